//! The review of a step that passed: its verdict, how each is recorded, and what comes next.

use super::*;

const UNDER_REVIEW: &str = "STATUS: RUNNING
GOAL: g
REVIEW: on
PLAN:
  CURRENT_STEP: 2
  STEPS:
    1: [DONE] read
    2: [RUNNING] write
    3: [PENDING] test
RESULTS:
  STEP_2:
    ATTEMPTS: 1
    SUMMARY: wrote it
    COST_USD: 0.1
    REVIEW: pending
";

fn facts() -> ReviewFacts {
    ReviewFacts {
        step: 2,
        run: 1,
        cost_usd: 0.02,
        prior_cost_usd: 0.1,
        retakes: 0,
        summary: "wrote it".into(),
        next_step: Some((3, "test".into())),
        notify_each_step: false,
    }
}

#[test]
fn only_a_strict_last_line_is_a_review_verdict() {
    assert_eq!(
        judge_review(Ok(()), "ok\nREVIEW_APPROVE: done right"),
        ReviewVerdict::Approve("done right".into())
    );
    assert_eq!(
        judge_review(Ok(()), "REVIEW_CHANGES: add tests\n\n"),
        ReviewVerdict::Changes("add tests".into())
    );
    for answer in [
        "REVIEW_APPROVE: fine\nbut one more thing",
        "REVIEW_APPROVE:",
        "looks good",
    ] {
        assert!(
            matches!(judge_review(Ok(()), answer), ReviewVerdict::Missing(_)),
            "{answer}"
        );
    }
    assert!(matches!(
        judge_review(Err("killed".into()), "REVIEW_APPROVE: x"),
        ReviewVerdict::Missing(w) if w == "killed"
    ));
}

#[test]
fn a_pending_review_is_next_and_its_runs_are_capped() {
    let m = view(UNDER_REVIEW);
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Review {
            step: 2,
            attempt: 1
        }
    );
    let tried = UNDER_REVIEW.replace("REVIEW: pending\n", "REVIEW: pending\n    REVIEW_RUNS: 3\n");
    assert!(matches!(
        next(&view(&tried), &Caps::default(), now()),
        Next::Halt { .. }
    ));
}

#[test]
fn approval_makes_the_step_done_with_the_reviews_cost_and_moves_on() {
    let t = record_review(
        &ReviewVerdict::Approve("good".into()),
        &facts(),
        &Caps::default(),
    );
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.plan.steps[1].state, StepState::Done);
    assert_eq!(m.plan.current_step, 3);
    let r = &m.results[&2];
    assert_eq!(
        r.extra.get("REVIEW").map(String::as_str),
        Some("approved: good")
    );
    assert!((r.cost_usd.unwrap() - 0.12).abs() < 1e-9);
    assert_eq!(t.write, Write::WithNextSpawn);
    assert_eq!(t.effects, [Effect::TickPlanFile(2)]);
}

#[test]
fn changes_are_a_retake_not_a_failed_attempt_until_max_retakes_then_a_human_decides() {
    let caps = Caps {
        max_retakes: 1,
        ..Caps::default()
    };
    let words = ReviewVerdict::Changes("add tests".into());
    let m = view(&applied(
        UNDER_REVIEW,
        &record_review(&words, &facts(), &caps),
    ));
    let r = &m.results[&2];
    assert_eq!(
        (m.status, m.plan.steps[1].state),
        (Status::Running, StepState::Pending)
    );
    assert_eq!(r.extra.get("RETAKES").map(String::as_str), Some("1"));
    assert!(r.error.as_deref().unwrap().contains("add tests"));
    // The retake used attempt 1 without failing it: attempt 2 runs, in the step's session.
    let capped = Caps {
        max_retries: 1,
        ..caps.clone()
    };
    assert!(matches!(
        next(&m, &capped, now()),
        Next::Spawn {
            step: 2,
            attempt: 2,
            ..
        }
    ));
    let again = ReviewFacts {
        retakes: 1,
        ..facts()
    };
    let t = record_review(&words, &again, &caps);
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.status, Status::Waiting);
    assert!(m.last_action.unwrap().contains("add tests"));
    assert!(matches!(&t.effects[..], [Effect::Waiting { .. }]));
}

#[test]
fn a_review_run_without_a_verdict_is_counted_and_the_review_stays_pending() {
    let t = record_review(
        &ReviewVerdict::Missing("no verdict line".into()),
        &facts(),
        &Caps::default(),
    );
    let m = view(&applied(UNDER_REVIEW, &t));
    assert!(crate::engine::review::pending(&m, 2));
    assert_eq!(
        m.results[&2].extra.get("REVIEW_RUNS").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Review {
            step: 2,
            attempt: 2
        }
    );
}
