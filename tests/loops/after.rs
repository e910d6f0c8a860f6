//! `PLAN.AFTER`: a step starts only once the steps it waits for are DONE or SKIPPED, in
//! whatever order their numbers come; the planning call may write the block, and a person may
//! edit it like any other line.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, stdout};

/// The steps the agent was called for, in order (0: the planning call).
fn order(env: &TestLoop) -> Vec<u64> {
    env.calls()
        .iter()
        .filter_map(|c| c["step"].as_u64())
        .collect()
}

#[test]
fn a_planned_after_runs_a_step_only_once_what_it_waits_for_is_done() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().plan(Action::says(
        r#"{"steps": ["write the API", "write the UI on it", "write the schema"], "after": {"1": [3], "2": [1]}}"#,
    )));
    env.run_ok(&["start", "g"]);
    env.assert_status(Status::Done);
    assert_eq!(order(&env), [0, 3, 1, 2]);
    let status = stdout(&env.run_ok(&["status"]));
    assert!(
        status.contains("write the API  [after 3]") && status.contains("[after 1]"),
        "{status}"
    );
}

#[test]
fn an_after_written_by_hand_reorders_the_steps_that_remain() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new());
    env.run_ok(&TestLoop::start_args(&["a", "b", "c"], &["--plan-only"]));
    let text = env.text().replace(
        "    3: [PENDING] c\n",
        "    3: [PENDING] c\n  AFTER:\n    1: 3\n",
    );
    assert!(text.contains("  AFTER:\n"), "{text}");
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(order(&env), [2, 3, 1]);
}

#[test]
fn a_plan_whose_after_makes_a_cycle_is_no_plan_and_is_asked_again() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().plan([
        Action::says(r#"{"steps": ["a", "b"], "after": {"1": [2], "2": [1]}}"#),
        Action::says(r#"{"steps": ["a", "b"]}"#),
    ]));
    env.run_ok(&["start", "g"]);
    env.assert_status(Status::Done);
    assert_eq!(order(&env), [0, 0, 1, 2]);
    assert!(
        env.prompt(1)
            .contains("makes a cycle (1 waits for 2 waits for 1)"),
        "{}",
        env.prompt(1)
    );
}
