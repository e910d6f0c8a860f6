//! Every process of a task, in its process group or not.
//!
//! The process group is the first boundary of a task, but a process can leave it
//! (`setsid`, `setpgid`: `setsid sleep 600 &` in a shell, a daemonising tool) and, once its
//! parent is gone, be re-parented to the supervisor (a subreaper) or, with the supervisor
//! dead, to init. Signals to the group never reach it. Every process the command starts
//! inherits `LOOP_TASK_ID=<id>`, which the supervisor puts into the command's environment,
//! so a look through `/proc/*/environ` finds them wherever they are; while the supervisor
//! lives, its descendants count too (which catches one that cleared its environment).
//!
//! Members of the group are left to the group's own signals (`killpg`); a sweep tracks the
//! others ("strays"), each by pid and start time, so a reused pid is never signalled. Scans
//! happen only when a task ends, never while it runs: the supervisor walks its own process
//! tree (a few reads); without a live supervisor (the guardian, `kill` of a LOST task), the
//! scan reads all of `/proc`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::procfs::{self, ProcStat};

/// The variable that marks every process of a task: `LOOP_TASK_ID=<task id>`.
pub(crate) const TASK_ID_ENV: &str = "LOOP_TASK_ID";

/// At most this many strays are named in a message; all of them are in the record.
const NAMED_IN_MESSAGE: usize = 10;

