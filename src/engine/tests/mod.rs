//! Every rule of the loop as a unit test over a parsed M1.md.

use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::judge::{Attempt, Interruption};
use super::record::{Facts, record};
use super::review::{ReviewFacts, ReviewVerdict, judge_review, record_review};
use super::*;
use crate::agent::{BugKind, Class, Verdict};
use crate::exit::Status as Exit;
use crate::m1::{Document, M1, Status, StepState};
use crate::verify;

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap()
}

const BASE: &str = "STATUS: RUNNING
GOAL: fix the bug
PLAN:
  TOTAL_STEPS: 3
  CURRENT_STEP: 1
  STEPS:
    1: [DONE] investigate
    2: [PENDING] fix
    3: [PENDING] test
CURRENT:
RESULTS:
  STEP_1:
    EXIT: 0
    SUMMARY: found it
    COST_USD: 0.5
LAST_ACTION: x
NEXT_ACTION: y
";

fn doc(text: &str) -> Document {
    Document::parse(text).unwrap_or_else(|e| panic!("test document invalid: {e}\n{text}"))
}

fn view(text: &str) -> M1 {
    doc(text).view()
}

fn with(edit: &[(&str, &str)]) -> M1 {
    let mut text = BASE.to_string();
    for (from, to) in edit {
        assert!(text.contains(from), "{from:?} not in base");
        text = text.replacen(from, to, 1);
    }
    view(&text)
}

#[test]
fn a_running_loop_spawns_the_first_unfinished_step_in_a_fresh_session() {
    let got = next(&view(BASE), &Caps::default(), now());
    assert_eq!(
        got,
        Next::Run(RunSpec {
            kind: RunKind::Attempt,
            step: 2,
            number: 1,
            session: SessionPlan::Fresh
        })
    );
}

#[test]
fn done_and_failed_loops_only_report() {
    assert_eq!(
        next(&with(&[("RUNNING", "DONE")]), &Caps::default(), now()),
        Next::Finished(Status::Done)
    );
    assert_eq!(
        next(&with(&[("RUNNING", "FAILED")]), &Caps::default(), now()),
        Next::Finished(Status::Failed)
    );
}

#[test]
fn waiting_pauses_with_next_action_as_the_reason() {
    let got = next(
        &with(&[
            ("RUNNING", "WAITING"),
            ("NEXT_ACTION: y", "NEXT_ACTION: answer me"),
        ]),
        &Caps::default(),
        now(),
    );
    assert_eq!(got, Next::Paused("answer me".into()));
}

/// A pause by hand (`STATUS: WAITING` while a step ran) stopped the runner at once when it
/// read the edit between the step's spawn and its wait, leaving the step running with no
/// runner: the step on record is finished first, then the loop pauses.
#[test]
fn a_pause_by_hand_lets_the_running_step_finish_first() {
    let got = next(
        &with(&[
            ("RUNNING", "WAITING"),
            ("CURRENT:\n", "CURRENT:\n  TASK_ID: task_1\n"),
            ("CURRENT_STEP: 1", "CURRENT_STEP: 2"),
        ]),
        &Caps::default(),
        now(),
    );
    assert!(
        matches!(&got, Next::Await(run) if run.task_id == "task_1" && run.step == 2),
        "{got:?}"
    );
}

#[test]
fn a_recorded_task_is_awaited_not_respawned() {
    let got = next(
        &with(&[("CURRENT:\n", "CURRENT:\n  TASK_ID: task_1\n")]),
        &Caps::default(),
        now(),
    );
    assert_eq!(
        got,
        Next::Await(RunOnRecord {
            kind: RunKind::Attempt,
            step: 1,
            task_id: "task_1".into(),
            number: 1,
            session_id: None
        })
    );
}

#[test]
fn all_done_or_skipped_completes() {
    let got = next(
        &with(&[
            ("[PENDING] fix", "[SKIPPED] fix"),
            ("[PENDING] test", "[DONE] test"),
        ]),
        &Caps::default(),
        now(),
    );
    assert_eq!(got, Next::Complete);
}

