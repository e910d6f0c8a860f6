//! `--review`: every step that passes its checks is reviewed by a separate, read-only agent
//! run in a fresh session before it is DONE.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use serde_json::json;

use crate::support::answers::{approve, changes, work};
use crate::support::{TestLoop, is_review, review_text, save_by_rename, stdout, wait_until};

#[test]
fn an_approved_step_is_done_and_its_review_was_read_only_fresh_and_paid_for() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, [work("whole"), approve()]));
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    env.assert_status(Status::Done);
    let m = env.m1();
    let r = &m.results[&1];
    assert_eq!(review_text(r).as_deref(), Some("approved: a.txt is right"));
    assert!((r.cost_usd.unwrap() - 0.12).abs() < 1e-9, "{r:?}");
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!((steps.len(), reviews.len()), (1, 1));
    let (at, review) = &reviews[0];
    assert!(review["resume"].is_null());
    assert!(review["settings"].is_null(), "no step hooks for a reviewer");
    assert_ne!(review["session_id"], steps[0].1["session_id"]);
    assert_eq!(
        review["tools"],
        json!(["Read", "Grep", "Glob"]),
        "offered only tools that read"
    );
    let prompt_text = env.prompt(*at);
    assert!(
        !prompt_text.contains("state/M1.md"),
        "the loop's own files are not the step's diff"
    );
    let prompt = env.prompt(*at);
    assert!(prompt.contains("a.txt says whole"), "the claim: {prompt}");
    assert!(
        prompt.contains("new file (untracked): a.txt\nwhole"),
        "the diff: {prompt}"
    );
    assert!(stdout(&env.run(&["status"])).contains("review approved: a.txt is right"));
    assert!(env.log().contains("(reviewed)"), "the DONE message says so");
}

#[test]
fn changes_go_back_to_the_steps_session_as_a_retake_and_each_review_is_fresh() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, [work("half"), changes(), work("whole"), approve()]));
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!((steps.len(), reviews.len()), (2, 2));
    let step_session = &steps[0].1["session_id"];
    assert_eq!(
        &steps[1].1["resume"], step_session,
        "the fix resumes the step's session"
    );
    let fix = env.prompt(steps[1].0);
    assert!(fix.contains("a.txt must say whole"), "{fix}");
    assert_ne!(reviews[0].1["session_id"], reviews[1].1["session_id"]);
    for (_, r) in &reviews {
        assert_ne!(&r["session_id"], step_session);
    }
    let r = &env.m1().results[&1];
    assert_eq!(r.retakes, 1);
    assert_eq!(r.attempts, Some(2));
}

#[test]
fn past_max_retakes_the_step_waits_for_a_human_with_the_reviewers_last_words() {
    let env = TestLoop::new().with_git();
    std::fs::write(env.state().join("loop.yaml"), "review:\n  max_retakes: 1\n").unwrap();
    let still = Action::changes("still half").cost(0.02);
    env.scenario(&Scenario::new().step(1, [work("half"), changes(), work("half"), still]));
    env.run_exits(3, &["start", "g", "--step", "write a.txt"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert!(m.last_action.unwrap().contains("still half"));
    assert_ne!(m.plan.steps[0].state, StepState::Failed);
}

#[test]
fn a_review_without_a_verdict_is_a_failed_review_run_and_is_run_again() {
    let env = TestLoop::new().with_git();
    let no_verdict = Action::says("Looks fine to me.");
    env.scenario(&Scenario::new().step(1, [work("whole"), no_verdict, approve()]));
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!(
        (steps.len(), reviews.len()),
        (1, 2),
        "not taken for an approval"
    );
    assert!(
        env.log().contains("gave no verdict")
            || env.log().contains("did not end with a REVIEW_APPROVE"),
        "{}",
        env.log()
    );
    env.assert_status(Status::Done);
}

#[test]
fn a_crash_at_each_write_point_of_a_review_neither_reviews_twice_nor_reruns_the_step() {
    for point in [
        "before-review-spawn-write",
        "after-review-spawn-write",
        "after-review-fire",
        "before-review-record-write",
        "after-review-record-write",
    ] {
        let env = TestLoop::new().with_git();
        env.scenario(
            &Scenario::new()
                .step(1, [work("whole"), approve()])
                .step(2, [work("more"), approve()]),
        );
        let mut c = env.cmd(&["start", "g", "--step", "one", "--step", "two", "--review"]);
        c.env("LOOP_CRASH_AT", point);
        let status = c.status().unwrap();
        assert!(!status.success(), "{point}: the runner did not crash");
        env.run_ok(&["resume"]);
        let (steps, reviews) = env.step_and_review_calls();
        assert_eq!(
            (steps.len(), reviews.len()),
            (2, 2),
            "{point}: {}",
            env.log()
        );
        env.assert_status(Status::Done);
    }
}

#[test]
fn without_review_nothing_is_reviewed() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, work("whole")));
    env.run_ok(&["start", "g", "--step", "write a.txt"]);
    assert_eq!(env.calls().len(), 1);
    assert!(!env.text().contains("REVIEW"));
}

