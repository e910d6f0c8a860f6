//! Where the schedules file and its ledger live, reading the file, and editing it under a lock
//! without ever rewriting a file that has a mistake.

use std::path::PathBuf;

use anyhow::Context;

use super::file::{self, Entry};
use crate::error::{Error, Result};

/// `schedules.md` in the per-user state directory.
///
/// # Errors
/// No per-user directory (neither `XDG_STATE_HOME` nor `HOME`).
pub fn path() -> Result<PathBuf> {
    Ok(crate::dirs::user_state_dir()?.join("schedules.md"))
}

/// The start ledger, beside the file.
///
/// # Errors
/// As [`path`].
pub fn ledger_path() -> Result<PathBuf> {
    Ok(crate::dirs::user_state_dir()?.join("schedules.ledger.jsonl"))
}

/// The lock whoever edits the file or starts a due time holds.
///
/// # Errors
/// As [`path`].
pub fn lock_path() -> Result<PathBuf> {
    Ok(crate::dirs::user_state_dir()?.join("schedules.lock"))
}

/// The file as read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub path: PathBuf,
    pub text: String,
    pub entries: Vec<Entry>,
}

/// Reads the file (none yet: no entries).
///
/// # Errors
/// Bad input naming each mistake as `file:line:col`, or the file cannot be read.
pub fn load() -> Result<Loaded> {
    let path = path()?;
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("while reading {}", path.display()))
                .into());
        }
    };
    match file::parse(&text) {
        Ok(entries) => Ok(Loaded {
            path,
            text,
            entries,
        }),
        Err(problems) => Err(Error::bad_input(
            problems
                .iter()
                .map(|p| format!("{}:{}:{}: {}", path.display(), p.line, p.col, p.message))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
    }
}

/// Edits the file under its lock: `change` gets what it holds and gives the new text (or
/// refuses). A file with a mistake is refused before `change` sees it, and never rewritten.
///
/// # Errors
/// The file's mistakes, what `change` refuses, or I/O.
pub fn edit<T>(change: impl FnOnce(&Loaded) -> Result<(String, T)>) -> Result<T> {
    let dir = crate::dirs::user_state_dir()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("while creating {}", dir.display()))?;
    let _held = crate::lockfile::exclusive(&lock_path()?)?;
    let loaded = load()?;
    let (text, out) = change(&loaded)?;
    if text != loaded.text {
        let write = || -> std::io::Result<()> {
            let mut f = atomic_write_file::AtomicWriteFile::open(&loaded.path)?;
            std::io::Write::write_all(&mut f, text.as_bytes())?;
            f.commit()
        };
        write().with_context(|| format!("while writing {}", loaded.path.display()))?;
    }
    Ok(out)
}
