//! The task lock: `tasks/<id>/lock`, held (flock, exclusive) by `fire` from before the task
//! directory is published, then by the supervisor and its guardian for their whole lives.
//! The kernel drops it when the last of them dies, however they die, so "lock free and no
//! exit record" is exactly "lost".

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::Path;

use anyhow::Context;

use super::records::LOCK_FILE;

/// Whether someone holds the task's lock (a live supervisor or guardian).
pub(crate) fn is_held(task_dir: &Path) -> anyhow::Result<bool> {
    let path = task_dir.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("while opening {}", path.display())),
    };
    // Shared, so that concurrent checkers never make each other see a held lock.
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("while probing {}", path.display()))
        }
    }
}

/// Takes the lock exclusively if nobody holds it; `None` when it is held.
pub(crate) fn try_take(task_dir: &Path) -> anyhow::Result<Option<File>> {
    let path = task_dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("while opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("while locking {}", path.display()))
        }
    }
}
