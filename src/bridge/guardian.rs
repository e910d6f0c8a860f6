//! The guardian: a forked copy of the supervisor whose only job is to notice the
//! supervisor's death and then kill the command's whole process group, and every other
//! process of the task (see [`super::sweep`]).
//!
//! `PR_SET_PDEATHSIG` only reaches the command's leader, not the processes it started; if
//! the supervisor is killed by `SIGKILL` those would run on, orphaned. The guardian blocks
//! in `read` on a pipe whose write end only the supervisor holds (zero CPU, no timers). EOF
//! without a final "done" byte means the supervisor died abnormally. It also keeps the task lock
//! (inherited across `fork`) until the group is dead, so `check` says LOST only when
//! nothing is left running.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::fcntl::OFlag;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::unistd::{ForkResult, Pid, fork, pipe2, read, write};

use super::procfs;
use super::records::PidRecord;
use super::sweep::{self, Group, Sweep};

/// How long the guardian keeps killing before giving up on an unkillable process.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// The supervisor's end of the guardian's pipe.
#[derive(Debug)]
pub(crate) struct Guardian {
    tx: OwnedFd,
    pub pid: Pid,
}

impl Guardian {
    /// Forks the guardian of task `task_id`. Call before any thread exists (the supervisor
    /// has none).
    pub(crate) fn start(task_id: &str) -> anyhow::Result<Self> {
        let (rx, tx) = pipe2(OFlag::O_CLOEXEC).context("while creating the guardian's pipe")?;
        // SAFETY: the supervisor is single-threaded, so the child may run arbitrary code.
        match unsafe { fork() }.context("while forking the guardian")? {
            ForkResult::Child => {
                drop(tx);
                guard(&rx, task_id)
            }
            ForkResult::Parent { child } => Ok(Self { tx, pid: child }),
        }
    }

    /// Tells the guardian which group to kill should the supervisor die.
    pub(crate) fn arm(&self, leader: &PidRecord) {
        let mut msg = Vec::with_capacity(16);
        msg.extend_from_slice(&leader.pid.to_le_bytes());
        msg.extend_from_slice(&leader.sid.to_le_bytes());
        msg.extend_from_slice(&leader.start_ticks.to_le_bytes());
        let _ = write(&self.tx, &msg);
    }

    /// The task is over and recorded: the guardian exits without killing anything.
    pub(crate) fn done(self) {
        let _ = write(&self.tx, b"D");
    }
}

fn guard(rx: &OwnedFd, task_id: &str) -> ! {
    // Signals meant for the supervisor's session must not take the safety net down with it.
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: installing SIG_IGN has no handler code to be unsafe.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let mut msg = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match read(rx, &mut buf) {
            Ok(0) => break,
            Ok(n) => msg.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    // The arming message is 16 bytes; "done" is one more byte after it, or alone when the
    // command was never started.
    let armed = msg.len() >= 16;
    let done = msg.get(if armed { 16 } else { 0 }) == Some(&b'D');
    if !done {
        let group = armed.then(|| {
            let word = |r: std::ops::Range<usize>| msg[r].try_into().unwrap_or_default();
            Group {
                pgid: u32::from_le_bytes(word(0..4)),
                sid: u32::from_le_bytes(word(4..8)),
                leader_start: u64::from_le_bytes(msg[8..16].try_into().unwrap_or_default()),
            }
        });
        crate::errln!(
            "guardian: the supervisor died without an exit record; killing group {} and \
             every other process of task {task_id}",
            group.map_or_else(|| "(none yet)".to_owned(), |g| g.pgid.to_string())
        );
        end_everything(task_id, group);
    }
    std::process::exit(0)
}

/// SIGKILL to the group and the strays, again and again, until a look finds none running.
fn end_everything(task_id: &str, group: Option<Group>) {
    let mut strays = Sweep::new(task_id, group, None, &[]);
    let deadline = Instant::now() + GIVE_UP_AFTER;
    loop {
        let group_left = group
            .is_some_and(|g| procfs::signal_group(g.pgid, g.sid, g.leader_start, Signal::SIGKILL));
        let strays_left = strays.scan();
        strays.signal(Signal::SIGKILL);
        if !group_left && !strays_left {
            break;
        }
        if Instant::now() >= deadline {
            crate::errln!(
                "guardian: processes survived SIGKILL for {}s; giving up",
                GIVE_UP_AFTER.as_secs()
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if !strays.killed().is_empty() {
        crate::errln!(
            "guardian: killed outside the process group of the command: {}",
            sweep::describe(strays.killed())
        );
    }
}
