//! Field edits the runner makes. Each rewrites only the lines it is about (and inserts lines
//! for keys that did not exist), so a hand-edited file keeps its comments, spacing and order,
//! and the same edits can be re-applied onto a newer text after a concurrent hand edit.

use super::document::Document;
use super::hidden;
use super::line::{Eol, KeyLine, Kind, Line};
use super::steps;
use super::syntax::{self, Fenced};
use super::value::{self, Scalar};
use super::view::{Status, StepState};

/// Where a key is in M1.md: its block's keys, then its own (`["RESULTS", "STEP_2", "EXIT"]`).
///
/// Only the key declarations of [`super::keys`] make one, so no module outside `m1` can edit
/// a key by a name it spells itself: every key the runner writes is declared, and `validate`
/// checks it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPath(Vec<String>);

impl KeyPath {
    /// The path of `keys`, in `m1` alone.
    pub(super) fn new<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(keys.into_iter().map(Into::into).collect())
    }

    /// The keys of the path, outermost first.
    #[must_use]
    pub fn keys(&self) -> &[String] {
        &self.0
    }

    /// The path as M1.md's errors and logs name it: `RESULTS.STEP_2.EXIT`.
    #[must_use]
    pub fn dotted(&self) -> String {
        self.0.join(".")
    }

    /// Whether this path is `block` or under it.
    #[must_use]
    pub fn is_under(&self, block: &KeyPath) -> bool {
        self.0.starts_with(&block.0)
    }
}

/// A change of M1.md the runner makes. Keys are named by their declarations
/// ([`super::keys`]): `Top::Goal.set(…)`, `ResultKey::Exit.set(2, …)`.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    Status(Status),
    /// Set a scalar value at a key path; creates missing blocks/keys (appended at the end of
    /// the parent block; top-level new keys go after the last top-level key). A block at the
    /// path loses its nested keys.
    Set(KeyPath, String),
    /// Remove a key (with its children, if a block). No-op when absent.
    Remove(KeyPath),
    /// Remove all children of a block but keep the block line (e.g. clear CURRENT). No-op when
    /// absent or a scalar.
    Clear(KeyPath),
    /// Set a step's state, keeping its text. No-op when the step does not exist.
    StepState(u32, StepState),
    /// Set a step's text, keeping its state. No-op when the step does not exist.
    StepText(u32, String),
    /// Replace the whole step list (planning); also sets `PLAN.TOTAL_STEPS`. Creates
    /// PLAN/STEPS if missing.
    SetSteps(Vec<(StepState, String)>),
}

impl Edit {
    /// The key path a `Set`, `Remove` or `Clear` is about.
    #[must_use]
    pub fn path(&self) -> Option<&KeyPath> {
        match self {
            Edit::Set(p, _) | Edit::Remove(p) | Edit::Clear(p) => Some(p),
            _ => None,
        }
    }

    /// Whether this edit sets the key at `path`.
    #[must_use]
    pub fn sets(&self, path: &KeyPath) -> bool {
        matches!(self, Edit::Set(p, _) if p == path)
    }
}

pub(crate) fn apply(doc: &mut Document, edit: &Edit) {
    match edit {
        Edit::Status(s) => {
            if doc.child(None, "STATUS").is_none() {
                place_status(doc);
            }
            set(doc, &["STATUS"], s.as_str());
        }
        Edit::Set(path, v) => set(doc, &strs(&path.0), v),
        Edit::Remove(path) => {
            if let Some(i) = doc.find(&strs(&path.0)) {
                let end = doc.subtree_end(i);
                remove(doc, i, end);
            }
        }
        Edit::Clear(path) => {
            if let Some(i) = doc.find(&strs(&path.0))
                && doc.key_at(i).value.is_none()
            {
                let end = doc.subtree_end(i);
                remove(doc, i + 1, end);
            }
        }
        Edit::StepState(n, state) => {
            if let Some((i, _, text)) = step(doc, *n) {
                set_value(doc, i, &steps::value(*state, &text));
            }
        }
        Edit::StepText(n, text) => {
            if let Some((i, state, _)) = step(doc, *n)
                && let Ok(state) = state.parse()
            {
                set_value(doc, i, &steps::value(state, text));
            }
        }
        Edit::SetSteps(list) => {
            let block = ensure(doc, &["PLAN", "STEPS"]);
            let end = doc.subtree_end(block);
            remove(doc, block + 1, end);
            let indent = doc.key_at(block).indent + 2;
            for (k, (state, text)) in list.iter().enumerate() {
                let n = k + 1;
                let enc = value::encode(&steps::value(*state, text), false);
                insert(doc, block + n, indent, &n.to_string(), Some(&enc));
            }
            set(doc, &["PLAN", "TOTAL_STEPS"], &list.len().to_string());
        }
    }
}

/// Makes a `STATUS:` key line where there is none, so that setting it never adds a second
/// STATUS line: a line that reads as text but looks like one (`status:`, ` STATUS:`,
/// `STATUS RUNNING`) becomes the key line, keeping its comment; with none, the key goes first,
/// where the seed has it.
fn place_status(doc: &mut Document) {
    let fenced = syntax::fences(&doc.lines);
    let found = hidden::candidates(&doc.lines, &fenced, "STATUS")
        .find(|(_, f, look)| *f == Fenced::No && look.is_some())
        .map(|(i, _, _)| i);
    let Some(i) = found else {
        insert(doc, 0, 0, "STATUS", None);
        return;
    };
    // Its comment stays at its column.
    let old = &doc.lines[i].text;
    let text = match old.find(" #") {
        Some(at) => {
            let col = old[..=at].chars().count();
            format!(
                "STATUS:{}{}",
                " ".repeat(col.saturating_sub(7).max(1)),
                &old[at + 1..]
            )
        }
        None => "STATUS:".to_string(),
    };
    doc.lines[i].text = text;
    doc.lines[i].kind = Kind::Key(KeyLine {
        indent: 0,
        key: "STATUS".to_string(),
        colon: "STATUS".len(),
        value: None,
        parent: None,
    });
    doc.reindex();
}