#[test]
fn a_plan_over_max_steps_halts() {
    let caps = Caps {
        max_steps: 2,
        ..Caps::default()
    };
    let Next::Halt { reason, .. } = next(&view(BASE), &caps, now()) else {
        panic!()
    };
    assert!(reason.contains("3 steps, over MAX_STEPS 2"), "{reason}");
}

#[test]
fn spent_attempts_exhaust_the_step_and_a_recorded_session_is_resumed() {
    let two = with(&[(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    ATTEMPTS: 2\n    SESSION_ID: s-2\n",
    )]);
    assert_eq!(
        next(&two, &Caps::default(), now()),
        Next::Run(RunSpec {
            kind: RunKind::Attempt,
            step: 2,
            number: 3,
            session: SessionPlan::Resume("s-2".into())
        })
    );
    let three = with(&[("RESULTS:\n", "RESULTS:\n  STEP_2:\n    ATTEMPTS: 3\n")]);
    assert!(matches!(
        next(&three, &Caps::default(), now()),
        Next::Exhausted { step: 2, .. }
    ));
    let failed = with(&[("[PENDING] fix", "[FAILED] fix")]);
    assert!(matches!(
        next(&failed, &Caps::default(), now()),
        Next::Exhausted { step: 2, .. }
    ));
}

#[test]
fn a_wait_in_the_future_is_waited_out_and_a_past_one_ignored() {
    let m = with(&[(
        "CURRENT:\n",
        "CURRENT:\n  WAIT_UNTIL: 2026-11-22T03:00:30Z\n  WAIT_REASON: 529\n",
    )]);
    assert!(
        matches!(next(&m, &Caps::default(), now()), Next::WaitUntil { reason, .. } if reason == "529")
    );
    let later = now() + chrono::Duration::seconds(31);
    assert!(matches!(
        next(&m, &Caps::default(), later),
        Next::Run(RunSpec {
            kind: RunKind::Attempt,
            step: 2,
            ..
        })
    ));
}

#[test]
fn no_steps_means_planning_and_the_cost_cap_waits_on_a_gate() {
    let m = view("STATUS: RUNNING\nGOAL: g\n");
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Run(RunSpec {
            kind: RunKind::Plan,
            step: 0,
            number: 1,
            session: SessionPlan::Fresh
        })
    );
    let caps = Caps {
        max_cost_usd: Some(0.5),
        ..Caps::default()
    };
    assert!(
        matches!(next(&view(BASE), &caps, now()), Next::OverBudget { reason, .. } if reason.contains("MAX_COST_USD"))
    );
}

/// An answer that ends with the verdict line `verdict` stands for.
fn answer(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Done(s) if s == "did it" => "I did it.\nSTEP_DONE: did it",
        Verdict::Done(s) if s == "ok" => "Worked.\nSTEP_DONE: ok",
        Verdict::Done(_) => "Worked.\nSTEP_DONE: x",
        Verdict::Failed(_) => "Tried.\nSTEP_FAILED: no",
        Verdict::Blocked(_) => "Unsure.\nSTEP_BLOCKED: which file?",
        Verdict::Missing => "I think it is done.",
        Verdict::Restart(_) => {
            "Context is full; wrote the note.\nSTEP_RESTART: context nearly full"
        }
    }
}

fn attempt<'a>(caps: &'a Caps, class: Class, verdict: &Verdict) -> Attempt<'a> {
    Attempt {
        step: 2,
        attempt: 1,
        end: TaskEnd::Exited {
            code: Some(0),
            signal: None,
        },
        class: Some(class),
        answer: answer(verdict),
        denials: &[],
        deferred: None,
        background_stopped: &[],
        verify_configured: false,
        verify: None,
        transients: 0,
        restarts: 0,
        uncounted: 0,
        resumed: false,
        allowed_tools: &[],
        caps,
        spent_usd: 0.0,
        backend: crate::m1::settings::AgentKind::Claude,
        now: now(),
    }
}

