//! Atomic replacement of a file that also returns what it replaced.
//!
//! The new bytes go to a temporary file beside the target, are fsynced, and are then put in
//! place in one step; the directory is fsynced after. On Linux the step is
//! `renameat2(RENAME_EXCHANGE)`: the old file ends up at the temporary path, so the caller
//! sees exactly the bytes it displaced — including a hand edit saved a moment before — and
//! can merge them instead of losing them. Elsewhere (or on a file system without exchange) it
//! is a plain rename, and a save in the instant before it is not seen.
//!
//! An editor that saves in place may have opened the file just before the exchange and write
//! into it just after: its save lands in the displaced file. So the displaced file is not
//! deleted at once: it stays open, under a name beside the target that the runner's watch
//! sees ([`crate::layout::Layout::displaced`]), for the store to notice a write that arrives late.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::lease::{self, Probe};

mod guarded;

pub(super) use guarded::{Guarded, Taken, lease};

/// Whether a swap here is an exchange that hands back the bytes it displaced (where the
/// file system supports it: otherwise [`Swapped::Unknown`]).
pub(super) const EXCHANGES: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// What a swap replaced.
#[derive(Debug)]
pub(super) enum Swapped {
    /// The exact bytes that were at the target at the instant of the swap, and the file that
    /// held them.
    Replaced(Vec<u8>, Displaced),
    /// There was no file, or the platform cannot say what was replaced.
    Unknown,
}

/// The file a swap displaced, still open. Dropping it removes its name, unless a later swap
/// gave the name to another file.
#[derive(Debug)]
pub(super) struct Displaced {
    file: File,
    path: PathBuf,
    ino: u64,
}

impl Displaced {
    /// The whole file as it is now.
    pub(super) fn read(&mut self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.file.rewind()?;
        self.file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The file's inode number.
    pub(super) fn ino(&self) -> u64 {
        self.ino
    }

    /// Whether a process holds it open for writing (`None`: the kernel cannot say here).
    pub(super) fn writing(&self) -> Option<bool> {
        match lease::probe(&self.file) {
            Probe::Free(_) => Some(false),
            Probe::Writing => Some(true),
            Probe::Unknown => None,
        }
    }

    /// Its bytes once its writers are done: read under a lease where the kernel can say (no
    /// path names the file but one only the runner knows, so no new writer can come), waiting
    /// for a writer at most `patience`; elsewhere, or for a writer that stays, once they hold
    /// still and look whole (see [`settled`]), starting from `last`.
    pub(super) fn settled(
        &mut self,
        last: Vec<u8>,
        reference: &[u8],
        patience: Duration,
    ) -> io::Result<Vec<u8>> {
        let began = std::time::Instant::now();
        loop {
            match lease::probe(&self.file) {
                Probe::Free(_held) => return read_all(&self.file),
                Probe::Writing if began.elapsed() < patience => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Probe::Writing | Probe::Unknown => break,
            }
        }
        settled(|| self.read(), last, reference)
    }
}

impl Drop for Displaced {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A written, fsynced temporary file waiting to replace `target`. Dropping it removes it.
#[derive(Debug)]
pub(super) struct Staged {
    tmp: PathBuf,
    target: PathBuf,
    live: bool,
}

/// The name of this process's temporary copy of the file named `name`, written beside it and
/// renamed over it: `.M1.md.PID.N.tmp` for a write of the loop file ([`stage`], `N` counting
/// this process's writes), `.M1.md.versions.PID.tmp` for a rewrite of its journal.
/// [`temporary_writer`] reads the pid back.
pub(super) fn temporary_name(name: &str, n: Option<u64>) -> String {
    let pid = std::process::id();
    match n {
        Some(n) => format!(".{name}.{pid}.{n}.tmp"),
        None => format!(".{name}.{pid}.tmp"),
    }
}

/// The pid of the process that wrote `name`, when it is the name of a temporary copy of a loop
/// file or of its journal ([`temporary_name`]): what is left of a writer killed before it
/// renamed it.
#[must_use]
pub(crate) fn temporary_writer(name: &str) -> Option<u32> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let number = |p: &str| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u32>().ok())
            .flatten()
    };
    let loop_file = |base: &str| {
        Path::new(base)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"))
    };
    let parts: Vec<&str> = inner.rsplitn(3, '.').collect();
    match parts[..] {
        // A write of the loop file: `.M1.md.PID.N.tmp`.
        [n, pid, base] if number(n).is_some() && number(pid).is_some() && loop_file(base) => {
            number(pid)
        }
        // A rewrite of its journal: `.M1.md.versions.PID.tmp`.
        [pid, "versions", base] if loop_file(base) => number(pid),
        _ => None,
    }
}

/// Writes `bytes` to a new temporary file beside `target` (same directory, so the swap is one
/// atomic step), with the target's permissions when it exists, and fsyncs it.
pub(super) fn stage(target: &Path, bytes: &[u8]) -> io::Result<Staged> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "M1.md".into(), |n| n.to_string_lossy());
    let tmp = target.with_file_name(temporary_name(
        &name,
        Some(COUNTER.fetch_add(1, Ordering::Relaxed)),
    ));
    let mut staged = Staged {
        tmp,
        target: target.to_path_buf(),
        live: false,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&staged.tmp)?;
    staged.live = true;
    if let Ok(meta) = std::fs::metadata(target) {
        file.set_permissions(meta.permissions())?;
    }
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(staged)
}

