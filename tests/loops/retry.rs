//! `loop retry [N]`: a fresh budget for a failed or waiting step, a passed step run again on
//! purpose, each written to loop.log as a person's decision.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};

use crate::support::{TestLoop, save_by_rename, stderr, wait_until};

fn ok() -> Action {
    Action::done("ok").sleep_ms(10)
}

fn fails() -> Action {
    Action::failed("the tests do not build")
}

#[test]
fn retry_gives_a_failed_step_a_fresh_budget_and_runs_the_loop_on() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [fails(), fails(), ok()]));
    env.run_exits(
        1,
        &TestLoop::start_args(&["a", "b"], &["--max-retries", "2"]),
    );
    let m = env.m1();
    assert!(
        m.next_action
            .as_deref()
            .unwrap_or("")
            .contains("loop retry"),
        "the advice names the command: {}",
        env.text()
    );
    env.run_ok(&["retry"]);
    env.assert_status(Status::Done);
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
    env.assert_logged("retry: step 1 by a person");
}

#[test]
fn retry_n_runs_a_passed_step_again_and_nothing_puts_the_pass_back() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(ok()));
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    env.run_ok(&["retry", "1"]);
    assert_eq!(env.calls_for(1), 2, "{}", env.log());
    assert_eq!(env.calls_for(2), 1, "step 2 is not run again");
    env.assert_status(Status::Done);
    assert!(!env.log().contains("ledger:"), "{}", env.log());
}

#[test]
fn a_stale_save_after_a_retry_does_not_undo_it() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(600).heartbeat_ms(50)));
    env.run_ok(&["start", "g", "--step", "a", "--step", "b"]);
    let done = env.text();
    let mut runner = env.spawn(&["retry", "1"]);
    env.wait_for_calls(1, 2);
    // An editor that loaded the DONE text before the retry saves it now.
    save_by_rename(&env.file, &done);
    let status = runner.wait(Duration::from_secs(30));
    assert!(status.success(), "{}", env.log());
    assert_eq!(env.calls_for(1), 2, "{}", env.log());
    assert_eq!(env.calls_for(2), 1, "{}", env.log());
    env.assert_status(Status::Done);
}

#[test]
fn retry_with_nothing_failed_or_waiting_asks_for_a_step_number() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(ok()));
    env.run_ok(&["start", "g", "--step", "a"]);
    let before = env.text();
    let out = env.run_exits(2, &["retry"]);
    assert!(stderr(&out).contains("loop retry N"), "{}", stderr(&out));
    let out = env.run_exits(2, &["retry", "7"]);
    assert!(stderr(&out).contains("no step 7"), "{}", stderr(&out));
    assert_eq!(env.text(), before, "a refused retry writes nothing");
}

#[test]
fn retry_of_a_stopped_loop_runs_the_step_it_stopped_at() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(60_000).heartbeat_ms(50)));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    env.run_ok(&["stop"]);
    assert_eq!(runner.wait(Duration::from_secs(10)).code(), Some(3));
    env.scenario(&Scenario::new().otherwise(ok()));
    env.run_ok(&["retry", "--detach"]);
    assert!(wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&env.file).is_ok_and(|t| t.starts_with("STATUS: DONE"))
    }));
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Done);
    assert_eq!(env.calls_for(1), 2);
    env.assert_no_processes();
}
