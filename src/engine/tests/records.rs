//! One rule each: how every judgement is recorded, what follows it, and when it is written;
//! the runner's other transitions (a task back on record, its pid, an unrecordable edit).

use super::*;

fn facts(step: u32, attempt: u32) -> Facts {
    Facts {
        step,
        attempt,
        exit_code: Some(1),
        session_id: Some("sess-2".into()),
        loop_id: "loop-1".into(),
        next_gate: "G1".into(),
        now: now(),
        ..Facts::default()
    }
}

fn recorded(j: &Judgement, f: &Facts) -> (Transition, M1) {
    let t = record(j, f);
    let m = view(&applied(BASE, &t));
    (t, m)
}

#[test]
fn a_task_killed_by_loop_kill_is_a_failed_attempt() {
    let caps = Caps::default();
    let a = Attempt {
        end: TaskEnd::Killed,
        class: None,
        ..attempt(&caps, Class::Success, &Verdict::Missing)
    };
    assert!(matches!(judge(&a), Judgement::Retry { reason } if reason.contains("killed")));
}

#[test]
fn any_other_failure_of_the_agent_is_a_failed_attempt_carrying_its_message() {
    let caps = Caps::default();
    let a = attempt(
        &caps,
        Class::Other("boom (exited with code 1)".into()),
        &Verdict::Missing,
    );
    assert_eq!(
        judge(&a),
        Judgement::Retry {
            reason: "boom (exited with code 1)".into()
        }
    );
}

#[test]
fn an_idle_loop_pauses_until_resumed() {
    let got = next(&with(&[("RUNNING", "IDLE")]), &Caps::default(), now());
    assert!(matches!(got, Next::Paused(why) if why.contains("loop resume")));
}

#[test]
fn a_verify_that_failed_or_timed_out_is_a_failed_attempt_with_what_it_printed() {
    let caps = Caps::default();
    let cases = [
        (
            verify::Outcome::TimedOut {
                tail: "still running tests".into(),
            },
            "VERIFY timed out: still running tests",
        ),
        (
            verify::Outcome::Failed {
                code: Some(1),
                tail: "\n \n".into(),
            },
            "VERIFY failed (exit 1) and printed nothing",
        ),
    ];
    for (out, want) in cases {
        let a = Attempt {
            verify_configured: true,
            verify: Some(&out),
            ..attempt(&caps, Class::Success, &Verdict::Done("ok".into()))
        };
        assert_eq!(
            judge(&a),
            Judgement::Retry {
                reason: want.into()
            }
        );
    }
}

#[test]
fn a_retry_puts_the_step_back_counts_the_attempt_and_rides_on_the_next_spawn() {
    let j = Judgement::Retry {
        reason: "VERIFY failed (exit 1)".into(),
    };
    let (t, m) = recorded(&j, &facts(2, 1));
    assert_eq!(t.write, Write::WithNextSpawn);
    assert_eq!(t.outcome, Outcome::Continue);
    assert!(t.effects.is_empty());
    assert_eq!(m.plan.steps[1].state, StepState::Pending);
    let r = &m.results[&2];
    assert_eq!(
        (r.attempts, r.error.as_deref()),
        (Some(1), Some("VERIFY failed (exit 1)"))
    );
    assert!(m.next_action.unwrap().contains("attempt 2"));
}

#[test]
fn a_usage_wait_records_its_end_spends_no_attempt_and_tells_the_human_once() {
    let until = now() + chrono::Duration::hours(2);
    let j = Judgement::Interrupted(Interruption::UsageWait {
        until,
        guess: None,
        reason: "5-hour limit".into(),
    });
    let (t, m) = recorded(&j, &facts(2, 1));
    assert_eq!(t.write, Write::Now);
    assert_eq!(wait_until(&m), Some(until));
    assert_eq!(m.results[&2].attempts, None);
    assert!(matches!(
        &t.effects[..],
        [Effect::UsageWait { step: 2, .. }]
    ));
}

#[test]
fn a_usage_wait_guessed_from_the_agents_words_says_the_guess_in_next_action() {
    let until = now() + chrono::Duration::hours(23);
    let guess = "the agent named only `9:43 PM`, without a day: read as the next one, 23h00m away";
    let j = Judgement::Interrupted(Interruption::UsageWait {
        until,
        guess: Some(guess.into()),
        reason: "usage limit".into(),
    });
    let (t, m) = recorded(&j, &facts(2, 1));
    assert_eq!(wait_until(&m), Some(until));
    let next = m.next_action.unwrap();
    assert!(next.contains(guess), "{next}");
    assert!(next.contains("`loop stop` then `loop resume`"), "{next}");
    assert!(t.log.contains(guess), "{}", t.log);
    assert!(
        matches!(&t.effects[..], [Effect::UsageWait { reason, .. }] if reason.contains(guess)),
        "the message says it too: {:?}",
        t.effects
    );
}