impl Staged {
    /// Puts the staged file at the target and fsyncs the directory. `expected`: what the
    /// caller believes it replaces; when the displaced bytes differ, or someone holds the
    /// displaced file open for writing, someone saved just now, perhaps in place and not yet
    /// done (their writes go on into the displaced file): it is read once they are done (a
    /// writer waited for at most `patience`; see [`Displaced::settled`]), so that what is
    /// handed back is their whole text.
    pub(super) fn swap(mut self, expected: &[u8], patience: Duration) -> io::Result<Swapped> {
        let swapped = if exchange(&self.tmp, &self.target)? {
            // The old file now sits at the temporary path: kept open, and under the name the
            // runner watches, for a save still being written into it (and never removed, should
            // anything below fail).
            self.live = false;
            let file = File::open(&self.tmp)?;
            let ino = file.metadata()?.ino();
            let path = crate::layout::Layout::displaced(&self.target);
            std::fs::rename(&self.tmp, &path)?;
            let mut displaced = Displaced { file, path, ino };
            let mut old = displaced.read()?;
            if old != expected || (!patience.is_zero() && displaced.writing() == Some(true)) {
                old = displaced.settled(old, expected, patience)?;
            }
            Swapped::Replaced(old, displaced)
        } else {
            std::fs::rename(&self.tmp, &self.target)?;
            Swapped::Unknown
        };
        self.live = false;
        sync_dir(&self.target)?;
        Ok(swapped)
    }
}

/// The whole file, from its start.
fn read_all(mut file: &File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.rewind()?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads again every few milliseconds until the bytes hold still and look whole: a save in
/// place caught halfway is empty, or stops mid-line, or is the beginning of the text it
/// replaces (`reference`; an editor's text mostly begins as the one it loaded). Such a text
/// is waited on for up to 5 s however still it seems: on a busy machine a writer can be held
/// up between two chunks for longer than any pause worth waiting out.
fn settled(
    mut read: impl FnMut() -> io::Result<Vec<u8>>,
    mut bytes: Vec<u8>,
    reference: &[u8],
) -> io::Result<Vec<u8>> {
    use std::time::{Duration, Instant};
    let begun = Instant::now();
    let mut still_since = Instant::now();
    while begun.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        let again = read()?;
        if again != bytes {
            bytes = again;
            still_since = Instant::now();
            continue;
        }
        let still = still_since.elapsed();
        let ends_a_line = bytes.ends_with(b"\n") || !reference.ends_with(b"\n");
        let cut_copy = bytes.len() < reference.len() && reference.starts_with(&bytes);
        if ends_a_line && !cut_copy && still >= Duration::from_millis(10) {
            break;
        }
    }
    Ok(bytes)
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.live {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Exchanges the two paths atomically; `false` when that is not possible here (no target,
/// or no support), so the caller renames instead.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    match renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE) {
        Ok(()) => Ok(true),
        Err(Errno::ENOENT | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Fsyncs the directory holding `path`, so the rename itself survives a crash.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_of_a_temporary_copy_is_read_back_from_its_name_and_nothing_else_is_one() {
        let pid = std::process::id();
        assert_eq!(
            temporary_writer(&temporary_name("M1.md", Some(7))),
            Some(pid)
        );
        assert_eq!(
            temporary_writer(&temporary_name("plan.md", Some(0))),
            Some(pid)
        );
        assert_eq!(
            temporary_writer(&temporary_name("M1.md.versions", None)),
            Some(pid)
        );
        for other in [
            ".M1.md.swp",
            ".M1.md.12.tmp",
            ".task_1.json.12.tmp",
            ".M1.md.versions.x.tmp",
            ".notes.txt.12.3.tmp",
            "M1.md.12.3.tmp",
        ] {
            assert_eq!(temporary_writer(other), None, "{other}");
        }
    }

    #[test]
    fn swap_returns_the_replaced_bytes_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("M1.md");
        std::fs::write(&f, "old").unwrap();
        let s = stage(&f, b"new").unwrap();
        std::fs::write(&f, "hand edit\n").unwrap();
        match s.swap(b"old", Duration::ZERO).unwrap() {
            Swapped::Replaced(old, displaced) => {
                assert_eq!(old, b"hand edit\n");
                assert!(crate::layout::Layout::displaced(&f).exists());
                drop(displaced);
            }
            Swapped::Unknown => {} // platforms without exchange
        }
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_dropped_stage_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("M1.md");
        drop(stage(&f, b"x").unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let s = stage(&f, b"first").unwrap();
        assert!(matches!(
            s.swap(b"", Duration::ZERO).unwrap(),
            Swapped::Unknown
        ));
        assert_eq!(std::fs::read(&f).unwrap(), b"first");
    }
}
