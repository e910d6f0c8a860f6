//! Who sends from an outbox: one process at a time, holding `outbox.send.lock`, and at most one
//! waiting to be next, holding `outbox.next.lock` (each with its pid written in it).
//!
//! The rule that keeps every queued message moving without anyone waiting for the network:
//! a process that queues a message starts a delivery process, which takes the place next in
//! line, and whoever is next reads the outbox only once it is sending, so it sends everything
//! queued before it. Nobody relies on the sender, which may be stuck on a Telegram that does
//! not answer, or about to give up. The place goes to the newest: a delivery process that
//! finds it taken asks the one waiting there to leave (`SIGUSR1`, which ends a delivery
//! process that has not begun to send: it has read nothing, so nothing is lost or sent twice),
//! because the newest was started with the settings of the latest command. A sender that sees
//! someone waiting hands over after its turn instead of waiting out a backoff, so a new message
//! is tried at once. A process whose turn it is, or a command waiting for its own message,
//! blocks the signal ([`Line::keep_place`]).
//!
//! Whoever holds its place in line must not give it up with messages pending and nobody to
//! send them: a command that leaves without a turn (its wait ran out, or another process sent
//! what it waited for) starts a delivery process as it leaves if anything is pending, since it
//! may have kept one out of line meanwhile.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{SigSet, Signal};

use crate::lockfile::{self, Held};

/// What asks a process waiting in line to leave its place to a newer one.
pub(crate) const LEAVE: Signal = Signal::SIGUSR1;

/// How often a process waiting in line looks again.
const LOOK: Duration = Duration::from_millis(20);

/// Holding this means this process is the only one sending from the outbox.
#[derive(Debug)]
pub(crate) struct Sending(
    #[expect(dead_code, reason = "held for its drop: the lock goes with it")] Held,
);

/// How a wait for the turn to send came out.
#[derive(Debug)]
pub(crate) enum Waited {
    /// This process sends now.
    Turn(Sending),
    /// Another process is next in line: it sends, once it can, what this one came for.
    Queued,
    /// This process was next, but the sender had not finished in time: its pid (as written).
    Busy(String),
    /// What this process waited for happened meanwhile (another sent its message).
    Done,
}

/// The line of senders of one state directory's outbox.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    dir: PathBuf,
}

