//! A loop comes back by itself: a step's end revives a dead runner, `loop daemon` revives a
//! loop with no runner (at its wait's deadline), and a runner that keeps dying is halted.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::answers::steady;
use crate::support::{
    Guard, TestLoop, code, line_with, stderr, stdout, wait_until, write_executable,
};

/// A loop whose runners are revived by their steps (`TestLoop` turns that off).
fn reviving() -> TestLoop {
    TestLoop::new().env("LOOP_REVIVE", "on")
}

fn revivals(env: &TestLoop) -> Vec<String> {
    std::fs::read_to_string(env.state().join("revivals.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every step works `ms`, then passes.
fn done(ms: u64) -> Action {
    Action::done("ok").sleep_ms(ms)
}

/// Starts `loop daemon` for the loop (looking every second) and waits until the loop is DONE;
/// the daemon, to end when the test does.
fn daemon_until_done(env: &TestLoop) -> Guard {
    let file = env.file.display().to_string();
    let daemon = env.spawn(&["daemon", "--loop", &file, "--every", "1s"]);
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    daemon
}

#[test]
fn a_runner_killed_mid_step_comes_back_by_itself_and_starts_nothing_twice() {
    let env = reviving();
    env.scenario(&steady(1500));
    let mut runner = env.spawn(&["start", "g", "--step", "a", "--step", "b"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    assert_eq!(
        (env.calls_for(1), env.calls_for(2)),
        (1, 1),
        "{}",
        env.log()
    );
    env.assert_logged("resumed by itself (revived by the supervisor of task");
    assert_eq!(revivals(&env).len(), 1);
    env.assert_no_processes();
}

#[test]
fn the_daemon_revives_a_runner_killed_during_a_backoff_at_its_deadline() {
    let env = TestLoop::new();
    let overloaded = Action::api_error(529, "API Error: Repeated 529 Overloaded errors");
    env.scenario(&Scenario::new().step(1, [overloaded, done(20)]));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    let mut until = None;
    assert!(wait_until(Duration::from_secs(20), || {
        until = env
            .file
            .exists()
            .then(|| env.m1().current.wait_until)
            .flatten();
        until.is_some()
    }));
    runner.kill9();
    let until = until.unwrap();
    let _daemon = daemon_until_done(&env);
    assert_eq!(
        env.calls_for(1),
        2,
        "the failed call and the one after the wait"
    );
    let log = env.log();
    let revived = line_with(&log, "revived by loop daemon");
    let at =
        chrono::DateTime::parse_from_rfc3339(revived.split_whitespace().next().unwrap()).unwrap();
    // WAIT_UNTIL is stored to the second: revived at or after that second, not before.
    assert!(
        at.timestamp() >= until.timestamp(),
        "revived at {at}, wait ended {until}"
    );
}

#[test]
fn the_daemon_resumes_a_running_loop_whose_runner_died_between_steps() {
    let env = TestLoop::new();
    env.scenario(&steady(20));
    let mut c = env.cmd(&["start", "g", "--step", "one", "--step", "two"]);
    // The runner dies after step 1 passed, before step 2 was recorded: no step runs.
    c.env("LOOP_CRASH_AT", "before-spawn-write@2");
    let status = c.status().unwrap();
    assert!(!status.success());
    env.assert_status(Status::Running);
    let _daemon = daemon_until_done(&env);
    assert_eq!((env.calls_for(1), env.calls_for(2)), (1, 1));
}

#[test]
fn a_runner_that_dies_on_every_revival_is_halted_waiting_not_revived_forever() {
    let env = reviving().env("LOOP_CRASH_AT", "after-revival");
    env.scenario(&steady(800));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    let file = env.file.display().to_string();
    let _daemon = env.spawn(&["daemon", "--loop", &file, "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.m1().status
            == Status::Waiting),
        "{}",
        env.log()
    );
    let m = env.m1();
    let last = m.last_action.unwrap_or_default();
    assert!(
        last.contains("the runner died 3 times within 10 minutes"),
        "{last}"
    );
    // Give a storm the time to show: no further revival after the halt.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(revivals(&env).len(), 3, "{:?}", revivals(&env));
    assert_eq!(env.calls_for(1), 1, "the step itself ran once");
    // A person's resume forgets the count and goes on.
    let mut resume = env.cmd(&["resume"]);
    resume.env_remove("LOOP_CRASH_AT");
    let status = resume.status().unwrap();
    assert!(status.success(), "{}", env.log());
    env.assert_status(Status::Done);
    assert!(revivals(&env).is_empty());
}

#[test]
fn service_install_names_the_loop_writes_the_unit_and_enables_it() {
    let env = TestLoop::new();
    std::fs::write(&env.file, "STATUS: IDLE\nGOAL: g\n").unwrap();
    let config = env.temp.join("config");
    let calls = env.temp.join("systemctl.calls");
    let systemctl = env.temp.join("systemctl");
    write_executable(
        &systemctl,
        &format!("#!/bin/sh\necho \"$@\" >> {}\n", calls.display()),
    );
    let run = |args: &[&str], ctl: &std::path::Path| {
        let mut c = env.cmd(args);
        c.env("XDG_CONFIG_HOME", &config).env("LOOP_SYSTEMCTL", ctl);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.output().unwrap()
    };
    let out = run(&["service", "install"], &systemctl);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let unit = config.join("systemd/user/m1loop.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(" daemon\n") && text.contains("Restart=always"),
        "{text}"
    );
    assert!(
        !text.contains("TELEGRAM_BOT_TOKEN"),
        "no secret in the unit"
    );
    let called = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        called,
        "--user show-environment\n--user daemon-reload\n--user enable --now m1loop.service\n"
    );
    let listed = std::fs::read_to_string(env.xdg().join("m1loop/daemon.loops")).unwrap();
    assert_eq!(listed.trim(), env.file.display().to_string());
    // Where systemd's own checker is installed, it accepts the unit without a warning.
    if let Ok(verify) = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
    {
        let said = String::from_utf8_lossy(&verify.stderr);
        assert!(
            verify.status.success() && !said.contains("m1loop.service"),
            "systemd-analyze verify: {said}"
        );
    }
    let status = stdout(&run(&["service", "status"], &systemctl));
    assert!(
        status.contains(&format!("{}: not RUNNING", env.file.display())),
        "{status}"
    );
    let out = run(&["service", "uninstall"], &systemctl);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!unit.exists());
    assert!(!env.xdg().join("m1loop/daemon.loops").exists());
    // Without systemd: the other ways to keep the daemon running, and exit 1 (not installed).
    let out = run(&["service", "install"], std::path::Path::new(""));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("tmux new-session -d -s m1loop") && said.contains("@reboot"),
        "{said}"
    );
    assert!(!unit.exists());
}

#[test]
fn revivals_racing_each_other_and_a_person_end_with_one_runner_and_nothing_run_twice() {
    let env = TestLoop::new();
    env.scenario(&steady(300));
    let mut c = env.cmd(&[
        "start", "g", "--step", "one", "--step", "two", "--step", "three",
    ]);
    c.env("LOOP_CRASH_AT", "before-spawn-write@2");
    assert!(!c.status().unwrap().success());
    let racers: Vec<_> = (0..4)
        .map(|i| {
            let by = format!("racer {i}");
            env.spawn(&["__revive", "--by", &by])
        })
        .chain(std::iter::once(env.spawn(&["resume"])))
        .collect();
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    drop(racers);
    for n in 1..=3 {
        assert_eq!(env.calls_for(n), 1, "step {n}: {}", env.log());
    }
    let took_over = env
        .log()
        .lines()
        .filter(|l| l.contains(" resume: STATUS RUNNING") || l.contains(" revive: the runner"))
        .count();
    assert_eq!(
        took_over,
        1,
        "one runner took the loop over:\n{}",
        env.log()
    );
}
