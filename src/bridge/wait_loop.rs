//! The supervisor's wait: one `poll` on a signalfd, woken by SIGCHLD or a kill request.
//!
//! With no timeout set the poll has no deadline at all, so a supervisor of a long quiet
//! command costs no CPU. A wall-clock timeout is one deadline. Only an idle timeout adds a
//! periodic wakeup, to compare the sizes of the output files.
//!
//! Ending a task ends all of it: the group, and the strays of [`Sweep`] (processes of the
//! task outside the group), found by one look through `/proc` when the task ends.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::os::fd::AsFd;

use super::records::{self, KILL_FILE, KillRequest, Reason, STDERR_FILE, STDOUT_FILE};
use super::sweep::Sweep;

/// How often the group is re-checked while it is being ended and some members are not
/// our children (their deaths send us no SIGCHLD).
const ENDING_TICK: Duration = Duration::from_millis(10);
/// How long after SIGKILL we wait for an unkillable process before recording anyway.
const GIVE_UP_AFTER_KILL: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(crate) struct Limits {
    pub timeout: Option<Duration>,
    pub idle: Option<Duration>,
    pub idle_exempt_marker: Option<String>,
    pub grace: Duration,
}

#[derive(Debug)]
pub(crate) struct Outcome {
    pub reason: Reason,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub message: Option<String>,
    pub ended_at: DateTime<Utc>,
}

/// The group is being ended: SIGTERM sent, SIGKILL due at `kill_at`.
#[derive(Debug)]
struct Ending {
    reason: Reason,
    message: Option<String>,
    kill_at: Instant,
    killed_at: Option<Instant>,
}

/// Waits until the leader has exited and the whole group and every stray is gone; ends them
/// on a timeout or a SIGTERM/SIGINT/SIGHUP (a kill request), first reason wins.
pub(crate) fn run(
    task_dir: &Path,
    sigfd: &SignalFd,
    leader: Pid,
    guardian: Pid,
    limits: &Limits,
    sweep: &mut Sweep,
) -> Outcome {
    let start = Instant::now();
    let mut w = Waiting {
        leader,
        limits,
        wall: limits.timeout.map(|t| start + t),
        idle: limits
            .idle
            .map(|limit| IdleWatch::new(limit, task_dir, start, limits.idle_exempt_marker.clone())),
        status: None,
        ended_at: None,
        ending: None,
    };
    loop {
        reap(leader, guardian, &mut w.status, &mut w.ended_at);
        let now = Instant::now();
        if w.settled(sweep, now) || w.gave_up(sweep, now) {
            break;
        }
        let wait = w.next_wait(now);
        wait_for_signals(sigfd, wait, |sig| {
            if matches!(sig, Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP)
                && w.ending.is_none()
                && w.status.is_none()
            {
                let (grace, message) = kill_request(task_dir, sig, limits.grace);
                w.ending = Some(begin(leader, sweep, Reason::Killed, Some(message), grace));
            }
        });
    }
    let (exit_code, signal) = w.status.unwrap_or((None, None));
    let (reason, message) = match w.ending {
        Some(e) => (e.reason, e.message),
        None => (Reason::Exited, None),
    };
    Outcome {
        reason,
        exit_code,
        signal,
        message,
        ended_at: w.ended_at.unwrap_or_else(Utc::now),
    }
}

/// What the supervisor knows while it waits for a task to end.
struct Waiting<'a> {
    leader: Pid,
    limits: &'a Limits,
    wall: Option<Instant>,
    idle: Option<IdleWatch>,
    /// The leader's exit (code, signal), once reaped.
    status: Option<(Option<i32>, Option<i32>)>,
    ended_at: Option<DateTime<Utc>>,
    ending: Option<Ending>,
}

