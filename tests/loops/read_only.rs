//! The runs that must not change the project, the planning call and the reviewer, are offered
//! only tools that read, in a way no permission rule can widen; and a review that changed the
//! work tree all the same is no approval.

use serde_json::{Value, json};

use crate::support::{TestLoop, code, stderr};

/// A loop in a git project with a first commit.
fn project() -> TestLoop {
    let env = TestLoop::new();
    env.git(&["init", "-q"]);
    env.git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    env
}

fn work() -> Value {
    json!({"write": [{"path": "a.txt", "text": "whole\n"}],
           "result": "Wrote it.\nSTEP_DONE: a.txt says whole"})
}

/// The value of `--tools` in a call's argv, if it has one.
fn tools(call: &Value) -> Option<String> {
    let argv: Vec<&str> = call["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = argv.iter().position(|a| *a == "--tools")?;
    argv.get(at + 1).map(|v| (*v).to_owned())
}

#[test]
fn the_planner_and_the_reviewer_are_offered_only_tools_that_read() {
    // `--permission-mode plan` lets a Bash call through that a user's allow rule covers, and
    // `--allowedTools` only pre-approves (captures `reviewer-plan-mode-allow-rule*`);
    // `--tools` is what removes the others (captures `reviewer-tools-read-only*`).
    let env = project();
    env.scenario(&json!({
        "plan": {"result": "{\"steps\": [\"write a.txt\"]}"},
        "steps": {"1": work()},
        "review": {"result": "Checked.\nREVIEW_APPROVE: fine"}}));
    let out = env.run(&["start", "g", "--review"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let calls = env.calls();
    assert_eq!(calls.len(), 3, "plan, step, review");
    let read_only = Some("Read,Grep,Glob".to_owned());
    assert_eq!(tools(&calls[0]), read_only, "the planning call");
    assert_eq!(tools(&calls[1]), None, "the step's agent keeps its tools");
    assert_eq!(tools(&calls[2]), read_only, "the reviewer");
}
