//! Reading a file that a person named (`--file`, `--plan`): only a regular file, and only up to
//! a cap. A path can name anything: a FIFO holds a reader until someone writes to it (for ever,
//! for a `loop status`), and a device such as /dev/zero never ends, so a plain read of either
//! hangs or takes all the memory there is. A symlink to a regular file is a regular file here.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file is not read: said to the person, who can change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not a regular file: what it is instead (`a FIFO (named pipe)`, `a directory`, …).
    NotRegular(&'static str),
    /// More than `limit` bytes: `len` of them, or at least that many.
    TooLarge { len: u64, limit: u64 },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NotRegular(kind) => write!(f, "not a regular file but {kind}"),
            Refused::TooLarge { len, limit } => {
                write!(f, "{len} bytes, more than the {}", size(*limit))
            }
        }
    }
}

/// What [`open_beneath`] says of a link it met on its path ([`Refused::NotRegular`]).
pub(crate) const LINK: &str = "a symbolic link";

/// `4 MiB`, or the bytes when that is not a whole number of MiB.
#[must_use]
pub(crate) fn size(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A file that cannot be read: refused, or an I/O error (missing, no permission, …).
#[derive(Debug)]
pub(crate) enum ReadError {
    Refused(Refused),
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Refused(r) => r.fmt(f),
            ReadError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// The bytes of the regular file at `path` (at most `limit` of them), and its metadata, both
/// of the one file opened.
///
/// # Errors
/// [`ReadError::Refused`] for anything but a regular file, or one over `limit` bytes;
/// [`ReadError::Io`] when it cannot be read.
pub(crate) fn read(path: &Path, limit: u64) -> Result<(Vec<u8>, Metadata), ReadError> {
    let (file, meta) = open(path, limit)?;
    Ok((read_open(&file, &meta, limit)?, meta))
}

/// The regular file at `path` (at most `limit` bytes long), opened for reading, and its
/// metadata: for a caller that does something with the open file before it reads it.
///
/// # Errors
/// As [`read`].
pub(crate) fn open(path: &Path, limit: u64) -> Result<(File, Metadata), ReadError> {
    // Looked at before it is opened: opening a device may already do something.
    accept(&std::fs::metadata(path)?, limit)?;
    // And opened without waiting, should a FIFO have taken the path's place since.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    accept(&meta, limit)?;
    Ok((file, meta))
}

/// The regular file `rel` beneath the directory `dir`, opened for reading without following a
/// link at any step of `rel`, and its metadata: for a file in a place a run of the agent, a
/// reviewer or VERIFY may write (a handoff note, a task's hand-back, the work tree), where a
/// link could name anything of the person's. `dir` itself is the loop's own and is trusted.
///
/// # Errors
/// [`ReadError::Refused`] for anything but a regular file (a link is `a symbolic link`) or
/// one over `limit` bytes; [`ReadError::Io`] when it cannot be opened, for a `rel` that is
/// absolute or climbs out with `..` too.
pub(crate) fn open_beneath(
    dir: &Path,
    rel: &Path,
    limit: u64,
) -> Result<(File, Metadata), ReadError> {
    use std::os::fd::AsFd;

    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    let escapes = || {
        ReadError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a path beneath {}", rel.display(), dir.display()),
        ))
    };
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            std::path::Component::Normal(n) => Ok(n),
            _ => Err(escapes()),
        })
        .collect::<Result<_, _>>()?;
    let (last, parents) = parts.split_last().ok_or_else(escapes)?;
    let nofollow = OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let mut at: std::os::fd::OwnedFd = File::open(dir)?.into();
    for p in parents {
        at = openat(
            at.as_fd(),
            *p,
            nofollow | OFlag::O_DIRECTORY | OFlag::O_RDONLY,
            Mode::empty(),
        )
        .map_err(|e| link_said(e, at.as_fd(), p))?;
    }
    let file: File = openat(
        at.as_fd(),
        *last,
        nofollow | OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| link_said(e, at.as_fd(), last))?
    .into();
    let meta = file.metadata()?;
    accept(&meta, limit)?;
    Ok((file, meta))
}

/// [`open_beneath`], read: the bytes of the regular file `rel` beneath `dir`, at most `limit`.
///
/// # Errors
/// As [`open_beneath`].
pub(crate) fn read_beneath(dir: &Path, rel: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_beneath(dir, rel, limit)?;
    read_open(&file, &meta, limit)
}

