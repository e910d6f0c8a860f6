//! The versions of M1.md that runners have known, kept on disk beside it (`M1.md.versions`).
//!
//! Telling a stale save from a hand edit needs the versions the file went through (see
//! [`super::merge`]). Held in one runner's memory only, that history dies with the runner: a
//! runner revived after a `kill -9`, a hand `loop resume` or the daemon's would know only the
//! versions since it opened the file, and an old text saved then would be read against the
//! wrong base (a passed step read as one set back by hand, and run again). So every version
//! a store learns is appended here, and a store that opens the file for a runner reads them
//! back first.
//!
//! One JSON line per version: its fields as `[[key path], value]` pairs. Before a store
//! replaces the file, it notes the text it is about to write as staged (`{"staged": pairs}`);
//! a runner killed between the swap and the version's line leaves the staged line last, and
//! the next runner that finds exactly that text on file knows it for the last runner's own
//! write, not a hand edit. A staged line is never a version otherwise: a swap that did not
//! happen must not become a base that a person's save is read against. Appended without an
//! fsync: M1.md itself is the durable record, and a version a power cut took is only a base a
//! stale save can no longer be matched to (the task ledger still stops a second run). A line
//! cut short by a crash is skipped. The file is rewritten whole (temporary file, rename) when
//! it has grown to twice the history a store keeps.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use super::merge::Fields;

/// A journal larger than this was not written by a store (they stay far smaller): it is not
/// read, and the history starts afresh.
const MAX_READ: u64 = 64 * 1024 * 1024;

/// The journal file of one M1.md.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    /// Versions in the file, to know when to compact it.
    lines: usize,
}

impl Journal {
    /// Opens the journal at `path`: the versions it holds, oldest first, at most the `keep`
    /// newest, and the text staged after the newest of them, if any (see the module's doc).
    pub(crate) fn load(path: PathBuf, keep: usize) -> (Journal, Vec<Fields>, Option<Fields>) {
        let text = crate::named_file::read(&path, MAX_READ)
            .ok()
            .and_then(|(bytes, _)| String::from_utf8(bytes).ok())
            .unwrap_or_default();
        let lines = text.lines().count();
        let mut versions: Vec<Fields> = Vec::new();
        let mut staged = None;
        for line in text.lines() {
            if let Some(f) = decode(line) {
                versions.push(f);
                staged = None;
            } else if let Some(f) = decode_staged(line) {
                staged = Some(f);
            }
        }
        if versions.len() > keep {
            versions.drain(..versions.len() - keep);
        }
        (Journal { path, lines }, versions, staged)
    }

    /// The journal at `path`, not read: for a new loop, whose versions start over.
    pub(crate) fn unread(path: PathBuf) -> Journal {
        Journal { path, lines: 0 }
    }

    /// Adds the newest version; compacts to `all` (the history in memory, `f` last) once the
    /// file holds twice as many lines as `all`'s capacity.
    pub(crate) fn append<'a>(
        &mut self,
        f: &Fields,
        all: impl ExactSizeIterator<Item = &'a Fields>,
        capacity: usize,
    ) {
        if self.lines >= 2 * capacity {
            self.rewrite(all);
            return;
        }
        self.append_line(encode(f));
    }

    /// Appends one line (`line` without its newline) to the file.
    fn append_line(&mut self, mut line: String) {
        line.push('\n');
        let appended = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if appended.is_ok() {
            self.lines += 1;
        }
    }

    /// Notes `f` as the text about to replace the file (see the module's doc).
    pub(crate) fn stage(&mut self, f: &Fields) {
        let pairs: Vec<(&Vec<String>, &String)> = f.iter().collect();
        self.append_line(serde_json::json!({ "staged": pairs }).to_string());
    }

    /// Replaces the file's contents with `versions` (none: an empty history).
    pub(crate) fn rewrite<'a>(&mut self, versions: impl ExactSizeIterator<Item = &'a Fields>) {
        let mut text = String::new();
        let n = versions.len();
        for f in versions {
            text.push_str(&encode(f));
            text.push('\n');
        }
        let name = self
            .path
            .file_name()
            .map_or_else(|| "M1.md.versions".into(), |n| n.to_string_lossy());
        let tmp = self
            .path
            .with_file_name(super::swap::temporary_name(&name, None));
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_ok() {
            self.lines = n;
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn encode(f: &Fields) -> String {
    let pairs: Vec<(&Vec<String>, &String)> = f.iter().collect();
    serde_json::to_string(&pairs).unwrap_or_default()
}

fn decode(line: &str) -> Option<Fields> {
    let pairs: Vec<(Vec<String>, String)> = serde_json::from_str(line).ok()?;
    Some(pairs.into_iter().collect())
}

fn decode_staged(line: &str) -> Option<Fields> {
    #[derive(serde::Deserialize)]
    struct Staged {
        staged: Vec<(Vec<String>, String)>,
    }
    let s: Staged = serde_json::from_str(line).ok()?;
    Some(s.staged.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(status: &str) -> Fields {
        let mut f = Fields::new();
        f.insert(vec!["STATUS".into()], status.into());
        f.insert(
            vec!["PLAN".into(), "STEPS".into(), "1".into()],
            "[DONE] a".into(),
        );
        f
    }

    #[test]
    fn versions_come_back_in_order_and_a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("M1.md.versions");
        let (mut j, none, _) = Journal::load(path.clone(), 8);
        assert!(none.is_empty());
        let (a, b) = (version("RUNNING"), version("DONE"));
        j.append(&a, [&a].into_iter(), 8);
        j.append(&b, [&a, &b].into_iter(), 8);
        let mut torn = OpenOptions::new().append(true).open(&path).unwrap();
        torn.write_all(b"[[[\"STATUS\"],\"WAI").unwrap();
        let (_, back, _) = Journal::load(path.clone(), 8);
        assert_eq!(back, vec![a.clone(), b.clone()]);
        let (_, newest, _) = Journal::load(path, 1);
        assert_eq!(newest, vec![b]);
    }

    #[test]
    fn the_file_is_compacted_to_the_history_it_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("M1.md.versions");
        let (mut j, _, _) = Journal::load(path.clone(), 2);
        let vs: Vec<Fields> = (0..9).map(|i| version(&format!("S{i}"))).collect();
        for (i, v) in vs.iter().enumerate() {
            let kept = &vs[i.saturating_sub(1)..=i];
            j.append(v, kept.iter(), 2);
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 4, "{lines} lines");
        let (_, back, _) = Journal::load(path, 2);
        assert_eq!(back, vs[7..].to_vec());
    }
}