#[test]
fn a_blocked_step_waits_for_the_human_with_its_question() {
    let j = Judgement::Blocked {
        question: "which file?".into(),
    };
    let (t, m) = recorded(&j, &facts(2, 1));
    assert_eq!(t.outcome, Outcome::Exit(Exit::Waiting));
    assert_eq!(m.status, Status::Waiting);
    assert_eq!(m.results[&2].blocked.as_deref(), Some("which file?"));
    assert!(matches!(&t.effects[..], [Effect::Gate { id }] if id == "G1"));
    // The question waits on a gate of its own, answered with `loop answer G1 …`.
    let g = m.gate("G1").expect("an ASK gate");
    assert_eq!(
        (g.kind, g.step, g.question.as_deref(), g.is_pending()),
        (crate::m1::GateKind::Ask, 2, Some("which file?"), true)
    );
    assert!(m.next_action.unwrap().contains("loop answer G1"));
}

#[test]
fn a_halt_waits_with_the_reason_in_error_and_next_action() {
    let j = Judgement::Interrupted(Interruption::Halt {
        reason: "authentication failed".into(),
        how: "log in, then `loop resume`".into(),
    });
    let (t, m) = recorded(&j, &facts(2, 1));
    assert_eq!(
        (m.status, m.plan.steps[1].state),
        (Status::Waiting, StepState::Pending)
    );
    assert_eq!(
        m.results[&2].error.as_deref(),
        Some("authentication failed")
    );
    assert_eq!(m.next_action.as_deref(), Some("log in, then `loop resume`"));
    assert_eq!(t.effects.len(), 1);
}

#[test]
fn a_session_that_cannot_be_resumed_is_dropped_and_one_in_use_is_resumed() {
    let fresh = Judgement::FreshSession {
        reason: "no conversation".into(),
    };
    let (t, m) = recorded(&fresh, &facts(2, 1));
    assert_eq!(m.results[&2].session_id, None);
    assert_eq!(m.results[&2].attempts, None, "not counted");
    assert_eq!(t.outcome, Outcome::Continue);
    let resume = Judgement::ResumeSession {
        reason: "session id in use".into(),
    };
    let (_, m) = recorded(&resume, &facts(2, 1));
    assert_eq!(m.results[&2].session_id.as_deref(), Some("sess-2"));
    assert_eq!(m.plan.steps[1].state, StepState::Pending);
}

#[test]
fn an_exhausted_step_fails_the_step_and_the_loop_and_tells_the_human() {
    let t = exhausted(2, "step 2 already failed 3 of MAX_RETRIES 3 attempts");
    let m = view(&applied(BASE, &t));
    assert_eq!(
        (m.status, m.plan.steps[1].state),
        (Status::Failed, StepState::Failed)
    );
    assert_eq!(t.outcome, Outcome::Exit(Exit::Failed));
    assert!(matches!(&t.effects[..], [Effect::Failed { step: 2, .. }]));
}

#[test]
fn a_halt_from_next_waits_and_tells_the_human() {
    let t = halt(2, "spent $5.00", "raise LIMITS.MAX_COST_USD");
    let m = view(&applied(BASE, &t));
    assert_eq!(m.status, Status::Waiting);
    assert_eq!(m.next_action.as_deref(), Some("raise LIMITS.MAX_COST_USD"));
    assert!(matches!(&t.effects[..], [Effect::Waiting { reason, .. }] if reason == "spent $5.00"));
}

#[test]
fn a_plan_becomes_the_steps_and_step_1_is_next() {
    let caps = Caps::default();
    let a = Attempt {
        step: 0,
        answer: r#"{"steps": ["read", "write"]}"#,
        ..attempt(&caps, Class::Success, &Verdict::Missing)
    };
    let j = judge(&a);
    assert_eq!(
        j,
        Judgement::Planned {
            steps: vec!["read".into(), "write".into()],
            after: std::collections::BTreeMap::new(),
        }
    );
    let empty = "STATUS: RUNNING\nGOAL: g\n";
    let t = record(&j, &facts(0, 1));
    let m = view(&applied(empty, &t));
    let texts: Vec<&str> = m.plan.steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["read", "write"]);
    assert_eq!(m.plan.current_step, 1);
    assert_eq!(t.write, Write::WithNextSpawn);
    assert_eq!(t.effects, [Effect::Planned]);
}

#[test]
fn a_planning_answer_without_a_plan_is_a_failed_attempt() {
    let caps = Caps::default();
    let a = Attempt {
        step: 0,
        answer: "Here is my plan: first read, then write.",
        ..attempt(&caps, Class::Success, &Verdict::Missing)
    };
    assert!(matches!(judge(&a), Judgement::Retry { reason } if reason.contains("no usable plan")));
}