/// An error of opening `name` in the directory `at` without following links: a link found
/// there is refused as such.
fn link_said(
    e: nix::errno::Errno,
    at: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
) -> ReadError {
    use nix::sys::stat::{SFlag, fstatat};
    // `O_NOFOLLOW` on a link: ELOOP; with `O_DIRECTORY` too, ENOTDIR.
    let is_link = || {
        fstatat(at, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
    };
    if matches!(e, nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR) && is_link() {
        return ReadError::Refused(Refused::NotRegular(LINK));
    }
    ReadError::Io(io::Error::from(e))
}

/// The bytes of a file [`open`] opened, from its start, at most `limit` of them. `meta` is
/// what [`open`] said of it: its length then sizes the buffer (the file may have changed
/// since; it is read to its end all the same).
///
/// # Errors
/// [`ReadError::Refused`] when it grew over `limit`; [`ReadError::Io`] when it cannot be read.
pub(crate) fn read_open(
    mut file: &File,
    meta: &Metadata,
    limit: u64,
) -> Result<Vec<u8>, ReadError> {
    use std::io::Seek;
    file.rewind()?;
    // Room for what it held, so the whole of it comes in one read (a `Take` gives
    // `read_to_end` no size to go by: it would read 32 bytes, then twice as many, and so on).
    let held = meta.len().min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(held).unwrap_or(0).saturating_add(1));
    file.take(limit + 1).read_to_end(&mut bytes)?;
    // It grew while it was read.
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > limit {
        return Err(ReadError::Refused(Refused::TooLarge { len: read, limit }));
    }
    Ok(bytes)
}

/// What `meta` describes when it is not a regular file (`a directory`, `a FIFO (named
/// pipe)`, …); `None` for a regular file.
#[must_use]
pub(crate) fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("something else")
    }
}

fn accept(meta: &Metadata, limit: u64) -> Result<(), ReadError> {
    if let Some(kind) = not_regular(meta) {
        return Err(ReadError::Refused(Refused::NotRegular(kind)));
    }
    if meta.len() > limit {
        return Err(ReadError::Refused(Refused::TooLarge {
            len: meta.len(),
            limit,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_whole_and_a_larger_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(read(&p, 5).unwrap().0, b"12345");
        let err = read(&p, 4).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::Refused(Refused::TooLarge { len: 5, limit: 4 })
            ),
            "{err:?}"
        );
        assert_eq!(
            Refused::TooLarge {
                len: 5 << 20,
                limit: 4 << 20
            }
            .to_string(),
            "5242880 bytes, more than the 4 MiB"
        );
    }

    #[test]
    fn a_file_beneath_a_directory_is_read_only_where_no_step_of_its_path_is_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        let inside = dir.path().join("inside");
        std::fs::create_dir_all(inside.join("sub")).unwrap();
        std::fs::write(inside.join("sub/note.md"), "mine").unwrap();
        assert_eq!(
            read_beneath(&inside, Path::new("sub/note.md"), 100).unwrap(),
            b"mine"
        );
        std::os::unix::fs::symlink(&secret, inside.join("link.md")).unwrap();
        std::os::unix::fs::symlink(dir.path(), inside.join("up")).unwrap();
        for rel in ["link.md", "up/secret", "../secret", "/etc/hostname"] {
            match read_beneath(&inside, Path::new(rel), 100) {
                Err(ReadError::Refused(Refused::NotRegular(LINK)))
                    if !rel.contains("..") && !rel.starts_with('/') => {}
                Err(ReadError::Io(_)) if rel.contains("..") || rel.starts_with('/') => {}
                other => panic!("{rel}: {other:?}"),
            }
        }
        let fifo = inside.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            read_beneath(&inside, Path::new("fifo"), 100),
            Err(ReadError::Refused(Refused::NotRegular(
                "a FIFO (named pipe)"
            )))
        ));
    }

    #[test]
    fn what_is_not_a_regular_file_says_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO (named pipe)"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ] {
            match read(path, 1 << 20) {
                Err(ReadError::Refused(Refused::NotRegular(k))) => assert_eq!(k, kind),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        assert!(matches!(
            read(&dir.path().join("missing"), 1),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound
        ));
    }
}
