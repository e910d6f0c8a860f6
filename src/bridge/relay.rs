//! The command's output, carried from a pipe into the task's file by the supervisor.
//!
//! A command given its output file directly meets a full disk itself: its write fails, and an
//! agent that cannot write its stream ends with none, which reads as a failed attempt though
//! nothing was wrong with its work. Through a pipe, the command writes to the kernel's pipe
//! buffer, and the relay here takes each chunk into the file as it comes; a write that meets
//! a full or read-only disk waits for room and is tried again ([`crate::full_disk`]), the pipe
//! fills meanwhile, and the command's next write blocks until there is room, as its output
//! would on a slow terminal. Nothing is lost, and nothing is counted against the step.
//!
//! The relay is a thread of the supervisor, which sleeps in `read` while the command is quiet:
//! it costs nothing between chunks. A command killed with its supervisor loses no more than
//! before (the supervisor's death kills it too).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// How long the relay is waited for once the command's processes are gone, when it is not
/// waiting for room: a process that left the task (and was not found) may hold the pipe open.
const AFTER_EXIT: Duration = Duration::from_secs(2);

/// A running relay from one pipe into one file.
pub(super) struct Relay {
    name: &'static str,
    waiting_for_room: Arc<AtomicBool>,
    /// Disconnected once the relay's thread has ended (its sender is dropped with it).
    ended: Receiver<()>,
    thread: JoinHandle<()>,
}

/// A pipe whose write end is for the command (`Stdio::from`), and whose read end (close-on-exec,
/// so the command does not hold it) is for [`Relay::start`].
pub(super) fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("while making the output pipe")
}

impl Relay {
    /// Starts carrying what `from` reads into `to` (the task's file `name`).
    pub(super) fn start(name: &'static str, from: OwnedFd, mut to: File) -> anyhow::Result<Self> {
        let waiting_for_room = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&waiting_for_room);
        let mut from = File::from(from);
        let (ending, ended) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("relay {name}"))
            .spawn(move || {
                let _ending = ending;
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match from.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            crate::errln!("supervisor: reading the command's {name}: {e}");
                            return;
                        }
                    };
                    let mut chunk = &buf[..n];
                    let written = crate::full_disk::retry(
                        || loop {
                            if chunk.is_empty() {
                                return Ok(());
                            }
                            match to.write(chunk) {
                                Ok(w) => chunk = &chunk[w..],
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                Err(e) => {
                                    return Err(anyhow::Error::new(e)
                                        .context(format!("while writing the task's {name}")));
                                }
                            }
                        },
                        |why, waits| {
                            flag.store(true, Ordering::Release);
                            if waits % 30 == 0 {
                                crate::errln!(
                                    "supervisor: {name} cannot be written ({why}); the command's \
                                     output waits for room, try {}",
                                    waits + 1
                                );
                            }
                        },
                    );
                    flag.store(false, Ordering::Release);
                    if let Err(e) = written {
                        // Read on and drop, so the command is not blocked for good.
                        crate::errln!("supervisor: {e:#}; its output from here on is dropped");
                        let _ = std::io::copy(&mut from, &mut std::io::sink());
                        return;
                    }
                }
            })
            .with_context(|| format!("while starting the relay of the command's {name}"))?;
        Ok(Self {
            name,
            waiting_for_room,
            ended,
            thread,
        })
    }

    /// Waits until everything the command wrote is in the file: to the end of the pipe, as
    /// long as the relay waits for room, and else at most [`AFTER_EXIT`] (then what a process
    /// that outlived the task writes later is not kept).
    pub(super) fn finish(self) {
        let give_up = Instant::now() + AFTER_EXIT;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            // While it waits for room, it is looked at again each second past `give_up`.
            match self.ended.recv_timeout(left.max(Duration::from_secs(1))) {
                Err(RecvTimeoutError::Disconnected) => break,
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= give_up && !self.waiting_for_room.load(Ordering::Acquire) {
                crate::errln!(
                    "supervisor: the command's {} is still held open by a process outside the \
                     task; what it writes from here on is not kept",
                    self.name
                );
                return;
            }
        }
        let _ = self.thread.join();
    }
}
