//! One runner per M1.md: a lock on `<M1.md>.lock` (see `crate::lockfile`), with the
//! holder's pid written inside so a second runner can say who holds it.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::lockfile::{self, Held};

/// The held lock; dropping it (or the process dying) releases it.
pub type RunnerLock = Held;

/// The lock file of the loop whose state file is `m1`.
#[must_use]
pub(crate) fn path_for(m1: &Path) -> PathBuf {
    crate::layout::Layout::runner_lock(m1)
}

/// Takes the runner lock of `m1`, or fails with exit status 2 naming the pid that holds it.
///
/// # Errors
/// Bad input (`Error::BadInput`, exit 2) when another runner holds it; I/O errors otherwise.
pub fn acquire(m1: &Path) -> crate::error::Result<RunnerLock> {
    let path = path_for(m1);
    // A runner that was just killed still holds the lock for a moment: its threads are
    // still exiting while its main thread already reads as a zombie. Wait for that one.
    let dying_until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut held = loop {
        match lockfile::try_exclusive(&path)? {
            Ok(held) => break held,
            Err(mut file) => {
                let holder = lockfile::content(&mut file);
                if std::time::Instant::now() < dying_until && holder_is_gone(&holder) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                }
                let who = if holder.is_empty() {
                    "another runner".to_string()
                } else {
                    format!("another runner (pid {holder})")
                };
                return Err(Error::bad_input(format!(
                    "{who} already runs the loop of {} (lock {}); watch it with `loop status`, \
                     stop it with {}",
                    m1.display(),
                    path.display(),
                    crate::runner::stopfile::command_for(m1)
                )));
            }
        }
    };
    held.write(&std::process::id().to_string())?;
    Ok(held)
}

/// Whether the pid written in the lock file names no running process (gone, or a zombie).
fn holder_is_gone(holder: &str) -> bool {
    let Ok(pid) = holder.parse::<u32>() else {
        return false;
    };
    i32::try_from(pid)
        .ok()
        .and_then(crate::bridge::procfs::stat)
        .is_none_or(|s| !s.is_running())
}

/// The pid written in the lock file, if a live runner holds the lock now. Never takes it.
///
/// A runner writes its pid just after it takes the lock: a lock held with no pid of a live
/// process in it yet is a runner taking the loop, and is waited for a moment, not read as no
/// runner (a command that took it for none tried to take the loop too, and failed).
#[must_use]
pub fn holder(m1: &Path) -> Option<u32> {
    let path = path_for(m1);
    let deadline = std::time::Instant::now() + PID_WRITTEN_WITHIN;
    loop {
        if !lockfile::is_held(&path).ok()? {
            return None;
        }
        let mut file = std::fs::File::open(&path).ok()?;
        let written = lockfile::content(&mut file);
        let pid = written.parse().ok();
        if (pid.is_some() && !holder_is_gone(&written)) || std::time::Instant::now() >= deadline {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How long a runner that has taken its lock may take to write its pid into it.
const PID_WRITTEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits, at most `within`, until no runner holds the lock of `m1`: how a command that stopped
/// a runner knows it has let go of its loop (its step ended, WAITING written), whatever stopped
/// it. The holder's pid when one still holds it then.
#[must_use]
pub(crate) fn wait_released(m1: &Path, within: std::time::Duration) -> Option<u32> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let holder = holder(m1)?;
        if std::time::Instant::now() >= deadline {
            return Some(holder);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_names_the_holder_and_first_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = dir.path().join("M1.md");
        let first = acquire(&m1).unwrap();
        assert_eq!(holder(&m1), Some(std::process::id()));
        let err = acquire(&m1).unwrap_err();
        assert_eq!(err.code(), crate::exit::Status::BadInput);
        assert!(
            err.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        // Another test thread of this process may fork at any moment, and its child holds a
        // copy of every descriptor (the lock's too) until it execs: poll, with a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while holder(&m1).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(holder(&m1), None);
        acquire(&m1).unwrap();
    }
}
