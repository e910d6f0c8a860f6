//! The runs that must not change the project, the planning call and the reviewer, are offered
//! only tools that read, in a way no permission rule can widen; and a review that changed the
//! work tree all the same is no approval.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;
use serde_json::Value;

use crate::support::TestLoop;

fn work() -> Action {
    Action::done("a.txt says whole").write("a.txt", "whole\n")
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
    let env = TestLoop::new().with_git();
    env.scenario(
        &Scenario::new()
            .plan(Action::plan(["write a.txt"]))
            .step(1, work())
            .review(Action::approve("fine")),
    );
    env.run_ok(&["start", "g", "--review"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 3, "plan, step, review");
    let read_only = Some("Read,Grep,Glob".to_owned());
    assert_eq!(tools(&calls[0]), read_only, "the planning call");
    assert_eq!(tools(&calls[1]), None, "the step's agent keeps its tools");
    assert_eq!(tools(&calls[2]), read_only, "the reviewer");
}

#[test]
fn a_review_that_changed_the_work_tree_is_not_an_approval() {
    // However it came about (a hook, a tool of an older CLI, anything running beside it), a
    // change during the review would go unreviewed into the next step's commit.
    let env = TestLoop::new().with_git();
    let meddling = Action::approve("fine")
        .write("made_by_reviewer.txt", "x\n")
        .write("a.txt", "half\n");
    env.scenario(
        &Scenario::new()
            .step(1, work())
            .step(2, work())
            .review(meddling),
    );
    env.run_exits(
        3,
        &[
            "start",
            "g",
            "--step",
            "write a.txt",
            "--step",
            "more",
            "--review",
        ],
    );
    assert_eq!(env.calls_for(2), 0, "nothing runs on top of it");
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let r = &m.results[&1];
    assert_eq!(
        r.review.as_ref().map(ToString::to_string).as_deref(),
        Some("pending")
    );
    let error = r.error.clone().unwrap_or_default();
    for file in ["made_by_reviewer.txt (new)", "a.txt (changed)"] {
        assert!(error.contains(file), "{file}: {error}");
        assert!(env.log().contains(file), "{file}: {}", env.log());
    }
    let next = m.next_action.unwrap_or_default();
    assert!(next.contains("git status"), "{next}");
}
