//! Every command finds its loop as git finds `.git`: `state/M1.md` in the current directory or
//! the nearest parent that has one.

use std::process::Command;

use m1loop::m1::Status;
use serde_json::json;

use crate::support::{TestLoop, code, run, stderr, stdout, wait_until};

/// `loop ARGS` run in `dir` below the project, with neither `--file` nor `LOOP_FILE`.
fn below(env: &TestLoop, dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    c.env_remove("LOOP_FILE").current_dir(dir);
    c
}

#[test]
fn status_two_directories_below_the_project_finds_its_loop() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": {"result": "x\nSTEP_DONE: ok"}}));
    assert_eq!(code(&env.run(&["start", "g", "--step", "a"])), 0);
    let deep = env.path().join("src").join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    let out = run(below(&env, &deep, &["status"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("DONE"), "{}", stdout(&out));
    let out = run(below(&env, &deep, &["validate"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn start_below_a_project_with_a_live_loop_says_so_and_makes_no_second_loop() {
    let env = TestLoop::new();
    env.scenario(&json!({"default": {"sleep_ms": 60_000, "heartbeat_ms": 50,
        "result": "x\nSTEP_DONE: ok"}}));
    let _runner = env.spawn(&["start", "g", "--step", "a"]);
    assert!(wait_until(std::time::Duration::from_secs(20), || env
        .calls_for(1)
        == 1));
    let sub = env.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let out = run(below(&env, &sub, &["start", "other", "--step", "b"]));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&env.file.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(
        !sub.join("state").exists(),
        "no second loop in the subdirectory"
    );
    assert_eq!(code(&run(below(&env, &sub, &["stop"]))), 0);
    assert_eq!(env.m1().status, Status::Waiting);
}

#[test]
fn without_a_loop_here_or_above_a_command_says_where_it_looked() {
    let env = TestLoop::new().without_state();
    let out = run(below(&env, env.path(), &["status"]));
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("state/M1.md"), "{}", stderr(&out));
}