impl Waiting<'_> {
    /// Whether everything of the task is gone; else begins ending it when a reason came
    /// (the command ended leaving processes, the timeout, the idle limit).
    fn settled(&mut self, sweep: &mut Sweep, now: Instant) -> bool {
        let (leader, grace) = (self.leader, self.limits.grace);
        if let Some(e) = &self.ending {
            if self.status.is_some() && !group_alive(leader) && !sweep.any_alive() {
                // All known dead: one more look, for processes started in the meantime.
                if !sweep.scan() {
                    return true;
                }
                let late = if e.killed_at.is_some() {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                sweep.signal(late);
            }
        } else if self.status.is_some() {
            // The command has ended: whatever it left running, in its group or not, ends too.
            if !sweep.scan() && !group_alive(leader) {
                return true;
            }
            let msg = "processes the command left behind were ended".into();
            self.ending = Some(begin(leader, sweep, Reason::Exited, Some(msg), grace));
        } else if let Some(t) = self
            .limits
            .timeout
            .filter(|_| self.wall.is_some_and(|w| now >= w))
        {
            let msg = format!(
                "ran longer than the timeout of {}",
                crate::duration::human(t)
            );
            self.ending = Some(begin(leader, sweep, Reason::Timeout, Some(msg), grace));
        } else if let Some(limit) = self
            .idle
            .as_mut()
            .and_then(|w| w.expired(now).then_some(w.limit))
        {
            let msg = format!("no output for {}", crate::duration::human(limit));
            self.ending = Some(begin(leader, sweep, Reason::Idle, Some(msg), grace));
        }
        false
    }

    /// While ending: SIGKILL when the grace is over; whether to stop waiting for processes
    /// that survive even that.
    fn gave_up(&mut self, sweep: &mut Sweep, now: Instant) -> bool {
        let leader = self.leader;
        let Some(e) = &mut self.ending else {
            return false;
        };
        match e.killed_at {
            None if now >= e.kill_at => {
                let _ = killpg(leader, Signal::SIGKILL);
                sweep.scan();
                sweep.signal(Signal::SIGKILL);
                e.killed_at = Some(now);
                false
            }
            Some(k) if now >= k + GIVE_UP_AFTER_KILL => {
                crate::errln!(
                    "supervisor: processes of group {leader} or strays {:?} survived SIGKILL; \
                     recording anyway",
                    sweep.live_pids()
                );
                e.message = Some(format!(
                    "{} (some processes of the group could not be killed)",
                    e.message.as_deref().unwrap_or("ended")
                ));
                true
            }
            _ => false,
        }
    }

    /// How long to sleep on signals: a tick while ending, else until the next limit.
    fn next_wait(&self, now: Instant) -> Option<Duration> {
        if self.ending.is_some() {
            return Some(ENDING_TICK);
        }
        let until_wall = self.wall.map(|w| w.saturating_duration_since(now));
        let until_idle = self
            .idle
            .as_ref()
            .map(|w| w.next_check.saturating_duration_since(now));
        [until_wall, until_idle].into_iter().flatten().min()
    }
}

/// SIGTERM (and SIGCONT, so a stopped group can act on it) to the group and to every stray
/// a fresh look finds, SIGKILL later.
fn begin(
    leader: Pid,
    sweep: &mut Sweep,
    reason: Reason,
    message: Option<String>,
    grace: Duration,
) -> Ending {
    let _ = killpg(leader, Signal::SIGTERM);
    let _ = killpg(leader, Signal::SIGCONT);
    sweep.scan();
    sweep.signal(Signal::SIGTERM);
    Ending {
        reason,
        message,
        kill_at: Instant::now() + grace,
        killed_at: None,
    }
}

