//! The rules of the one run pipeline: which prompt a run gets, and how an ended run is
//! concluded from what the runner observed.

use super::*;
use crate::engine::conclude::{Conclusion, Context, Observed, conclude};
use crate::engine::prompt::Prompt;

/// Step 2 running, attempt `attempt`, in session `s-2`, begun at HEAD `aaa`.
fn running(attempt: u32, results: &str) -> String {
    BASE.replace("    2: [PENDING] fix", "    2: [RUNNING] fix")
        .replace(
            "CURRENT:\n",
            &format!(
                "CURRENT:\n  TASK_ID: task_9\n  ATTEMPT: {attempt}\n  SESSION_ID: s-2\n  \
                 GIT_HEAD: aaa\n"
            ),
        )
        .replace("RESULTS:\n", &format!("RESULTS:\n{results}"))
}

fn choose(text: &str, number: u32, resumed: bool) -> Prompt {
    Prompt::choose(RunKind::Attempt, &view(text), 2, number, resumed)
}

#[test]
fn a_first_attempt_gets_the_step_and_a_retry_in_its_session_gets_what_failed() {
    assert_eq!(choose(&running(1, ""), 1, false), Prompt::Step);
    // Attempt 2 of MAX_RETRIES, after attempt 1 failed.
    let failed = running(2, "  STEP_2:\n    ERROR: tests fail\n");
    assert_eq!(
        choose(&failed, 2, true),
        Prompt::Fix {
            nth: 2,
            failure: "tests fail".into()
        }
    );
    // In a fresh session the failure is not "your last attempt": the step starts over.
    assert_eq!(choose(&failed, 2, false), Prompt::Step);
}

#[test]
fn a_retake_after_a_review_is_not_counted_as_a_failure_in_the_fix_prompt() {
    // The third run of the step, one of which was a retake: attempt 2, not 3.
    let retake = running(3, "  STEP_2:\n    ERROR: asked to change\n    RETAKES: 1\n");
    assert_eq!(
        choose(&retake, 3, true),
        Prompt::Fix {
            nth: 2,
            failure: "asked to change".into()
        }
    );
}

#[test]
fn a_run_after_an_api_error_carries_on_and_a_fresh_session_is_handed_over() {
    let cut = running(1, "  STEP_2:\n    INTERRUPTED: rate limit\n");
    assert_eq!(
        choose(&cut, 1, true),
        Prompt::Interrupted {
            why: "rate limit".into(),
            still_open: None
        }
    );
    let handoff = running(2, "  STEP_2:\n    HANDOFF: context at 80%\n");
    assert_eq!(
        choose(&handoff, 2, false),
        Prompt::Handoff {
            why: "context at 80%".into()
        }
    );
    // Once the fresh session runs, it is resumed like any other.
    assert_eq!(choose(&handoff, 2, true), Prompt::Step);
}

#[test]
fn an_answered_question_comes_first_and_plans_and_reviews_have_their_own() {
    let blocked = running(1, "  STEP_2:\n    BLOCKED: which API?\n    HANDOFF: x\n");
    assert_eq!(
        choose(&blocked, 1, false),
        Prompt::Answered {
            question: "which API?".into(),
            answer: None,
        }
    );
    let m = view(&running(1, ""));
    assert_eq!(
        Prompt::choose(RunKind::Review, &m, 2, 1, false),
        Prompt::Review
    );
    assert_eq!(
        Prompt::choose(RunKind::Plan, &m, 0, 1, false),
        Prompt::Plan {
            previous_error: None
        }
    );
}

fn observed(answer: &str, git_head: &str) -> Observed {
    Observed {
        end: TaskEnd::Exited {
            code: Some(0),
            signal: None,
        },
        class: Some(Class::Success),
        session_tokens: None,
        run_tokens: None,
        backend: crate::m1::settings::AgentKind::Claude,
        answer: answer.into(),
        denials: Vec::new(),
        deferred: None,
        background_stopped: Vec::new(),
        session_id: Some("s-2".into()),
        cost_usd: 0.4,
        context_pct: Some(10),
        compactions: 0,
        exit_code: Some(0),
        elapsed: Duration::from_secs(30),
        git_head: Some(git_head.into()),
        tree_changes: Vec::new(),
        reach: crate::engine::review::Reach::MayWrite("could write".into()),
        report: "tasks/task_9".into(),
        now: now(),
    }
}

fn run(kind: RunKind) -> RunOnRecord {
    RunOnRecord {
        kind,
        step: 2,
        task_id: "task_9".into(),
        number: 1,
        session_id: Some("s-2".into()),
    }
}

fn context<'a>(caps: &'a Caps, verify: Option<&'a str>) -> Context<'a> {
    Context {
        caps,
        allowed_tools: &[],
        verify,
        notify_each_step: false,
    }
}

