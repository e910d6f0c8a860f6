//! Process identity from `/proc`: a pid alone is not an identity (pids are reused, and a
//! zombie still answers `kill(pid, 0)`), so every check here also compares the start time
//! and treats zombies as dead.
//!
//! The reading part ([`stat`], [`pids`], [`env_has`], [`name`]) is public so that the tests
//! look at processes the way the bridge does; what signals stays inside the crate.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The fields of `/proc/<pid>/stat` the bridge needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z`, `T`, ...
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    /// Clock ticks after boot at which the process started.
    pub start_ticks: u64,
}

impl ProcStat {
    /// A zombie or a dead entry has finished running; only its parent's `wait` is missing.
    #[must_use]
    pub fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/<pid>/stat`; `None` when there is no such process.
#[must_use]
pub fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields of a stat line after the command name, field 3 (state) first. The name (field
/// 2) may contain spaces and parentheses, so they are counted from the last `)`.
pub(crate) fn stat_fields(line: &str) -> Option<Vec<&str>> {
    Some(
        line[line.rfind(')')? + 1..]
            .split_ascii_whitespace()
            .collect(),
    )
}

/// Parses a stat line.
pub(crate) fn parse_stat(line: &str) -> Option<ProcStat> {
    let fields = stat_fields(line)?;
    // After the name: state is field 3, ppid 4, pgrp 5, session 6, starttime 22.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
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

/// The numeric entries of `/proc`: every process's pid.
#[must_use]
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Whether `environ` (NUL-separated, as `/proc/<pid>/environ` reads) holds exactly `entry`:
/// a whole `NAME=value` entry, never a prefix of a longer value or part of another's value.
pub(crate) fn environ_has(environ: &[u8], entry: &[u8]) -> bool {
    environ.split(|&b| b == 0).any(|e| e == entry)
}

/// Whether the environment `pid` was started with holds exactly `entry`. Another user's
/// processes cannot be read and answer false.
#[must_use]
pub fn env_has(pid: i32, entry: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| environ_has(&env, entry))
}

/// The command name of `pid` (`/proc/<pid>/comm`), or `?`.
#[must_use]
pub fn name(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| "?".to_owned(), |n| n.trim_end().to_owned())
}

/// Sends `signal` to `pid` only if it is still the running process that started at
/// `start_ticks`; returns whether it was sent. Through a pidfd, opened before the identity
/// check, so a pid reused between the check and the signal cannot be hit.
pub(crate) fn signal_exact(pid: i32, start_ticks: u64, signal: Signal) -> bool {
    let is_it = || stat(pid).is_some_and(|s| s.start_ticks == start_ticks && s.is_running());
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    if fd < 0 {
        // Kernels before 5.3: check, then signal, with a window of a few microseconds.
        return Errno::last() == Errno::ENOSYS
            && is_it()
            && kill(Pid::from_raw(pid), signal).is_ok();
    }
    // SAFETY: the descriptor was just opened and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if !is_it() {
        return false;
    }
    // SAFETY: a valid pidfd, a valid signal number, no siginfo, no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
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
                ppid: 1,
                pgid: 4242,
                sid: 4242,
                start_ticks: 987_654
            }
        );
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn only_a_whole_environment_entry_matches() {
        let entry = b"LOOP_TASK_ID=task_1";
        assert!(environ_has(b"A=1\0LOOP_TASK_ID=task_1\0B=2\0", entry));
        assert!(environ_has(b"LOOP_TASK_ID=task_1", entry));
        assert!(
            !environ_has(b"LOOP_TASK_ID=task_10\0", entry),
            "a longer id"
        );
        assert!(
            !environ_has(b"X_LOOP_TASK_ID=task_1\0", entry),
            "another name"
        );
        assert!(
            !environ_has(b"X=LOOP_TASK_ID=task_1\0", entry),
            "inside a value"
        );
        assert!(!environ_has(b"", entry));
    }

    #[test]
    fn signal_exact_spares_a_process_with_another_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let start = stat(pid).unwrap().start_ticks;
        assert!(!signal_exact(pid, start + 1, Signal::SIGKILL));
        assert!(
            is_alive_as(child.id(), start),
            "a mismatched start time must spare it"
        );
        assert!(signal_exact(pid, start, Signal::SIGKILL));
        child.wait().unwrap();
        assert!(
            !signal_exact(pid, start, Signal::SIGKILL),
            "reaped: nothing to signal"
        );
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
