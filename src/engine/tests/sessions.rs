//! A step that goes on in a fresh session: asked by the agent (`STEP_RESTART`), or because
//! its session's context or time passed a limit.

use super::*;

fn facts(step: u32) -> Facts {
    Facts {
        step,
        attempt: 1,
        exit_code: Some(0),
        session_id: Some("sess-2".into()),
        now: now(),
        ..Facts::default()
    }
}

/// Asserts that `next` runs attempt `number` of step `step`, in a fresh session.
#[track_caller]
fn assert_fresh_attempt(next: &Next, step: u32, number: u32) {
    assert!(
        matches!(
            next,
            Next::Run(RunSpec {
                kind: RunKind::Attempt,
                step: s,
                number: n,
                session: SessionPlan::Fresh
            }) if *s == step && *n == number
        ),
        "{next:?}"
    );
}

#[test]
fn step_restart_is_a_fresh_session_not_a_failed_attempt_and_is_counted() {
    let caps = Caps::default();
    let judged = judge(&attempt(
        &caps,
        Class::Success,
        &Verdict::Restart(String::new()),
    ));
    assert_eq!(
        judged,
        Judgement::Restart {
            reason: "context nearly full".into()
        }
    );
    let before = BASE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    SESSION_ID: sess-1\n",
    );
    let t = record(
        &judged,
        &Facts {
            restarts: 1,
            ..facts(2)
        },
    );
    let m = view(&applied(&before, &t));
    let r = &m.results[&2];
    assert_eq!(
        r.session_id, None,
        "the next attempt starts a fresh session"
    );
    assert_eq!(r.attempts, None, "not a failed attempt");
    assert_eq!(r.restarts, 2);
    assert!(
        r.handoff
            .as_deref()
            .unwrap_or_default()
            .contains("context nearly full")
    );
    assert_eq!(m.plan.steps[1].state, StepState::Pending);
    assert_eq!(t.write, Write::WithNextSpawn);
    assert_fresh_attempt(&next(&m, &caps, now()), 2, 1);
}

#[test]
fn step_restart_past_max_restarts_is_a_failed_attempt() {
    let caps = Caps {
        max_restarts: 2,
        ..Caps::default()
    };
    let a = Attempt {
        restarts: 2,
        ..attempt(&caps, Class::Success, &Verdict::Restart(String::new()))
    };
    assert!(matches!(judge(&a), Judgement::Retry { reason } if reason.contains("MAX_RESTARTS 2")));
}

#[test]
fn a_session_past_the_context_threshold_or_its_time_is_handed_off_not_resumed() {
    let caps = Caps {
        context_threshold: 70,
        max_session: Some(Duration::from_secs(3600)),
        ..Caps::default()
    };
    let minute = Duration::from_secs(60);
    assert_eq!(handoff_reason(&caps, Some(69), minute), None);
    let full = handoff_reason(&caps, Some(71), minute).unwrap();
    assert!(full.contains("71%"), "{full}");
    let long = handoff_reason(&caps, Some(10), Duration::from_secs(3700)).unwrap();
    assert!(long.contains("MAX_SESSION"), "{long}");
    // A retry with a handoff reason drops the session and says why; without, it resumes.
    let j = Judgement::Retry {
        reason: "VERIFY failed (exit 1)".into(),
    };
    let before = BASE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    SESSION_ID: sess-1\n",
    );
    let handed = Facts {
        handoff: Some(full),
        context_pct: Some(71),
        ..facts(2)
    };
    let m = view(&applied(&before, &record(&j, &handed)));
    assert_eq!(m.results[&2].session_id, None);
    assert_eq!(m.results[&2].context_pct, Some(71));
    assert!(
        m.results[&2]
            .handoff
            .as_deref()
            .unwrap_or_default()
            .contains("71%")
    );
    let m = view(&applied(&before, &record(&j, &facts(2))));
    assert_eq!(m.results[&2].session_id.as_deref(), Some("sess-2"));
    assert!(m.results[&2].handoff.is_none());
}

#[test]
fn a_done_step_whose_background_work_was_stopped_unfinished_is_not_done() {
    let caps = Caps::default();
    let stopped = ["long job".to_owned()];
    let a = Attempt {
        background_stopped: &stopped,
        ..attempt(&caps, Class::Success, &Verdict::Done("ok".into()))
    };
    assert!(
        matches!(judge(&a), Judgement::Retry { reason } if reason.contains("stopped it unfinished: long job"))
    );
}

#[test]
fn a_resumed_session_too_long_for_its_window_goes_on_fresh_with_a_handoff_not_an_attempt() {
    let caps = Caps::default();
    let too_long = || Class::InvocationBug {
        kind: BugKind::ContextTooLong,
        message: "Prompt is too long (API status 400)".into(),
    };
    let a = Attempt {
        attempt: 2,
        resumed: true,
        ..attempt(&caps, too_long(), &Verdict::Missing)
    };
    let judged = judge(&a);
    assert!(
        matches!(&judged, Judgement::FreshSession { reason } if reason.contains("Prompt is too long")),
        "{judged:?}"
    );
    let before = BASE.replace(
        "RESULTS:\n",
        "RESULTS:\n  STEP_2:\n    ATTEMPTS: 1\n    SESSION_ID: sess-1\n",
    );
    let m = view(&applied(
        &before,
        &record(
            &judged,
            &Facts {
                attempt: 2,
                ..facts(2)
            },
        ),
    ));
    let r = &m.results[&2];
    assert_eq!(
        r.session_id, None,
        "the next attempt starts a fresh session"
    );
    assert_eq!(r.attempts, Some(1), "not a failed attempt");
    assert!(
        r.handoff
            .as_deref()
            .unwrap_or_default()
            .contains("Prompt is too long"),
        "the fresh session gets the handoff: {r:?}"
    );
    assert_fresh_attempt(&next(&m, &caps, now()), 2, 2);
    // A fresh session whose first prompt is already too long cannot be helped by another one.
    assert!(matches!(
        judge(&attempt(&caps, too_long(), &Verdict::Missing)),
        Judgement::Interrupted(Interruption::Halt { .. })
    ));
}
