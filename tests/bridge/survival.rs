//! The failures the bridge exists to survive: a dead runner, a dead supervisor, hangs, and
//! process trees that try to outlive their task.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use m1loop::bridge::{TaskState, procfs};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::support::procs::{ESCAPEES, Escapees, assert_nothing_survives, group_members, running};
use crate::support::{Guard, LOOP, PATIENCE, TestLoop, wait_until};

/// A command whose group holds three processes: the shell and two grandchildren.
const TREE: &str = "sleep 300 & sleep 300 & wait";

fn wait_for_members(pgid: i32, n: usize) {
    assert!(
        wait_until(PATIENCE, || group_members(pgid).len() >= n),
        "group {pgid} never reached {n} processes: {:?}",
        group_members(pgid)
    );
}

/// A task of [`TREE`], once all three of its processes run: its id and its leader.
fn fire_tree(w: &TestLoop) -> (String, i32) {
    let id = w.fire(&["--", "sh", "-c", TREE]);
    let leader = w.leader(&id);
    wait_for_members(leader, 3);
    (id, leader)
}

#[test]
fn the_command_runs_on_and_is_recorded_when_the_runner_is_sigkilled() {
    let w = TestLoop::new();
    let go = w.path().join("go");
    let id_file = w.path().join("id");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo survived; exit 7",
        go.display()
    );
    // The runner: a shell that fires the task, then lingers as a runner would.
    let runner = format!(
        "\"$LOOP\" fire -- sh -c \"$SCRIPT\" > '{}'; exec sleep 300",
        id_file.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &runner])
        .current_dir(w.path())
        .env("LOOP", LOOP)
        .env("SCRIPT", &script)
        .env("LOOP_FILE", w.state().join("M1.md"))
        .env("LOOP_STOP_FILE", &w.stop)
        .stdin(Stdio::null())
        .process_group(0);
    let runner = Guard::spawn(&mut cmd);
    let runner_pid = i32::try_from(runner.pid()).unwrap();
    assert!(wait_until(PATIENCE, || fs::read_to_string(&id_file)
        .is_ok_and(|s| s.ends_with('\n'))));
    let id = fs::read_to_string(&id_file).unwrap().trim().to_owned();
    // SIGKILL to the runner's whole process group, as a crash or a terminal's Ctrl-C would.
    killpg(Pid::from_raw(runner_pid), Signal::SIGKILL).unwrap();
    drop(runner);
    assert_eq!(
        w.check(&id)["state"],
        "RUNNING",
        "the task must outlive its runner"
    );
    fs::write(&go, "").unwrap();
    let report = w.wait_final(&id);
    assert_eq!(report["state"], "FAILED", "{report}");
    assert_eq!(report["exit_code"], 7);
    assert_eq!(
        fs::read_to_string(w.task_file(&id, "stdout")).unwrap(),
        "survived\n"
    );
}

#[test]
fn a_sigkilled_supervisor_leaves_lost_and_nothing_running() {
    let w = TestLoop::new();
    let (id, leader) = fire_tree(&w);
    let supervisor = w.supervisor(&id);
    kill(Pid::from_raw(supervisor), Signal::SIGKILL).unwrap();
    let report = w.wait_final(&id);
    assert_eq!(report["state"], "LOST", "{report}");
    assert_eq!(report["reason"], "lost");
    // LOST is only answered once the lock is free, i.e. the guardian has finished.
    assert_eq!(
        group_members(leader),
        Vec::<i32>::new(),
        "grandchildren must die too"
    );
    assert!(w.json(&id, "exit.json").is_none());
}

#[test]
fn a_pid_reused_by_an_unrelated_process_never_revives_a_lost_task() {
    let w = TestLoop::new();
    let id = w.fire(&["--", "sleep", "300"]);
    let leader = w.leader(&id);
    kill(Pid::from_raw(w.supervisor(&id)), Signal::SIGKILL).unwrap();
    assert_eq!(w.wait_final(&id)["state"], "LOST");
    assert!(wait_until(PATIENCE, || !running(leader)));
    // Point pid.json at a live unrelated process that leads its own group in our session,
    // keeping the original start time, as if the pid had been reused.
    let mut unrelated = Command::new("sleep");
    unrelated.arg("300").process_group(0);
    let unrelated = Guard::spawn(&mut unrelated);
    let other = i32::try_from(unrelated.pid()).unwrap();
    let other_stat = procfs::stat(other).unwrap();
    let (other_sid, other_start) = (other_stat.sid, other_stat.start_ticks);
    let mut rec = w.json(&id, "pid.json").unwrap();
    assert_ne!(
        rec["start_ticks"].as_u64().unwrap(),
        other_start,
        "need a different start time"
    );
    rec["pid"] = other.into();
    rec["sid"] = other_sid.into();
    fs::write(w.task_file(&id, "pid.json"), rec.to_string()).unwrap();

    assert_eq!(w.check(&id)["state"], "LOST");
    let out = w.run(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().contains(" LOST "));
    assert!(
        running(other),
        "kill must not touch a process that merely reuses the pid"
    );
    assert_eq!(w.check(&id)["state"], "LOST");
}

