//! Reading and writing M1.md on disk: atomic replacement, and compare-and-swap so that a
//! human's edit made while the runner was busy is merged, never overwritten.
//!
//! The guarantee: a commit re-reads the file, applies its edits onto whatever is there, and
//! writes the result to a synced temporary file. Right before the rename it compares the file
//! on disk with the text it merged onto; if they differ it starts over on the newer text. A
//! hand edit saved before that last comparison is therefore kept. One saved in the
//! microseconds between the comparison and the rename can still be replaced; no portable
//! file-system call closes that window without the editor's cooperation.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use atomic_write_file::AtomicWriteFile;

use super::document::Document;
use super::edit::Edit;
use super::error::{Error, Errors};

/// How many times a commit starts over because the file kept changing under it.
const MAX_ROUNDS: usize = 100;

/// Marks a commit that found a hand edit on disk and applied its edits onto it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConflictMerged {
    /// How many times the file changed under the commit before it could write.
    pub rounds: usize,
}

#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    /// The bytes as last read or written by this store.
    bytes: Vec<u8>,
    merged: Option<ConflictMerged>,
}

impl Store {
    /// Reads and parses the file. Errors carry the path ([`Errors::with_path`]).
    ///
    /// # Errors
    /// The file cannot be read, or is not a valid M1.md (downcastable to [`Errors`]).
    pub fn open(path: &Path) -> anyhow::Result<(Store, Document)> {
        let bytes =
            std::fs::read(path).with_context(|| format!("while reading {}", path.display()))?;
        let doc = decode(path, &bytes)?;
        let store = Store {
            path: path.to_path_buf(),
            bytes,
            merged: None,
        };
        Ok((store, doc))
    }

    /// Re-reads the file (e.g. after a file-watch event). `Ok(None)` if unchanged since the
    /// last read or write.
    ///
    /// # Errors
    /// The file cannot be read or is invalid; the store still remembers the last good bytes.
    pub fn reload(&mut self) -> anyhow::Result<Option<Document>> {
        let bytes = self.read()?;
        if bytes == self.bytes {
            return Ok(None);
        }
        let doc = decode(&self.path, &bytes)?;
        self.bytes = bytes;
        Ok(Some(doc))
    }

    /// Compare-and-swap: applies `edits` onto the file as it is on disk now (merging onto a
    /// hand edit if there was one) and writes atomically. A malformed file on disk, or edits
    /// that would make the file invalid, write nothing and return the errors. Returns the
    /// document now on disk.
    ///
    /// # Errors
    /// I/O errors; [`Errors`] (with the path) for a malformed file or an invalid result.
    pub fn commit(&mut self, edits: &[Edit]) -> anyhow::Result<Document> {
        self.merged = None;
        for round in 0..MAX_ROUNDS {
            let base = self.read()?;
            let mut doc = decode(&self.path, &base)?;
            if base != self.bytes {
                self.merged = Some(ConflictMerged { rounds: round + 1 });
            }
            for e in edits {
                doc.apply(e);
            }
            let text = doc.render();
            let written = Document::parse(&text).map_err(|errs| {
                anyhow::Error::new(errs.with_path(&self.path))
                    .context("edits would make the file invalid; nothing was written")
            })?;
            if text.as_bytes() == base {
                self.bytes = base;
                return Ok(written);
            }
            let mut file = AtomicWriteFile::open(&self.path).with_context(|| {
                format!(
                    "while creating a temporary file beside {}",
                    self.path.display()
                )
            })?;
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("while writing beside {}", self.path.display()))?;
            // Last look before the rename: a hand edit since `base` was read means start over.
            if self.read()? != base {
                drop(file.discard());
                continue;
            }
            file.commit()
                .with_context(|| format!("while replacing {}", self.path.display()))?;
            self.bytes = text.into_bytes();
            return Ok(written);
        }
        bail!(
            "{} changed {MAX_ROUNDS} times while being saved; nothing was written",
            self.path.display()
        )
    }

    /// Writes a brand-new file atomically (for `loop start`), creating parent directories.
    /// Replaces an existing file: callers decide whether that is allowed.
    ///
    /// # Errors
    /// `text` is not a valid M1.md ([`Errors`]), or the file cannot be written.
    pub fn create(path: &Path, text: &str) -> anyhow::Result<(Store, Document)> {
        let doc = Document::parse(text).map_err(|e| anyhow::Error::new(e.with_path(path)))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
        }
        let mut file = AtomicWriteFile::open(path)
            .with_context(|| format!("while creating {}", path.display()))?;
        file.write_all(text.as_bytes())
            .with_context(|| format!("while writing {}", path.display()))?;
        file.commit()
            .with_context(|| format!("while writing {}", path.display()))?;
        let store = Store {
            path: path.to_path_buf(),
            bytes: text.as_bytes().to_vec(),
            merged: None,
        };
        Ok((store, doc))
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the last [`Store::commit`] merged its edits onto a hand edit.
    #[must_use]
    pub fn last_merge(&self) -> Option<ConflictMerged> {
        self.merged
    }

    fn read(&self) -> anyhow::Result<Vec<u8>> {
        std::fs::read(&self.path).with_context(|| format!("while reading {}", self.path.display()))
    }
}

/// Parses file bytes; invalid UTF-8 is reported at its line and column like any other error.
fn decode(path: &Path, bytes: &[u8]) -> anyhow::Result<Document> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
        let err = Error::new(line, column, "expected UTF-8 text: invalid byte sequence");
        anyhow::Error::new(Errors::new(vec![err]).with_path(path))
    })?;
    Document::parse(text).map_err(|e| anyhow::Error::new(e.with_path(path)))
}
