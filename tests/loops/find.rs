//! Every command finds its loop as git finds `.git`: `state/M1.md` in the current directory or
//! the nearest parent that has one.

use std::process::Command;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::{TestLoop, code, run, stderr, stdout};

/// `loop ARGS` run in `dir` below the project, with neither `--file` nor `LOOP_FILE`.
fn below(env: &TestLoop, dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    c.env_remove("LOOP_FILE").current_dir(dir);
    c
}

#[test]
fn status_two_directories_below_the_project_finds_its_loop() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    env.run_ok(&["start", "g", "--step", "a"]);
    let deep = env.path().join("src").join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    let out = run(below(&env, &deep, &["status"]));
    env.assert_exit(&out, 0);
    assert!(stdout(&out).contains("DONE"), "{}", stdout(&out));
    env.assert_exit(&run(below(&env, &deep, &["validate"])), 0);
}

#[test]
fn start_below_a_project_with_a_live_loop_says_so_and_makes_no_second_loop() {
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(60_000).heartbeat_ms(50)));
    let _runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let sub = env.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let out = run(below(&env, &sub, &["start", "other", "--step", "b"]));
    env.assert_exit(&out, 2);
    assert!(
        stderr(&out).contains(&env.file.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(
        !sub.join("state").exists(),
        "no second loop in the subdirectory"
    );
    env.assert_exit(&run(below(&env, &sub, &["stop"])), 0);
    env.assert_status(Status::Waiting);
}

#[test]
fn without_a_loop_here_or_above_a_command_says_where_it_looked() {
    let env = TestLoop::new().without_state();
    let out = run(below(&env, env.path(), &["status"]));
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("state/M1.md"), "{}", stderr(&out));
}
