//! The loops of this user: every M1.md a runner of this user opened, so that `loop list` and
//! `loop clean` find them from any directory, running or long finished. One absolute path a
//! line in `loops` under the per-user state directory ([`crate::dirs::user_state_dir`]),
//! written under `loops.lock`. A hint, as the runner registry is: a path whose file is gone is
//! passed over, and `loop clean` forgets it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The list and its lock; `None` without a per-user directory.
fn files() -> Option<(PathBuf, PathBuf)> {
    let dir = crate::dirs::user_state_dir().ok()?;
    Some((dir.join("loops"), dir.join("loops.lock")))
}

fn read(list: &Path) -> Vec<PathBuf> {
    let mut seen = Vec::new();
    for line in std::fs::read_to_string(list).unwrap_or_default().lines() {
        let p = PathBuf::from(line.trim());
        if p.is_absolute() && !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen
}

/// Notes the loop whose state file is `m1` (once). Best-effort: a loop that cannot be noted
/// runs all the same; `loop list` then finds it while its runner runs, or from its project.
pub(crate) fn remember(m1: &Path) {
    let Some((list, lock)) = files() else { return };
    let Ok(file) = std::path::absolute(m1) else {
        return;
    };
    if let Some(dir) = list.parent()
        && std::fs::create_dir_all(dir).is_err()
    {
        return;
    }
    let Ok(_held) = crate::lockfile::exclusive(&lock) else {
        return;
    };
    if read(&list).contains(&file) {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&list)
    {
        let _ = writeln!(f, "{}", file.display());
    }
}

/// Every loop noted, oldest first.
#[must_use]
pub(crate) fn all() -> Vec<PathBuf> {
    files().map(|(list, _)| read(&list)).unwrap_or_default()
}

/// Forgets the loops of `gone` (their state files are no more).
///
/// # Errors
/// When the list cannot be rewritten.
pub(crate) fn forget(gone: &[PathBuf]) -> anyhow::Result<()> {
    let Some((list, lock)) = files() else {
        return Ok(());
    };
    if gone.is_empty() || !list.exists() {
        return Ok(());
    }
    let _held = crate::lockfile::exclusive(&lock)?;
    let kept: Vec<String> = read(&list)
        .into_iter()
        .filter(|p| !gone.contains(p))
        .map(|p| format!("{}\n", p.display()))
        .collect();
    let mut f = atomic_write_file::AtomicWriteFile::open(&list)?;
    f.write_all(kept.concat().as_bytes())?;
    f.commit()?;
    Ok(())
}