/// A process of a task that was found outside the task's process group, and killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stray {
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`, at most 15 bytes).
    pub name: String,
}

/// The task's process group as recorded in `pid.json`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub pgid: u32,
    pub sid: u32,
    pub leader_start: u64,
}

impl Group {
    fn holds(&self, pid: i32, s: &ProcStat) -> bool {
        i64::from(s.pgid) == i64::from(self.pgid)
            && i64::from(s.sid) == i64::from(self.sid)
            && s.start_ticks >= self.leader_start
            && (pid != s.pgid || s.start_ticks == self.leader_start)
    }
}

#[derive(Debug, Clone, Copy)]
struct Member {
    pid: i32,
    start_ticks: u64,
}

/// The strays of one task as they are found, signalled and seen dead.
#[derive(Debug)]
pub(crate) struct Sweep {
    entry: Vec<u8>,
    group: Option<Group>,
    root: Option<i32>,
    exclude: Vec<i32>,
    /// Found and not yet seen dead.
    live: Vec<Member>,
    /// Every stray a signal was delivered to, in the order found.
    killed: Vec<Stray>,
    signalled: HashSet<(i32, u64)>,
}

impl Sweep {
    /// A sweep for task `task_id`. `root`: a live ancestor whose descendants all belong to the
    /// task (the supervisor); `exclude`: pids that never count (the guardian). The calling
    /// process never counts.
    pub(crate) fn new(
        task_id: &str,
        group: Option<Group>,
        root: Option<i32>,
        exclude: &[i32],
    ) -> Self {
        let mut exclude = exclude.to_vec();
        exclude.push(i32::try_from(std::process::id()).unwrap_or(0));
        Self {
            entry: env_entry(task_id),
            group,
            root,
            exclude,
            live: Vec::new(),
            killed: Vec::new(),
            signalled: HashSet::new(),
        }
    }

    /// Looks through `/proc` for the task's processes outside its group and adds the new
    /// ones; returns whether any stray is running.
    pub(crate) fn scan(&mut self) -> bool {
        // While the root (the supervisor, a subreaper) lives, every process of the task is
        // below it: walking its tree costs a few reads, where all of /proc costs milliseconds
        // per task end. Without a root, or where the kernel keeps no child lists, all of
        // /proc, by environment.
        let tree = self.root.and_then(tree);
        let by_tree = tree.is_some();
        let stats: HashMap<i32, ProcStat> = tree
            .unwrap_or_else(procfs::pids)
            .into_iter()
            .filter_map(|pid| Some((pid, procfs::stat(pid)?)))
            .collect();
        // The group is gone once another process has the leader's pid.
        let group = self.group.filter(|g| {
            i32::try_from(g.pgid)
                .ok()
                .and_then(|p| stats.get(&p))
                .is_none_or(|s| s.start_ticks == g.leader_start)
        });
        let descendants = match self.root {
            Some(r) if !by_tree => descendants(r, &stats),
            _ => HashSet::new(),
        };
        for (&pid, s) in &stats {
            if !s.is_running()
                || self.exclude.contains(&pid)
                || group.is_some_and(|g| g.holds(pid, s))
                || self.live.iter().any(|m| m.pid == pid)
            {
                continue;
            }
            if by_tree || descendants.contains(&pid) || procfs::env_has(pid, &self.entry) {
                self.live.push(Member {
                    pid,
                    start_ticks: s.start_ticks,
                });
            }
        }
        self.any_alive()
    }

    /// Whether a stray found so far still runs: one `stat` each, no scan.
    pub(crate) fn any_alive(&mut self) -> bool {
        self.live
            .retain(|m| procfs::is_alive_as(m.pid.cast_unsigned(), m.start_ticks));
        !self.live.is_empty()
    }

    /// Sends `signal` (and SIGCONT after SIGTERM, so a stopped process can act on it) to every
    /// stray found so far that still runs.
    pub(crate) fn signal(&mut self, signal: Signal) {
        for m in &self.live {
            let name = procfs::name(m.pid);
            if !procfs::signal_exact(m.pid, m.start_ticks, signal) {
                continue;
            }
            if signal == Signal::SIGTERM {
                procfs::signal_exact(m.pid, m.start_ticks, Signal::SIGCONT);
            }
            if self.signalled.insert((m.pid, m.start_ticks)) {
                self.killed.push(Stray {
                    pid: m.pid.cast_unsigned(),
                    name,
                });
            }
        }
    }

    /// The strays signalled so far.
    pub(crate) fn killed(&self) -> &[Stray] {
        &self.killed
    }

    /// The pids of the strays still running, as last seen.
    pub(crate) fn live_pids(&self) -> Vec<i32> {
        self.live.iter().map(|m| m.pid).collect()
    }
}

/// `LOOP_TASK_ID=<id>`, as it reads in `/proc/<pid>/environ`.
fn env_entry(task_id: &str) -> Vec<u8> {
    format!("{TASK_ID_ENV}={task_id}").into_bytes()
}

/// Every process below `root`, from the kernel's per-thread child lists
/// (`/proc/PID/task/TID/children`); `None` where the kernel does not keep them.
fn tree(root: i32) -> Option<Vec<i32>> {
    // Whether the kernel keeps child lists is read off the root's main thread; any other
    // thread may end while it is listed, and its list is then simply gone.
    std::fs::metadata(format!("/proc/{root}/task/{root}/children")).ok()?;
    let mut found: Vec<i32> = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
                continue;
            };
            for c in list.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&c) {
                    found.push(c);
                    todo.push(c);
                }
            }
        }
    }
    Some(found)
}

/// Every process below `root` in the current process tree.
fn descendants(root: i32, stats: &HashMap<i32, ProcStat>) -> HashSet<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, s) in stats {
        children.entry(s.ppid).or_default().push(pid);
    }
    let mut found = HashSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map_or(&[][..], Vec::as_slice) {
            if found.insert(c) {
                todo.push(c);
            }
        }
    }
    found
}

/// `4242 (sleep), 4250 (bash)`, naming at most a few.
pub(crate) fn describe(strays: &[Stray]) -> String {
    let mut text = strays
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(|s| format!("{} ({})", s.pid, s.name))
        .collect::<Vec<_>>()
        .join(", ");
    if strays.len() > NAMED_IN_MESSAGE {
        let _ = write!(text, " and {} more", strays.len() - NAMED_IN_MESSAGE);
    }
    text
}

/// `message`, plus the strays that were killed, if any.
pub(crate) fn with_strays(message: Option<String>, strays: &[Stray]) -> Option<String> {
    if strays.is_empty() {
        return message;
    }
    let base = message.unwrap_or_else(|| "ended".into());
    Some(format!(
        "{base}; killed outside its process group: {}",
        describe(strays)
    ))
}

/// The running processes that carry `LOOP_TASK_ID=<task_id>` in their environment, wherever
/// they are in the process tree: after a task has ended, none should be left. The calling
/// process is never listed. Reads all of `/proc` (about 3 ms for a hundred processes on a
/// small machine); processes of other users cannot be read and are not listed.
///
/// Every process a task's command starts carries the variable (the supervisor sets it),
/// unless it cleared its environment on purpose.
#[must_use]
pub fn survivors(task_id: &str) -> Vec<u32> {
    let entry = env_entry(task_id);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    procfs::pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| procfs::stat(pid).is_some_and(|s| s.is_running()))
        .filter(|&pid| procfs::env_has(pid, &entry))
        .map(i32::cast_unsigned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_strays_and_count_the_rest() {
        let strays: Vec<Stray> = (1..=12)
            .map(|pid| Stray {
                pid,
                name: "sleep".into(),
            })
            .collect();
        assert_eq!(with_strays(Some("x".into()), &[]), Some("x".into()));
        assert_eq!(
            with_strays(Some("timed out".into()), &strays[..2]).unwrap(),
            "timed out; killed outside its process group: 1 (sleep), 2 (sleep)"
        );
        assert!(describe(&strays).ends_with("10 (sleep) and 2 more"));
    }

    #[test]
    fn the_tree_of_a_process_lists_its_children_and_theirs() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let sh = i32::try_from(child.id()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let below_sh = |seen: &[i32]| {
            seen.iter()
                .any(|&p| procfs::stat(p).is_some_and(|s| s.ppid == sh))
        };
        let mut seen = Vec::new();
        let mut grandchild = false;
        while std::time::Instant::now() < deadline && !grandchild {
            seen = tree(me).expect("this kernel keeps child lists");
            grandchild = seen.contains(&sh) && below_sh(&seen);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(sh), Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            grandchild,
            "the shell and its sleep are in the tree: {seen:?}"
        );
    }

    #[test]
    fn descendants_follow_the_whole_tree() {
        let stat = |ppid| ProcStat {
            state: 'S',
            ppid,
            pgid: 0,
            sid: 0,
            start_ticks: 0,
        };
        let stats: HashMap<i32, ProcStat> =
            [(10, stat(1)), (11, stat(10)), (12, stat(11)), (20, stat(1))].into();
        let mut d: Vec<i32> = descendants(10, &stats).into_iter().collect();
        d.sort_unstable();
        assert_eq!(d, vec![11, 12]);
    }

    #[test]
    fn survivors_finds_a_process_by_its_exact_task_id_only() {
        let id = format!("test_survivors_{}", std::process::id());
        let spawn = |value: &str| {
            std::process::Command::new("sleep")
                .arg("300")
                .env(TASK_ID_ENV, value)
                .spawn()
                .unwrap()
        };
        let mut ours = spawn(&id);
        let mut other = spawn(&format!("{id}x"));
        // Until a child has exec'd, /proc shows the parent's environment: poll, with a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = survivors(&id);
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            found = survivors(&id);
        }
        let _ = ours.kill();
        let _ = other.kill();
        ours.wait().unwrap();
        other.wait().unwrap();
        assert_eq!(found, vec![ours.id()]);
        assert!(survivors(&id).is_empty(), "a reaped process is gone");
    }
}
