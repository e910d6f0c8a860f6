//! An agent killed from outside before its result (not by the loop's own timeout or stop) is
//! a failed attempt: counted, and retried in the same session, not waited out as an API
//! outage.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{PATIENCE, TestLoop, wait_until};

fn done() -> Action {
    Action::done("ok").sleep_ms(20)
}

/// The `--resume` id of a logged call, if any.
fn resumed(call: &serde_json::Value) -> Option<String> {
    call["resume"].as_str().map(str::to_owned)
}

fn assert_counted_and_resumed(env: &TestLoop) {
    env.assert_status(Status::Done);
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(2), "the killed attempt is counted");
    assert_eq!(r.transient, 0, "not waited out as an outage");
    assert!(!env.log().contains("backoff"), "{}", env.log());
    let calls: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c["step"].as_u64() == Some(1))
        .collect();
    assert_eq!(calls.len(), 2);
    let first = calls[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        resumed(&calls[1]),
        Some(first),
        "retried in the same session"
    );
}

#[test]
fn an_agent_killed_by_an_outside_signal_costs_an_attempt_and_is_retried() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [Action::new().killed_by_signal(9), done()]));
    env.run_ok(&["start", "g", "--step", "one"]);
    assert_counted_and_resumed(&env);
    env.assert_logged("signal 9");
}

#[test]
fn an_agent_killed_with_kill_minus_nine_from_outside_costs_an_attempt_and_is_retried() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [Action::hang(), done()]));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    env.wait_for_calls(1, 1);
    let call = &env.calls()[0];
    // The agent as the machine knows it (in a sandbox, the pid it logged is its own
    // namespace's): the simulated agent's process of the task.
    let task = call["task_id"].as_str().unwrap().to_owned();
    let pid = crate::support::procs::task_processes(&task)
        .into_iter()
        .find(|p| p.name.contains("claude-sim"))
        .map(|p| p.pid)
        .expect("the agent runs");
    // Killed once it has said something, as a real agent would have: its init event is a
    // whole line of the task's stdout.
    let stdout = env.task_file(call["task_id"].as_str().unwrap(), "stdout");
    let spoke = wait_until(PATIENCE, || {
        std::fs::read_to_string(&stdout).is_ok_and(|s| s.contains('\n'))
    });
    assert!(spoke, "the agent wrote no event to {}", stdout.display());
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = runner.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
    assert_counted_and_resumed(&env);
    env.assert_no_processes();
}
