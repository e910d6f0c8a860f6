//! Telling a stale save from a hand edit.
//!
//! An editor that ignores changes on disk saves the text it loaded, plus what the person
//! typed. Saved after the runner wrote, it reverts the runner's record ("step 2 DONE, step 3
//! spawning") to what it was when the editor loaded the file. Taken as it is, the loop would
//! run a passed step again or start a second agent for the running one.
//!
//! A save is read as the person's changes against the version their editor loaded: of the
//! versions of the file the store has known, the one the saved text is closest to, field by
//! field. When that is the newest version, the save is an ordinary hand edit and wins as it
//! is. When it is an older one, the save is stale: the fields the person changed against that
//! older version are theirs; every other field the runner changed since then is put back.
//! So a step line set back to PENDING in the current text is a deliberate change (it runs
//! again), while a whole file reverted to an older text is a stale save (nothing is lost).

use std::collections::{BTreeMap, VecDeque};

use super::document::Document;
use super::edit::Edit;
use super::journal::Journal;

/// Every scalar of a document by key path (step lines included: `PLAN STEPS 2`).
pub(crate) type Fields = BTreeMap<Vec<String>, String>;

/// How many earlier versions a store remembers as possible bases of a save.
const HISTORY: usize = 64;
/// Documents larger than this are not remembered (the cost would outgrow the use).
const MAX_REMEMBERED_BYTES: usize = 256 * 1024;

/// The scalar fields of `doc`.
pub(crate) fn fields(doc: &Document) -> Fields {
    let mut out = Fields::new();
    let mut path = Vec::new();
    walk(doc, None, &mut path, &mut out);
    out
}

fn walk(doc: &Document, parent: Option<usize>, path: &mut Vec<String>, out: &mut Fields) {
    for i in doc.children(parent) {
        let k = doc.key_at(i);
        path.push(k.key.clone());
        match &k.value {
            Some(v) => {
                out.insert(path.clone(), v.text.clone());
            }
            None => walk(doc, Some(i), path, out),
        }
        path.pop();
    }
}

/// The fields that differ from `before` to `after`, each as `PATH: old → new` (`(none)` for a
/// field that was not there, or is gone), in key order.
#[must_use]
pub(crate) fn changes(before: &Document, after: &Document) -> Vec<String> {
    field_changes(&fields(before), &fields(after))
}

fn field_changes(a: &Fields, b: &Fields) -> Vec<String> {
    let keys: std::collections::BTreeSet<&Vec<String>> = a.keys().chain(b.keys()).collect();
    let show = |v: Option<&String>| v.map_or_else(|| "(none)".to_string(), Clone::clone);
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{}: {} → {}", k.join("."), show(a.get(k)), show(b.get(k))))
        .collect()
}

