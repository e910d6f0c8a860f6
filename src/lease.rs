//! Whether a file is being written, asked of the kernel.
//!
//! A save in place (open, truncate, write) shows a reader an empty or cut text until its writer
//! is done, and no stillness of the file tells a writer held up between two chunks from one
//! that has finished. The kernel knows: a read lease (`fcntl(F_SETLEASE, F_RDLCK)`, Linux) is
//! granted only while no process holds the file open for writing, whoever it belongs to, and
//! while it is held, a process that opens the file for writing waits in its `open` until the
//! lease is let go (and the lease shows that someone waits). So a text read under a lease is
//! whole: no save was under way, and none could begin. Leases are held for microseconds (a
//! read, a rename), or, by a commit that keeps losing to saves, for the milliseconds of one
//! write of the file; a writer waits that long at most.
//!
//! Where the kernel cannot say (another system, a file system without leases, a file of
//! another owner without `CAP_LEASE`, leases turned off in `fs.leases-enable`), [`probe`] says
//! [`Probe::Unknown`] and the caller judges by other means.

use std::fs::{File, Metadata};

/// What the kernel says of a file's writers.
#[derive(Debug)]
#[cfg_attr(
    not(target_os = "linux"),
    expect(dead_code, reason = "elsewhere the kernel cannot say: only Unknown")
)]
pub(crate) enum Probe {
    /// No process holds the file open for writing, and none can open it so while the lease
    /// is held (it is let go when dropped).
    Free(Lease),
    /// A process holds the file open for writing: a save may be under way.
    Writing,
    /// The kernel cannot say here.
    Unknown,
}

/// A read lease on an open file, let go when dropped. It holds a descriptor of its own of the
/// open file (a lease belongs to the open file, not to one descriptor), so that it can be kept
/// beside the file it leases.
#[derive(Debug)]
pub(crate) struct Lease {
    file: File,
}

/// Asks for a read lease on `file` (opened read-only).
#[must_use]
pub(crate) fn probe(file: &File) -> Probe {
    imp::probe(file)
}

impl Lease {
    /// Whether a process has come to write since the lease was granted: it waits in its
    /// `open` until the lease is let go, and then writes into this file (whatever name the
    /// file has by then).
    #[must_use]
    pub(crate) fn contended(&self) -> bool {
        imp::contended(&self.file)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        imp::release(&self.file);
    }
}

/// The processes that hold the file `meta` describes open for writing, as `pid N (name)`, read
/// from `/proc`: for a log line after a long wait (a walk over every process's open files costs
/// milliseconds). The open files of another user's processes cannot be read, nor named.
#[must_use]
pub(crate) fn writers(meta: &Metadata) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let pid = p.file_name();
        let pid = pid.to_string_lossy();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
                && writes(&p.path().join("fdinfo").join(fd.file_name()))
        });
        if holds {
            let name = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            out.push(format!("pid {pid} ({})", name.trim()));
        }
    }
    out
}

/// Whether the open file `/proc/PID/fdinfo/FD` describes was opened for writing.
fn writes(fdinfo: &std::path::Path) -> bool {
    let info = std::fs::read_to_string(fdinfo).unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        // O_ACCMODE: 1 O_WRONLY, 2 O_RDWR.
        .is_some_and(|flags| flags & 3 != 0)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::fs::File;
    use std::os::fd::AsRawFd;

    use nix::libc;

    use super::{Lease, Probe};

    /// `F_SETSIG` of `<fcntl.h>` (the same on every Linux architecture), which the `libc`
    /// crate leaves out.
    const F_SETSIG: libc::c_int = 10;

    pub(super) fn probe(file: &File) -> Probe {
        let fd = file.as_raw_fd();
        // A writer who comes while the lease is held makes the kernel signal the holder, SIGIO
        // by default, whose default action ends the process. SIGURG's is to ignore it.
        // SAFETY: fcntl on a descriptor `file` owns, with integer arguments only.
        if unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) } != 0 {
            return Probe::Unknown;
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
            if let Ok(file) = file.try_clone() {
                return Probe::Free(Lease { file });
            }
            release(file);
            return Probe::Unknown;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => Probe::Writing,
            _ => Probe::Unknown,
        }
    }

    pub(super) fn contended(file: &File) -> bool {
        // While a writer waits, the lease reads as what it is being broken to (F_UNLCK).
        // SAFETY: fcntl on a descriptor `file` owns.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE) != libc::F_RDLCK }
    }

    pub(super) fn release(file: &File) {
        // SAFETY: as above.
        unsafe {
            libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::fs::File;

    use super::Probe;

    pub(super) fn probe(_file: &File) -> Probe {
        Probe::Unknown
    }

    pub(super) fn contended(_file: &File) -> bool {
        false
    }

    pub(super) fn release(_file: &File) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_lease_is_refused_while_a_writer_holds_the_file_and_granted_once_it_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("M1.md");
        std::fs::write(&path, "STATUS: IDLE\n").unwrap();
        let reader = File::open(&path).unwrap();
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        assert!(matches!(probe(&reader), Probe::Writing));
        // (A child another test forks in this instant is listed too, until it execs.)
        let ours = format!(
            "pid {} ({})",
            std::process::id(),
            std::fs::read_to_string("/proc/self/comm").unwrap().trim()
        );
        let listed = writers(&reader.metadata().unwrap());
        assert!(listed.contains(&ours), "{listed:?}");
        writer.write_all(b"STATUS: DONE\n").unwrap();
        drop(writer);
        // Polled: such a child holds its copy of the writer until it execs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let lease = loop {
            if let Probe::Free(lease) = probe(&reader) {
                break lease;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no lease once the writer closed the file"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(!lease.contended());
    }

    /// A file nobody writes, `M1.md` in `dir`, opened for reading and leased through that
    /// descriptor: its path, the descriptor and the lease.
    fn leased(dir: &std::path::Path) -> (std::path::PathBuf, File, Lease) {
        let path = dir.join("M1.md");
        std::fs::write(&path, "STATUS: IDLE\n").unwrap();
        let reader = File::open(&path).unwrap();
        // A child another test forks while the write above has the file open holds a copy of
        // that descriptor until it execs, and a lease is refused meanwhile: tried again until
        // a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Probe::Free(lease) = probe(&reader) {
                return (path, reader, lease);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no lease on a file nobody writes"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A writer who comes to append to `path` while `lease` is held shows as waiting, has
    /// written nothing until the lease is let go, and writes once it is.
    fn a_late_writer_waits_for(path: &std::path::Path, lease: Lease) {
        let p = path.to_path_buf();
        let writer = std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
            f.write_all(b"# late\n").unwrap();
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !lease.contended() {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never showed"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Still waiting in its open: nothing written yet.
        assert_eq!(std::fs::read_to_string(path).unwrap(), "STATUS: IDLE\n");
        drop(lease);
        writer.join().unwrap();
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            "STATUS: IDLE\n# late\n"
        );
    }

    #[test]
    fn a_lease_kept_apart_from_the_descriptor_it_was_taken_through_still_holds_writers_off() {
        let dir = tempfile::tempdir().unwrap();
        let (path, reader, lease) = leased(dir.path());
        drop(reader);
        a_late_writer_waits_for(&path, lease);
    }

    #[test]
    fn a_writer_who_comes_while_the_lease_is_held_waits_for_it_and_shows() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _reader, lease) = leased(dir.path());
        a_late_writer_waits_for(&path, lease);
    }
}
