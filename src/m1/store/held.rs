//! A round of a commit with the file held, for a commit that keeps losing to saves.
//!
//! A round reads the file, applies the edits, stages the result and swaps it in only if the
//! file still holds what was read. Saves every few milliseconds can make every round lose (a
//! round, with the fsync of what it stages, takes longer than that on a busy machine). Where
//! the kernel can say who writes the file, the round after a lost one is made under a read
//! lease on it ([`crate::lease`]): from the read to the swap no save can begin (a writer waits
//! in its `open` for the milliseconds of one write), so the commit gets through, and never
//! over a save it has not read.
//!
//! (Before, a commit that lost a dozen rounds swapped without a last look, trusting the
//! exchange to hand back what it displaced, and then put that save back with its edits. But
//! in between, the runner's text, which did not have that save, was on the file: an editor
//! that reloaded it then saved on top of it, and the save it had made before was lost.)

use anyhow::Context;

use super::super::document::Document;
use super::super::edit::Edit;
use super::super::swap::{self, Guarded, Taken};
use super::{Store, StoreError};

/// How a held round ended.
#[derive(Debug)]
pub(super) enum Held {
    /// Written (or nothing to write): the document now on the file.
    Done(Document),
    /// Someone writes the file, or came to while it was swapped: its text once they are done,
    /// read whole, for the next round.
    Again(Vec<u8>),
    /// The kernel cannot say who writes the file here: the usual rounds go on.
    Unguarded,
}

impl Store {
    /// Reads the file under a read lease, applies `edits` onto what it holds and swaps the
    /// result in before the lease is let go.
    pub(super) fn held_round(&mut self, edits: &[Edit]) -> Result<Held, StoreError> {
        let taken = swap::lease(&self.path)
            .with_context(|| format!("while reading {}", self.path.display()))?;
        let held = match taken {
            Taken::Held(held) => held,
            Taken::Writing | Taken::Refused => return Ok(Held::Again(self.read()?)),
            Taken::Unknown => return Ok(Held::Unguarded),
        };
        let base = held.bytes().to_vec();
        // A malformed save, or edits it makes invalid: the lease is let go with the error.
        let (text, written) = self.apply_onto(&base, edits)?;
        if text == base {
            drop(held);
            self.note_written(&base);
            self.owed.clear();
            self.history.push(&written, text.len());
            self.bytes = base;
            self.parsed = Some(written.clone());
            return Ok(Held::Done(written));
        }
        let noted = self.history.stage(&written, text.len());
        let staged = swap::stage(&self.path, &text)
            .with_context(|| format!("while writing beside {}", self.path.display()))?;
        match staged
            .swap_leased(held)
            .with_context(|| format!("while replacing {}", self.path.display()))?
        {
            Guarded::Swapped(displaced) => {
                self.watch(displaced, base);
                self.note_written(&text);
                self.owed.clear();
                self.history.push_staged(noted, &written, text.len());
                self.bytes = text;
                self.parsed = Some(written.clone());
                Ok(Held::Done(written))
            }
            Guarded::Changed(_) => Ok(Held::Again(self.read()?)),
            Guarded::Unguarded(_) => Ok(Held::Unguarded),
        }
    }
}
