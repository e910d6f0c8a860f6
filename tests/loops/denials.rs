//! Tools the agent could not use stop a step from passing, however the CLI reports them.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};

use crate::support::TestLoop;

#[test]
fn a_tool_removed_by_a_deny_rule_is_not_a_false_done() {
    // A deny rule in the user's Claude settings removes Bash: the call gets "No such tool
    // available", `permission_denials` stays empty, and the answer still says STEP_DONE.
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("made it").unavailable(["Bash"])));
    env.run_exits(3, &["start", "make the file", "--step", "make it"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert_ne!(m.plan.steps[0].state, StepState::Done);
    let last = m.last_action.unwrap();
    assert!(last.contains("denied") && last.contains("Bash"), "{last}");
    let how = m.next_action.unwrap();
    assert!(
        how.contains("add `,Bash` to the end of the line `ALLOWED_TOOLS:`"),
        "{how}"
    );
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

/// Starts a loop of one step, `write it`, allowed only `Read,Edit`: its agent is denied Write,
/// then writes once allowed. It waits on gate G1.
pub(super) fn waits_on_a_denied_write(env: &TestLoop) {
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::done("tried").denied(["Write"]),
            Action::done("written"),
        ],
    ));
    env.run_exits(
        3,
        &[
            "start",
            "g",
            "--step",
            "write it",
            "--allowed-tools",
            "Read,Edit",
        ],
    );
}

#[test]
fn the_advice_after_a_denial_is_the_m1_line_that_allows_it_and_following_it_works() {
    let env = TestLoop::new();
    waits_on_a_denied_write(&env);
    let how = env.m1().next_action.unwrap();
    assert!(
        how.contains("add `,Write` to the end of the line `ALLOWED_TOOLS:` under AGENT"),
        "{how}"
    );
    let line = "ALLOWED_TOOLS: Read,Edit,Write";
    assert!(
        !how.contains("loop.yaml"),
        "loop.yaml changes no existing loop: {how}"
    );
    // Do exactly what it says.
    let text = env.text();
    let old = text
        .lines()
        .find(|l| l.trim_start().starts_with("ALLOWED_TOOLS:"))
        .unwrap()
        .to_string();
    let indent = &old[..old.len() - old.trim_start().len()];
    std::fs::write(&env.file, text.replace(&old, &format!("{indent}{line}"))).unwrap();
    env.run_ok(&["resume"]);
    let argv = env.calls()[1]["argv"].to_string();
    assert!(argv.contains("Write"), "{argv}");
}
