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
        task_id: "task_20260101T000000_review".into(),
        cost_usd: 0.02,
        prior_cost_usd: 0.1,
        tokens: None,
        retakes: 0,
        summary: "wrote it".into(),
        next_step: Some((3, "test".into())),
        notify_each_step: false,
        transients: 0,
        loop_id: "l1".into(),
        next_gate: "G1".into(),
        now: now(),
    }
}

/// A review run that ended with `class` and answered `answer`.
fn review_run<'a>(caps: &'a Caps, class: Class, answer: &'a str) -> Attempt<'a> {
    Attempt {
        answer,
        ..attempt(caps, class, &Verdict::Missing)
    }
}

fn judged(class: Class, answer: &str) -> ReviewVerdict {
    judge_review(&review_run(&Caps::default(), class, answer))
}

#[test]
fn only_a_strict_last_line_is_a_review_verdict() {
    assert_eq!(
        judged(Class::Success, "ok\nREVIEW_APPROVE: done right"),
        ReviewVerdict::Approve("done right".into())
    );
    assert_eq!(
        judged(Class::Success, "REVIEW_CHANGES: add tests\n\n"),
        ReviewVerdict::Changes("add tests".into())
    );
    for answer in [
        "REVIEW_APPROVE: fine\nbut one more thing",
        "REVIEW_APPROVE:",
        "looks good",
    ] {
        assert!(
            matches!(judged(Class::Success, answer), ReviewVerdict::Missing(_)),
            "{answer}"
        );
    }
    let caps = Caps::default();
    let killed = Attempt {
        end: TaskEnd::Killed,
        ..review_run(&caps, Class::Success, "REVIEW_APPROVE: x")
    };
    assert!(matches!(
        judge_review(&killed),
        ReviewVerdict::Missing(w) if w.contains("killed")
    ));
    assert!(matches!(
        judged(Class::Other("the tool crashed".into()), "REVIEW_APPROVE: x"),
        ReviewVerdict::Missing(w) if w.contains("the tool crashed")
    ));
}

#[test]
fn a_review_cut_off_by_the_usage_limit_waits_for_the_reset_and_is_not_a_review_run() {
    let until = now() + chrono::Duration::minutes(40);
    let v = judged(
        Class::UsageLimit {
            resets_at: Some(until),
            guess: None,
            message: "5-hour limit".into(),
        },
        "",
    );
    assert!(matches!(&v, ReviewVerdict::Interrupted(_)), "{v:?}");
    let f = ReviewFacts {
        now: now(),
        ..facts()
    };
    let t = record_review(&v, &f, &Caps::default());
    assert!(matches!(
        &t.effects[..],
        [Effect::UsageWait { step: 2, .. }]
    ));
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.status, Status::Running);
    assert!(crate::engine::review::pending(&m, 2));
    assert_eq!(m.results[&2].review_runs, 0);
    assert_eq!(wait_until(&m), Some(until));
    assert!(matches!(
        next(&m, &Caps::default(), now()),
        Next::WaitUntil { .. }
    ));
    assert_eq!(
        next(&m, &Caps::default(), until),
        Next::Run(RunSpec {
            kind: RunKind::Review,
            step: 2,
            number: 1,
            session: SessionPlan::Fresh
        })
    );
    // The wait set the step back to PENDING; its review makes it RUNNING again.
    assert_eq!(m.plan.steps[1].state, StepState::Pending);
    let after = applied(
        &applied(UNDER_REVIEW, &t),
        &started(&SpawnFacts {
            kind: RunKind::Review,
            step: 2,
            attempt: 1,
            review_number: 1,
            task_id: "task_r",
            session_id: "sid",
            command: "",
            git_head: None,
            new_loop_id: None,
            commit: false,
            superseded: Vec::new(),
            now: until,
        }),
    );
    assert_eq!(view(&after).plan.steps[1].state, StepState::Running);
}

#[test]
fn a_review_cut_off_by_a_transient_error_backs_off_counted_with_the_steps_transients() {
    let caps = Caps::default();
    let run = review_run(&caps, Class::Transient("529 overloaded".into()), "");
    let v = judge_review(&run);
    let t = record_review(&v, &facts(), &caps);
    let m = view(&applied(UNDER_REVIEW, &t));
    assert!(t.log.starts_with("review: backoff 2s"), "{}", t.log);
    assert_eq!(m.results[&2].transient, 1);
    assert!(crate::engine::review::pending(&m, 2));
    let over = Attempt {
        transients: caps.transient_cap,
        ..run
    };
    assert!(matches!(
        judge_review(&over),
        ReviewVerdict::Interrupted(Interruption::Halt { .. })
    ));
}

#[test]
fn a_review_refused_for_bad_credentials_halts_with_that_reason_and_stays_pending() {
    let v = judged(Class::Auth("Invalid API key".into()), "");
    let t = record_review(&v, &facts(), &Caps::default());
    assert_eq!(t.outcome, Outcome::Exit(Exit::Waiting));
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.status, Status::Waiting);
    assert!(m.last_action.as_deref().unwrap().contains("authentication"));
    assert!(crate::engine::review::pending(&m, 2));
    assert_eq!(m.results[&2].review_runs, 0);
}