#[test]
fn a_timeout_kills_the_whole_group_before_the_record_is_written() {
    let w = TestLoop::new();
    let id = w.fire(&["--timeout", "1s", "--", "sh", "-c", TREE]);
    let leader = w.leader(&id);
    wait_for_members(leader, 3);
    let report = w.wait_final(&id);
    assert_eq!(report["state"], "TIMEOUT", "{report}");
    assert_eq!(report["reason"], "timeout");
    assert_eq!(report["signal"], 15, "SIGTERM was enough for sh and sleep");
    // No polling here: the record is only written once the group is dead.
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let elapsed = report["elapsed"].as_f64().unwrap();
    assert!(elapsed >= 1.0, "killed before its timeout: {elapsed}");
}

#[test]
fn an_idle_timeout_kills_a_silent_command_but_not_a_chatty_one() {
    let w = TestLoop::new();
    let silent = w.fire(&[
        "--idle-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        "echo started; sleep 300 & wait",
    ]);
    let chatty = w.fire(&[
        "--idle-timeout",
        "3s",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6 7 8; do echo $i >&2; sleep 0.5; done",
    ]);
    let leader = w.leader(&silent);
    let report = w.wait_final(&silent);
    assert_eq!(report["state"], "TIMEOUT", "{report}");
    assert_eq!(report["reason"], "idle");
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("no output for 1.0s"),
        "{report}"
    );
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let report = w.wait_final(&chatty);
    assert_eq!(
        report["state"], "DONE",
        "output on stderr counts as activity: {report}"
    );
}

#[test]
fn kill_ends_the_whole_group_waits_and_records_killed() {
    let w = TestLoop::new();
    let (id, leader) = fire_tree(&w);
    let out = w.run(&["kill", &id]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with(&format!("{id} KILLED")), "{line:?}");
    // kill returned: the group is already dead, no polling.
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let report = w.check(&id);
    assert_eq!(report["state"], "KILLED");
    assert_eq!(report["message"], "killed by loop kill");
}

/// A supervisor records itself just after it started its command, so a kill that comes as
/// the command starts (its first output already written) can find the task running and no
/// `supervisor.json` yet. It must wait for the record, not take the supervisor for gone: it
/// once sent no signal at all, waited out grace and slack for nothing, and failed with "still
/// held by its supervisor after SIGKILL" while the command ran to its end.
#[test]
fn a_kill_as_the_command_starts_waits_for_the_supervisor_to_record_itself() {
    let w = TestLoop::new();
    let (id, leader) = fire_tree(&w);
    // The moment before the supervisor recorded itself, held open: its record taken away,
    // and put back a moment after the kill began.
    let record = w.task_file(&id, "supervisor.json");
    let aside = record.with_extension("aside");
    fs::rename(&record, &aside).unwrap();
    let put_back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        fs::rename(&aside, &record).unwrap();
    });
    let report = m1loop::bridge::kill(&w.state(), &id, Duration::from_secs(1));
    put_back.join().unwrap();
    let report = report.unwrap();
    assert_eq!(report.state, TaskState::Killed, "{report:?}");
    assert_eq!(group_members(leader), Vec::<i32>::new());
    assert_eq!(w.check(&id)["message"], "killed by loop kill");
}