fn strs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

/// The line index, state and text of step `n`.
fn step(doc: &Document, n: u32) -> Option<(usize, String, String)> {
    let i = doc.find(&["PLAN", "STEPS", &n.to_string()])?;
    let v = doc.key_at(i).value.as_ref()?;
    let (state, text) = steps::split(&v.text)?;
    Some((i, state.to_string(), text.to_string()))
}

fn set(doc: &mut Document, path: &[&str], v: &str) {
    let i = ensure(doc, path);
    if doc.key_at(i).value.is_none() {
        let end = doc.subtree_end(i);
        remove(doc, i + 1, end);
    }
    set_value(doc, i, v);
}

/// The line of the key at `path`, creating it and any missing parents as blocks.
fn ensure(doc: &mut Document, path: &[&str]) -> usize {
    let mut parent: Option<usize> = None;
    for key in path {
        let found = doc.child(parent, key);
        let at = if let Some(i) = found {
            i
        } else {
            let (pos, indent) = match parent {
                Some(p) => {
                    if doc.key_at(p).value.is_some() {
                        set_value_raw(doc, p, None);
                    }
                    (doc.subtree_end(p) + 1, doc.key_at(p).indent + 2)
                }
                None => (
                    doc.children(None)
                        .last()
                        .map_or(doc.lines.len(), |last| doc.subtree_end(last) + 1),
                    0,
                ),
            };
            insert(doc, pos, indent, key, None);
            pos
        };
        parent = Some(at);
    }
    parent.expect("paths are never empty")
}

/// Inserts the key line `KEY:` or `KEY: encoded` at `pos`.
fn insert(doc: &mut Document, pos: usize, indent: usize, key: &str, encoded: Option<&str>) {
    let eol = doc.dominant_eol();
    let mut text = format!("{}{key}:", " ".repeat(indent));
    let colon = text.len() - 1;
    let value = encoded.map(|e| {
        text.push(' ');
        let start = text.len();
        text.push_str(e);
        scanned(&text, start)
    });
    let mut line_eol = eol;
    if pos == doc.lines.len()
        && let Some(last) = doc.lines.last_mut()
        && last.eol == Eol::None
    {
        last.eol = eol;
        line_eol = Eol::None;
    }
    let kind = Kind::Key(KeyLine {
        indent,
        key: key.to_string(),
        colon,
        value: value.flatten(),
        parent: None,
    });
    doc.lines.insert(
        pos,
        Line {
            text,
            eol: line_eol,
            kind,
        },
    );
    doc.inserted(pos);
}

/// Removes lines `from..=to` (nothing when `from > to`).
fn remove(doc: &mut Document, from: usize, to: usize) {
    if from > to {
        return;
    }
    let last_eol = doc.lines[to].eol;
    doc.lines.drain(from..=to);
    // A removed last line takes the missing final newline with it; keep the file's shape.
    if last_eol == Eol::None
        && from == doc.lines.len()
        && let Some(l) = doc.lines.last_mut()
    {
        l.eol = Eol::None;
    }
    doc.reindex();
}

/// Sets the scalar of key line `idx` to `v`, quoted when needed or when it was quoted.
fn set_value(doc: &mut Document, idx: usize, v: &str) {
    let keep = doc.key_at(idx).value.as_ref().is_some_and(|s| s.quoted);
    set_value_raw(doc, idx, Some(&value::encode(v, keep)));
}

/// Rewrites the value part of line `idx`, keeping the key, indentation and any comment (at its
/// column when the new value fits before it).
fn set_value_raw(doc: &mut Document, idx: usize, encoded: Option<&str>) {
    let line = &doc.lines[idx];
    let k = line.key().expect("key line");
    let head = &line.text[..=k.colon];
    let old_end = k.value.as_ref().map_or(k.colon + 1, |v| v.end);
    let tail = &line.text[old_end..];
    let comment = tail.trim_start_matches(' ');
    let comment_col = line.text[..old_end].chars().count() + (tail.len() - comment.len());
    let mut text = head.to_string();
    let mut start = None;
    if let Some(e) = encoded {
        // Keep the spacing a human chose between the colon and the value.
        let gap = k
            .value
            .as_ref()
            .map_or(1, |v| v.start - (k.colon + 1))
            .max(1);
        text.push_str(&" ".repeat(gap));
        start = Some(text.len());
        text.push_str(e);
    }
    if comment.is_empty() {
        if encoded.is_none() || k.value.is_some() {
            text.push_str(tail);
        }
    } else {
        let width = text.chars().count();
        text.push_str(&" ".repeat(comment_col.saturating_sub(width).max(1)));
        text.push_str(comment);
    }
    let value = start.and_then(|s| scanned(&text, s));
    let line = &mut doc.lines[idx];
    line.text = text;
    let k = line.key_mut().expect("key line");
    k.value = value;
}

fn scanned(text: &str, start: usize) -> Option<Scalar> {
    value::scan(text, start).ok().flatten()
}