#[test]
fn a_usage_limit_resetting_past_the_fallback_time_moves_the_step_to_the_fallback() {
    use crate::m1::settings::AgentKind;
    let limit = |hours: i64| Class::UsageLimit {
        resets_at: Some(now() + chrono::Duration::hours(hours)),
        guess: None,
        message: "You've hit your limit".into(),
    };
    let caps = Caps {
        fallback: Some((vec![AgentKind::Codex], Duration::from_secs(15 * 60))),
        ..Caps::default()
    };
    let j = crate::engine::judge(&attempt(&caps, limit(3), &Verdict::Missing));
    assert!(
        matches!(&j, Judgement::Fallback { to: AgentKind::Codex, until, .. } if *until == now() + chrono::Duration::hours(3)),
        "{j:?}"
    );
    // Soon enough to wait for; or no fallback set; or already on the fallback: it waits.
    let soon = Class::UsageLimit {
        resets_at: Some(now() + chrono::Duration::minutes(10)),
        guess: None,
        message: "limit".into(),
    };
    let waits = |j: Judgement| matches!(j, Judgement::Interrupted(Interruption::UsageWait { .. }));
    assert!(waits(crate::engine::judge(&attempt(
        &caps,
        soon,
        &Verdict::Missing
    ))));
    let none = Caps::default();
    assert!(waits(crate::engine::judge(&attempt(
        &none,
        limit(3),
        &Verdict::Missing
    ))));
    let mut on_codex = attempt(&caps, limit(3), &Verdict::Missing);
    on_codex.backend = AgentKind::Codex;
    assert!(waits(crate::engine::judge(&on_codex)));
}

#[test]
fn a_usage_limit_on_a_fallback_moves_the_step_to_the_next_of_the_chain_never_back() {
    use crate::m1::settings::AgentKind::{Claude, Codex, Gemini};
    let limit = Class::UsageLimit {
        resets_at: Some(now() + chrono::Duration::hours(3)),
        guess: None,
        message: "You've hit your limit".into(),
    };
    let caps = Caps {
        fallback: Some((vec![Codex, Gemini], Duration::from_secs(15 * 60))),
        ..Caps::default()
    };
    let on = |backend| {
        let mut a = attempt(&caps, limit.clone(), &Verdict::Missing);
        a.backend = backend;
        match crate::engine::judge(&a) {
            Judgement::Fallback { to, .. } => Some(to),
            Judgement::Interrupted(Interruption::UsageWait { .. }) => None,
            j => panic!("{j:?}"),
        }
    };
    assert_eq!(on(Claude), Some(Codex));
    assert_eq!(on(Codex), Some(Gemini));
    assert_eq!(on(Gemini), None, "the chain's last waits");
    assert_eq!(
        crate::engine::judge::next_fallback(&[Codex, Claude], Claude),
        None
    );
    assert_eq!(
        crate::engine::judge::next_fallback(&[Codex, Codex], Codex),
        None
    );
}

#[test]
fn success_with_a_done_verdict_passes_and_verify_is_asked_for_when_set() {
    let caps = Caps::default();
    let a = attempt(&caps, Class::Success, &Verdict::Done("did it".into()));
    assert_eq!(
        judge(&a),
        Judgement::Pass {
            summary: "did it".into()
        }
    );
    let a = Attempt {
        verify_configured: true,
        ..a
    };
    assert_eq!(judge(&a), Judgement::NeedsVerify);
    let passed = verify::Outcome::Passed;
    assert_eq!(
        judge(&Attempt {
            verify: Some(&passed),
            ..a.clone()
        }),
        Judgement::Pass {
            summary: "did it".into()
        }
    );
    let failed = verify::Outcome::Failed {
        code: Some(1),
        tail: "ok 1\nFAIL test_x\n".into(),
    };
    let Judgement::Retry { reason } = judge(&Attempt {
        verify: Some(&failed),
        ..a.clone()
    }) else {
        panic!()
    };
    assert!(
        reason.contains("VERIFY failed (exit 1)") && reason.contains("FAIL test_x"),
        "{reason}"
    );
    let last = Attempt {
        attempt: 3,
        verify: Some(&failed),
        ..a
    };
    assert!(matches!(judge(&last), Judgement::Exhausted { .. }));
}