/// Whether two versions can be of one loop: not when both name a `LOOP_ID`, and not the same.
fn same_loop(a: &Fields, b: &Fields) -> bool {
    let id = |f: &Fields| f.get(&vec!["LOOP_ID".to_string()]).cloned();
    match (id(a), id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// How many fields differ between two versions.
fn distance(a: &Fields, b: &Fields) -> usize {
    let mut n = a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count();
    n += b.keys().filter(|k| !a.contains_key(*k)).count();
    n
}

/// The blocks that putting back `edits` leaves with no key, that the newest version `newest`
/// does not have either: the runner removed them whole (a merged step's record), so they go
/// whole, not as an empty block that reads as a record of nothing.
fn emptied_blocks(edits: &[Edit], newest: &Fields, saved: &Fields) -> Vec<Edit> {
    let removed: Vec<&[String]> = edits
        .iter()
        .filter_map(|e| match e {
            Edit::Remove(p) => Some(p.keys()),
            _ => None,
        })
        .collect();
    let mut blocks: Vec<Vec<String>> = Vec::new();
    for path in &removed {
        for len in (1..path.len()).rev() {
            let block = &path[..len];
            let under = |f: &Fields| f.keys().any(|k| k.starts_with(block));
            let left = saved
                .keys()
                .any(|k| k.starts_with(block) && !removed.contains(&k.as_slice()));
            if under(newest) || left {
                break;
            }
            if !blocks.iter().any(|b| b.as_slice() == block) {
                blocks.push(block.to_vec());
            }
        }
    }
    // The outermost of nested blocks is enough.
    let outer: Vec<&Vec<String>> = blocks
        .iter()
        .filter(|b| !blocks.iter().any(|o| o.len() < b.len() && b.starts_with(o)))
        .collect();
    outer
        .into_iter()
        .map(|b| Edit::Remove(super::edit::KeyPath::new(b.clone())))
        .collect()
}

/// The versions a store has known, oldest first; the last is the newest. With a journal,
/// they are those every runner of the loop has known (see [`super::journal`]).
#[derive(Debug, Default)]
pub(crate) struct History {
    versions: VecDeque<Fields>,
    journal: Option<Journal>,
}

/// What a stale save would have reverted, and the edits that put it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    /// How many versions back the saved text was made from (1: the one before the newest).
    pub versions_back: usize,
    /// The fields put back, as `KEY.KEY` paths.
    pub fields: Vec<String>,
    pub(crate) edits: Vec<Edit>,
}

/// Keeps `f` as the newest of `versions`, letting the oldest go past [`HISTORY`].
fn keep_newest(versions: &mut VecDeque<Fields>, f: Fields) {
    if versions.len() == HISTORY {
        versions.pop_front();
    }
    versions.push_back(f);
}

impl History {
    /// The versions in the journal at `path`, which this history goes on writing to. Versions
    /// of another loop (another `LOOP_ID` than `doc`'s) are not this file's history.
    pub(crate) fn journaled(path: std::path::PathBuf, doc: &Document) -> Self {
        let (journal, versions, staged) = Journal::load(path, HISTORY);
        let ours = fields(doc);
        let mut versions: VecDeque<Fields> = versions
            .into_iter()
            .filter(|v| same_loop(v, &ours))
            .collect();
        // The text on file is the one a runner staged and died before noting: its own write.
        if let Some(staged) = staged.filter(|s| *s == ours) {
            keep_newest(&mut versions, staged);
        }
        Self {
            versions,
            journal: Some(journal),
        }
    }

    /// A new loop's history, journaled at `path`: what the journal held (another loop's
    /// versions) is gone, and `doc` is the first version.
    pub(crate) fn fresh(path: std::path::PathBuf, doc: &Document, len: usize) -> Self {
        let mut history = Self {
            journal: Some(Journal::unread(path)),
            ..Self::default()
        };
        history.restart(doc, len);
        history
    }

    /// What `doc` changed against the newest version known (nothing when none is known).
    pub(crate) fn changes_since_newest(&self, doc: &Document) -> Vec<String> {
        self.versions
            .back()
            .map(|newest| field_changes(newest, &fields(doc)))
            .unwrap_or_default()
    }

    /// Whether the history knows no version yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// Forgets every version (of the journal too): a new loop begins with `doc`.
    pub(crate) fn restart(&mut self, doc: &Document, len: usize) {
        self.versions.clear();
        if let Some(j) = &mut self.journal {
            j.rewrite(std::iter::empty());
        }
        self.push(doc, len);
    }

    /// Notes in the journal that `doc` is about to replace the file (see [`Journal::stage`]);
    /// its fields, for [`History::push_staged`] once it has.
    pub(crate) fn stage(&mut self, doc: &Document, len: usize) -> Option<Fields> {
        if len > MAX_REMEMBERED_BYTES {
            return None;
        }
        let j = self.journal.as_mut()?;
        let f = fields(doc);
        j.stage(&f);
        Some(f)
    }

    /// Remembers `doc` as the newest version.
    pub(crate) fn push(&mut self, doc: &Document, len: usize) {
        self.push_staged(None, doc, len);
    }

    /// [`History::push`] of a text [`History::stage`] noted (`staged`: its fields, as they
    /// were read then, not read again).
    pub(crate) fn push_staged(&mut self, staged: Option<Fields>, doc: &Document, len: usize) {
        if len > MAX_REMEMBERED_BYTES {
            self.versions.clear();
            if let Some(j) = &mut self.journal {
                j.rewrite(std::iter::empty());
            }
            return;
        }
        let f = staged.unwrap_or_else(|| fields(doc));
        if self.versions.back() == Some(&f) {
            return;
        }
        keep_newest(&mut self.versions, f);
        if let (Some(j), Some(f)) = (&mut self.journal, self.versions.back()) {
            j.append(f, self.versions.iter(), HISTORY);
        }
    }

    /// For a text saved by someone else: `None` when it is a hand edit of the newest version
    /// (or nothing of the runner's would be lost), else what a stale save reverted.
    pub(crate) fn stale(&self, theirs: &Document) -> Option<Restored> {
        let newest = self.versions.back()?;
        let t = fields(theirs);
        let d_newest = distance(&t, newest);
        if d_newest == 0 {
            return None;
        }
        // The closest older version; on a tie the newer one (the smaller claim of staleness).
        let (back, base) = self
            .versions
            .iter()
            .rev()
            .enumerate()
            .skip(1)
            .filter(|(_, v)| same_loop(v, &t))
            .map(|(back, v)| (back, v, distance(&t, v)))
            .filter(|(_, _, d)| *d < d_newest)
            .min_by_key(|(back, _, d)| (*d, *back))
            .map(|(back, v, _)| (back, v))?;
        let mut edits = Vec::new();
        let mut names = Vec::new();
        let keys: std::collections::BTreeSet<&Vec<String>> =
            base.keys().chain(newest.keys()).collect();
        for k in keys {
            let (was, ours, now) = (base.get(k), newest.get(k), t.get(k));
            // The runner changed it since the base, and the saved text still has the base's.
            if was != ours && now == was {
                names.push(k.join("."));
                edits.push(match ours {
                    Some(v) => Edit::Set(super::edit::KeyPath::new(k.clone()), v.clone()),
                    None => Edit::Remove(super::edit::KeyPath::new(k.clone())),
                });
            }
        }
        if edits.is_empty() {
            return None;
        }
        edits.extend(emptied_blocks(&edits, newest, &t));
        Some(Restored {
            versions_back: back,
            fields: names,
            edits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        Document::parse(text).unwrap()
    }

    const V1: &str = "STATUS: RUNNING\nGOAL: g\nCONSTRAINTS: none\nPLAN:\n  TOTAL_STEPS: 2\n  CURRENT_STEP: 1\n  STEPS:\n    1: [RUNNING] a\n    2: [PENDING] b\nCURRENT:\n  TASK_ID: t1\n";
    const V2: &str = "STATUS: RUNNING\nGOAL: g\nCONSTRAINTS: none\nPLAN:\n  TOTAL_STEPS: 2\n  CURRENT_STEP: 2\n  STEPS:\n    1: [DONE] a\n    2: [RUNNING] b\nCURRENT:\n  TASK_ID: t2\nRESULTS:\n  STEP_1:\n    EXIT: 0\n";

    fn history(versions: &[&str]) -> History {
        let mut h = History::default();
        for v in versions {
            h.push(&doc(v), v.len());
        }
        h
    }

    #[test]
    fn a_save_of_an_older_text_puts_back_what_the_runner_wrote_since() {
        let h = history(&[V1, V2]);
        let r = h.stale(&doc(V1)).expect("stale");
        assert_eq!(r.versions_back, 1);
        let mut d = doc(V1);
        for e in &r.edits {
            d.apply(e);
        }
        assert_eq!(fields(&d), fields(&doc(V2)));
    }

    #[test]
    fn what_the_person_changed_in_the_older_text_is_kept() {
        let h = history(&[V1, V2]);
        let theirs = V1.replace("CONSTRAINTS: none", "CONSTRAINTS: no new deps");
        let r = h.stale(&doc(&theirs)).expect("stale");
        let mut d = doc(&theirs);
        for e in &r.edits {
            d.apply(e);
        }
        assert_eq!(d.get(&["CONSTRAINTS"]).as_deref(), Some("no new deps"));
        assert_eq!(d.get(&["CURRENT", "TASK_ID"]).as_deref(), Some("t2"));
    }

    #[test]
    fn a_step_set_back_to_pending_in_the_newest_text_is_a_hand_edit() {
        let h = history(&[V1, V2]);
        let theirs = V2.replace("1: [DONE] a", "1: [PENDING] a");
        assert_eq!(h.stale(&doc(&theirs)), None);
    }

    #[test]
    fn the_newest_text_itself_is_no_stale_save() {
        let h = history(&[V1, V2]);
        assert_eq!(h.stale(&doc(V2)), None);
        assert_eq!(History::default().stale(&doc(V1)), None);
    }

    #[test]
    fn a_text_of_another_loop_is_no_stale_save_of_this_one() {
        let with_id = |v: &str, id: &str| format!("LOOP_ID: {id}\n{v}");
        let h = history(&[&with_id(V1, "aaa"), &with_id(V2, "aaa")]);
        assert!(h.stale(&doc(&with_id(V1, "aaa"))).is_some());
        assert_eq!(h.stale(&doc(&with_id(V1, "bbb"))), None);
    }
}