#[test]
fn kill_escalates_to_sigkill_for_a_group_that_ignores_sigterm() {
    let w = TestLoop::new();
    // `trap "" TERM` is inherited by the grandchild too.
    let id = w.fire(&["--", "sh", "-c", "trap '' TERM; sleep 300 & wait"]);
    let leader = w.leader(&id);
    wait_for_members(leader, 2);
    let out = w.run(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let report = w.check(&id);
    assert_eq!(report["state"], "KILLED");
    assert_eq!(report["signal"], 9, "{report}");
}

#[test]
fn kill_during_a_timeouts_grace_period_keeps_the_first_reason() {
    let w = TestLoop::new();
    let marker = w.path().join("got-term");
    // Survives SIGTERM (the trap), so the supervisor sits in its grace period.
    let script = format!(
        "trap 'echo x > \"{}\"' TERM; while :; do sleep 0.05; done",
        marker.display()
    );
    let id = w.fire(&["--timeout", "300ms", "--", "sh", "-c", &script]);
    let leader = w.leader(&id);
    assert!(
        wait_until(PATIENCE, || marker.exists()),
        "the timeout never sent SIGTERM"
    );
    let out = w.run(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let report = w.check(&id);
    assert_eq!(report["state"], "TIMEOUT", "{report}");
    assert_eq!(report["signal"], 9);
}

#[test]
fn kill_of_a_lost_task_ends_what_is_left_and_records_killed() {
    let w = TestLoop::new();
    let (id, leader) = fire_tree(&w);
    // Kill supervisor and guardian together (their own group), so no one cleans up:
    // PDEATHSIG takes the leader, the grandchildren run on.
    let supervisor = w.supervisor(&id);
    let supervisor_group = procfs::stat(supervisor).unwrap().pgid;
    killpg(Pid::from_raw(supervisor_group), Signal::SIGKILL).unwrap();
    assert_eq!(w.wait_final(&id)["state"], "LOST");
    assert!(
        wait_until(PATIENCE, || !running(leader)),
        "PDEATHSIG must end the leader"
    );
    assert_eq!(
        group_members(leader).len(),
        2,
        "the grandchildren are orphaned"
    );
    let out = w.run(&["kill", &id]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(group_members(leader), Vec::<i32>::new());
    let report = w.check(&id);
    assert_eq!(report["state"], "KILLED", "{report}");
}

#[test]
fn processes_left_behind_by_a_finished_command_are_ended_before_the_record() {
    let w = TestLoop::new();
    let id = w.fire(&["--", "sh", "-c", "sleep 300 & echo bye"]);
    let leader = w.leader(&id);
    let report = w.wait_final(&id);
    assert_eq!(
        report["state"], "DONE",
        "the command's own exit status decides: {report}"
    );
    assert_eq!(report["exit_code"], 0);
    let message = report["message"].as_str().unwrap_or_default();
    assert!(message.contains("left behind"), "{report}");
    assert_eq!(group_members(leader), Vec::<i32>::new());
}

// Processes that leave the group: `setsid` children, and what a double fault orphans. Each
// must be dead by the time the task's end is recorded (or `kill` returns), found by the
// task id every process of the task carries.

fn killed_outside(report: &serde_json::Value) -> Vec<i64> {
    report["killed_outside_group"]
        .as_array()
        .unwrap_or_else(|| panic!("no killed_outside_group: {report}"))
        .iter()
        .map(|s| s["pid"].as_i64().unwrap())
        .collect()
}

fn names_the_escapee(report: &serde_json::Value, t: &Escapees) {
    assert_eq!(
        killed_outside(report),
        vec![i64::from(t.escapee.pid)],
        "{report}"
    );
    let message = report["message"].as_str().unwrap_or_default();
    let named = format!(
        "killed outside its process group: {} (sleep)",
        t.escapee.pid
    );
    assert!(message.contains(&named), "{report}");
}

#[test]
fn a_setsid_child_does_not_survive_a_timeout() {
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&["--timeout", "2s"], ESCAPEES);
    let report = w.wait_final(&t.id);
    assert_eq!(report["state"], "TIMEOUT", "{report}");
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    names_the_escapee(&report, &t);
}

#[test]
fn a_setsid_child_does_not_survive_an_idle_timeout() {
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&["--idle-timeout", "2s"], ESCAPEES);
    let report = w.wait_final(&t.id);
    assert_eq!(report["reason"], "idle", "{report}");
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    names_the_escapee(&report, &t);
}

#[test]
fn a_setsid_child_does_not_survive_a_kill() {
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&[], ESCAPEES);
    // Bystanders with a near-miss of the id must be spared.
    let bystander = |k: &str, v: String| {
        let mut c = Command::new("sleep");
        c.arg("300").env(k, v);
        Guard::spawn(&mut c)
    };
    let longer = bystander("LOOP_TASK_ID", format!("{}x", t.id));
    let inside = bystander("OTHER", format!("LOOP_TASK_ID={}", t.id));
    let out = w.run(&["kill", &t.id]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.starts_with(&format!("{} KILLED", t.id)), "{line:?}");
    // kill returned: everything is already dead, no polling.
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    names_the_escapee(&w.check(&t.id), &t);
    for b in [&longer, &inside] {
        assert!(
            running(i32::try_from(b.pid()).unwrap()),
            "a bystander was killed"
        );
    }
    let log = fs::read_to_string(w.task_file(&t.id, "supervisor.log")).unwrap();
    assert!(log.contains(&format!("{} (sleep)", t.escapee.pid)), "{log}");
}

