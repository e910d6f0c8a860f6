//! Reading M1.md from disk: what its path may name, how much of it is read, and a text only
//! once its writer is done.
//!
//! A save in place (open, truncate, write) shows a reader an empty or cut text until it is
//! done; taken as the person's, such a text loses the rest of their save (a commit merges onto
//! it). So a text is read under a read lease ([`crate::lease`]): granted only while no process
//! holds the file open for writing, and while it is held, none can begin to. A writer still at
//! work is waited for, a little at a time, for at most a bound: a process that keeps the file
//! open for writing for good never holds a reader up longer than that.

use std::fs::Metadata;
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::{Error, Errors};
use super::store::StoreError;
use crate::lease::{self, Probe};
use crate::named_file::{self, ReadError, Refused};

/// The most an M1.md may hold. A loop's file is a few KiB, and a goal as long as a book still
/// fits; the cap keeps a path that names something else (a log, a disk image) from being read
/// whole into memory by every command and at every decision of a runner.
pub(crate) const MAX_BYTES: u64 = 4 << 20;

/// How long a read waits for a writer to finish with the file: a save takes microseconds, a
/// few milliseconds on a busy machine; a file held open for writing longer than this is held
/// for good (a shell's `exec 3>>M1.md`), and its text is taken as it is.
pub(crate) const WRITER_PATIENCE: Duration = Duration::from_secs(1);

/// A wait this long names who holds the file (a walk over every process's open files).
const NAME_WRITERS_AFTER: Duration = Duration::from_millis(50);

/// Whether a text was read while no one was writing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Whole {
    /// Read under a lease: no save in place was under way, and none could begin.
    Yes,
    /// A writer held the file open for writing for the whole patience: what was there.
    WriterStayed,
    /// The kernel cannot say here: the caller judges by other means.
    Unknown,
}

/// A read that waited for a writer to finish with the file: said in the runner's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterWait {
    /// How long the read waited.
    pub took: Duration,
    /// Who held the file open for writing, as `pid N (name)`; looked up only for a wait of
    /// [`NAME_WRITERS_AFTER`] or more, and only processes whose open files can be read.
    pub writers: Vec<String>,
    /// The writer still held it when the patience ran out: its text was taken as it was.
    pub gave_up: bool,
}

/// A text as read by [`read_whole`].
#[derive(Debug)]
pub(super) struct Read {
    pub(super) bytes: Vec<u8>,
    pub(super) meta: Metadata,
    pub(super) whole: Whole,
    pub(super) waited: Option<WriterWait>,
}

/// The bytes of the M1.md at `path`, and its metadata.
///
/// # Errors
/// [`StoreError::DiskInvalid`], as one error about the whole file, when the path names no
/// regular file or one over [`MAX_BYTES`]: like a malformed text, it is the person's to fix,
/// and a runner waits for the fix without writing. [`StoreError::Io`] when it cannot be read
/// (when it is not there: that no loop is there).
pub(super) fn read(path: &Path) -> Result<(Vec<u8>, Metadata), StoreError> {
    named_file::read(path, MAX_BYTES).map_err(|e| refused(path, e))
}

/// The text at `path` once no process writes it (see the module's comment), waiting for a
/// writer at most `patience` (given the file's metadata: a file known to be held for good is
/// not waited for again).
///
/// # Errors
/// As [`read`].
pub(super) fn read_whole(
    path: &Path,
    patience: impl Fn(&Metadata) -> Duration,
) -> Result<Read, StoreError> {
    let began = Instant::now();
    let mut pause = Duration::from_micros(100);
    let mut writers = Vec::new();
    let mut saw_writer = false;
    loop {
        let (file, meta) = named_file::open(path, MAX_BYTES).map_err(|e| refused(path, e))?;
        let probe = lease::probe(&file);
        let whole = match &probe {
            Probe::Free(_) => Whole::Yes,
            Probe::Unknown => Whole::Unknown,
            Probe::Writing if began.elapsed() >= patience(&meta) => Whole::WriterStayed,
            Probe::Writing => {
                saw_writer = true;
                if writers.is_empty() && began.elapsed() >= NAME_WRITERS_AFTER {
                    writers = lease::writers(&meta);
                }
                drop(probe);
                drop(file);
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
                continue;
            }
        };
        // Read while the lease is held: no writer can begin meanwhile.
        let bytes = named_file::read_open(&file, &meta, MAX_BYTES).map_err(|e| refused(path, e))?;
        drop(probe);
        let waited = saw_writer.then(|| WriterWait {
            took: began.elapsed(),
            writers,
            gave_up: whole == Whole::WriterStayed,
        });
        return Ok(Read {
            bytes,
            meta,
            whole,
            waited,
        });
    }
}

/// A file that cannot be read, as the store's error: refused ones are the person's to fix.
fn refused(path: &Path, e: ReadError) -> StoreError {
    match e {
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
    }
}

/// Reads and parses the M1.md at `path`, for a command that only looks at it: once no process
/// writes it (see [`read_whole`]), so that a save in place under way is neither shown as a
/// malformed file nor decided on half written (a resume checks the agent the file names).
///
/// # Errors
/// As [`read`], and [`StoreError::DiskInvalid`] for a malformed text.
pub(crate) fn load(path: &Path) -> Result<super::Document, StoreError> {
    let read = read_whole(path, |_| WRITER_PATIENCE)?;
    super::store::decode(path, &read.bytes).map_err(StoreError::DiskInvalid)
}
