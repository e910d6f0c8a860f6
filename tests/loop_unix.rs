//! Unix manners: a closed pipe, exit codes, `loop stop` that waits, archives that never
//! replace each other, a state directory git leaves alone. Each test is named after the
//! problem it pins.

mod harness;

use std::process::Stdio;
use std::time::Duration;

use harness::{Env, Guard, code};
use m1loop::m1::Status;
use serde_json::json;

fn done(ms: u64) -> serde_json::Value {
    json!({"sleep_ms": ms, "result": "worked.\nSTEP_DONE: ok"})
}

/// Spawns `loop ARGS` with stdout (and stderr) on pipes whose reading ends are closed at
/// once, as `loop ARGS 2>&1 | head -0` would.
fn spawn_with_closed_output(env: &Env, args: &[&str]) -> Guard {
    let mut c = env.cmd(args);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    Guard(Some(child))
}

#[test]
fn a_closed_stdout_never_kills_the_runner() {
    let env = Env::new();
    env.scenario(&json!({"default": done(100)}));
    let mut run = spawn_with_closed_output(&env, &["start", "g", "--step", "a", "--step", "b"]);
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", env.log());
    assert_eq!(env.m1().status, Status::Done);
    env.assert_no_processes();
}

#[test]
fn status_and_resume_into_a_closed_pipe_exit_as_usual() {
    let env = Env::new();
    env.scenario(&json!({"default": done(20)}));
    assert_eq!(code(&env.run(&["start", "g", "--step", "a"])), 0);
    for (args, want) in [
        (&["status"][..], 0),
        (&["status", "--json"][..], 0),
        (&["resume"][..], 0),
        (&["validate"][..], 0),
    ] {
        let status = spawn_with_closed_output(&env, args).wait(Duration::from_secs(30));
        assert_eq!(status.code(), Some(want), "loop {args:?}: {status:?}");
    }
}