#[test]
fn a_pending_review_is_next_and_its_runs_are_capped() {
    let m = view(UNDER_REVIEW);
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Run(RunSpec {
            kind: RunKind::Review,
            step: 2,
            number: 1,
            session: SessionPlan::Fresh
        })
    );
    let tried = UNDER_REVIEW.replace(
        "REVIEW: pending\n",
        "REVIEW: pending\n    REVIEW_RUNS: 3\n    REVIEW_TASK: task_x\n",
    );
    let Next::Halt { reason, how } = next(&view(&tried), &Caps::default(), now()) else {
        panic!("not a halt");
    };
    assert!(
        reason.ends_with("in 3 runs (the last: task task_x)"),
        "{reason}"
    );
    assert!(
        how.contains("tasks/task_x/stdout") && how.contains("loop check task_x"),
        "{how}"
    );
}

#[test]
fn a_pending_review_with_review_set_off_takes_the_passed_attempt_as_done_with_no_run() {
    let off = UNDER_REVIEW
        .replace("REVIEW: on\n", "REVIEW: off\n")
        .replace(
            "REVIEW: pending\n",
            "REVIEW: pending\n    REVIEW_RUNS: 3\n    REVIEW_TASK: task_x\n",
        );
    let m = view(&off);
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Unreviewed { step: 2 }
    );
    let t = crate::engine::review::unreviewed(&m, 2, false, now());
    let after = view(&applied(&off, &t));
    assert_eq!(after.plan.steps[1].state, StepState::Done);
    assert_eq!(after.plan.current_step, 3);
    let r = &after.results[&2];
    assert!(!crate::engine::review::pending(&after, 2));
    assert_eq!((r.review_runs, r.review_task.as_deref()), (0, None));
    assert!(matches!(
        next(&after, &Caps::default(), now()),
        Next::Run(RunSpec {
            kind: RunKind::Attempt,
            step: 3,
            ..
        })
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
        r.review.as_ref().map(ToString::to_string).as_deref(),
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
    assert_eq!(r.retakes, 1);
    assert!(r.error.as_deref().unwrap().contains("add tests"));
    // The retake used attempt 1 without failing it: attempt 2 runs, in the step's session.
    let capped = Caps {
        max_retries: 1,
        ..caps.clone()
    };
    assert!(matches!(
        next(&m, &capped, now()),
        Next::Run(RunSpec {
            kind: RunKind::Attempt,
            step: 2,
            number: 2,
            ..
        })
    ));
    let again = ReviewFacts {
        retakes: 1,
        ..facts()
    };
    let t = record_review(&words, &again, &caps);
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.status, Status::Waiting);
    assert!(m.last_action.as_deref().unwrap().contains("add tests"));
    assert!(matches!(&t.effects[..], [Effect::Gate { id }] if id == "G1"));
    // A person decides on a REVIEW gate: accept it as it is, retake it afresh, or stop.
    let g = m.gate("G1").expect("a REVIEW gate");
    assert_eq!(g.kind, crate::m1::GateKind::Review);
    assert_eq!(g.step, 2);
    assert_eq!(g.options, ["accept", "retry", "stop"]);
    assert!(
        m.next_action
            .as_deref()
            .unwrap()
            .contains("loop answer G1 accept")
    );
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
    assert_eq!(m.results[&2].review_runs, 1);
    assert_eq!(
        m.results[&2].review_task.as_deref(),
        Some("task_20260101T000000_review")
    );
    assert_eq!(
        next(&m, &Caps::default(), now()),
        Next::Run(RunSpec {
            kind: RunKind::Review,
            step: 2,
            number: 2,
            session: SessionPlan::Fresh
        })
    );
}

#[test]
fn a_review_that_changed_the_tree_approves_nothing_and_a_human_looks() {
    use crate::engine::review::{Reach, TreeDuringReview, attribute};
    let could = Reach::MayWrite("called Bash: touch made.txt".into());
    assert_eq!(attribute(2, &[], &could), TreeDuringReview::Unchanged);
    let changed = ["made.txt (new)".to_owned(), "a.txt (changed)".to_owned()];
    let TreeDuringReview::Suspect(v) = attribute(2, &changed, &could) else {
        panic!("a reviewer that could write is suspected")
    };
    let t = record_review(&v, &facts(), &Caps::default());
    assert_eq!(t.outcome, Outcome::Exit(Exit::Waiting));
    assert!(
        t.log.contains("made.txt (new), a.txt (changed)"),
        "{}",
        t.log
    );
    assert!(
        t.log.contains("the reviewer called Bash: touch made.txt"),
        "{}",
        t.log
    );
    let m = view(&applied(UNDER_REVIEW, &t));
    assert_eq!(m.status, Status::Waiting);
    assert_ne!(m.plan.steps[1].state, StepState::Done);
    let r = &m.results[&2];
    assert!(
        r.error.as_deref().unwrap().contains("made.txt (new)"),
        "{r:?}"
    );
    assert!(m.next_action.as_deref().unwrap().contains("git status"));
    assert!(
        crate::engine::review::pending(&m, 2),
        "reviewed again once a human looked"
    );
    assert!(
        (r.cost_usd.unwrap() - 0.12).abs() < 1e-9,
        "the run is paid for"
    );
}

#[test]
fn a_change_no_read_only_reviewer_could_make_is_said_and_decides_nothing() {
    use crate::engine::review::{Reach, TreeDuringReview, attribute};
    let reach = Reach::ReadOnly("ran in Codex's read-only sandbox".into());
    let changed = ["loop.out (changed)".to_owned()];
    assert_eq!(
        attribute(2, &changed, &reach),
        TreeDuringReview::NotTheReviewers(
            "changed during the review of step 2: loop.out (changed) (not by the reviewer: its \
             run ran in Codex's read-only sandbox)"
                .into()
        )
    );
}
