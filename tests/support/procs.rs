//! Processes as `/proc` shows them, read with the library's own reader
//! ([`m1loop::bridge::procfs`]): what a test checks is still running, and what it must end.
//!
//! Fault injection for the bridge: [`TestLoop::fire_with_escapees`](super::TestLoop) starts a
//! task whose command leaves a `setsid` escapee (its own session, outside the task's group)
//! and a plain grandchild; [`task_processes`] lists the running processes of a task id by
//! their environment, independently of the bridge's own sweep.

use std::path::Path;
use std::process::Command;

use m1loop::bridge::procfs;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// SIGKILL to `pid`, whatever it is by now.
pub fn sigkill(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
}

/// Whether `pid` exists and is not a zombie.
pub fn running(pid: i32) -> bool {
    procfs::stat(pid).is_some_and(|s| s.is_running())
}

/// The parent pid of a process.
pub fn ppid(pid: i32) -> Option<i32> {
    procfs::stat(pid).map(|s| s.ppid)
}

/// A child of `parent` that is none of `except`: a step's guardian, as the child of its
/// supervisor that is not the agent.
pub fn child_of(parent: i32, except: &[i32]) -> Option<i32> {
    procfs::pids()
        .into_iter()
        .find(|&p| !except.contains(&p) && ppid(p) == Some(parent))
}

/// Running (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    procfs::pids()
        .into_iter()
        .filter(|&p| procfs::stat(p).is_some_and(|s| s.pgid == pgid && s.is_running()))
        .collect()
}

/// A running process as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub start: u64,
    pub pgid: i32,
    pub sid: i32,
    pub name: String,
}

impl Proc {
    /// Whether the same process (pid and start time) is still running (not a zombie).
    pub fn running(&self) -> bool {
        procfs::stat(self.pid).is_some_and(|s| s.start_ticks == self.start && s.is_running())
    }
}

/// Running (non-zombie) processes whose environment holds exactly `LOOP_TASK_ID=<id>`: every
/// process a task's command started, in its group or not, wherever it was re-parented.
pub fn task_processes(id: &str) -> Vec<Proc> {
    let entry = format!("LOOP_TASK_ID={id}").into_bytes();
    let me = i32::try_from(std::process::id()).unwrap();
    procfs::pids()
        .into_iter()
        .filter(|&pid| pid != me && procfs::env_has(pid, &entry))
        .filter_map(|pid| {
            let s = procfs::stat(pid)?;
            s.is_running().then(|| Proc {
                pid,
                start: s.start_ticks,
                pgid: s.pgid,
                sid: s.sid,
                name: procfs::name(pid),
            })
        })
        .collect()
}

/// SIGKILL to every running process of task `id` (pid and start time checked): cleanup.
pub fn kill_task_processes(id: &str) {
    for p in task_processes(id) {
        if p.running() {
            sigkill(p.pid);
        }
    }
}

/// Asserts that no process of task `id` runs any more, naming any that does. Those it names
/// are killed as the test's loop is dropped.
pub fn assert_nothing_survives(id: &str, known: &[&Proc]) {
    let alive: Vec<&&Proc> = known.iter().filter(|p| p.running()).collect();
    assert!(
        alive.is_empty(),
        "still running after the task ended: {alive:?}"
    );
    let left = task_processes(id);
    assert!(left.is_empty(), "processes of {id} still running: {left:?}");
}

/// A shell command that starts a `setsid` escapee and a plain grandchild, then waits.
pub const ESCAPEES: &str = "setsid sleep 600 & sleep 600 & wait";

/// A task whose command left its process group behind: see
/// [`TestLoop::fire_with_escapees`](super::TestLoop::fire_with_escapees).
#[derive(Debug)]
pub struct Escapees {
    pub id: String,
    /// The command's pid (= its process group).
    pub leader: i32,
    /// A `sleep` in its own session, outside the group.
    pub escapee: Proc,
    /// A `sleep` in the group.
    pub grandchild: Proc,
}

/// Fails the test at once, with the reason, where util-linux's `setsid` is missing.
pub fn require_setsid() {
    let found = Command::new("setsid")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "these tests need the setsid command (util-linux)");
}

/// Live processes (not zombies) whose working directory or command line is inside `dir`, as
/// `pid command line`; never this process.
pub fn live_processes_under(dir: &Path) -> Vec<String> {
    let me = i32::try_from(std::process::id()).unwrap();
    let needle = dir.to_string_lossy().into_owned();
    procfs::pids()
        .into_iter()
        .filter(|&pid| pid != me && running(pid))
        .filter_map(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cwd.starts_with(&needle) || cmdline.contains(&needle))
                .then(|| format!("{pid} {}", cmdline.trim()))
        })
        .collect()
}
