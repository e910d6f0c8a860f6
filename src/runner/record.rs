//! The record the runner keeps: M1.md as it last read or wrote it, the store it writes through
//! (compare-and-swap, a hand edit merged, a stale save recognized), and the edits it has
//! decided but holds for its next write. The runner decides what goes in; this part knows how
//! the text, the held edits and the file on disk stay one.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::m1::{Document, Edit, M1, Store, StoreError, WriterWait};

/// A wait for a writer shorter than this is the ordinary life of a save (a chunk written, the
/// next one on its way) and is not logged.
const LOG_WAITS_FROM: Duration = Duration::from_millis(20);

/// What a look at M1.md found.
#[derive(Debug)]
pub(super) enum Reloaded {
    /// A new text, read in under the held edits: the text the runner had before it.
    Changed(Document),
    /// The same text as before.
    Same,
    /// An invalid text: the problem, the first time it is met (`None` after: told once).
    Invalid(Option<String>),
}

/// M1.md as the runner knows it, and how it gets there.
#[derive(Debug)]
pub(super) struct Record {
    store: Store,
    doc: Document,
    /// Edits decided but not yet written. A step's outcome waits to go into the next spawn's
    /// write-ahead record, so one atomic write says "step N done, step N+1 spawning": a step
    /// costs one M1.md write, not two. They are applied to `doc` in memory and go out with the
    /// next commit of any kind; a runner that dies first loses only a decision it can remake
    /// from the task's exit record.
    held: Vec<Edit>,
    /// The problem of an invalid M1.md last told, so that it is told once.
    invalid_told: Option<String>,
    /// A person set `STATUS: WAITING` while this runner drove the loop: where it stops, it
    /// says how to carry on.
    paused_by_hand: bool,
}

impl Record {
    /// Reads M1.md at `file`, with what the store knows of its past saves.
    ///
    /// # Errors
    /// As [`Store::open_with_history`].
    pub(super) fn open(file: &Path) -> Result<Self, StoreError> {
        let (store, doc) = Store::open_with_history(file)?;
        Ok(Self {
            store,
            doc,
            held: Vec::new(),
            invalid_told: None,
            paused_by_hand: false,
        })
    }

    /// The loop as the runner knows it: the text last read or written, with the held edits.
    pub(super) fn view(&self) -> Arc<M1> {
        self.doc.shared_view()
    }

    /// The text behind [`Record::view`].
    pub(super) fn doc(&self) -> &Document {
        &self.doc
    }

    /// Holds `edits` for the next write, applied to the text at once.
    pub(super) fn hold(&mut self, edits: &[Edit]) {
        for e in edits {
            self.doc.apply(e);
        }
        self.held.extend(edits.iter().cloned());
    }

    /// Notes that a person paused the loop (`STATUS: WAITING`) while this runner drove it.
    pub(super) fn note_paused_by_hand(&mut self) {
        self.paused_by_hand = true;
    }

    /// Whether a person paused the loop since this was last asked.
    pub(super) fn take_paused_by_hand(&mut self) -> bool {
        std::mem::take(&mut self.paused_by_hand)
    }

    /// Whether edits wait for the next write.
    pub(super) fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// The held edits and then `edits`: what the next write puts in.
    pub(super) fn with_held(&self, edits: &[Edit]) -> Vec<Edit> {
        self.held.iter().chain(edits).cloned().collect()
    }

    /// Writes `all` ([`Record::with_held`], taken when the write was first tried) in one
    /// compare-and-swap, unless `interrupt` says to give up while M1.md keeps changing; the
    /// held edits are then written. Written: the text as the runner had it before, with
    /// `edits` (the new ones among `all`), when a person's save was met and merged under the
    /// write (what that save changed is a hand edit to take up), else `None`.
    ///
    /// # Errors
    /// As [`Store::commit_unless`]; the held edits are kept for the next try.
    pub(super) fn commit(
        &mut self,
        all: &[Edit],
        edits: &[Edit],
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Document>, StoreError> {
        let doc = self.store.commit_unless(all, interrupt)?;
        let mut ours = std::mem::replace(&mut self.doc, doc);
        self.held.clear();
        if self.store.last_merge().is_none() {
            return Ok(None);
        }
        for e in edits {
            ours.apply(e);
        }
        Ok(Some(ours))
    }

    /// Drops the held edits and writes `edits` alone (the runner's record cannot go in).
    ///
    /// # Errors
    /// As [`Store::commit`].
    pub(super) fn write_alone(&mut self, edits: &[Edit]) -> Result<(), StoreError> {
        self.held.clear();
        self.doc = self.store.commit(edits)?;
        Ok(())
    }

    /// One look at M1.md, never blocking on a broken file.
    ///
    /// # Errors
    /// Reading the file failed.
    pub(super) fn reload(&mut self) -> Result<Reloaded, StoreError> {
        match self.store.reload() {
            Ok(Some(doc)) => {
                let before = std::mem::replace(&mut self.doc, doc);
                for e in &self.held {
                    self.doc.apply(e);
                }
                self.invalid_told = None;
                Ok(Reloaded::Changed(before))
            }
            Ok(None) => {
                self.invalid_told = None;
                Ok(Reloaded::Same)
            }
            Err(StoreError::DiskInvalid(errs)) => {
                let msg = errs.to_string();
                if self.invalid_told.as_deref() == Some(msg.as_str()) {
                    return Ok(Reloaded::Invalid(None));
                }
                self.invalid_told = Some(msg.clone());
                Ok(Reloaded::Invalid(Some(msg)))
            }
            Err(e) => Err(e),
        }
    }

    /// What the store met of saves since the last look, as lines for the log: a long wait
    /// for a writer, a late save kept aside.
    pub(super) fn saves_met(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(w) = self.store.take_wait()
            && (w.gave_up || w.took >= LOG_WAITS_FROM)
        {
            lines.push(wait_line(&w));
        }
        if let Some(aside) = self.store.take_set_aside() {
            lines.push(format!(
                "late save: a save written into the file the runner's write had just replaced \
                 was found after a newer save of M1.md, which never saw it; it is kept as {} \
                 (not applied), so compare it with M1.md and copy over what you want",
                aside.display()
            ));
        }
        lines
    }

    /// What the store put back after a stale save, as a line for the log; `None` when it put
    /// nothing back.
    pub(super) fn restored(&mut self) -> Option<String> {
        let r = self.store.take_restored()?;
        Some(format!(
            "stale save: M1.md was saved from a text {} version(s) old; kept what was changed in it, \
             put back what the runner had recorded since: {}",
            r.versions_back,
            r.fields.join(", ")
        ))
    }

    /// The fields a person changed while no runner ran.
    pub(super) fn edited_while_away(&mut self) -> Vec<String> {
        self.store.take_edited_while_away()
    }
}

/// `save: waited 60 ms for pid 4242 (vim) to finish writing M1.md before reading it`.
fn wait_line(w: &WriterWait) -> String {
    let who = if w.writers.is_empty() {
        "a process".to_owned()
    } else {
        w.writers.join(", ")
    };
    let took = if w.took < Duration::from_secs(1) {
        format!("{} ms", w.took.as_millis())
    } else {
        crate::duration::human(w.took)
    };
    if w.gave_up {
        format!(
            "save: {who} kept M1.md open for writing for {took}; its text was taken once it \
             had been still (a process that holds the file open for good is not waited for \
             again)"
        )
    } else {
        format!("save: waited {took} for {who} to finish writing M1.md before reading it")
    }
}
