//! Process identity from `/proc`: a pid alone is not an identity (pids are reused, and a
//! zombie still answers `kill(pid, 0)`), so every check here also compares the start time
//! and treats zombies as dead.

use std::fs;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The fields of `/proc/<pid>/stat` the bridge needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// `R`, `S`, `D`, `Z`, `T`, ...
    pub state: char,
    pub pgid: i32,
    pub sid: i32,
    /// Clock ticks after boot at which the process started.
    pub start_ticks: u64,
}

impl ProcStat {
    /// A zombie or a dead entry has finished running; only its parent's `wait` is missing.
    pub(crate) fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/<pid>/stat`; `None` when there is no such process.
pub(crate) fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses a stat line. The command name (field 2) may contain spaces and parentheses, so
/// fields are counted from the last `)`.
pub(crate) fn parse_stat(line: &str) -> Option<ProcStat> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state is field 3, pgrp 5, session 6, starttime 22.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgid: fields.get(2)?.parse().ok()?,
        sid: fields.get(3)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// Whether `pid` is still the process that started at `start_ticks`, and not a zombie.
pub(crate) fn is_alive_as(pid: u32, start_ticks: u64) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(stat)
        .is_some_and(|s| s.start_ticks == start_ticks && s.is_running())
}

/// The running (non-zombie) members of the task's process group: pgid and session as
/// recorded, started no earlier than the group's leader.
///
/// If another process now has the leader's pid, the group is gone: the kernel does not
/// reuse a pid while a process group still carries it as its id.
pub(crate) fn group_members(pgid: u32, sid: u32, leader_start: u64) -> Vec<i32> {
    let (Ok(pgid), Ok(sid)) = (i32::try_from(pgid), i32::try_from(sid)) else {
        return Vec::new();
    };
    if stat(pgid).is_some_and(|s| s.start_ticks != leader_start) {
        return Vec::new();
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            stat(pid).is_some_and(|s| {
                s.pgid == pgid && s.sid == sid && s.start_ticks >= leader_start && s.is_running()
            })
        })
        .collect()
}

/// Sends `signal` to the recorded group if it still has members; returns whether it had.
pub(crate) fn signal_group(pgid: u32, sid: u32, leader_start: u64, signal: Signal) -> bool {
    if group_members(pgid, sid, leader_start).is_empty() {
        return false;
    }
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_name_with_spaces_and_parens() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            ProcStat {
                state: 'S',
                pgid: 4242,
                sid: 4242,
                start_ticks: 987_654
            }
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn our_own_process_is_alive_as_itself_only() {
        let me = std::process::id();
        let s = stat(i32::try_from(me).unwrap()).unwrap();
        assert!(is_alive_as(me, s.start_ticks));
        assert!(!is_alive_as(me, s.start_ticks + 1));
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = stat(i32::try_from(pid).unwrap()).unwrap().start_ticks;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Not waited for, so it stays a zombie until we reap it below.
        while stat(i32::try_from(pid).unwrap()).is_some_and(|s| s.state != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "child never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_alive_as(pid, start), "a zombie must count as dead");
        let mut child = child;
        child.wait().unwrap();
    }
}