#[test]
fn a_missing_or_failed_verdict_is_a_failed_attempt_and_blocked_asks_the_human() {
    let caps = Caps::default();
    assert!(
        matches!(judge(&attempt(&caps, Class::Success, &Verdict::Missing)), Judgement::Retry { reason } if reason.contains("STEP_DONE"))
    );
    assert!(
        matches!(judge(&attempt(&caps, Class::Success, &Verdict::Failed("no".into()))), Judgement::Retry { reason } if reason.contains("STEP_FAILED: no"))
    );
    assert_eq!(
        judge(&attempt(
            &caps,
            Class::Success,
            &Verdict::Blocked("which file?".into()),
        )),
        Judgement::Blocked {
            question: "which file?".into()
        }
    );
}

#[test]
fn permission_denials_halt_naming_the_tools_even_with_a_done_verdict() {
    let caps = Caps::default();
    let denials = vec![
        "Bash".to_string(),
        "WebFetch".to_string(),
        "Bash".to_string(),
    ];
    let a = Attempt {
        denials: &denials,
        ..attempt(&caps, Class::Success, &Verdict::Done("x".into()))
    };
    let Judgement::Denied { tools, how } = judge(&a) else {
        panic!()
    };
    assert_eq!(tools, ["Bash", "WebFetch"]);
    assert!(
        how.contains("make the line under AGENT `ALLOWED_TOOLS: Bash,WebFetch`"),
        "{how}"
    );
    let allowed = vec!["Read".to_string(), "WebFetch".to_string()];
    let Judgement::Denied { how, .. } = judge(&Attempt {
        allowed_tools: &allowed,
        ..a
    }) else {
        panic!()
    };
    assert!(how.contains("add `,Bash` to the end of the line"), "{how}");
}

#[test]
fn every_halt_says_what_to_edit_in_m1_or_what_to_run() {
    let caps = Caps::default();
    let budget = Class::Billing("Reached maximum budget ($0.0001)".into());
    let credit = Class::Billing("Credit balance is too low".into());
    let refused = Class::InvocationBug {
        kind: BugKind::UnknownOption,
        message: "error: unknown option '--frobnicate'".into(),
    };
    for (class, want) in [
        (budget, "AGENT.MAX_BUDGET_USD"),
        (credit, "add credit"),
        (refused, "AGENT block"),
    ] {
        let Judgement::Interrupted(Interruption::Halt { how, .. }) =
            judge(&attempt(&caps, class, &Verdict::Missing))
        else {
            panic!()
        };
        assert!(how.contains(want), "{how}");
        assert!(
            !how.contains("loop.yaml ("),
            "loop.yaml changes no existing loop: {how}"
        );
    }
}

#[test]
fn transient_errors_back_off_then_halt_at_the_cap() {
    let caps = Caps {
        transient_cap: 3,
        ..Caps::default()
    };
    let a = attempt(
        &caps,
        Class::Transient("529 overloaded".into()),
        &Verdict::Missing,
    );
    assert_eq!(
        judge(&a),
        Judgement::Interrupted(Interruption::Backoff {
            delay: Duration::from_secs(2),
            reason: "529 overloaded".into()
        })
    );
    assert!(
        matches!(judge(&Attempt { transients: 2, ..a.clone() }), Judgement::Interrupted(Interruption::Backoff { delay, .. }) if delay == Duration::from_secs(8))
    );
    assert!(matches!(
        judge(&Attempt { transients: 3, ..a }),
        Judgement::Interrupted(Interruption::Halt { .. })
    ));
}

