//! `loop retry [N]`: a fresh budget for a failed or waiting step, a passed step run again on
//! purpose, each written to loop.log as a person's decision.

use m1loop::m1::{Status, StepState};
use serde_json::json;

use crate::support::{TestLoop, code, save_by_rename, stderr, wait_until};

fn ok() -> serde_json::Value {
    json!({"sleep_ms": 10, "result": "worked\nSTEP_DONE: ok"})
}

fn fails() -> serde_json::Value {
    json!({"result": "cannot\nSTEP_FAILED: the tests do not build"})
}

#[test]
fn retry_gives_a_failed_step_a_fresh_budget_and_runs_the_loop_on() {
    let env = TestLoop::new();
    env.scenario(&json!({"steps": {"1": [fails(), fails(), ok()]}}));
    let out = env.run(&[
        "start",
        "g",
        "--step",
        "a",
        "--step",
        "b",
        "--max-retries",
        "2",
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let m = env.m1();
    assert!(
        m.next_action
            .as_deref()
            .unwrap_or("")
            .contains("loop retry"),
        "the advice names the command: {}",
        env.text()
    );
    let out = env.run(&["retry"]);
    assert_eq!(code(&out), 0, "{}\n{}", stderr(&out), env.log());
    let m = env.m1();
    assert_eq!(m.status, Status::Done, "{}", env.text());
    assert_eq!(env.calls_for(1), 3);
    // Attempt numbers go on (no attempt is ever started twice under one number), and the
    // retry resumed the step's session with what failed.
    let calls = env.calls();
    let attempts: Vec<_> = calls
        .iter()
        .filter(|c| c["step"] == 1 || c["step"] == "1")
        .map(|c| c["attempt"].to_string())
        .collect();
    assert_eq!(attempts.len(), 3);
    assert_ne!(attempts[1], attempts[2], "{attempts:?}");
    assert!(env.prompt(2).contains("the tests do not build"));
    assert!(
        env.log().contains("retry: step 1 by a person"),
        "{}",
        env.log()
    );
}

#[test]
fn retry_n_runs_a_passed_step_again_and_nothing_puts_the_pass_back() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": ok()}));
    let out = env.run(&["start", "g", "--step", "a", "--step", "b"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = env.run(&["retry", "1"]);
    assert_eq!(code(&out), 0, "{}\n{}", stderr(&out), env.log());
    assert_eq!(env.calls_for(1), 2, "{}", env.log());
    assert_eq!(env.calls_for(2), 1, "step 2 is not run again");
    assert_eq!(env.m1().status, Status::Done);
    assert!(!env.log().contains("ledger:"), "{}", env.log());
}

#[test]
fn a_stale_save_after_a_retry_does_not_undo_it() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": {"sleep_ms": 600, "heartbeat_ms": 50,
        "result": "worked\nSTEP_DONE: ok"}}));
    let out = env.run(&["start", "g", "--step", "a", "--step", "b"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done = env.text();
    let mut runner = env.spawn(&["retry", "1"]);
    assert!(wait_until(std::time::Duration::from_secs(20), || env
        .calls_for(1)
        == 2));
    // An editor that loaded the DONE text before the retry saves it now.
    save_by_rename(&env.file, &done);
    let status = runner.wait(std::time::Duration::from_secs(30));
    assert!(status.success(), "{}", env.log());
    assert_eq!(env.calls_for(1), 2, "{}", env.log());
    assert_eq!(env.calls_for(2), 1, "{}", env.log());
    assert_eq!(env.m1().status, Status::Done, "{}", env.text());
}

#[test]
fn retry_with_nothing_failed_or_waiting_asks_for_a_step_number() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": ok()}));
    assert_eq!(code(&env.run(&["start", "g", "--step", "a"])), 0);
    let before = env.text();
    let out = env.run(&["retry"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("loop retry N"), "{}", stderr(&out));
    let out = env.run(&["retry", "7"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("no step 7"), "{}", stderr(&out));
    assert_eq!(env.text(), before, "a refused retry writes nothing");
}

#[test]
fn retry_of_a_stopped_loop_runs_the_step_it_stopped_at() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": {"sleep_ms": 60_000, "heartbeat_ms": 50,
        "result": "x\nSTEP_DONE: ok"}}));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    assert!(wait_until(std::time::Duration::from_secs(20), || env
        .calls_for(1)
        == 1));
    assert_eq!(code(&env.run(&["stop"])), 0);
    assert_eq!(
        runner.wait(std::time::Duration::from_secs(10)).code(),
        Some(3)
    );
    env.scenario(&json!({"default": ok()}));
    let out = env.run(&["retry", "--detach"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(wait_until(std::time::Duration::from_secs(20), || {
        std::fs::read_to_string(&env.file).is_ok_and(|t| t.starts_with("STATUS: DONE"))
    }));
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    assert_eq!(env.calls_for(1), 2);
    env.assert_no_processes();
}
