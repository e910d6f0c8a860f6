//! A step that goes on in a fresh session with a handoff: when the agent asks
//! (`STEP_RESTART`), and when its session's context passed the threshold.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::TestLoop;

/// The agent leaves `note` as its handoff and asks for a fresh session.
fn restart(note: &str) -> Action {
    Action::restart("context nearly full").write("state/handoff/step-1.md", note)
}

fn done() -> Action {
    Action::done("ok")
}

#[test]
fn step_restart_goes_on_in_a_fresh_session_from_the_agents_handoff_note() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [restart("did the parser; left: the tests"), done()]));
    let calls = env.run_in_two_calls_the_second_fresh();
    assert_ne!(calls[1]["session_id"], calls[0]["session_id"]);
    let first = env.prompt(0);
    assert!(
        first.contains("STEP_RESTART") && first.contains("handoff/step-1.md"),
        "{first}"
    );
    let second = env.prompt(1);
    assert!(
        second.contains("did the parser; left: the tests"),
        "{second}"
    );
    assert!(second.contains("context nearly full"), "{second}");
    let r = &env.m1().results[&1];
    assert_eq!(r.restarts, 1);
    assert_eq!(r.attempts, Some(1), "a restart is not a failed attempt");
}

#[test]
fn step_restart_past_max_restarts_counts_as_a_failed_attempt() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(restart("again")));
    env.run_exits(1, &["start", "g", "--step", "one", "--max-retries", "1"]);
    env.assert_status(Status::Failed);
    let m = env.m1();
    let r = &m.results[&1];
    assert_eq!(r.restarts, 3);
    assert!(
        r.error.as_deref().unwrap().contains("MAX_RESTARTS 3"),
        "{r:?}"
    );
    assert_eq!(
        env.calls().len(),
        4,
        "three fresh sessions, then the one that failed"
    );
}

#[test]
fn a_crash_between_the_restart_and_the_fresh_session_resumes_into_one_fresh_session() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [restart("note"), done()]));
    let mut c = env.cmd(&["start", "g", "--step", "one"]);
    c.env("LOOP_CRASH_AT", "after-restart");
    let status = c.status().unwrap();
    assert!(!status.success(), "the runner crashed at after-restart");
    env.run_ok(&["resume"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "{}", env.log());
    assert!(calls[1]["resume"].is_null());
    assert!(env.prompt(1).contains("note"));
    let r = &env.m1().results[&1];
    assert_eq!(r.restarts, 1, "counted once");
}

#[test]
fn a_retry_of_a_session_past_the_context_threshold_is_a_fresh_session_with_a_handoff() {
    let env = TestLoop::new();
    let full = Action::says("I think it works now.").context_tokens(150_000);
    env.scenario(&Scenario::new().step(1, [full, done()]));
    env.run_in_two_calls_the_second_fresh();
    let second = env.prompt(1);
    assert!(
        second.contains("reached 75% of the model's window"),
        "{second}"
    );
    assert!(
        second.contains("I think it works now."),
        "the last answer is handed over"
    );
    assert!(
        second.contains("did not end with a STEP_DONE"),
        "what failed is handed over"
    );
}

#[test]
fn a_step_whose_background_work_the_cli_stopped_is_retried_in_its_session() {
    let env = TestLoop::new();
    let unfinished = Action::done("migrated").background_task("run the migration");
    env.scenario(&Scenario::new().step(1, [unfinished, done()]));
    env.run_ok(&["start", "g", "--step", "one"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1]["resume"], calls[0]["session_id"],
        "the same session goes on"
    );
    let again = env.prompt(1);
    assert!(
        again.contains("stopped it unfinished: run the migration"),
        "{again}"
    );
    assert_eq!(env.m1().results[&1].attempts, Some(2));
}