#[test]
fn a_done_attempt_runs_verify_first_and_passes_on_its_outcome_with_its_commit() {
    let text = running(1, "");
    let m = view(&text);
    let caps = Caps::default();
    let o = observed("did it\nSTEP_DONE: fixed", "bbb");
    let cx = context(&caps, Some("cargo test"));
    let run = run(RunKind::Attempt);
    assert_eq!(conclude(&run, &m, &o, None, &cx), Conclusion::Verify);
    let Conclusion::Recorded {
        transition,
        verdict,
        restart,
    } = conclude(&run, &m, &o, Some(&verify::Outcome::Passed), &cx)
    else {
        panic!("not recorded")
    };
    assert_eq!((verdict, restart), (LedgerVerdict::Pass, false));
    let r = view(&applied(&text, &transition)).results[&2].clone();
    assert_eq!(r.verified, Some(true));
    // HEAD moved from the one on record: the step made a commit.
    assert_eq!(r.commit.as_deref(), Some("bbb"));
    assert!((r.cost_usd.unwrap() - 0.4).abs() < 1e-9, "{r:?}");
}

#[test]
fn an_attempt_that_left_head_where_it_was_records_no_commit() {
    let text = running(1, "");
    let caps = Caps::default();
    let o = observed("STEP_DONE: nothing to commit", "aaa");
    let got = conclude(
        &run(RunKind::Attempt),
        &view(&text),
        &o,
        None,
        &context(&caps, None),
    );
    let Conclusion::Recorded { transition, .. } = got else {
        panic!("without VERIFY there is nothing to wait for")
    };
    assert_eq!(view(&applied(&text, &transition)).results[&2].commit, None);
}

/// A review of step 2 that answered `approve`, during which `made_by_reviewer.txt` appeared,
/// concluded with the reviewer's run able to write as `reach` says: the loop as recorded.
fn reviewed_with_a_change(reach: crate::engine::review::Reach) -> (M1, String) {
    let text = running(1, "  STEP_2:\n    EXIT: 0\n    REVIEW: pending\n")
        .replace("  SESSION_ID: s-2\n", "  SESSION_ID: s-2\n  REVIEW: true\n");
    let caps = Caps::default();
    let mut o = observed("looks right\nREVIEW_APPROVE: fine", "aaa");
    o.tree_changes = vec!["made_by_reviewer.txt (new)".into()];
    o.reach = reach;
    let got = conclude(
        &run(RunKind::Review),
        &view(&text),
        &o,
        None,
        &context(&caps, None),
    );
    let Conclusion::Recorded { transition, .. } = got else {
        panic!("a review is recorded at once")
    };
    (view(&applied(&text, &transition)), transition.log)
}

#[test]
fn a_review_during_which_the_tree_changed_is_no_approval() {
    let (m, log) = reviewed_with_a_change(crate::engine::review::Reach::MayWrite(
        "called Write: made_by_reviewer.txt".into(),
    ));
    assert_eq!(m.status, Status::Waiting);
    assert!(
        !matches!(m.results[&2].review, Some(crate::m1::Review::Approved(_))),
        "{:?}",
        m.results[&2].review
    );
    assert!(log.contains("called Write: made_by_reviewer.txt"), "{log}");
}

#[test]
fn a_change_a_read_only_reviewer_could_not_make_is_not_its_and_its_verdict_stands() {
    let (m, log) = reviewed_with_a_change(crate::engine::review::Reach::ReadOnly(
        "had only read-only tools (--tools Read,Grep,Glob)".into(),
    ));
    assert_eq!(m.status, Status::Running, "{log}");
    assert!(
        matches!(m.results[&2].review, Some(crate::m1::Review::Approved(_))),
        "{:?}",
        m.results[&2].review
    );
    assert!(
        log.contains(
            "changed during the review of step 2: made_by_reviewer.txt (new) (not by the \
             reviewer: its run had only read-only tools (--tools Read,Grep,Glob))"
        ),
        "{log}"
    );
}

#[test]
fn a_sessions_cumulative_tokens_count_once_per_run_in_the_steps_total() {
    let recorded = |text: &str, session: &str, total: u64| {
        let mut o = observed("STEP_FAILED: not yet", "aaa");
        o.session_id = Some(session.into());
        o.session_tokens = Some(total);
        let caps = Caps::default();
        let Conclusion::Recorded { transition, .. } = conclude(
            &run(RunKind::Attempt),
            &view(text),
            &o,
            None,
            &context(&caps, None),
        ) else {
            panic!("not recorded")
        };
        view(&applied(text, &transition)).results[&2].clone()
    };
    // The first run of a session: its total is the run's.
    let r = recorded(&running(1, ""), "s-2", 1000);
    assert_eq!((r.tokens, r.session_tokens), (Some(1000), Some(1000)));
    // The same session resumed reports 2500 so far: the run used 1500.
    let before = running(
        2,
        "  STEP_2:\n    SESSION_ID: s-2\n    TOKENS: 1000\n    SESSION_TOKENS: 1000\n",
    );
    let r = recorded(&before, "s-2", 2500);
    assert_eq!((r.tokens, r.session_tokens), (Some(2500), Some(2500)));
    // A fresh session (a handoff) starts its count again: all 700 are the run's.
    let r = recorded(&before, "s-3", 700);
    assert_eq!((r.tokens, r.session_tokens), (Some(1700), Some(700)));
}
