//! Tools the agent could not use stop a step from passing, however the CLI reports them.

use m1loop::m1::{Status, StepState};
use serde_json::json;

use crate::support::{TestLoop, code, stderr};

#[test]
fn a_tool_removed_by_a_deny_rule_is_not_a_false_done() {
    // A deny rule in the user's Claude settings removes Bash: the call gets "No such tool
    // available", `permission_denials` stays empty, and the answer still says STEP_DONE.
    let env = TestLoop::new();
    env.scenario(&json!({"default": {
        "unavailable_tools": ["Bash"],
        "result": "I tried to make the file.\nSTEP_DONE: made it"
    }}));
    let out = env.run(&["start", "make the file", "--step", "make it"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let m = env.m1();
    assert_eq!(m.status, Status::Waiting);
    assert_ne!(m.plan.steps[0].state, StepState::Done);
    let last = m.last_action.unwrap();
    assert!(last.contains("denied") && last.contains("Bash"), "{last}");
    let how = m.next_action.unwrap();
    assert!(how.contains("allowed_tools"), "{how}");
    assert!(
        how.contains("permissions.deny"),
        "a deny rule wins over any allow, so the advice names it: {how}"
    );
    assert_eq!(env.calls_for(1), 1, "a denial waits for a human, no retry");
    // The sim really answered as the CLI does: the tool_result, and no listed denial.
    let task_out = std::fs::read_dir(env.state().join("tasks"))
        .unwrap()
        .map(|e| e.unwrap().path().join("stdout"))
        .find(|p| p.is_file())
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    assert!(
        task_out.contains("No such tool available: Bash")
            && task_out.contains(r#""permission_denials":[]"#),
        "{task_out}"
    );
}
