//! Shared by the bridge tests: a temp state dir per test, the `loop` binary, polling with
//! deadlines, and a Drop guard that kills every process a test's tasks started.
//!
//! Fault injection, for any test that needs it: [`World::fire_with_escapees`] starts a task
//! whose command leaves a `setsid` escapee (its own session, outside the task's group) and a
//! plain grandchild; [`task_processes`] lists the running processes of a task id by reading
//! `/proc/*/environ`, independently of the bridge's own scan.

#![allow(dead_code)] // each test binary uses a different part

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::Value;

/// Generous: the machine may be busy. Only failing tests ever wait this long.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `cond` every 10 ms until it holds; false if `within` passes first.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `(state, pgid, sid, start_ticks)` of a process, from /proc/<pid>/stat.
pub fn proc_stat(pid: i32) -> Option<(char, i32, i32, u64)> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = line[line.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        f[0].chars().next()?,
        f[2].parse().ok()?,
        f[3].parse().ok()?,
        f[19].parse().ok()?,
    ))
}

/// Whether `pid` exists and is not a zombie.
pub fn running(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(s, ..)| s != 'Z' && s != 'X')
}

/// Running (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|(s, g, ..)| g == pgid && s != 'Z' && s != 'X'))
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
        proc_stat(self.pid)
            .is_some_and(|(s, _, _, start)| start == self.start && s != 'Z' && s != 'X')
    }
}

/// The parent pid of a process, from /proc/<pid>/stat.
pub fn ppid(pid: i32) -> Option<i32> {
    let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    line[line.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Running (non-zombie) processes whose environment holds exactly `LOOP_TASK_ID=<id>`: every
/// process a task's command started, in its group or not, wherever it was re-parented.
pub fn task_processes(id: &str) -> Vec<Proc> {
    let entry = format!("LOOP_TASK_ID={id}").into_bytes();
    let me = i32::try_from(std::process::id()).unwrap();
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == entry.as_slice()))
        })
        .filter_map(|pid| {
            let (state, pgid, sid, start) = proc_stat(pid)?;
            let name = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (state != 'Z' && state != 'X').then(|| Proc {
                pid,
                start,
                pgid,
                sid,
                name: name.trim_end().to_owned(),
            })
        })
        .collect()
}

/// SIGKILL to every running process of task `id` (pid and start time checked): cleanup.
pub fn kill_task_processes(id: &str) {
    for p in task_processes(id) {
        if p.running() {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
    }
}

/// Asserts that no process of task `id` runs any more, naming any that does. Those it names
/// are killed by the World's drop.
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

/// A task whose command left its process group behind: see [`World::fire_with_escapees`].
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

/// One test's world: its own temp dir, state dir and stop file.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    pub fn task_file(&self, id: &str, name: &str) -> PathBuf {
        self.state().join("tasks").join(id).join(name)
    }

    pub fn json(&self, id: &str, name: &str) -> Option<Value> {
        let text = fs::read_to_string(self.task_file(id, name)).ok()?;
        Some(serde_json::from_str(&text).unwrap())
    }

    /// `loop` with this world's state file and stop file, run in the temp dir.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin!("loop"));
        c.current_dir(self.path())
            .env("LOOP_FILE", self.state().join("M1.md"))
            .env("LOOP_STOP_FILE", self.path().join("stop"))
            .env("XDG_STATE_HOME", self.path().join("xdg"));
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// `loop fire ARGS`, which must succeed; the task id.
    pub fn fire(&self, args: &[&str]) -> String {
        let out = self.cmd().arg("fire").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "fire failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(id.starts_with("task_"), "fire printed {id:?}");
        id
    }

    /// `loop check ID --json`, which must answer (exit 0 for DONE, 10 to 14 for the other
    /// states).
    pub fn check(&self, id: &str) -> Value {
        let out = self.run(&["check", id, "--json"]);
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code == 0 || (10..=14).contains(&code),
            "check failed with {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Polls `check` until the task has left RUNNING; the final report.
    pub fn wait_final(&self, id: &str) -> Value {
        let mut last = Value::Null;
        let ended = wait_until(PATIENCE, || {
            last = self.check(id);
            last["state"] != "RUNNING"
        });
        assert!(ended, "task {id} still running: {last}");
        last
    }

    /// The command's pid (= process group), once the supervisor has recorded it.
    pub fn leader(&self, id: &str) -> i32 {
        assert!(
            wait_until(PATIENCE, || self.json(id, "pid.json").is_some()),
            "no pid.json"
        );
        let pid = self.json(id, "pid.json").unwrap()["pid"].as_i64().unwrap();
        i32::try_from(pid).unwrap()
    }

    /// `loop fire OPTS -- sh -c SCRIPT`, where SCRIPT starts a `setsid` child and a plain
    /// background child (as [`ESCAPEES`] does); returns once both run as `sleep`, the escapee
    /// in a session of its own, the grandchild in the task's group.
    pub fn fire_with_escapees(&self, opts: &[&str], script: &str) -> Escapees {
        require_setsid();
        let mut args = opts.to_vec();
        args.extend(["--", "sh", "-c", script]);
        let id = self.fire(&args);
        let leader = self.leader(&id);
        let mut found = None;
        let ready = wait_until(PATIENCE, || {
            let procs = task_processes(&id);
            let sleeping = |p: &&Proc| p.name == "sleep";
            let escapee = procs
                .iter()
                .filter(sleeping)
                .find(|p| p.sid == p.pid && p.pgid != leader);
            let grandchild = procs.iter().filter(sleeping).find(|p| p.pgid == leader);
            found = escapee.cloned().zip(grandchild.cloned());
            found.is_some()
        });
        assert!(
            ready,
            "no escapee and grandchild: {:?}",
            task_processes(&id)
        );
        let (escapee, grandchild) = found.unwrap();
        Escapees {
            id,
            leader,
            escapee,
            grandchild,
        }
    }

    /// The guardian: the supervisor's child that is not the command.
    pub fn guardian(&self, id: &str) -> i32 {
        let supervisor = self.supervisor(id);
        let leader = self.leader(id);
        let children: Vec<i32> = fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&p| p != leader && ppid(p) == Some(supervisor))
            .collect();
        assert_eq!(
            children.len(),
            1,
            "supervisor children besides the command: {children:?}"
        );
        children[0]
    }

    pub fn supervisor(&self, id: &str) -> i32 {
        let pid = self
            .json(id, "supervisor.json")
            .expect("no supervisor.json")["pid"]
            .as_i64();
        i32::try_from(pid.unwrap()).unwrap()
    }
}

impl Drop for World {
    /// Kills whatever the test's tasks left: supervisors, guardians, command groups.
    fn drop(&mut self) {
        let Ok(tasks) = fs::read_dir(self.state().join("tasks")) else {
            return;
        };
        for task in tasks.flatten() {
            if let Some(id) = task.file_name().to_str() {
                kill_task_processes(id);
            }
            let read = |name: &str| -> Option<Value> {
                serde_json::from_str(&fs::read_to_string(task.path().join(name)).ok()?).ok()
            };
            for (file, group) in [("supervisor.json", false), ("pid.json", true)] {
                let Some(rec) = read(file) else { continue };
                let (Some(pid), Some(start)) = (rec["pid"].as_i64(), rec["start_ticks"].as_u64())
                else {
                    continue;
                };
                let pid = i32::try_from(pid).unwrap();
                if group && !group_members(pid).is_empty() {
                    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                } else if proc_stat(pid).is_some_and(|(.., s)| s == start) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
    }
}

/// A process the test started itself, killed on drop.
pub struct Guarded(pub std::process::Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
