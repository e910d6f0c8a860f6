//! Advisory file locks (`flock`), the one implementation behind every lock of `loop`: the
//! runner's lock beside M1.md, a task's lock held by its supervisor, the Telegram bot's, the
//! outbox's. The kernel drops a lock when the last process holding its file dies, however it
//! dies, so a held lock always means a live holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A held lock; dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct Held {
    file: File,
    path: PathBuf,
}

impl Held {
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` as the file's whole content (the holder's pid, say), for others to read
    /// while the lock is held.
    ///
    /// # Errors
    /// When the file cannot be written, naming it.
    pub fn write(&mut self, text: &str) -> anyhow::Result<()> {
        let mut put = || {
            self.file.set_len(0)?;
            self.file.seek(SeekFrom::Start(0))?;
            self.file.write_all(text.as_bytes())?;
            self.file.flush()
        };
        put().with_context(|| format!("while writing the lock {}", self.path.display()))
    }

    /// The file, e.g. to hand to a child process that is to keep the lock.
    #[must_use]
    pub fn into_file(self) -> File {
        self.file
    }
}

fn open(path: &Path) -> anyhow::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("while opening the lock {}", path.display()))
}

/// Takes the lock exclusively if nobody holds it (creating its file); `Err(file)` when it is
/// held, with the file open for reading what the holder wrote.
///
/// # Errors
/// When the file cannot be opened or locked for another reason than being held.
pub(crate) fn try_exclusive(path: &Path) -> anyhow::Result<Result<Held, File>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Ok(Held {
            file,
            path: path.to_path_buf(),
        })),
        Err(TryLockError::WouldBlock) => Ok(Err(file)),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("while locking {}", path.display()))
        }
    }
}

/// Takes the lock exclusively, waiting for its holder to let go.
///
/// # Errors
/// When the file cannot be opened or locked.
pub(crate) fn exclusive(path: &Path) -> anyhow::Result<Held> {
    let file = open(path)?;
    file.lock()
        .with_context(|| format!("while locking {}", path.display()))?;
    Ok(Held {
        file,
        path: path.to_path_buf(),
    })
}

/// Whether someone holds the lock. A missing file is a free lock. The probe takes the lock
/// shared, so that concurrent probes never make each other see a held lock, and never creates
/// the file.
///
/// # Errors
/// When the file exists but cannot be opened or probed.
pub(crate) fn is_held(path: &Path) -> anyhow::Result<bool> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("while opening {}", path.display())),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("while probing {}", path.display()))
        }
    }
}

/// What the holder of a lock wrote in its file (trimmed), read from `file`.
#[must_use]
pub(crate) fn content(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.read_to_string(&mut text);
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_held_refused_to_another_and_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        assert!(!is_held(&path).unwrap(), "no file: free");
        assert!(!path.exists(), "probing creates nothing");
        let mut held = try_exclusive(&path).unwrap().unwrap();
        held.write("4242").unwrap();
        assert!(is_held(&path).unwrap());
        let mut other = try_exclusive(&path).unwrap().unwrap_err();
        assert_eq!(content(&mut other), "4242");
        drop(held);
        // A child another test forks in this instant holds a copy of the descriptor, and with
        // it the lock, until it execs (the descriptor is close-on-exec): polled, not asserted
        // at once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_held(&path).unwrap() {
            assert!(
                std::time::Instant::now() < deadline,
                "still held once dropped"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(try_exclusive(&path).unwrap().is_ok());
    }
}