/// Reaps every child that has ended: the leader (its status is the task's), orphans of the
/// group re-parented to us, and the guardian should it die early.
fn reap(
    leader: Pid,
    guardian: Pid,
    status: &mut Option<(Option<i32>, Option<i32>)>,
    ended_at: &mut Option<DateTime<Utc>>,
) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == leader => {
                *status = Some((Some(code), None));
                *ended_at = Some(Utc::now());
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == leader => {
                *status = Some((None, Some(sig as i32)));
                *ended_at = Some(Utc::now());
            }
            Ok(WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)) if pid == guardian => {
                crate::errln!("supervisor: the guardian process ended early");
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Whether any process of the group exists (zombies included: ours get reaped above).
fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// The grace period and message of a kill: from `kill.json` when `loop kill` sent it.
fn kill_request(task_dir: &Path, sig: Signal, default_grace: Duration) -> (Duration, String) {
    match records::read::<KillRequest>(&task_dir.join(KILL_FILE)) {
        Ok(Some(req)) => (
            Duration::from_millis(req.grace_ms),
            "killed by loop kill".into(),
        ),
        _ => (default_grace, format!("the supervisor received {sig}")),
    }
}

/// Blocks in `poll` until a signal arrives or `wait` passes (`None`: no deadline).
fn wait_for_signals(sigfd: &SignalFd, wait: Option<Duration>, mut on_signal: impl FnMut(Signal)) {
    let timeout = match wait {
        None => PollTimeout::NONE,
        // Round up, so that a deadline 0.4 ms away does not become a busy loop.
        Some(d) => {
            PollTimeout::try_from(d + Duration::from_micros(999)).unwrap_or(PollTimeout::MAX)
        }
    };
    let mut fds = [PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, timeout) {
        Ok(n) if n > 0 => {}
        _ => return,
    }
    while let Ok(Some(info)) = sigfd.read_signal() {
        if let Ok(sig) = Signal::try_from(i32::try_from(info.ssi_signo).unwrap_or(0)) {
            on_signal(sig);
        }
    }
}

/// The idle timeout: output counts as activity when either file's size changed.
#[derive(Debug)]
struct IdleWatch {
    limit: Duration,
    interval: Duration,
    files: [PathBuf; 2],
    sizes: [u64; 2],
    last_change: Instant,
    next_check: Instant,
    /// Stdout containing this switches the idle timeout off.
    marker: Option<Vec<u8>>,
    /// How far stdout has been searched for the marker, and the last bytes searched.
    scanned: u64,
    partial: Vec<u8>,
}

impl IdleWatch {
    fn new(limit: Duration, task_dir: &Path, start: Instant, marker: Option<String>) -> Self {
        let interval = (limit / 8).clamp(Duration::from_millis(50), Duration::from_secs(1));
        Self {
            limit,
            interval,
            files: [task_dir.join(STDOUT_FILE), task_dir.join(STDERR_FILE)],
            sizes: [0, 0],
            last_change: start,
            next_check: start + interval,
            marker: marker.filter(|m| !m.is_empty()).map(String::into_bytes),
            scanned: 0,
            partial: Vec::new(),
        }
    }

    /// Reads what stdout gained since the last look and reports whether it holds the marker.
    /// Reads each byte once; keeps only a marker's length of the past.
    fn marker_seen(&mut self) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let Some(marker) = &self.marker else {
            return false;
        };
        let Ok(mut f) = fs::File::open(&self.files[0]) else {
            return false;
        };
        if f.seek(SeekFrom::Start(self.scanned)).is_err() {
            return false;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.read_to_end(&mut buf) else {
            return false;
        };
        self.scanned += n as u64;
        // Search the new bytes together with the tail of the old ones, so a marker split
        // across two reads is still found.
        self.partial.extend_from_slice(&buf);
        let found = self
            .partial
            .windows(marker.len())
            .any(|w| w == marker.as_slice());
        let keep = marker.len().saturating_sub(1).min(self.partial.len());
        self.partial.drain(..self.partial.len() - keep);
        found
    }

    fn expired(&mut self, now: Instant) -> bool {
        if now < self.next_check {
            return false;
        }
        let sizes = self
            .files
            .clone()
            .map(|f| fs::metadata(f).map_or(0, |m| m.len()));
        if sizes != self.sizes {
            self.sizes = sizes;
            self.last_change = now;
            if self.marker_seen() {
                // The command has given its answer: no idle limit from here on.
                self.marker = None;
                self.limit = Duration::MAX;
            }
        }
        self.next_check = now + self.interval;
        now.duration_since(self.last_change) >= self.limit
    }
}