#[test]
fn a_setsid_child_does_not_survive_a_stop() {
    // A stop is the runner calling the library's kill.
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&[], ESCAPEES);
    let before = m1loop::bridge::survivors(&t.id);
    assert!(
        before.contains(&t.escapee.pid.cast_unsigned()),
        "{before:?}"
    );
    let report = m1loop::bridge::kill(&w.state(), &t.id, Duration::from_secs(5)).unwrap();
    assert_eq!(report.state, TaskState::Killed);
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    assert_eq!(m1loop::bridge::survivors(&t.id), Vec::<u32>::new());
    let strays: Vec<(u32, &str)> = report
        .killed_outside_group
        .iter()
        .map(|s| (s.pid, s.name.as_str()))
        .collect();
    assert_eq!(strays, vec![(t.escapee.pid.cast_unsigned(), "sleep")]);
}

#[test]
fn a_setsid_child_does_not_survive_the_end_of_its_command() {
    let w = TestLoop::new();
    let go = w.path().join("go");
    let script = format!(
        "setsid sleep 600 & sleep 600 & while [ ! -e '{}' ]; do sleep 0.02; done; echo bye",
        go.display()
    );
    let t = w.fire_with_escapees(&[], &script);
    fs::write(&go, "").unwrap();
    let report = w.wait_final(&t.id);
    assert_eq!(report["state"], "DONE", "{report}");
    assert!(
        report["message"].as_str().unwrap().contains("left behind"),
        "{report}"
    );
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    names_the_escapee(&report, &t);
}

#[test]
fn a_setsid_child_does_not_survive_a_supervisor_kill9() {
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&[], ESCAPEES);
    kill(Pid::from_raw(w.supervisor(&t.id)), Signal::SIGKILL).unwrap();
    // LOST is only answered once the guardian has finished and let go of the lock.
    let report = w.wait_final(&t.id);
    assert_eq!(report["state"], "LOST", "{report}");
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    let log = fs::read_to_string(w.task_file(&t.id, "supervisor.log")).unwrap();
    assert!(
        log.contains(&format!(
            "killed outside the process group of the command: {} (sleep)",
            t.escapee.pid
        )),
        "{log}"
    );
}

#[test]
fn a_grandchild_does_not_survive_a_supervisor_and_guardian_kill9_then_kill() {
    let w = TestLoop::new();
    let t = w.fire_with_escapees(&[], ESCAPEES);
    let supervisor = w.supervisor(&t.id);
    let guardian = w.guardian(&t.id);
    // Both at once: stopped first, so neither can act on the other's death.
    for pid in [guardian, supervisor] {
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    }
    for pid in [guardian, supervisor] {
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    }
    assert_eq!(w.wait_final(&t.id)["state"], "LOST");
    assert!(
        wait_until(PATIENCE, || !running(t.leader)),
        "PDEATHSIG must end the leader"
    );
    // Nobody is left to clean up: the double fault orphans both.
    assert!(t.escapee.running() && t.grandchild.running());
    // What the runner does before a retry.
    let report = m1loop::bridge::kill(&w.state(), &t.id, Duration::from_secs(5)).unwrap();
    assert_eq!(report.state, TaskState::Killed, "{report:?}");
    assert_nothing_survives(&t.id, &[&t.escapee, &t.grandchild]);
    assert_eq!(group_members(t.leader), Vec::<i32>::new());
    let strays: Vec<u32> = report.killed_outside_group.iter().map(|s| s.pid).collect();
    assert_eq!(strays, vec![t.escapee.pid.cast_unsigned()]);
    let message = report.message.unwrap_or_default();
    assert!(
        message.contains(&format!("{} (sleep)", t.escapee.pid)),
        "{message}"
    );
}