/// Runs a reviewed one-step loop under `MAX_RETRIES` 1, where one failed review run would be
/// all that is allowed: a wait must not count as one. The step ran once, was reviewed twice
/// (cut off, then approved), and the loop is DONE.
fn reviewed_to_the_end_with_one_review_run_allowed(env: &TestLoop) {
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "write a.txt",
        "--review",
        "--max-retries",
        "1",
    ]);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!((steps.len(), reviews.len()), (1, 2));
    env.assert_status(Status::Done);
    assert_eq!(
        review_text(&env.m1().results[&1]).as_deref(),
        Some("approved: a.txt is right")
    );
}

#[test]
fn a_review_cut_off_by_the_usage_limit_waits_for_the_reset_instead_of_halting() {
    let env = TestLoop::new().with_git();
    let reset = chrono::Utc::now().timestamp() + 2;
    let limited = Action::usage_limit(reset);
    env.scenario(&Scenario::new().step(1, [work("whole"), limited, approve()]));
    reviewed_to_the_end_with_one_review_run_allowed(&env);
    assert!(
        chrono::Utc::now().timestamp() >= reset,
        "it waited for the reset"
    );
    env.assert_logged("usage limit");
    assert_eq!(env.m1().results[&1].interrupted, None);
}

#[test]
fn a_review_cut_off_by_an_overloaded_api_backs_off_and_reviews_again() {
    let env = TestLoop::new().with_git();
    env.scenario(&Scenario::new().step(1, [work("whole"), Action::overloaded(), approve()]));
    reviewed_to_the_end_with_one_review_run_allowed(&env);
    env.assert_logged("backoff 2s");
    env.assert_one_wait_logged();
}

#[test]
fn a_review_refused_for_bad_credentials_halts_at_once_with_that_reason() {
    let env = TestLoop::new().with_git();
    let auth = || Action::api_error(401, "Invalid API key · Fix external API key");
    env.scenario(&Scenario::new().step(1, [work("whole"), auth(), auth(), auth(), approve()]));
    env.run_exits(3, &["start", "g", "--step", "write a.txt", "--review"]);
    let (_, reviews) = env.step_and_review_calls();
    assert_eq!(
        reviews.len(),
        1,
        "running it again cannot log it in: {}",
        env.log()
    );
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let last = m.last_action.unwrap_or_default();
    assert!(last.contains("authentication"), "{last}");
    assert_eq!(
        review_text(&m.results[&1]).as_deref(),
        Some("pending"),
        "still to be reviewed once a human fixed the login"
    );
}

/// Every call of the loop, as (step, attempt or review run, whether a review): each must be
/// made once.
fn assert_each_call_once(env: &TestLoop) {
    let mut seen = std::collections::BTreeMap::new();
    for c in env.calls() {
        let key = (c["step"].as_u64(), c["attempt"].as_u64(), is_review(&c));
        *seen.entry(key).or_insert(0) += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "{seen:?}\n{}", env.log());
}

#[test]
fn a_stale_save_with_the_runner_dead_neither_reviews_a_step_again_nor_reruns_it() {
    // The text read while step 1 runs or is reviewed, saved once step 3 runs: everything the
    // runner judged since is in the task ledger, the reviews included.
    for during in [1, 2] {
        let env = TestLoop::new().with_git();
        env.scenario(
            &Scenario::new()
                .otherwise(Action::done("ok").sleep_ms(600).heartbeat_ms(50))
                .review(Action::approve("fine").sleep_ms(300)),
        );
        let mut runner = env.spawn(&[
            "start", "g", "--step", "a", "--step", "b", "--step", "c", "--review",
        ]);
        let deadline = Duration::from_secs(30);
        assert!(wait_until(deadline, || env.calls_for(during) >= 1
            && env.m1().plan.steps[during as usize - 1].state
                == StepState::Running));
        let old = env.text();
        assert!(wait_until(deadline, || env.calls_for(3) >= 1));
        runner.kill9();
        save_by_rename(&env.file, &old);
        env.run_ok(&["resume"]);
        assert_each_call_once(&env);
        let m = env.m1();
        for n in 1..=3 {
            assert_eq!(
                review_text(&m.results[&n]).as_deref(),
                Some("approved: fine"),
                "step {n}\n{}",
                env.text()
            );
        }
        env.assert_no_processes();
    }
}
