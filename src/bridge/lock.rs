//! The task lock: `tasks/<id>/lock`, held (flock, exclusive) by `fire` from before the task
//! directory is published, then by the supervisor and its guardian for their whole lives.
//! The kernel drops it when the last of them dies, however they die, so "lock free and no
//! exit record" is exactly "lost".

use std::fs::File;
use std::path::Path;

use super::records::LOCK_FILE;
use crate::lockfile;

/// Whether someone holds the task's lock (a live supervisor or guardian).
pub(crate) fn is_held(task_dir: &Path) -> anyhow::Result<bool> {
    lockfile::is_held(&task_dir.join(LOCK_FILE))
}

/// Takes the lock exclusively if nobody holds it; `None` when it is held.
pub(crate) fn try_take(task_dir: &Path) -> anyhow::Result<Option<File>> {
    Ok(lockfile::try_exclusive(&task_dir.join(LOCK_FILE))?
        .ok()
        .map(lockfile::Held::into_file))
}
