//! The guardian: a forked copy of the supervisor whose only job is to notice the
//! supervisor's death and then kill the command's whole process group.
//!
//! `PR_SET_PDEATHSIG` only reaches the command's leader, not the processes it started; if
//! the supervisor is SIGKILLed those would run on, orphaned. The guardian blocks in `read`
//! on a pipe whose write end only the supervisor holds (zero CPU, no timers). EOF without a
//! final "done" byte means the supervisor died abnormally. It also keeps the task lock
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

/// How long the guardian keeps killing before giving up on an unkillable process.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// The supervisor's end of the guardian's pipe.
#[derive(Debug)]
pub(crate) struct Guardian {
    tx: OwnedFd,
    pub pid: Pid,
}

impl Guardian {
    /// Forks the guardian. Call before any thread exists (the supervisor has none).
    pub(crate) fn start() -> anyhow::Result<Self> {
        let (rx, tx) = pipe2(OFlag::O_CLOEXEC).context("while creating the guardian's pipe")?;
        // SAFETY: the supervisor is single-threaded, so the child may run arbitrary code.
        match unsafe { fork() }.context("while forking the guardian")? {
            ForkResult::Child => {
                drop(tx);
                guard(&rx)
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

fn guard(rx: &OwnedFd) -> ! {
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
    if msg.len() >= 16 && msg.get(16) != Some(&b'D') {
        let word = |r: std::ops::Range<usize>| msg[r].try_into().unwrap_or_default();
        let pgid = u32::from_le_bytes(word(0..4));
        let sid = u32::from_le_bytes(word(4..8));
        let start = u64::from_le_bytes(msg[8..16].try_into().unwrap_or_default());
        eprintln!("guardian: the supervisor died without an exit record; killing group {pgid}");
        let deadline = Instant::now() + GIVE_UP_AFTER;
        while procfs::signal_group(pgid, sid, start, Signal::SIGKILL) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    std::process::exit(0)
}
