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

use super::source::MAX_BYTES;
use crate::lease::{self, Lease, Probe};
use crate::named_file::{self, ReadError};

/// Whether a swap here is an exchange that hands back the bytes it displaced (where the
/// file system supports it: otherwise [`Swapped::Unknown`]).
pub(super) const EXCHANGES: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// What a guarded swap ([`Staged::swap_guarded`]) did.
#[derive(Debug)]
pub(super) enum Guarded {
    /// The staged file is in place of one that held the expected bytes, and no one was
    /// writing into that file, nor came to while the swap happened. It is kept open, should a
    /// writer that found it just before the swap still open it.
    Swapped(Displaced),
    /// Nothing was swapped: the file holds other bytes, read whole (`Some`), or someone writes
    /// it or came to write it while it was swapped (`None`; the swap was undone so that their
    /// save lands in the file at the path): read it again once they are done.
    Changed(Option<Vec<u8>>),
    /// Nothing was swapped: the kernel cannot say who writes the file here; the caller swaps
    /// as [`Staged::swap`] does.
    Unguarded(Staged),
}

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

/// Writes `bytes` to a new temporary file beside `target` (same directory, so the swap is one
/// atomic step), with the target's permissions when it exists, and fsyncs it.
pub(super) fn stage(target: &Path, bytes: &[u8]) -> io::Result<Staged> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "M1.md".into(), |n| n.to_string_lossy());
    let tmp = target.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
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

impl Staged {
    /// Puts the staged file at the target only if the file there holds `expected` and no one
    /// writes it, reading and swapping under a read lease on it ([`crate::lease`]): a save in
    /// place can neither be under way nor begin meanwhile, so no save is caught half written,
    /// and none lands in the file the swap displaces. A writer that came while the lease was
    /// held waits in its `open`, holding the old file: the swap is then undone, so that its save
    /// goes where it belongs.
    pub(super) fn swap_guarded(mut self, expected: &[u8]) -> io::Result<Guarded> {
        if !EXCHANGES {
            return Ok(Guarded::Unguarded(self));
        }
        // Opened as every read of M1.md is: without waiting (a FIFO may have taken its place),
        // and never more than an M1.md may hold; anything else, the next careful read reports.
        let old = match named_file::open(&self.target, MAX_BYTES) {
            Ok((file, _)) => file,
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Guarded::Unguarded(self));
            }
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Refused(_)) => return Ok(Guarded::Changed(None)),
        };
        let old_lease = match lease::probe(&old) {
            Probe::Free(l) => l,
            Probe::Writing => return Ok(Guarded::Changed(None)),
            Probe::Unknown => return Ok(Guarded::Unguarded(self)),
        };
        let now = match named_file::read_open(&old, MAX_BYTES) {
            Ok(bytes) => bytes,
            Err(ReadError::Io(e)) => return Err(e),
            Err(ReadError::Refused(_)) => return Ok(Guarded::Changed(None)),
        };
        if now != expected {
            return Ok(Guarded::Changed(Some(now)));
        }
        // Ours too: a writer who opens the target once ours is there waits as well, so that
        // undoing the swap never takes their save away.
        let new = File::open(&self.tmp)?;
        let Probe::Free(new_lease) = lease::probe(&new) else {
            drop(old_lease);
            return Ok(Guarded::Unguarded(self));
        };
        if old_lease.contended() {
            return Ok(Guarded::Changed(None));
        }
        if !exchange(&self.tmp, &self.target)? {
            drop((old_lease, new_lease));
            return Ok(Guarded::Unguarded(self));
        }
        // The temporary path holds the old file now: whatever fails, it is never removed.
        self.live = false;
        if old_lease.contended() && !new_lease.contended() && self.undo(&new_lease)? {
            return Ok(Guarded::Changed(None));
        }
        drop((old_lease, new_lease));
        // One who found the old file just before the swap and opened it just after: undone too,
        // unless someone writes ours by now.
        if matches!(lease::probe(&old), Probe::Writing)
            && let Probe::Free(again) = lease::probe(&new)
            && self.undo(&again)?
        {
            return Ok(Guarded::Changed(None));
        }
        let ino = old.metadata()?.ino();
        let path = crate::layout::Layout::displaced(&self.target);
        std::fs::rename(&self.tmp, &path)?;
        sync_dir(&self.target)?;
        Ok(Guarded::Swapped(Displaced {
            file: old,
            path,
            ino,
        }))
    }

    /// Puts the old file back at the target, ours back at the temporary path; unless a writer
    /// came to ours in that instant (it waits on `ours`, the lease on it, and would write into
    /// a file that is about to be removed): then ours goes back at the target, and the old
    /// file is displaced after all (watched, as any). Whether the swap was undone.
    fn undo(&mut self, ours: &Lease<'_>) -> io::Result<bool> {
        exchange(&self.tmp, &self.target)?;
        if !ours.contended() {
            self.live = true;
            return Ok(true);
        }
        exchange(&self.tmp, &self.target)?;
        Ok(false)
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
