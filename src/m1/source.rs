//! Reading M1.md from disk: what its path may name, and how much of it is read.

use std::fs::Metadata;
use std::path::Path;

use super::error::{Error, Errors};
use super::store::StoreError;
use crate::named_file::{self, ReadError, Refused};

/// The most an M1.md may hold. A loop's file is a few KiB, and a goal as long as a book still
/// fits; the cap keeps a path that names something else (a log, a disk image) from being read
/// whole into memory by every command and at every decision of a runner.
pub(crate) const MAX_BYTES: u64 = 4 << 20;

/// The bytes of the M1.md at `path`, and its metadata.
///
/// # Errors
/// [`StoreError::DiskInvalid`], as one error about the whole file, when the path names no
/// regular file or one over [`MAX_BYTES`]: like a malformed text, it is the person's to fix,
/// and a runner waits for the fix without writing. [`StoreError::Io`] when it cannot be read
/// (when it is not there: that no loop is there).
pub(super) fn read(path: &Path) -> Result<(Vec<u8>, Metadata), StoreError> {
    named_file::read(path, MAX_BYTES).map_err(|e| match e {
        ReadError::Refused(r) => {
            let message = match r {
                Refused::NotRegular(_) => {
                    format!("{r}; M1.md must be a regular file (a symlink to one is fine)")
                }
                Refused::TooLarge { .. } => format!(
                    "{r} an M1.md may hold, so it is not read: make it smaller (a long text, old \
                     RESULTS)"
                ),
            };
            StoreError::DiskInvalid(Errors::new(vec![Error::whole_file(message)]).with_path(path))
        }
        // Said as every command says it, never as the raw error of the system call.
        ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            StoreError::Io(anyhow::anyhow!(
                "no loop at {}: start one with `loop start \"GOAL\"`",
                path.display()
            ))
        }
        ReadError::Io(e) => StoreError::Io(
            anyhow::Error::from(e).context(format!("while reading {}", path.display())),
        ),
    })
}

/// Reads and parses the M1.md at `path`, for a command that only looks at it.
///
/// # Errors
/// As [`read`], and [`StoreError::DiskInvalid`] for a malformed text.
pub(crate) fn load(path: &Path) -> Result<super::Document, StoreError> {
    let (bytes, _) = read(path)?;
    super::store::decode(path, &bytes).map_err(StoreError::DiskInvalid)
}