#[test]
fn a_usage_limit_waits_until_its_reset_or_half_an_hour_when_unknown() {
    let caps = Caps::default();
    let reset = now() + chrono::Duration::hours(2);
    let a = attempt(
        &caps,
        Class::UsageLimit {
            resets_at: Some(reset),
            guess: None,
            message: "limit".into(),
        },
        &Verdict::Missing,
    );
    assert_eq!(
        judge(&a),
        Judgement::Interrupted(Interruption::UsageWait {
            until: reset,
            guess: None,
            reason: "limit".into()
        })
    );
    let a = attempt(
        &caps,
        Class::UsageLimit {
            resets_at: None,
            guess: None,
            message: "limit".into(),
        },
        &Verdict::Missing,
    );
    assert!(
        matches!(judge(&a), Judgement::Interrupted(Interruption::UsageWait { until, .. }) if until == now() + chrono::Duration::minutes(30))
    );
}

#[test]
fn auth_billing_and_bad_invocations_halt_but_session_trouble_is_repaired() {
    let caps = Caps::default();
    for class in [
        Class::Auth("Invalid API key".into()),
        Class::Billing("Credit balance is too low".into()),
    ] {
        assert!(matches!(
            judge(&attempt(&caps, class, &Verdict::Missing)),
            Judgement::Interrupted(Interruption::Halt { .. })
        ));
    }
    let unknown = Class::InvocationBug {
        kind: BugKind::UnknownSession,
        message: "No conversation found".into(),
    };
    let a = Attempt {
        resumed: true,
        ..attempt(&caps, unknown, &Verdict::Missing)
    };
    assert!(matches!(judge(&a), Judgement::FreshSession { .. }));
    let in_use = Class::InvocationBug {
        kind: BugKind::SessionInUse,
        message: "in use".into(),
    };
    assert!(matches!(
        judge(&attempt(&caps, in_use, &Verdict::Missing)),
        Judgement::ResumeSession { .. }
    ));
}

#[test]
fn timeouts_and_lost_tasks_are_failed_attempts_and_a_missing_agent_halts() {
    let caps = Caps::default();
    let base = attempt(&caps, Class::Success, &Verdict::Missing);
    for (end, want) in [
        (TaskEnd::Timeout, "step timeout"),
        (TaskEnd::Idle, "idle timeout"),
        (TaskEnd::Lost, "lost"),
    ] {
        let Judgement::Retry { reason } = judge(&Attempt {
            end,
            class: None,
            ..base.clone()
        }) else {
            panic!()
        };
        assert!(reason.contains(want), "{reason}");
    }
    let a = Attempt {
        end: TaskEnd::SpawnFailed("No such file".into()),
        class: None,
        ..base
    };
    assert!(
        matches!(judge(&a), Judgement::Interrupted(Interruption::Halt { how, .. }) if how.contains("LOOP_AGENT"))
    );
}

fn applied(text: &str, t: &Transition) -> String {
    let mut d = doc(text);
    for e in &t.edits {
        d.apply(e);
    }
    let out = d.render();
    Document::parse(&out).unwrap_or_else(|e| panic!("edits made an invalid document: {e}\n{out}"));
    out
}

#[test]
fn a_pass_records_results_clears_current_and_moves_on_changing_only_its_lines() {
    let before = BASE.replace("CURRENT:\n", "CURRENT:\n  TASK_ID: task_9\n  ATTEMPT: 1\n");
    let facts = Facts {
        step: 2,
        attempt: 1,
        exit_code: Some(0),
        session_id: Some("s-2".into()),
        cost_usd: 0.25,
        duration_s: 12.0,
        verified: true,
        next_step: Some((3, "test".into())),
        now: now(),
        ..Facts::default()
    };
    let t = record(
        &Judgement::Pass {
            summary: "fixed it".into(),
        },
        &facts,
    );
    assert_eq!(t.outcome, Outcome::Continue);
    let after = applied(&before, &t);
    let m = view(&after);
    assert_eq!(m.plan.steps[1].state, StepState::Done);
    assert_eq!(m.plan.current_step, 3);
    assert_eq!(m.current.task_id, None);
    let r = &m.results[&2];
    assert_eq!(
        (r.exit, r.summary.as_deref(), r.verified, r.attempts),
        (Some(0), Some("fixed it"), Some(true), Some(1))
    );
    assert_eq!(r.session_id.as_deref(), Some("s-2"));
    // Untouched lines stay byte for byte.
    for line in [
        "    1: [DONE] investigate",
        "    3: [PENDING] test",
        "    SUMMARY: found it",
        "GOAL: fix the bug",
    ] {
        assert!(after.contains(line), "{line:?} lost:\n{after}");
    }
}

