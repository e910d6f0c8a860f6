//! Stopping: `loop stop` stops this loop and a `loop resume` runs right after it; `--all` is
//! the machine-wide stop file; Ctrl-C on a foreground runner is a person's stop, not a crash.

use std::process::{Child, Stdio};
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{Status, StepState};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{Guard, TestLoop, stderr, stdout, wait_until};

/// Every step passes at once: what a stopped loop runs when it is resumed.
fn passing() -> Scenario {
    Scenario::new().otherwise(Action::done("ok").sleep_ms(20))
}

/// Every step works for a minute: long enough to be stopped.
fn slow() -> Scenario {
    Scenario::new().otherwise(Action::done("ok").sleep_ms(60_000).heartbeat_ms(50))
}

/// The step's agent was stopped as a stop does: the loop WAITING, the step PENDING, its
/// attempt not counted, nothing left running.
fn assert_stopped(env: &TestLoop, by: &str) {
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert_eq!(m.plan.steps[0].state, StepState::Pending, "{}", env.text());
    assert_eq!(m.results.get(&1).and_then(|r| r.attempts), None);
    assert!(
        m.last_action.as_deref().unwrap_or("").contains(by),
        "{}",
        env.text()
    );
    assert!(!env.log().contains("revive"), "{}", env.log());
    env.assert_no_processes();
}

/// This test's loop and another one, of another directory, each with a step running: their
/// runners, and the other loop's M1.md.
fn two_running_loops(env: &TestLoop) -> (Guard, Guard, std::path::PathBuf) {
    let other = env.temp.path().join("other").join("state").join("M1.md");
    env.scenario(&slow());
    let first = env.spawn(&["start", "g", "--step", "one"]);
    let second = env.spawn(&[
        "--file",
        other.to_str().unwrap(),
        "start",
        "h",
        "--step",
        "one",
    ]);
    assert!(wait_until(Duration::from_secs(20), || env.calls().len() == 2));
    (first, second, other)
}

#[test]
fn stop_stops_this_loop_only_and_a_resume_runs_at_once() {
    let env = TestLoop::new();
    let (mut first, mut second, other) = two_running_loops(&env);
    let other_arg = other.to_str().unwrap();

    let out = env.run_ok(&["stop"]);
    assert!(
        stdout(&out).contains(&format!("stopped {}", env.file.display())),
        "{}",
        stdout(&out)
    );
    // This runner let go of its loop before `stop` returned; the other loop runs on.
    assert_eq!(m1loop::runner::lock::holder(&env.file), None);
    assert_eq!(first.wait(Duration::from_secs(10)).code(), Some(3));
    assert!(m1loop::runner::lock::holder(&other).is_some());
    assert!(second.try_wait().unwrap().is_none());
    // Nothing to remove: no stop file anywhere.
    assert!(!env.stop.exists());
    assert!(!env.state().join("STOP").exists());
    env.run_ok(&["--file", other_arg, "stop"]);
    assert_eq!(second.wait(Duration::from_secs(10)).code(), Some(3));
    assert_stopped(&env, "Stopped by `loop stop`");

    env.scenario(&passing());
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
}

#[test]
fn stop_all_creates_the_stop_file_and_waits_for_every_runner() {
    let env = TestLoop::new();
    let (mut first, mut second, other) = two_running_loops(&env);

    let out = env.run_ok(&["stop", "--all"]);
    // Both runners let go of their loops before `stop` returned, the one of another
    // directory included, and `stop` named both.
    assert_eq!(m1loop::runner::lock::holder(&env.file), None);
    assert_eq!(m1loop::runner::lock::holder(&other), None);
    for f in [&env.file, &other] {
        assert!(
            stdout(&out).contains(&format!("stopped {}", f.display())),
            "{}",
            stdout(&out)
        );
    }
    assert_eq!(first.wait(Duration::from_secs(10)).code(), Some(3));
    assert_eq!(second.wait(Duration::from_secs(10)).code(), Some(3));
    // The emergency brake holds every loop until someone removes it.
    assert!(env.stop.exists());
    let out = env.run_exits(3, &["resume"]);
    assert!(stderr(&out).contains("rm "), "{}", stderr(&out));

    std::fs::remove_file(&env.stop).unwrap();
    env.scenario(&passing());
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    env.assert_no_processes();
}

