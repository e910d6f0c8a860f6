//! The swap under read leases ([`crate::lease`]), where the kernel can say who writes the file:
//! the file at the target is read, compared and replaced while no process holds it open for
//! writing and none can begin to, so no save in place is caught half written, and none lands
//! in the file the swap displaces.
//!
//! A writer who comes while the lease is held waits in its `open`, holding the old file: the
//! swap is then undone, so that its save goes where it belongs. A save by rename is no writer
//! of the leased file: one that lands between the read and the swap is what the exchange
//! displaces instead, and the swap is undone for it too.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::super::source::MAX_BYTES;
use super::{Displaced, EXCHANGES, Staged, exchange, sync_dir};
use crate::lease::{self, Lease, Probe};
use crate::named_file::{self, ReadError};

/// What a guarded swap ([`Staged::swap_guarded`], [`Staged::swap_leased`]) did.
#[derive(Debug)]
pub(in crate::m1) enum Guarded {
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

/// The file at a target, read under a read lease on it: no process writes it, and none can
/// begin to until the lease is let go (when this is dropped, or swapped with
/// [`Staged::swap_leased`]).
#[derive(Debug)]
pub(in crate::m1) struct Leased {
    file: File,
    lease: Lease,
    bytes: Vec<u8>,
}

impl Leased {
    /// The file's bytes, read under the lease: whole.
    pub(in crate::m1) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// What [`lease`] found at a target.
#[derive(Debug)]
pub(in crate::m1) enum Taken {
    /// Read under a lease.
    Held(Leased),
    /// A process holds it open for writing: a careful read waits for it.
    Writing,
    /// It is nothing an M1.md can be (not a regular file, too large): a careful read says so.
    Refused,
    /// The kernel cannot say who writes it here, or there is no file, or no exchange to swap
    /// with.
    Unknown,
}

/// The file at `target`, read under a read lease (see [`Taken`]). Opened as every read of
/// M1.md is: without waiting (a FIFO may have taken its place), and never more than an M1.md
/// may hold.
pub(in crate::m1) fn lease(target: &Path) -> io::Result<Taken> {
    if !EXCHANGES {
        return Ok(Taken::Unknown);
    }
    let (file, meta) = match named_file::open(target, MAX_BYTES) {
        Ok(opened) => opened,
        Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(Taken::Unknown),
        Err(ReadError::Io(e)) => return Err(e),
        Err(ReadError::Refused(_)) => return Ok(Taken::Refused),
    };
    let lease = match lease::probe(&file) {
        Probe::Free(l) => l,
        Probe::Writing => return Ok(Taken::Writing),
        Probe::Unknown => return Ok(Taken::Unknown),
    };
    match named_file::read_open(&file, &meta, MAX_BYTES) {
        Ok(bytes) => Ok(Taken::Held(Leased { file, lease, bytes })),
        Err(ReadError::Io(e)) => Err(e),
        Err(ReadError::Refused(_)) => Ok(Taken::Refused),
    }
}

impl Staged {
    /// Puts the staged file at the target only if the file there holds `expected` and no one
    /// writes it (see the module's comment).
    pub(in crate::m1) fn swap_guarded(self, expected: &[u8]) -> io::Result<Guarded> {
        match lease(&self.target)? {
            Taken::Held(held) if held.bytes != expected => Ok(Guarded::Changed(Some(held.bytes))),
            Taken::Held(held) => self.swap_leased(held),
            Taken::Writing | Taken::Refused => Ok(Guarded::Changed(None)),
            Taken::Unknown => Ok(Guarded::Unguarded(self)),
        }
    }

