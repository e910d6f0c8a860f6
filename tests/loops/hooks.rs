//! The hooks every agent call gets: the loop's state when a session starts, resumes or was
//! compacted, and compactions counted; `loop hook install` for interactive sessions.

use claude_sim::scenario::{Action, Scenario};
use serde_json::Value;

use crate::support::{TestLoop, code, stderr, stdout};

#[test]
fn every_agent_call_gets_the_loops_hooks_in_its_own_settings() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    env.run_ok(&["start", "g", "--step", "one"]);
    let settings = env.calls()[0]["settings"]
        .as_str()
        .expect("--settings reaches the agent")
        .to_owned();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    for (event, what) in [
        ("SessionStart", "hook session-start"),
        ("PreCompact", "hook pre-compact"),
    ] {
        let command = v["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert!(command.ends_with(what), "{event}: {command}");
    }
}

/// A session's first prompt holds the goal, the plan and its step, and a resumed session
/// (a retry) still has it: the hook that says them again costs a shell and a start of `loop`
/// per run, and tells the agent nothing. Only a compaction loses them (the test below).
#[test]
fn a_fresh_or_resumed_session_is_not_told_its_step_again_by_the_hook() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().step(1, [Action::failed("not yet"), Action::done("one")]));
    env.run_ok(&["start", "g", "--step", "one", "--max-retries", "2"]);
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "a first attempt and a retry");
    assert!(
        calls[1]["resume"].is_string(),
        "the retry resumes: {calls:?}"
    );
    let runs = env.hook_runs();
    assert!(runs.iter().all(|h| h["hook"] != "SessionStart"), "{runs:?}");
}

#[test]
fn after_a_compaction_the_agent_is_told_its_step_again_and_the_compaction_is_counted() {
    let env = TestLoop::new();
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("ok"))
            .step(2, Action::done("ok").compact()),
    );
    env.run_ok(&TestLoop::start_args(
        &["read the code", "fix the parser"],
        &[],
    ));
    // The compaction's hooks; every call's `SessionStart` as its session starts is another's.
    let runs: Vec<Value> = env
        .hook_runs()
        .into_iter()
        .filter(|h| h["source"] != "startup" && h["source"] != "resume")
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["hook"], "PreCompact");
    let said: Value = serde_json::from_str(runs[1]["stdout"].as_str().unwrap()).unwrap();
    let context = said["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains("YOUR STEP (2): fix the parser"),
        "{context}"
    );
    assert!(
        context.contains("STEP_DONE: <one-line summary"),
        "{context}"
    );
    assert!(context.contains("GOAL: g"), "{context}");
    let m = env.m1();
    assert_eq!(m.results[&2].compactions, 1);
    assert_eq!(m.results[&1].compactions, 0);
    env.assert_logged("compaction: step 2's session");
}

#[test]
fn session_start_speaks_for_a_running_or_waiting_loop_and_is_silent_otherwise() {
    let env = TestLoop::new();
    let hook = |step: Option<&str>| {
        let mut c = env.cmd(&["hook", "session-start"]);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(s) = step {
            c.env("LOOP_STEP", s);
        }
        c.output().unwrap()
    };
    let out = hook(None);
    assert_eq!((code(&out), stdout(&out)), (0, String::new()), "no loop");
    let text = "STATUS: RUNNING\nGOAL: ship it\nPLAN:\n  CURRENT_STEP: 1\n  STEPS:\n    1: [RUNNING] write\n    2: [PENDING] test\n";
    std::fs::write(&env.file, text).unwrap();
    let out = hook(Some("2"));
    assert_eq!(code(&out), 0);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains("GOAL: ship it") && context.contains("YOUR STEP (2): test"));
    let mut review = env.cmd(&["hook", "session-start"]);
    review
        .env("LOOP_REVIEW", "1")
        .stdout(std::process::Stdio::piped());
    assert_eq!(
        stdout(&review.output().unwrap()),
        "",
        "a reviewer is not told a step"
    );
    std::fs::write(&env.file, text.replace("RUNNING\nGOAL", "WAITING\nGOAL")).unwrap();
    assert!(stdout(&hook(Some("1"))).contains("YOUR STEP (1): write"));
    assert!(stdout(&hook(None)).contains("The loop is at step 1: write"));
    std::fs::write(&env.file, text.replace("STATUS: RUNNING", "STATUS: DONE")).unwrap();
    assert_eq!(stdout(&hook(None)), "", "a finished loop says nothing");
    std::fs::write(&env.file, "STATUS: RUNNING\nGOAL: x\n  broken: [\n").unwrap();
    let out = hook(None);
    assert_eq!(
        (code(&out), stdout(&out), stderr(&out)),
        (0, String::new(), String::new())
    );
}

#[test]
fn hook_install_adds_only_our_hook_and_uninstall_takes_only_it_out() {
    let env = TestLoop::new();
    let settings = env.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = "{\n  \"model\": \"opus\",\n  \"permissions\": {\n    \"allow\": []\n  }\n}\n";
    std::fs::write(&settings, theirs).unwrap();
    env.run_ok(&["hook", "install"]);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(v["model"], "opus");
    let command = v["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(command.ends_with(" hook session-start"), "{command}");
    env.run_ok(&["hook", "uninstall"]);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), theirs);
}