#[test]
fn stop_all_with_no_runner_says_so_and_returns_at_once() {
    let env = TestLoop::new();
    let out = env.run_for(&["stop", "--all"], Duration::from_secs(5));
    env.assert_exit(&out, 0);
    assert!(stdout(&out).contains("no runner"), "{}", stdout(&out));
    assert!(env.stop.exists());
}

#[test]
fn stop_without_a_loop_is_bad_input_and_names_stop_all() {
    let env = TestLoop::new();
    let out = env.run_for(&["stop"], Duration::from_secs(5));
    env.assert_exit(&out, 2);
    assert!(stderr(&out).contains("no loop at"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--all"), "{}", stderr(&out));
    assert!(!env.stop.exists());
}

#[test]
fn stop_of_a_loop_whose_runner_died_ends_its_step_and_leaves_it_waiting() {
    let env = TestLoop::new();
    env.scenario(&slow());
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    // The step runs on under its supervisor, with nobody driving the loop.
    assert!(!env.processes().is_empty());
    let out = env.run_ok(&["stop"]);
    assert!(stdout(&out).contains("no runner"), "{}", stdout(&out));
    assert_stopped(&env, "Stopped by `loop stop`");
    // Stopping a loop that is not running changes nothing.
    let before = env.text();
    let out = env.run_ok(&["stop"]);
    assert!(stdout(&out).contains("nothing to stop"), "{}", stdout(&out));
    assert_eq!(env.text(), before);
}

#[test]
fn a_refusal_to_replace_a_driven_loop_names_the_command_that_stops_only_it() {
    let env = TestLoop::new();
    env.scenario(&slow());
    let _runner = env.spawn(&["start", "g", "--step", "one"]);
    env.wait_for_calls(1, 1);
    for args in [
        &["start", "again", "--step", "x", "--force"][..],
        &["resume", "--detach"][..],
        &["resume"][..],
    ] {
        let out = env.run_exits(2, args);
        let want = format!("loop stop --file {}", env.file.display());
        assert!(stderr(&out).contains(&want), "{args:?}: {}", stderr(&out));
    }
    env.run_ok(&["stop"]);
}

/// `loop ARGS` in the foreground with its output on pipes, as a person runs it in a terminal.
fn foreground(env: &TestLoop, args: &[&str]) -> Child {
    env.cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Ctrl-C: SIGINT to the runner, then its output once it has ended (at most 20 s).
fn ctrl_c(child: Child) -> std::process::Output {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    crate::support::output_within(child, Duration::from_secs(20))
        .expect("the runner did not end within 20 s of Ctrl-C")
}

#[test]
fn ctrl_c_on_a_foreground_runner_stops_the_loop_as_loop_stop_does() {
    let env = TestLoop::new();
    env.scenario(&slow());
    let runner = foreground(&env, &["start", "g", "--step", "one"]);
    env.wait_for_calls(1, 1);
    let out = ctrl_c(runner);
    env.assert_exit(&out, 3);
    let err = stderr(&out);
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("Stopped by Ctrl-C"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("loop resume"), "{}", said[0]);
    assert_stopped(&env, "Stopped by Ctrl-C");
    // No stop is left behind: the loop carries on at the next resume.
    env.scenario(&passing());
    env.run_ok(&["resume"]);
}

#[test]
fn ctrl_c_during_a_backoff_leaves_the_loop_waiting_not_running() {
    let env = TestLoop::new();
    // An overloaded API: the loop backs off (2 s) before it tries again.
    env.scenario(&Scenario::new().otherwise(Action::api_error(
        529,
        "API Error: Repeated 529 Overloaded errors.",
    )));
    let runner = foreground(&env, &["start", "g", "--step", "one"]);
    assert!(wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&env.file).is_ok_and(|t| t.contains("WAIT_UNTIL"))
    }));
    let out = ctrl_c(runner);
    env.assert_exit(&out, 3);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert!(
        m.last_action.as_deref().unwrap_or("").contains("Ctrl-C"),
        "{}",
        env.text()
    );
    assert_eq!(env.calls_for(1), 1, "no run after the Ctrl-C");
}