impl Line {
    pub(crate) fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.to_path_buf(),
        }
    }

    fn send_lock(&self) -> PathBuf {
        crate::layout::Layout::dir(&self.dir).outbox_send_lock()
    }

    fn next_lock(&self) -> PathBuf {
        crate::layout::Layout::dir(&self.dir).outbox_next_lock()
    }

    /// Whether a process waits to send next. A probe: it may briefly keep a process from
    /// taking its place, which is why [`Line::wait_turn`] tries for a while.
    pub(crate) fn waiting(&self) -> bool {
        lockfile::is_held(&self.next_lock()).unwrap_or(false)
    }

    /// From now on this process is not asked to leave its place in line (a command waiting
    /// for its own message; a process whose turn it is, which must not die halfway through a
    /// send). Blocks the signal in the calling thread; a delivery process starts with it
    /// unblocked.
    pub(crate) fn keep_place() {
        let mut set = SigSet::empty();
        set.add(LEAVE);
        let _ = set.thread_block();
    }

    /// Asks the process waiting next in line to leave, once per process: its pid as it wrote
    /// it, read while it holds the place.
    fn ask_to_leave(file: &mut std::fs::File, asked: &mut Option<i32>) {
        let Ok(pid) = lockfile::content(file).parse::<i32>() else {
            return;
        };
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        if pid > 1 && pid != me && *asked != Some(pid) {
            *asked = Some(pid);
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), LEAVE);
        }
    }

    /// Takes the place next in line (asking a process waiting there to leave it), unless it
    /// is still taken after `place_within`, then waits for the sender before it to finish, at
    /// most `turn_within` (`None`: as long as it takes). `done` is asked between looks; `true`
    /// ends the wait.
    ///
    /// # Errors
    /// When a lock cannot be opened or taken for another reason than being held.
    pub(crate) fn wait_turn(
        &self,
        place_within: Duration,
        turn_within: Option<Duration>,
        mut done: impl FnMut() -> bool,
    ) -> anyhow::Result<Waited> {
        crate::dirs::create_state_dir(&self.dir)
            .with_context(|| format!("while creating {}", self.dir.display()))?;
        let began = Instant::now();
        let mut place: Option<Held> = None;
        let mut asked = None;
        let me = std::process::id().to_string();
        loop {
            if done() {
                return Ok(Waited::Done);
            }
            if place.is_none() {
                match lockfile::try_exclusive(&self.next_lock())? {
                    Ok(mut held) => {
                        let _ = held.write(&me);
                        place = Some(held);
                    }
                    Err(mut file) => Self::ask_to_leave(&mut file, &mut asked),
                }
            }
            if place.is_some() {
                let send = match turn_within {
                    Some(_) => lockfile::try_exclusive(&self.send_lock())?,
                    None => Ok(lockfile::exclusive(&self.send_lock())?),
                };
                match send {
                    Ok(mut held) => {
                        // Before the place is given up, so nobody asks a sender to leave.
                        Self::keep_place();
                        // For people and commands to name it; the lock works without it.
                        let _ = held.write(&me);
                        return Ok(Waited::Turn(Sending(held)));
                    }
                    Err(mut file) if turn_within.is_some_and(|t| began.elapsed() >= t) => {
                        return Ok(Waited::Busy(lockfile::content(&mut file)));
                    }
                    Err(_) => {}
                }
            } else if began.elapsed() >= place_within {
                return Ok(Waited::Queued);
            }
            std::thread::sleep(LOOK);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Option<Duration> = Some(Duration::ZERO);

    #[test]
    fn one_sends_one_waits_next_and_a_third_is_told_someone_is_next() {
        let dir = tempfile::tempdir().unwrap();
        let line = Line::new(dir.path());
        assert!(!line.waiting());
        let Waited::Turn(first) = line.wait_turn(Duration::ZERO, NOW, || false).unwrap() else {
            panic!("nobody sends: the turn is this one's");
        };
        assert!(!line.waiting(), "the sender is not in line");

        // Next in line, but the sender does not finish: busy, named by its pid.
        let busy = line.wait_turn(Duration::ZERO, NOW, || false).unwrap();
        assert!(
            matches!(&busy, Waited::Busy(pid) if *pid == std::process::id().to_string()),
            "{busy:?}"
        );

        // While one waits next, another is told so.
        let waiting = lockfile::try_exclusive(&line.next_lock()).unwrap().unwrap();
        assert!(line.waiting());
        let queued = line
            .wait_turn(Duration::from_millis(50), None, || false)
            .unwrap();
        assert!(matches!(queued, Waited::Queued), "{queued:?}");
        drop(waiting);

        // The sender lets go: the one next in line sends.
        drop(first);
        let turn = line.wait_turn(Duration::ZERO, NOW, || false).unwrap();
        assert!(matches!(turn, Waited::Turn(_)), "{turn:?}");
        assert!(!line.waiting(), "its place is given up once it sends");
    }

    #[test]
    fn a_wait_ends_when_what_it_waited_for_happened() {
        let dir = tempfile::tempdir().unwrap();
        let line = Line::new(dir.path());
        let Waited::Turn(_sender) = line.wait_turn(Duration::ZERO, NOW, || false).unwrap() else {
            panic!("the turn is this one's");
        };
        let mut looks = 0;
        let waited = line
            .wait_turn(
                Duration::from_secs(60),
                Some(Duration::from_secs(60)),
                || {
                    looks += 1;
                    looks == 3
                },
            )
            .unwrap();
        assert!(matches!(waited, Waited::Done), "{waited:?}");
        assert!(!line.waiting(), "its place is given up as it leaves");
    }
}
