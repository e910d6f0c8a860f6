//! `state/telegram.gates`: which chat message shows which gate, one JSON line per message sent,
//! so that a reply to a question's message answers that question. Append-only and small (a
//! line per gate message); a line that does not read is passed over.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    message_id: i64,
    /// `ID FINGERPRINT`.
    gate: String,
}

fn path(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).telegram("gates")
}

/// Notes that message `message_id` shows `gate` (`ID FINGERPRINT`).
///
/// # Errors
/// The file cannot be written.
pub(crate) fn note(state_dir: &Path, message_id: i64, gate: &str) -> anyhow::Result<()> {
    let p = path(state_dir);
    let mut line = serde_json::to_string(&Line {
        message_id,
        gate: gate.to_owned(),
    })?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .with_context(|| format!("while opening {}", p.display()))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .with_context(|| format!("while writing {}", p.display()))
}

/// The gate message `message_id` shows: its id and the fingerprint of what it showed.
#[must_use]
pub(crate) fn lookup(state_dir: &Path, message_id: i64) -> Option<(String, String)> {
    let text = std::fs::read_to_string(path(state_dir)).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .find(|l| l.message_id == message_id)
        .and_then(|l| {
            let (id, shown) = l.gate.split_once(' ')?;
            Some((id.to_owned(), shown.to_owned()))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_noted_message_is_found_and_an_unknown_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        super::note(dir.path(), 7, "G2 abc").unwrap();
        super::note(dir.path(), 9, "G3 def").unwrap();
        assert_eq!(
            super::lookup(dir.path(), 7),
            Some(("G2".into(), "abc".into()))
        );
        assert_eq!(super::lookup(dir.path(), 8), None);
    }
}
