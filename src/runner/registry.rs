//! The runners of this user, so that `loop stop` can wait for every loop it stops, not only
//! the one of `--file`.
//!
//! A runner that takes its lock writes `runners/<pid>.json` under the per-user state
//! directory ([`crate::dirs::user_state_dir`]): its pid, its M1.md and the stop file it obeys.
//! It removes the entry when it lets go of the lock. An entry whose M1.md lock is no longer
//! held by that pid (a runner that was killed) is stale, and whoever reads it removes it. The
//! registry is only a hint for waiting; the runner lock stays the truth about who runs a loop.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One registered runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub pid: u32,
    /// The loop's M1.md, absolute.
    pub file: PathBuf,
    /// The global stop file the runner obeys (its `LOOP_STOP_FILE`), absolute.
    pub stop_file: PathBuf,
}

impl Entry {
    /// Whether the runner still holds its loop's lock.
    #[must_use]
    pub(crate) fn is_live(&self) -> bool {
        crate::runner::lock::holder(&self.file) == Some(self.pid)
    }
}

/// A runner's entry; dropping it removes the entry.
#[derive(Debug)]
pub(crate) struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn dir() -> Option<PathBuf> {
    crate::dirs::user_state_dir()
        .ok()
        .map(|d| d.join("runners"))
}

/// Registers this process as the runner of `m1`. Best-effort: `None` when there is no
/// per-user directory or it cannot be written (then `loop stop` waits for it only when it is
/// the `--file` loop).
#[must_use]
pub(crate) fn register(m1: &Path) -> Option<Registration> {
    let dir = dir()?;
    std::fs::create_dir_all(&dir).ok()?;
    let entry = Entry {
        pid: std::process::id(),
        file: std::path::absolute(m1).ok()?,
        stop_file: std::path::absolute(crate::runner::stopfile::global()).ok()?,
    };
    let path = dir.join(format!("{}.json", entry.pid));
    let tmp = dir.join(format!("{}.json.tmp", entry.pid));
    std::fs::write(&tmp, serde_json::to_vec(&entry).ok()?).ok()?;
    std::fs::rename(&tmp, &path).ok()?;
    Some(Registration { path })
}

/// The registered runners that still run; stale entries are removed on the way.
#[must_use]
pub(crate) fn live() -> Vec<Entry> {
    let Some(dir) = dir() else {
        return Vec::new();
    };
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in read.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(entry) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Entry>(&b).ok())
        else {
            continue;
        };
        if entry.is_live() {
            out.push(entry);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}
