//! A step whose supervisor and guardian die together (kill -9 of both, an OOM killer): the
//! task reads LOST, costs an attempt, and nothing it left runs on beside the retry,
//! including a process that left the group with `setsid`.

use std::path::Path;
use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::procs::{child_of, running, sigkill};
use crate::support::{SIM, TestLoop, wait_until, write_executable};

fn read_pid(path: &Path) -> Option<i32> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    i32::try_from(v["pid"].as_i64()?).ok()
}

/// Unconfined (`--sandbox off`), a process the agent left outside its group is found by the
/// task's id and ended with the lost task. (Confined, the sandbox's own PID namespace ends it:
/// see `a_lost_confined_step_leaves_nothing_running_beside_its_retry`.)
#[test]
fn a_lost_step_leaves_nothing_running_beside_its_retry() {
    let env = TestLoop::new().env("LOOP_SANDBOX", "off");
    // The agent leaves a process outside its group, and (first call) one inside it.
    let escapees = env.temp.path().join("escapees");
    let agent = env.temp.path().join("agent.sh");
    write_executable(
        &agent,
        &format!(
            "#!/bin/sh\nsetsid sleep 600 </dev/null >/dev/null 2>&1 &\necho $! >> '{}'\nexec '{}' \"$@\"\n",
            escapees.display(),
            SIM
        ),
    );
    let env = env.env("LOOP_AGENT", &agent);
    let quick = || Action::done("ok").sleep_ms(10);
    let long = Action::done("ok")
        .sleep_ms(60_000)
        .heartbeat_ms(100)
        .grandchild_sleep_s(600.0);
    env.scenario(&Scenario::new().step(1, [long, quick()]).otherwise(quick()));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let tasks = env.state().join("tasks");
    let task = std::fs::read_dir(&tasks)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let (mut sup, mut agent_pid) = (None, None);
    assert!(wait_until(Duration::from_secs(20), || {
        sup = read_pid(&task.join("supervisor.json"));
        agent_pid = read_pid(&task.join("pid.json"));
        sup.is_some() && agent_pid.is_some() && std::fs::read_to_string(&escapees).is_ok()
    }));
    let sup = sup.unwrap();
    // The guardian: the supervisor's child that is not the agent.
    let guardian = child_of(sup, &[agent_pid.unwrap()]).expect("the guardian runs");
    let first: Vec<i32> = std::fs::read_to_string(&escapees)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert!(first.iter().all(|&p| running(p)));

    sigkill(sup);
    sigkill(guardian);

    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2, "LOST costs an attempt and is retried");
    assert_eq!(env.m1().results[&1].attempts, Some(2));
    let log = env.log();
    assert!(
        first.iter().all(|&p| !running(p)),
        "the first attempt's setsid process outlived its lost task: {first:?}\n{log}"
    );
    assert!(log.contains("lost: task"), "{log}");
    env.assert_no_processes();
    env.run_ok(&["status"]);
}

#[test]
fn a_lost_confined_step_leaves_nothing_running_beside_its_retry() {
    if !crate::support::bwrap_here() {
        return;
    }
    let env = TestLoop::new();
    let quick = || Action::done("ok").sleep_ms(10);
    let long = Action::done("ok")
        .sleep_ms(60_000)
        .heartbeat_ms(100)
        .grandchild_sleep_s(600.0)
        .bash("setsid sleep 600 </dev/null >/dev/null 2>&1 &");
    env.scenario(&Scenario::new().step(1, [long, quick()]).otherwise(quick()));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let task = env.calls()[0]["task_id"].as_str().unwrap().to_owned();
    let dir = env.state().join("tasks").join(&task);
    let mut sup = None;
    assert!(wait_until(Duration::from_secs(20), || {
        sup = read_pid(&dir.join("supervisor.json"));
        sup.is_some() && crate::support::procs::task_processes(&task).len() >= 3
    }));
    let first: Vec<i32> = crate::support::procs::task_processes(&task)
        .iter()
        .map(|p| p.pid)
        .filter(|p| Some(*p) != sup)
        .collect();
    let sup = sup.unwrap();
    let guardian = child_of(sup, &first).expect("the guardian runs");
    sigkill(sup);
    sigkill(guardian);
    let status = runner.wait(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2, "LOST costs an attempt and is retried");
    assert!(
        wait_until(Duration::from_secs(10), || first
            .iter()
            .all(|&p| !running(p))),
        "the lost task's processes outlived it: {first:?}\n{}",
        env.log()
    );
    env.assert_no_processes();
}

/// A runner killed 4–10 ms after its first spawn, before the step's supervisor took the task,
/// left a task that nobody ever started: `resume` judged it LOST, and so an attempt whose agent
/// never ran cost an attempt (with `--max-retries 1`, the loop FAILED). Issue 30.
#[test]
fn an_attempt_whose_agent_never_ran_costs_no_attempt() {
    use std::os::unix::process::ExitStatusExt;
    let env = TestLoop::new();
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    let mut start = env.cmd(&["start", "g", "--step", "a", "--max-retries", "1"]);
    // Killed once the task's directory is published, before its supervisor is asked for.
    start.env("LOOP_CRASH_AT", "after-publish");
    assert_eq!(start.status().unwrap().signal(), Some(9));
    assert!(env.calls().is_empty(), "no agent ran");
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.results[&1].attempts, Some(1), "{}", env.text());
    assert_eq!(env.calls().len(), 1, "the agent ran once");
    let log = env.log();
    assert!(
        log.contains("its agent never ran, so no attempt is counted"),
        "{log}"
    );
    assert!(!log.contains("LOST"), "{log}");
}

/// The runner slept on events only (no periodic look) and took a task wake that came less
/// than `PID_RECORD_AFTER` after its last full look for the agent's output, not looking again:
/// a supervisor and guardian killed while the agent's last output came in left the lost task
/// unseen until the five-minute look for a lost event. The kill soak met it: a loop stood
/// still for minutes. A wake taken as output now brings one full look at most
/// `PID_RECORD_AFTER` later.
#[test]
fn a_task_lost_as_its_output_ends_is_seen_at_once_not_at_the_five_minute_look() {
    let env = TestLoop::new().env("LOOP_SANDBOX", "off");
    let quick = || Action::done("ok").sleep_ms(10);
    // Busy output to its end, which comes soon after the kill: no event follows the last.
    let busy = Action::done("ok").sleep_ms(60_000).heartbeat_ms(20);
    env.scenario(&Scenario::new().step(1, [busy, quick()]).otherwise(quick()));
    let mut runner = env.spawn(&["start", "g", "--step", "a"]);
    env.wait_for_calls(1, 1);
    let task = env.calls()[0]["task_id"].as_str().unwrap().to_owned();
    let dir = env.state().join("tasks").join(&task);
    let (mut sup, mut agent_pid) = (None, None);
    // Killed once the runner's timed look (the one that records the agent's pid) is past:
    // from then on only events wake it.
    assert!(wait_until(Duration::from_secs(20), || {
        sup = read_pid(&dir.join("supervisor.json"));
        agent_pid = read_pid(&dir.join("pid.json"));
        sup.is_some() && agent_pid.is_some() && env.text().contains("CC_PID:")
    }));
    let sup = sup.unwrap();
    let guardian = child_of(sup, &[agent_pid.unwrap()]).expect("the guardian runs");
    sigkill(sup);
    sigkill(guardian);
    // Well inside the five-minute look, well beyond a loaded machine's slowness.
    let status = runner.wait(Duration::from_secs(45));
    assert!(status.success(), "{status:?}\n{}", env.log());
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2, "LOST costs an attempt and is retried");
    env.assert_no_processes();
}