#[test]
fn the_last_failed_attempt_fails_step_and_loop() {
    let facts = Facts {
        step: 2,
        attempt: 3,
        exit_code: Some(1),
        loop_id: "loop-1".into(),
        next_gate: "G1".into(),
        ..Facts::default()
    };
    let t = record(
        &Judgement::Exhausted {
            reason: "VERIFY failed".into(),
            no_retry: false,
        },
        &facts,
    );
    assert_eq!(t.outcome, Outcome::Exit(Exit::Failed));
    let m = view(&applied(BASE, &t));
    assert_eq!(
        (m.status, m.plan.steps[1].state),
        (Status::Failed, StepState::Failed)
    );
    assert_eq!(m.results[&2].attempts, Some(3));
    assert_eq!(m.results[&2].error.as_deref(), Some("VERIFY failed"));
    // A person is asked what now, on a FAILED gate: the message is that gate's.
    let g = m.gate("G1").expect("a FAILED gate");
    assert_eq!((g.kind, g.step), (crate::m1::GateKind::Failed, 2));
    assert_eq!(g.options, ["retry", "skip", "stop"]);
    assert!(matches!(&t.effects[..], [Effect::Gate { id }] if id == "G1"));
    let next = m.next_action.unwrap();
    assert!(
        next.contains("`loop retry`") && next.contains("`loop answer G1 skip|stop`"),
        "{next}"
    );
}

#[test]
fn a_spawn_is_recorded_before_it_happens_and_a_stop_undoes_it() {
    let t = started(&SpawnFacts {
        kind: RunKind::Attempt,
        step: 2,
        attempt: 1,
        review_number: 1,
        task_id: "task_a",
        session_id: "uuid-1",
        command: "do the fix\nplease",
        git_head: None,
        new_loop_id: None,
        commit: false,
        superseded: Vec::new(),
        now: now(),
    });
    let after = applied(BASE, &t);
    let m = view(&after);
    assert_eq!(m.plan.steps[1].state, StepState::Running);
    assert_eq!(m.current.task_id.as_deref(), Some("task_a"));
    assert_eq!(m.current.session_id.as_deref(), Some("uuid-1"));
    assert_eq!(m.current.attempt, Some(1));
    assert_eq!(m.current.command.as_deref(), Some("do the fix please"));
    let s = stopped(2, None, &Stop::File("/tmp/x-stop".into()), Some("task_a"));
    assert_eq!(s.outcome, Outcome::Exit(Exit::Waiting));
    let m = view(&applied(&after, &s));
    assert_eq!(
        (m.status, m.plan.steps[1].state, m.current.task_id),
        (Status::Waiting, StepState::Pending, None)
    );
    assert!(m.next_action.unwrap().contains("Remove /tmp/x-stop"));
    assert_eq!(m.results.get(&2).and_then(|r| r.exit), None);
    assert!(
        !applied(&after, &s).contains("(pending)"),
        "the killed attempt's EXIT is gone"
    );
}

#[test]
fn a_backoff_records_when_to_try_again() {
    let facts = Facts {
        step: 2,
        attempt: 1,
        now: now(),
        ..Facts::default()
    };
    let t = record(
        &Judgement::Interrupted(Interruption::Backoff {
            delay: Duration::from_secs(4),
            reason: "529".into(),
        }),
        &facts,
    );
    let m = view(&applied(BASE, &t));
    assert_eq!(wait_until(&m), Some(now() + chrono::Duration::seconds(4)));
    assert_eq!(
        m.results[&2].attempts, None,
        "a transient error spends no attempt"
    );
}