#[test]
fn a_pass_ticks_the_checklist_and_tells_the_human_only_when_each_step_is_told() {
    let j = Judgement::Pass {
        summary: "fixed".into(),
    };
    let (t, _) = recorded(&j, &facts(2, 1));
    assert_eq!(t.effects, [Effect::TickPlanFile(2)]);
    let told = Facts {
        notify_each_step: true,
        ..facts(2, 1)
    };
    let (t, _) = recorded(&j, &told);
    assert!(matches!(
        &t.effects[..],
        [Effect::TickPlanFile(2), Effect::StepDone { step: 2, .. }]
    ));
}

#[test]
fn a_task_the_file_lost_goes_back_on_record_with_its_attempt_and_session() {
    let task = OnRecord {
        step: 2,
        task_id: "task_20261122T030000_abcdef",
        attempt: Some(2),
        session_id: Some("sess-2"),
        review: false,
    };
    let running = view(BASE);
    let kept = kept_on_record(&running, &task).expect("dropped from CURRENT: it goes back");
    for t in [kept, adopted(&task)] {
        let m = view(&applied(BASE, &t));
        assert_eq!(m.current.task_id.as_deref(), Some(task.task_id));
        assert_eq!(
            (m.current.attempt, m.current.session_id.as_deref()),
            (Some(2), Some("sess-2"))
        );
        assert_eq!(
            (m.plan.current_step, m.plan.steps[1].state),
            (2, StepState::Running)
        );
        assert_eq!(t.write, Write::Now);
    }
}

#[test]
fn a_review_run_the_file_lost_goes_back_on_record_as_a_review() {
    let task = OnRecord {
        step: 2,
        task_id: "task_20261122T030000_abcdef",
        attempt: Some(1),
        session_id: Some("sess-r"),
        review: true,
    };
    let t = adopted(&task);
    let m = view(&applied(BASE, &t));
    assert!(m.current.review);
    assert!(t.log.contains("step 2 review 1"), "{}", t.log);
}

#[test]
fn the_agents_pid_is_recorded_in_current() {
    let m = view(&applied(BASE, &pid_recorded(4242)));
    assert_eq!(m.current.cc_pid, Some(4242));
}

#[test]
fn an_edit_the_runner_cannot_record_onto_halts_waiting_and_writes_nothing_else() {
    let t = unrecordable("M1.md:7:5: no step 4");
    assert_eq!(t.edits.len(), 3, "STATUS and the two actions only");
    let m = view(&applied(BASE, &t));
    assert_eq!(m.status, Status::Waiting);
    assert!(m.last_action.unwrap().contains("no step 4"));
    assert_eq!(t.outcome, Outcome::Exit(Exit::Waiting));
}

#[test]
fn held_outcomes_are_written_before_the_runner_ends_waits_or_watches() {
    let held_first = |n: Next| n.writes_held_first();
    assert!(held_first(Next::Finished(Status::Done)));
    assert!(held_first(Next::Paused("x".into())));
    assert!(held_first(Next::Await(RunOnRecord {
        kind: RunKind::Attempt,
        step: 1,
        task_id: "t".into(),
        number: 1,
        session_id: None
    })));
    assert!(!held_first(Next::Run(RunSpec {
        kind: RunKind::Attempt,
        step: 1,
        number: 1,
        session: SessionPlan::Fresh
    })));
    assert!(!held_first(Next::Complete));
}

#[test]
fn a_plan_with_after_records_what_each_step_waits_for_and_a_bad_one_is_no_plan() {
    let caps = Caps::default();
    let a = Attempt {
        step: 0,
        answer: r#"{"steps": ["schema", "api", "ui", "e2e"], "after": {"4": [2, 3], "2": [1]}}"#,
        ..attempt(&caps, Class::Success, &Verdict::Missing)
    };
    let j = judge(&a);
    let t = record(&j, &facts(0, 1));
    let text = applied("STATUS: RUNNING\nGOAL: g\n", &t);
    let m = view(&text);
    assert_eq!(m.plan.after[&4], [2, 3], "{text}");
    assert_eq!(m.plan.after[&2], [1], "{text}");
    assert!(text.contains("  AFTER:\n    2: 1\n    4: 2, 3\n"), "{text}");
    for bad in [
        r#"{"steps": ["a", "b"], "after": {"2": [2]}}"#,
        r#"{"steps": ["a", "b"], "after": {"3": [1]}}"#,
        r#"{"steps": ["a", "b"], "after": {"1": [2], "2": [1]}}"#,
    ] {
        let a = Attempt {
            step: 0,
            answer: bad,
            ..attempt(&caps, Class::Success, &Verdict::Missing)
        };
        assert!(
            matches!(judge(&a), Judgement::Retry { .. }),
            "{bad}: {:?}",
            judge(&a)
        );
    }
}
