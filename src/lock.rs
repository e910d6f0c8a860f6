//! One runner per M1.md: an OS lock on `<M1.md>.lock`, released by the kernel when the runner
//! dies, with the holder's pid written inside so a second runner can say who holds it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::exit::Exit;

/// The held lock; dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct RunnerLock {
    _file: File,
    path: PathBuf,
}

impl RunnerLock {
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock file of the loop whose state file is `m1`.
#[must_use]
pub fn path_for(m1: &Path) -> PathBuf {
    let mut name = m1
        .file_name()
        .map(std::ffi::OsString::from)
        .unwrap_or_default();
    name.push(".lock");
    m1.with_file_name(name)
}

/// Takes the runner lock of `m1`, or fails with exit status 2 naming the pid that holds it.
///
/// # Errors
/// [`Exit`] (bad input) when another runner holds it; I/O errors otherwise.
pub fn acquire(m1: &Path) -> anyhow::Result<RunnerLock> {
    let path = path_for(m1);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("while opening the runner lock {}", path.display()))?;
    // A runner that was just killed still holds the lock for a moment: its threads are
    // still exiting while its main thread already reads as a zombie. Wait for that one.
    let dying_until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut result = file.try_lock();
    while matches!(result, Err(std::fs::TryLockError::WouldBlock))
        && std::time::Instant::now() < dying_until
        && holder_is_gone(&mut file)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
        result = file.try_lock();
    }
    match result {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.seek(SeekFrom::Start(0));
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another runner".to_string()
            } else {
                format!("another runner (pid {holder})")
            };
            return Err(Exit::bad_input(format!(
                "{who} already runs the loop of {} (lock {}); watch it with `loop status`",
                m1.display(),
                path.display()
            ))
            .into());
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("while locking {}", path.display()));
        }
    }
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    write!(file, "{}", std::process::id())?;
    file.flush()?;
    Ok(RunnerLock { _file: file, path })
}

/// Whether the pid written in the lock file names no running process (gone, or a zombie).
fn holder_is_gone(file: &mut File) -> bool {
    let mut text = String::new();
    if file.seek(SeekFrom::Start(0)).is_err() || file.read_to_string(&mut text).is_err() {
        return false;
    }
    let Ok(pid) = text.trim().parse::<u32>() else {
        return false;
    };
    i32::try_from(pid)
        .ok()
        .and_then(crate::bridge::procfs::stat)
        .is_none_or(|s| !s.is_running())
}

/// The pid written in the lock file, if a live runner holds the lock now. Never takes it.
#[must_use]
pub fn holder(m1: &Path) -> Option<u32> {
    let path = path_for(m1);
    let mut file = OpenOptions::new().read(true).write(true).open(&path).ok()?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(_) => {
            let mut s = String::new();
            file.read_to_string(&mut s).ok()?;
            s.trim().parse().ok()
        }
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
        assert_eq!(crate::exit::status_of(&err), crate::exit::Status::BadInput);
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
