//! Inputs that `loop validate` accepts must run: a prompt of any length reaches the agent.

use m1loop::m1::Status;
use serde_json::json;

use crate::support::{TestLoop, code, stderr, stdout};

/// A goal past Linux's 128 KiB cap on one argument (`MAX_ARG_STRLEN`), in many languages, and
/// starting with a dash, as an option would.
fn long_goal() -> String {
    use std::fmt::Write as _;
    let mut goal = String::from("-the goal, long: ");
    for n in 0..6000 {
        let _ = write!(goal, "part {n:06} ünïcödé 日本語; ");
    }
    goal.push_str("THE END");
    assert!(goal.len() > 200 * 1024);
    goal
}

#[test]
fn a_goal_over_128_kib_reaches_the_agent_whole() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": {"result": "worked.\nSTEP_DONE: ok"}}));
    let goal = long_goal();
    std::fs::write(
        &env.file,
        format!(
            "STATUS: RUNNING\nGOAL: {goal}\n\nPLAN:\n  TOTAL_STEPS: 1\n  CURRENT_STEP: 0\n  \
             STEPS:\n    1: [PENDING] write the note\n"
        ),
    )
    .unwrap();
    let out = env.run(&["validate"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = env.run(&["resume"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(env.m1().status, Status::Done);
    assert!(env.prompt(0).contains(&goal), "the goal was cut or mangled");
    env.assert_no_processes();
}