#[test]
fn the_transient_halt_counts_the_error_that_halts_and_resets_the_count_for_the_resume() {
    let caps = Caps {
        transient_cap: 3,
        ..Caps::default()
    };
    let a = attempt(&caps, Class::Transient("529".into()), &Verdict::Missing);
    let j = judge(&Attempt { transients: 3, ..a });
    let Judgement::Interrupted(Interruption::Halt { reason, .. }) = &j else {
        panic!("{j:?}")
    };
    assert!(
        reason.starts_with("4 transient errors on step 2, over the cap of 3"),
        "{reason}"
    );
    let before = BASE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    TRANSIENT: 3\n    INTERRUPTED: 529\n",
    );
    let facts = Facts {
        step: 2,
        attempt: 1,
        now: now(),
        ..Facts::default()
    };
    let m = view(&applied(&before, &record(&j, &facts)));
    assert_eq!(m.status, Status::Waiting);
    assert_eq!(m.results[&2].transient, 0, "a resume starts from zero");
    assert_eq!(m.results[&2].interrupted, None);
}

#[test]
fn a_wait_is_recorded_as_an_interruption_not_as_a_failure() {
    let before = BASE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    ERROR: VERIFY failed (exit 1)\n",
    );
    let facts = Facts {
        step: 2,
        attempt: 2,
        now: now(),
        ..Facts::default()
    };
    for j in [
        Judgement::Interrupted(Interruption::Backoff {
            delay: Duration::from_secs(2),
            reason: "529 overloaded".into(),
        }),
        Judgement::Interrupted(Interruption::UsageWait {
            until: now() + chrono::Duration::hours(1),
            guess: None,
            reason: "usage limit".into(),
        }),
    ] {
        let m = view(&applied(&before, &record(&j, &facts)));
        let r = &m.results[&2];
        assert!(r.interrupted.is_some(), "{j:?}");
        assert_eq!(
            r.error.as_deref(),
            Some("VERIFY failed (exit 1)"),
            "the last real failure is kept: {j:?}"
        );
    }
}

#[test]
fn a_stop_during_planning_says_planning_runs_again_not_step_0() {
    let t = stopped(0, None, &Stop::Interrupt, Some("task_1"));
    let m = view(&applied(BASE, &t));
    let last = m.last_action.unwrap();
    assert!(last.contains("planning runs again on resume"), "{last}");
    assert!(!last.contains("step 0"), "{last}");
}

#[test]
fn done_says_the_goal_is_reached_only_when_no_step_was_skipped() {
    let t = complete(&view(BASE));
    assert!(t.log.contains("the goal is reached"), "{}", t.log);
    let m = view(&applied(BASE, &t));
    assert_eq!(m.status, Status::Done);
    assert_eq!(m.last_action.as_deref(), Some("All 3 steps done"));
    let skipped = with(&[("[PENDING] test", "[SKIPPED] test")]);
    let t = complete(&skipped);
    assert_eq!(t.outcome, Outcome::Exit(Exit::Ok));
    assert!(!t.log.contains("the goal is reached"), "{}", t.log);
    assert!(t.log.contains("step 3 skipped"), "{}", t.log);
    let m = view(&applied(BASE, &t));
    assert_eq!(
        m.last_action.as_deref(),
        Some("DONE with step 3 skipped (2 of 3 done)")
    );
    assert!(!m.next_action.unwrap().contains("goal is reached"));
    let one = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [DONE] only\n";
    let m = view(&applied(one, &complete(&view(one))));
    assert_eq!(m.last_action.as_deref(), Some("The only step is done"));
}

#[test]
fn a_run_ended_while_the_cli_retried_a_refused_key_halts_and_costs_no_attempt() {
    let caps = Caps::default();
    let killed = |class| Attempt {
        end: TaskEnd::Killed,
        ..attempt(&caps, class, &Verdict::Missing)
    };
    let auth = Class::Auth("the CLI was retrying an authentication error (401)".into());
    assert!(
        matches!(judge(&killed(auth)), Judgement::Interrupted(Interruption::Halt { reason, .. }) if reason.contains("401"))
    );
    // Killed for anything else, it is a failed attempt as before.
    assert!(matches!(
        judge(&killed(Class::Transient("529".into()))),
        Judgement::Retry { .. }
    ));
}