    /// Puts the staged file in place of `old`, the file at the target read under its lease
    /// (what is staged was made from it), and lets the lease go (see the module's comment).
    pub(in crate::m1) fn swap_leased(mut self, old: Leased) -> io::Result<Guarded> {
        let Leased {
            file: old,
            lease: old_lease,
            ..
        } = old;
        // Ours too: a writer who opens the target once ours is there waits as well, so that
        // undoing the swap never takes their save away.
        let new = File::open(&self.tmp)?;
        let Probe::Free(new_lease) = lease::probe(&new) else {
            return Ok(Guarded::Unguarded(self));
        };
        if old_lease.contended() {
            return Ok(Guarded::Changed(None));
        }
        if !exchange(&self.tmp, &self.target)? {
            return Ok(Guarded::Unguarded(self));
        }
        // The temporary path holds the old file now: whatever fails, it is never removed.
        self.live = false;
        // What the exchange displaced is the leased file, unless a save by rename came between.
        let ours_displaced_old = same_file(&self.tmp, &old)?;
        if (!ours_displaced_old || old_lease.contended())
            && !new_lease.contended()
            && self.undo(&new_lease)?
        {
            return Ok(Guarded::Changed(None));
        }
        drop((old_lease, new_lease));
        // One who found the old file just before the swap and opened it just after: undone too,
        // unless someone writes ours by now.
        if ours_displaced_old
            && matches!(lease::probe(&old), Probe::Writing)
            && let Probe::Free(again) = lease::probe(&new)
            && self.undo(&again)?
        {
            return Ok(Guarded::Changed(None));
        }
        // Kept open (a save by rename that a writer came to ours meanwhile left displaced is
        // watched as any displaced file: it is found as a late save).
        let file = if ours_displaced_old {
            old
        } else {
            File::open(&self.tmp)?
        };
        let ino = file.metadata()?.ino();
        let path = crate::layout::Layout::displaced(&self.target);
        std::fs::rename(&self.tmp, &path)?;
        sync_dir(&self.target)?;
        Ok(Guarded::Swapped(Displaced { file, path, ino }))
    }

    /// Puts the displaced file back at the target, ours back at the temporary path; unless a
    /// writer came to ours in that instant (it waits on `ours`, the lease on it, and would
    /// write into a file that is about to be removed): then ours goes back at the target, and
    /// the old file is displaced after all (watched, as any). Whether the swap was undone.
    fn undo(&mut self, ours: &Lease) -> io::Result<bool> {
        exchange(&self.tmp, &self.target)?;
        if !ours.contended() {
            self.live = true;
            return Ok(true);
        }
        exchange(&self.tmp, &self.target)?;
        Ok(false)
    }
}

/// Whether `path` names the file `file` is open on.
fn same_file(path: &Path, file: &File) -> io::Result<bool> {
    let (at, open) = (std::fs::symlink_metadata(path)?, file.metadata()?);
    Ok(at.dev() == open.dev() && at.ino() == open.ino())
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::super::stage;
    use super::*;

    fn seeded() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("M1.md");
        std::fs::write(&f, "STATUS: IDLE\n").unwrap();
        (dir, f)
    }

    #[test]
    fn a_save_by_rename_between_the_leased_read_and_the_swap_is_not_displaced() {
        let (_dir, f) = seeded();
        let Taken::Held(held) = lease(&f).unwrap() else {
            panic!("no lease on a file nobody writes");
        };
        let staged = stage(&f, b"STATUS: RUNNING\n").unwrap();
        // Renamed in: no writer of the leased file, so nothing waits for the lease.
        let tmp = f.with_extension("md.swp");
        std::fs::write(&tmp, "STATUS: DONE\n").unwrap();
        std::fs::rename(&tmp, &f).unwrap();
        assert!(matches!(
            staged.swap_leased(held).unwrap(),
            Guarded::Changed(None)
        ));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "STATUS: DONE\n");
        // Nothing left beside it: the staged file is gone, nothing was displaced.
        let names: Vec<_> = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("M1.md")]);
    }

    #[test]
    fn a_writer_who_comes_while_the_file_is_held_writes_into_the_file_at_the_path() {
        use std::io::Write;
        let (_dir, f) = seeded();
        let Taken::Held(held) = lease(&f).unwrap() else {
            panic!("no lease on a file nobody writes");
        };
        let staged = stage(&f, b"STATUS: RUNNING\n").unwrap();
        let p = f.clone();
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
            w.write_all(b"# theirs\n").unwrap();
        });
        // The writer waits in its open on the held file.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !held.lease.contended() {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never came"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(matches!(
            staged.swap_leased(held).unwrap(),
            Guarded::Changed(None)
        ));
        writer.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "STATUS: IDLE\n# theirs\n"
        );
    }
}
