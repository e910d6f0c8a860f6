//! `state/loop.log`: one timestamped line per decision, with its reason (the decision log). Appending is best effort: a full disk must not stop the loop.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The log file of the loop whose state directory is `state_dir`.
#[must_use]
pub(crate) fn path(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).log()
}

/// Appends `line` with a UTC timestamp. Newlines in `line` are folded so that one decision is
/// one line. Errors are returned for callers that care; most ignore them.
///
/// # Errors
/// When the log cannot be opened or written.
pub(crate) fn append(state_dir: &Path, line: &str) -> std::io::Result<()> {
    append_stamped(state_dir, &stamped(line))
}

/// [`append`] to the log at `file` (a run's own hooks' log, say).
///
/// # Errors
/// When the log cannot be opened or written.
pub(crate) fn append_to(file: &Path, line: &str) -> std::io::Result<()> {
    write_stamped(file, &stamped(line))
}

/// `line` as the log holds it: with a UTC timestamp of now, newlines folded, ended by one.
#[must_use]
pub(crate) fn stamped(line: &str) -> String {
    let stamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
    let folded = line.replace('\n', " ⏎ ");
    format!("{stamp} {folded}\n")
}

/// Appends lines already [`stamped`], in one write.
///
/// # Errors
/// When the log cannot be opened or written.
pub(crate) fn append_stamped(state_dir: &Path, text: &str) -> std::io::Result<()> {
    write_stamped(&path(state_dir), text)
}

/// Appends `text` to `file` in one write call.
fn write_stamped(file: &Path, text: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(file)?;
    // One write call per line, so lines from concurrent writers do not interleave.
    f.write_all(text.as_bytes())
}

/// The last `n` lines of any text file (lossy UTF-8), oldest first; empty when unreadable.
#[must_use]
pub(crate) fn last_lines(file: &Path, n: usize) -> Vec<String> {
    let bytes = std::fs::read(file).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}