#[test]
fn a_run_ended_in_a_storm_of_rate_limit_retries_backs_off_and_costs_no_attempt() {
    let caps = Caps::default();
    let killed = |class, transients| Attempt {
        end: TaskEnd::Killed,
        transients,
        ..attempt(&caps, class, &Verdict::Missing)
    };
    let storm = || Class::RateLimited("Attempt 2 failed with status 429".into());
    assert!(
        matches!(judge(&killed(storm(), 0)), Judgement::Interrupted(Interruption::Backoff { reason, delay }) if reason.contains("429") && delay == backoff(1))
    );
    // Counted with the step's other transient errors, and halted past their cap.
    assert!(matches!(
        judge(&killed(storm(), caps.transient_cap)),
        Judgement::Interrupted(Interruption::Halt { .. })
    ));
}

mod pipeline;
mod records;
mod review;
mod sessions;

#[test]
fn a_refused_key_is_advised_for_the_backend_that_ran() {
    let caps = Caps::default();
    let mut a = attempt(&caps, Class::Auth("401".into()), &Verdict::Missing);
    let how = |a: &Attempt<'_>| match crate::engine::judge(a) {
        Judgement::Interrupted(Interruption::Halt { how, .. }) => how,
        other => panic!("{other:?}"),
    };
    assert!(how(&a).contains("claude /login"), "{}", how(&a));
    a.backend = crate::m1::settings::AgentKind::Codex;
    assert!(how(&a).contains("codex login"), "{}", how(&a));
}

/// `--max-cost-usd 1` stopped at $1.20: the cap was checked between runs only. Each run is
/// given what is left of it, within its own cap, and reaching it waits on a COST gate.
#[test]
fn each_run_is_given_what_is_left_of_the_cost_cap_and_reaching_it_waits_on_a_gate() {
    let m = view(BASE);
    let caps = Caps {
        max_cost_usd: Some(1.0),
        ..Caps::default()
    };
    assert_eq!(run_budget(&m, &caps, None), Some(0.5));
    assert_eq!(run_budget(&m, &caps, Some(0.2)), Some(0.2));
    assert_eq!(run_budget(&m, &Caps::default(), Some(0.2)), Some(0.2));
    assert_eq!(run_budget(&m, &Caps::default(), None), None);
    let reached = Caps {
        max_cost_usd: Some(0.5),
        ..Caps::default()
    };
    assert!(
        matches!(next(&m, &reached, now()), Next::OverBudget { step: 2, .. }),
        "{:?}",
        next(&m, &reached, now())
    );
    let t = gate::over_budget(&m, 2, "spent $0.50, at or over MAX_COST_USD $0.50");
    let text = applied(BASE, &t);
    let after = view(&text);
    let g = after.gate("G1").expect("a COST gate");
    assert_eq!(
        (g.kind, g.options.clone()),
        (
            crate::m1::GateKind::Cost,
            vec!["raise".into(), "stop".into()]
        )
    );
    assert_eq!(after.status, Status::Waiting);
    // Decided by as much again, or by an amount above what was spent.
    let decide = |answer: &str| {
        let req = gate::Request {
            id: Some("G1".into()),
            step: None,
            answer: gate::Answer::Text(answer.into()),
            shown: None,
            by: "dj".into(),
        };
        gate::decide(&after, &req, &[], now())
    };
    let cap = |d: gate::Decision| match d {
        gate::Decision::Made { transition, .. } => {
            view(&applied(&text, &transition)).limits.max_cost_usd
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(cap(decide("raise")), Some(1.0));
    assert_eq!(cap(decide("$3")), Some(3.0));
    assert!(matches!(decide("0.4"), gate::Decision::Refused(why) if why.contains("not above")));
}
