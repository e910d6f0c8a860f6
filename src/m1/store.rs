//! Reading and writing M1.md on disk: atomic replacement, and compare-and-swap so that a
//! human's edit made while the runner was busy is merged, never overwritten.
//!
//! The guarantee: a commit re-reads the file and applies its edits onto whatever is there.
//! The result goes to a synced temporary file, which is swapped in only if the file still
//! holds what the edits were applied onto; a change means starting over on the newer text.
//!
//! Where the kernel can say who writes the file (Linux, see [`crate::lease`]), a text is read
//! only while no one writes it (a save in place, truncated and then written, is never taken
//! half written), and the comparison and the swap happen under a read lease: no save can be
//! under way or begin meanwhile, and one who opens the file in the instant of the swap has it
//! undone, so that their save lands in the file at the path. On Linux the swap is an exchange
//! that hands back the exact bytes it replaced (see [`super::swap`]).
//!
//! Where the kernel cannot say (or for a writer that keeps the file open for good), a text is
//! judged by its stillness and shape, and the exchange is what catches a save in the instant
//! between the comparison and the swap: a save by rename comes back and the edits are applied
//! onto it; a save in place by an editor that opened the file just before the swap goes on into
//! the file the swap displaced, which is watched for a few seconds, and what arrives in it is
//! put on the file and read like any other save (unless a person saved the file since: then it
//! is kept beside it, never put over the newer save). What remains is the editor's own race: a
//! save computed from a text read *before* the runner's write replaces that write, as it would
//! with any other program (a stale save, see [`super::merge`], which puts the runner's record
//! back).

use std::cell::{Cell, RefCell};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::document::Document;
use super::edit::Edit;
use super::error::{Error, Errors};
use super::merge::{History, Restored};
use super::source::{self, Whole, WriterWait};
use super::swap::{self, Displaced, Guarded, Swapped};

mod held;

use held::Held;

/// How long a changed file must have been still before its text is trusted.
pub(super) const SETTLE: Duration = Duration::from_millis(100);
/// How long a store waits for that stillness. A file saved again and again (an editor's
/// autosave, a `>>` every few milliseconds) is never still that long: after this, a text read
/// twice in a row a few milliseconds apart is trusted, so a read never stalls the runner.
const SETTLE_PATIENCE: Duration = Duration::from_millis(250);
/// The interval of those repeated reads: longer than the pause of an editor that writes in
/// chunks, shorter than the pause between saves of the fastest autosave.
const SAMPLE: Duration = Duration::from_millis(10);
/// How long a store waits before it takes a text that looks cut off: the beginning of the one
/// it knows, or one that stops mid-line.
const CUT_COPY_PATIENCE: Duration = Duration::from_secs(5);
/// How long a store waits for a file that never reads the same twice before it takes what
/// it read.
const SETTLE_MAX: Duration = Duration::from_millis(600);
/// How long a file a swap displaced is watched for a save in place still being written into
/// it (by an editor that opened the file just before the swap), and how many such files at
/// most: in a storm of saves only the newest few can still be written into.
const DISPLACED_WATCH: Duration = Duration::from_secs(5);
const DISPLACED_MAX: usize = 4;

/// Why a read or a commit of M1.md failed: the three cases a caller acts on differently.
#[derive(Debug)]
pub enum StoreError {
    /// The file on disk is not a valid M1.md (a hand edit broke it): wait for the fix.
    DiskInvalid(Errors),
    /// The file on disk is valid, but these edits would make it invalid (a hand edit took
    /// away what they are about): retrying cannot help; a human must decide.
    EditsInvalid(Errors),
    /// Reading or writing failed, or the file never stopped changing.
    Io(anyhow::Error),
    /// The file kept changing under the commit, and the caller's stop condition came true
    /// while it waited for a pause: nothing was written.
    Interrupted,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::DiskInvalid(e) => write!(f, "{e}"),
            StoreError::EditsInvalid(e) => {
                write!(
                    f,
                    "the edits would make the file invalid; nothing was written: {e}"
                )
            }
            StoreError::Io(e) => write!(f, "{e:#}"),
            StoreError::Interrupted => {
                write!(
                    f,
                    "interrupted while the file kept changing; nothing was written"
                )
            }
        }
    }
}

impl std::error::Error for StoreError {
    /// The validation errors of an invalid file or edit.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::DiskInvalid(e) | StoreError::EditsInvalid(e) => Some(e),
            StoreError::Io(_) | StoreError::Interrupted => None,
        }
    }
}

impl From<anyhow::Error> for StoreError {
    fn from(e: anyhow::Error) -> Self {
        StoreError::Io(e)
    }
}

/// A commit that keeps finding the file changed under it starts over at once a few times,
/// then waits between rounds (doubling up to a quarter second) for the saving to pause, and
/// gives up only after this long.
const GIVE_UP_AFTER: Duration = Duration::from_secs(600);
const EAGER_ROUNDS: usize = 5;
/// After this many rounds (about a second of saves faster than a round), the last look is
/// left out where the swap is an exchange but the kernel cannot say who writes the file (where
/// it can, a round is held instead, see `held`): the exchange hands back whatever it displaced
/// and the commit merges onto it, so saves that never pause cannot hold a commit off.
const TRUST_EXCHANGE_AFTER: usize = 12;

/// A file one of our swaps displaced: what it held, and since when it is watched.
#[derive(Debug)]
struct Watched {
    file: Displaced,
    seen: Vec<u8>,
    since: Instant,
    /// A person saved the file at the path since: a save found late in this one never saw
    /// theirs, and is not put over it.
    superseded: bool,
}

/// A save that arrived late in a file one of our swaps displaced.
#[derive(Debug)]
struct Late {
    text: LateText,
    /// A person's newer save is on the file (see [`Watched::superseded`]).
    superseded: bool,
}

/// What a late save wrote into a displaced file.
#[derive(Debug)]
enum LateText {
    /// A text of its own, as an editor saves.
    Whole(Vec<u8>),
    /// Lines added at the end of what the file held, and nothing else (`cmd >> M1.md`): a
    /// change to a text, which goes onto the file as it is now. Two appends into two displaced
    /// files then both arrive; taken as whole texts, the second would replace the first.
    Appended(Vec<u8>),
}

/// How a round of a commit ended.
#[derive(Debug)]
enum Round {
    /// The text is on the file.
    Written,
    /// Not written: someone saved meanwhile; their text, read whole, is the next base.
    Again(Vec<u8>),
    /// Written, over a save made in the instant before the swap (handed back by it): that
    /// save goes back on the file with the edits applied onto it.
    Repair(Vec<u8>),
}

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
    /// `bytes` parsed, when this store wrote them: the next commit onto an unchanged file
    /// starts from it instead of parsing and validating the whole file again.
    parsed: Option<Document>,
    merged: Option<ConflictMerged>,
    /// Versions of the file this store has known, to tell a stale save from a hand edit.
    history: History,
    /// What a stale save read by [`Store::reload`] reverted: edits owed to the next commit.
    owed: Vec<Edit>,
    /// The last stale save found, until the caller takes it.
    restored: Option<Restored>,
    /// What a person changed while no runner watched the file (found at
    /// [`Store::open_with_history`]), until the caller takes it.
    edited_while_away: Vec<String>,
    /// The file as last seen (identity, hash of its bytes): new bytes in the same file are a
    /// save in place, which may be caught half written; another file is a complete one
    /// renamed in.
    seen: Cell<Option<(FileId, u64)>>,
    /// Files our swaps displaced, watched for a while for a save written into them late.
    displaced: Vec<Watched>,
    /// A late save found in a displaced file that could not be put on the file yet.
    late: Option<Late>,
    /// Where a late save that a newer save left behind was kept, until the caller takes it.
    set_aside: Option<PathBuf>,
    /// The longest wait for a writer to finish with the file since the caller last took it.
    waited: RefCell<Option<WriterWait>>,
    /// The file a writer kept open for writing past [`source::WRITER_PATIENCE`]: it is not
    /// waited for again while it holds it (its text is judged by its stillness instead).
    held_for_good: Cell<Option<FileId>>,
    /// Test seam: runs between the last comparison and the swap, to land a hand save in the
    /// one instant no timing can reliably hit.
    #[cfg(test)]
    before_swap: Option<fn(&Path)>,
    /// Test seam: runs before every swap (and is kept), for saves that keep coming.
    #[cfg(test)]
    before_every_swap: Option<fn(&Path)>,
}

impl Store {
    /// Reads and parses the file, once no process writes it (as every read of a store, see
    /// [`source::read_whole`]). Errors carry the path ([`Errors::with_path`]).
    ///
    /// # Errors
    /// [`StoreError::Io`] when the file cannot be read, [`StoreError::DiskInvalid`] when it
    /// is not a valid M1.md (or the path names no regular file of at most 4 MiB).
    pub fn open(path: &Path) -> Result<(Store, Document), StoreError> {
        // Once no one writes it: a runner that starts during a save in place (in the first
        // milliseconds of `loop start`, say) must neither refuse the empty file the truncate
        // left nor write its record onto the first half of the save.
        let read = source::read_whole(path, |_| source::WRITER_PATIENCE)?;
        let doc = decode(path, &read.bytes).map_err(StoreError::DiskInvalid)?;
        let id = FileId::of(&read.meta);
        let whole = read.whole;
        let store = Store::new(path, read.bytes, &doc);
        store.note_wait(read.waited);
        match whole {
            Whole::Yes => store.seen.set(Some((id, hash(&store.bytes)))),
            Whole::WriterStayed => store.held_for_good.set(Some(id)),
            Whole::Unknown => {}
        }
        Ok((store, doc))
    }

    /// [`Store::open`] for a runner: with the versions every runner of this loop has known
    /// (the journal beside the file, [`crate::layout::Layout::versions`]), which this store
    /// goes on keeping. A text saved while no runner was watching is read against them as
    /// any save is: when it is a stale one, it comes back with what it reverted put back
    /// ([`Store::take_restored`] says what), and those edits go out with the next commit.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with_history(path: &Path) -> Result<(Store, Document), StoreError> {
        let (mut store, mut doc) = Store::open(path)?;
        let versions = crate::layout::Layout::versions(path);
        store.history = History::journaled(versions, &doc);
        if !store.history.is_empty() {
            store.owed = store.put_back(&mut doc);
        }
        if store.owed.is_empty() {
            store.edited_while_away = store.history.changes_since_newest(&doc);
            store.history.push(&doc, store.bytes.len());
        }
        Ok((store, doc))
    }

    fn new(path: &Path, bytes: Vec<u8>, doc: &Document) -> Store {
        let mut history = History::default();
        history.push(doc, bytes.len());
        Store {
            path: path.to_path_buf(),
            bytes,
            parsed: None,
            merged: None,
            history,
            owed: Vec::new(),
            restored: None,
            edited_while_away: Vec::new(),
            seen: Cell::new(None),
            displaced: Vec::new(),
            late: None,
            set_aside: None,
            waited: RefCell::new(None),
            held_for_good: Cell::new(None),
            #[cfg(test)]
            before_swap: None,
            #[cfg(test)]
            before_every_swap: None,
        }
    }

    /// What a person changed in the file while no runner watched it, as `PATH: old → new`
    /// (see [`Store::open_with_history`]). Taken once.
    pub fn take_edited_while_away(&mut self) -> Vec<String> {
        std::mem::take(&mut self.edited_while_away)
    }

    /// What the last stale save reverted (see `m1::merge`): the runner logs it. Taken
    /// once.
    pub fn take_restored(&mut self) -> Option<Restored> {
        self.restored.take()
    }

    /// The longest wait for a writer to finish with the file (a save in place under way)
    /// since this was last taken: the runner logs the long ones.
    pub fn take_wait(&mut self) -> Option<WriterWait> {
        self.waited.get_mut().take()
    }

    /// Where a save found late in a file the runner's write had displaced was kept, because
    /// a newer save had replaced the runner's text meanwhile (see [`Store::reload`]). Taken
    /// once.
    pub fn take_set_aside(&mut self) -> Option<PathBuf> {
        self.set_aside.take()
    }

    /// Keeps the longest of the waits since the caller last took them.
    fn note_wait(&self, wait: Option<WriterWait>) {
        let Some(wait) = wait else { return };
        let mut held = self.waited.borrow_mut();
        if held
            .as_ref()
            .is_none_or(|w| wait.gave_up || (!w.gave_up && wait.took > w.took))
        {
            *held = Some(wait);
        }
    }

    /// Re-reads the file (e.g. after a file-watch event). `Ok(None)` if unchanged since the
    /// last read or write.
    ///
    /// A stale save (a text made from an older version, see `m1::merge`) comes back
    /// with what it reverted put back; those edits go out with the next commit. A save that
    /// arrived late in a file one of our swaps displaced is put on the file first, and read
    /// the same way; unless a person saved the file since, whose save never saw it and is not
    /// replaced by it: then the late one is kept beside the file ([`Store::take_set_aside`]).
    /// A late append (`>> M1.md`) replaces nothing: it goes at the end of the file as it is.
    ///
    /// # Errors
    /// The file cannot be read or is invalid; the store still remembers the last good bytes.
    pub fn reload(&mut self) -> Result<Option<Document>, StoreError> {
        let late = self.late.take().or_else(|| self.late_save());
        let mut changed = self.reload_disk()?;
        if let Some(late) = late {
            match &late.text {
                LateText::Whole(text) if late.superseded || changed.is_some() => {
                    self.keep_aside(text)?;
                }
                _ => {
                    if self.put_on_file(late)? {
                        changed = self.reload_disk()?.or(changed);
                    }
                }
            }
        }
        Ok(changed)
    }

    fn reload_disk(&mut self) -> Result<Option<Document>, StoreError> {
        let bytes = self.read()?;
        if bytes == self.bytes {
            return Ok(None);
        }
        let mut doc = decode(&self.path, &bytes).map_err(StoreError::DiskInvalid)?;
        self.owed = self.put_back(&mut doc);
        if self.owed.is_empty() {
            self.history.push(&doc, bytes.len());
        }
        self.bytes = bytes;
        self.parsed = None;
        for w in &mut self.displaced {
            w.superseded = true;
        }
        Ok(Some(doc))
    }

    /// A save written into a file one of our swaps displaced, since we last looked: an editor
    /// that opened the file just before the swap and wrote after it (read once it is done
    /// with it). Files watched longer than [`DISPLACED_WATCH`] are let go.
    fn late_save(&mut self) -> Option<Late> {
        self.displaced
            .retain(|w| w.since.elapsed() < DISPLACED_WATCH);
        for w in &mut self.displaced {
            let Ok(now) = w.file.read() else { continue };
            let held = self
                .held_for_good
                .get()
                .is_some_and(|id| id.ino == w.file.ino());
            if now == w.seen && (held || w.file.writing() != Some(true)) {
                continue;
            }
            let patience = if held {
                Duration::ZERO
            } else {
                source::WRITER_PATIENCE
            };
            let whole = w.file.settled(now, &w.seen, patience).ok()?;
            if whole == w.seen {
                continue;
            }
            let tail = whole.strip_prefix(w.seen.as_slice()).map(<[u8]>::to_vec);
            w.seen.clone_from(&whole);
            let text = match tail {
                Some(tail) => LateText::Appended(tail),
                None if whole != self.bytes => LateText::Whole(whole),
                None => continue,
            };
            return Some(Late {
                text,
                superseded: w.superseded,
            });
        }
        None
    }

    /// Puts a late save on the file, as if it had landed there, so that it is read as any
    /// save is (a stale one gets what it reverted put back); an append goes at the end of the
    /// file as it is. Only over our own text: when someone is saving right now, it waits for
    /// the next look. Whether it was put there.
    fn put_on_file(&mut self, late: Late) -> Result<bool, StoreError> {
        let text = match &late.text {
            LateText::Appended(tail) => [self.bytes.as_slice(), tail].concat(),
            LateText::Whole(text) => text.clone(),
        };
        let staged = swap::stage(&self.path, &text)
            .with_context(|| format!("while writing beside {}", self.path.display()))?;
        let staged = match staged
            .swap_guarded(&self.bytes)
            .with_context(|| format!("while replacing {}", self.path.display()))?
        {
            Guarded::Swapped(d) => {
                self.watch(d, self.bytes.clone());
                return Ok(true);
            }
            Guarded::Changed(_) => {
                self.late = Some(late);
                return Ok(false);
            }
            Guarded::Unguarded(staged) => staged,
        };
        let (now, _) = self.read_once()?;
        if now != self.bytes {
            self.late = Some(late);
            return Ok(false);
        }
        let swapped = staged
            .swap(&self.bytes, source::WRITER_PATIENCE)
            .with_context(|| format!("while replacing {}", self.path.display()))?;
        if let Swapped::Replaced(old, d) = swapped {
            // Yet another save in that instant is displaced in turn: it is found late too.
            let seen = if old == self.bytes {
                old
            } else {
                self.bytes.clone()
            };
            self.watch(d, seen);
        }
        Ok(true)
    }

    /// Keeps a late save that a person's newer save left behind beside the file
    /// (`M1.md.late-<time>`), so that nothing they saved is lost.
    fn keep_aside(&mut self, text: &[u8]) -> Result<(), StoreError> {
        let name = self
            .path
            .file_name()
            .map_or_else(|| "M1.md".into(), |n| n.to_string_lossy());
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
        let aside = self.path.with_file_name(format!("{name}.late-{stamp}"));
        std::fs::write(&aside, text)
            .with_context(|| format!("while keeping a late save as {}", aside.display()))?;
        self.set_aside = Some(aside);
        Ok(())
    }

    /// Keeps a displaced file open and watched, `seen` being what it held when displaced.
    fn watch(&mut self, file: Displaced, seen: Vec<u8>) {
        if self.displaced.len() == DISPLACED_MAX {
            self.displaced.remove(0);
        }
        self.displaced.push(Watched {
            file,
            seen,
            since: Instant::now(),
            superseded: false,
        });
    }

    /// Applies onto someone else's save what it reverted, if it is stale; returns the edits.
    fn put_back(&mut self, theirs: &mut Document) -> Vec<Edit> {
        let Some(r) = self.history.stale(theirs) else {
            return Vec::new();
        };
        let mut merged = theirs.clone();
        for e in &r.edits {
            merged.apply(e);
        }
        // What the person changed and what the runner recorded may not fit together (a plan
        // emptied by hand, a step the record is about): then the save is taken as it is, and
        // the runner's next write finds out.
        if Document::parse(&merged.render()).is_err() {
            return Vec::new();
        }
        *theirs = merged;
        let edits = r.edits.clone();
        self.restored = Some(r);
        edits
    }

    /// Compare-and-swap: applies `edits` onto the file as it is on disk now (merging onto a
    /// hand edit if there was one) and writes atomically. A malformed file on disk, or edits
    /// that would make the file invalid, write nothing and return the errors. Returns the
    /// document now on disk.
    ///
    /// # Errors
    /// [`StoreError`]: the file on disk is malformed, the edits would make it invalid, or I/O.
    pub fn commit(&mut self, edits: &[Edit]) -> Result<Document, StoreError> {
        self.commit_unless(edits, &mut || false)
    }

    /// [`Store::commit`], which gives up with [`StoreError::Interrupted`] when `stop` comes
    /// true while it waits for a file that keeps changing to pause.
    ///
    /// # Errors
    /// As [`Store::commit`], plus [`StoreError::Interrupted`].
    pub fn commit_unless(
        &mut self,
        edits: &[Edit],
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<Document, StoreError> {
        // `base`: the text the edits are applied onto. `expected`: what should be on disk now.
        let mut base = self.read()?;
        let mut expected = base.clone();
        let mut rounds = usize::from(base != self.bytes);
        self.merged = None;
        let give_up = Instant::now() + GIVE_UP_AFTER;
        // Set right after a swap that replaced a hand save: that save is off the disk until
        // the next round puts it back, so that round neither waits nor gives up.
        let mut repairing = false;
        // Rounds lost to a save; and whether a round may be held (see `held`) here.
        let mut lost = 0;
        let mut holdable = true;
        loop {
            if !repairing && self.pace(rounds, give_up, stop)? {
                // What was read before the pause is stale by now.
                base = self.read()?;
                expected.clone_from(&base);
            }
            if rounds > 0 {
                self.merged = Some(ConflictMerged { rounds });
            }
            // (Never while a save handed back by the exchange is off the file: it is in `base`
            // only, and a held round reads the file.)
            if lost > 0 && holdable && !repairing && !self.held_at_path() {
                match self.held_round(edits)? {
                    Held::Done(doc) => return Ok(doc),
                    Held::Again(now) => {
                        base = now;
                        expected.clone_from(&base);
                        rounds += 1;
                        continue;
                    }
                    Held::Unguarded => holdable = false,
                }
            }
            repairing = false;
            let (text, written) = self.apply_onto(&base, edits)?;
            if text == base && base == expected {
                self.bytes = base;
                self.parsed = Some(written.clone());
                self.owed.clear();
                self.history.push(&written, text.len());
                return Ok(written);
            }
            let noted = self.history.stage(&written, text.len());
            let staged = swap::stage(&self.path, &text)
                .with_context(|| format!("while writing beside {}", self.path.display()))?;
            match self.swap_round(staged, &text, &expected, rounds)? {
                Round::Written => {
                    self.note_written(&text);
                    self.owed.clear();
                    self.history.push_staged(noted, &written, text.len());
                    self.bytes = text;
                    self.parsed = Some(written.clone());
                    return Ok(written);
                }
                Round::Again(now) => {
                    base = now;
                    expected.clone_from(&base);
                    lost += 1;
                }
                Round::Repair(old) => {
                    lost += 1;
                    self.bytes.clone_from(&text);
                    self.parsed = None;
                    base = old;
                    expected = text;
                    repairing = true;
                }
            }
            rounds += 1;
        }
    }

    /// Whether the file at the path is one a writer keeps open for good (see
    /// [`Store::held_for_good`]).
    fn held_at_path(&self) -> bool {
        self.held_for_good
            .get()
            .is_some_and(|id| std::fs::metadata(&self.path).is_ok_and(|m| FileId::of(&m) == id))
    }

    /// Puts the staged `text` in place of `expected`. Where the kernel can say who writes the
    /// file, under a lease ([`swap::Staged::swap_guarded`]): nothing is swapped while a save
    /// is under way or begins, and a save that came meanwhile is read whole for the next round.
    /// Elsewhere, or for a file a writer holds for good: a last look (left out once many
    /// rounds lost to saves that never pause), then an exchange that hands back what it
    /// replaced.
    fn swap_round(
        &mut self,
        staged: swap::Staged,
        text: &[u8],
        expected: &[u8],
        rounds: usize,
    ) -> Result<Round, StoreError> {
        let held = self.held_at_path();
        let staged = if held {
            staged
        } else {
            #[cfg(test)]
            if let Some(hook) = self.before_swap.take().or(self.before_every_swap) {
                hook(&self.path);
            }
            match staged
                .swap_guarded(expected)
                .with_context(|| format!("while replacing {}", self.path.display()))?
            {
                Guarded::Swapped(displaced) => {
                    self.watch(displaced, expected.to_vec());
                    return Ok(Round::Written);
                }
                Guarded::Changed(Some(now)) => return Ok(Round::Again(now)),
                Guarded::Changed(None) => return Ok(Round::Again(self.read()?)),
                Guarded::Unguarded(staged) => staged,
            }
        };
        if self.last_look(rounds, expected)? != expected {
            // What the quick look saw may be a save caught halfway: the next round starts from
            // a careful read.
            return Ok(Round::Again(self.read()?));
        }
        #[cfg(test)]
        if let Some(hook) = self.before_swap.take().or(self.before_every_swap) {
            hook(&self.path);
        }
        let patience = if held {
            Duration::ZERO
        } else {
            source::WRITER_PATIENCE
        };
        let swapped = staged
            .swap(expected, patience)
            .with_context(|| format!("while replacing {}", self.path.display()))?;
        Ok(match swapped {
            Swapped::Replaced(old, displaced) if old != expected => {
                // Saved by hand in the instant before the swap: merge onto it, or put it back
                // untouched if it is malformed.
                if let Err(err) = decode(&self.path, &old) {
                    self.restore(&old, text)?;
                    return Err(StoreError::DiskInvalid(err));
                }
                self.watch(displaced, old.clone());
                Round::Repair(old)
            }
            Swapped::Replaced(old, displaced) => {
                self.watch(displaced, old);
                Round::Written
            }
            Swapped::Unknown => Round::Written,
        })
    }

    /// The last look before the swap: a hand edit since then means start over on it. The
    /// bytes as they are, without waiting for the file to settle: waiting here would only let
    /// the next save in, and a round must stay short for a commit to get through saves that
    /// come every few milliseconds. (The exchange still catches a save in the instant after
    /// this look; after [`TRUST_EXCHANGE_AFTER`] rounds it alone guards the swap.)
    fn last_look(&self, rounds: usize, expected: &[u8]) -> Result<Vec<u8>, StoreError> {
        if rounds <= TRUST_EXCHANGE_AFTER || !swap::EXCHANGES {
            Ok(self.read_once()?.0)
        } else {
            Ok(expected.to_vec())
        }
    }

    /// Paces the rounds of a commit that keeps losing to saves: gives up after
    /// [`GIVE_UP_AFTER`], and past [`EAGER_ROUNDS`] pauses (doubling from 8 ms to 250 ms)
    /// unless `stop` says to give up now. Whether it paused.
    fn pace(
        &self,
        rounds: usize,
        give_up: Instant,
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<bool, StoreError> {
        if Instant::now() >= give_up {
            return Err(StoreError::Io(anyhow::anyhow!(
                "{} kept changing for {} while the runner tried to save it ({rounds} rounds); \
                 the runner's edits were not written",
                self.path.display(),
                crate::duration::human(GIVE_UP_AFTER),
            )));
        }
        if rounds <= EAGER_ROUNDS {
            return Ok(false);
        }
        if stop() {
            return Err(StoreError::Interrupted);
        }
        let exp = u32::try_from(rounds - EAGER_ROUNDS)
            .unwrap_or(u32::MAX)
            .min(7);
        std::thread::sleep(Duration::from_millis(8u64 << exp).min(Duration::from_millis(250)));
        Ok(true)
    }

    /// The edits applied onto the text `base` (after what a stale save reverted, or what is
    /// still owed from one): the new bytes and their document, checked valid.
    fn apply_onto(
        &mut self,
        base: &[u8],
        edits: &[Edit],
    ) -> Result<(Vec<u8>, Document), StoreError> {
        // What this store wrote last and finds unchanged: parsed when it was written (taken:
        // the write that follows leaves its own parse, any other way out a fresh read).
        let parsed = self.parsed.take().filter(|_| base == self.bytes);
        let mut doc = match parsed {
            Some(doc) => doc,
            None => decode(&self.path, base).map_err(StoreError::DiskInvalid)?,
        };
        if base == self.bytes {
            for e in &self.owed {
                doc.apply(e);
            }
        } else {
            // Someone else's save: what a stale one reverted goes back first.
            self.owed = self.put_back(&mut doc);
        }
        for e in edits {
            doc.apply(e);
        }
        let text = doc.render().into_bytes();
        // Over the size every reader takes, the file would be refused by the runner's own
        // next read and by every command: the record is not written (the runner halts).
        if u64::try_from(text.len()).is_ok_and(|n| n > super::MAX_BYTES) {
            let msg = format!(
                "with the runner's record M1.md would be {} bytes, over the {} it may hold: \
                 trim what need not be there (prose, comments, long values), then `loop resume`",
                text.len(),
                crate::named_file::size(super::MAX_BYTES),
            );
            return Err(StoreError::EditsInvalid(
                super::Errors::new(vec![super::Error::new(1, 1, msg)]).with_path(&self.path),
            ));
        }
        let written = std::str::from_utf8(&text)
            .map_err(|e| StoreError::Io(e.into()))
            .and_then(|t| {
                Document::parse(t)
                    .map_err(|errs| StoreError::EditsInvalid(errs.with_path(&self.path)))
            })?;
        Ok((text, written))
    }

    /// Puts a malformed hand save back in place of our write (unless yet another save
    /// replaced our write meanwhile), so a broken file is never overwritten.
    fn restore(&self, theirs: &[u8], ours: &[u8]) -> anyhow::Result<()> {
        let staged = swap::stage(&self.path, theirs)
            .with_context(|| format!("while restoring {}", self.path.display()))?;
        if self.read()? == ours {
            staged
                .swap(ours, Duration::ZERO)
                .with_context(|| format!("while restoring {}", self.path.display()))?;
        }
        Ok(())
    }

    /// Writes a brand-new file atomically (for `loop start`), creating parent directories.
    /// Replaces an existing file: callers decide whether that is allowed.
    ///
    /// # Errors
    /// `text` is not a valid M1.md ([`Errors`]), or the file cannot be written.
    pub fn create(path: &Path, text: &str) -> anyhow::Result<(Store, Document)> {
        let doc = Document::parse(text).map_err(|e| anyhow::Error::new(e.with_path(path)))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::dirs::create_state_dir(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
        }
        swap::stage(path, text.as_bytes())
            .and_then(|s| s.swap(b"", Duration::ZERO))
            .with_context(|| format!("while writing {}", path.display()))?;
        let mut store = Store::new(path, text.as_bytes().to_vec(), &doc);
        // A new loop: the versions of the one before it are no base of a save of this one.
        store.history = History::fresh(crate::layout::Layout::versions(path), &doc, text.len());
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

    /// The file's bytes once no one writes it: read under a lease where the kernel can say
    /// (see [`source::read_whole`]); an editor that saves in place (truncate, then write) shows
    /// a reader an empty or cut text for a moment, and merging onto that would lose the rest.
    /// Where the kernel cannot say, or for a writer that holds the file for good, judged by
    /// the text's stillness and shape instead ([`Store::read_by_stillness`]).
    fn read(&self) -> Result<Vec<u8>, StoreError> {
        let held = self.held_for_good.get();
        let read = source::read_whole(&self.path, |m| {
            if held == Some(FileId::of(m)) {
                Duration::ZERO
            } else {
                source::WRITER_PATIENCE
            }
        })?;
        self.note_wait(read.waited);
        let id = FileId::of(&read.meta);
        match read.whole {
            Whole::Yes => {
                if held == Some(id) {
                    self.held_for_good.set(None);
                }
                self.seen.set(Some((id, hash(&read.bytes))));
                Ok(read.bytes)
            }
            Whole::WriterStayed => {
                self.held_for_good.set(Some(id));
                self.read_by_stillness()
            }
            Whole::Unknown => self.read_by_stillness(),
        }
    }

    /// The file's bytes, where no one can say whether a writer is at work. Bytes this store
    /// did not write are trusted only once the file has been still for [`SETTLE`], and a text
    /// that looks cut off (the beginning of the one we know, or one that stops mid-line) only
    /// after a long wait.
    fn read_by_stillness(&self) -> Result<Vec<u8>, StoreError> {
        let began = Instant::now();
        loop {
            let (bytes, meta) = self.read_once()?;
            let id = FileId::of(&meta);
            let hash = hash(&bytes);
            // Same file, other bytes than at the last look: a save in place, maybe half done.
            // (The same bytes twice in a row, or another file renamed in, are whole.)
            let rewritten_in_place = matches!(
                self.seen.replace(Some((id, hash))),
                Some((was_id, was_hash)) if was_id == id && was_hash != hash
            );
            let waited = began.elapsed();
            // A save in place caught halfway is, most often, a cut-off copy of the text we
            // know (empty, right after the truncate, or its first part): however still the
            // file seems (a writer held up on a busy machine), that is taken only after a
            // long wait, as the deletion of the file's end it might also be.
            // The same for a text that stops mid-line where the one we know ended its last
            // line: the rest of a save is still to come (or the newline was taken away).
            let cut_copy = (bytes.len() < self.bytes.len() && self.bytes.starts_with(&bytes))
                || (!bytes.ends_with(b"\n") && self.bytes.ends_with(b"\n"));
            if cut_copy && waited < CUT_COPY_PATIENCE {
                std::thread::sleep(SAMPLE);
                continue;
            }
            // A save in place caught halfway mostly ends mid-line: such a text is taken only
            // once still (or at the end of patience).
            let whole_lines = bytes.ends_with(b"\n");
            if bytes == self.bytes || (!rewritten_in_place && whole_lines) || waited >= SETTLE_MAX {
                return Ok(bytes);
            }
            // Whole lines appended to the text we know (`>>`) cannot be a cut-off save.
            if bytes.len() > self.bytes.len()
                && bytes.starts_with(&self.bytes)
                && bytes.ends_with(b"\n")
            {
                return Ok(bytes);
            }
            // Read first, then look at the time: a write after the read makes the file young.
            let age = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or(SETTLE);
            if age >= SETTLE {
                return Ok(bytes);
            }
            let pause = if waited < SETTLE_PATIENCE {
                SETTLE.saturating_sub(age) // age < SETTLE, checked above
            } else {
                SAMPLE
            };
            std::thread::sleep(pause);
        }
    }

    /// The bytes and the metadata of one open file, so both describe the same inode.
    fn read_once(&self) -> Result<(Vec<u8>, std::fs::Metadata), StoreError> {
        source::read(&self.path)
    }

    /// Remembers the file now at the path (after this store replaced it with `bytes`).
    fn note_written(&self, bytes: &[u8]) {
        let id = std::fs::metadata(&self.path).ok().map(|m| FileId::of(&m));
        self.seen.set(id.map(|id| (id, hash(bytes))));
    }
}

fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Which file a path names: the inode number alone is not enough, because an editor's next
/// temporary file often gets the number of the file it just replaced; the birth time tells
/// them apart where the file system records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    born: Option<std::time::SystemTime>,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            born: meta.created().ok(),
        }
    }
}

/// Parses file bytes; invalid UTF-8 is reported at its line and column like any other error.
pub(super) fn decode(path: &Path, bytes: &[u8]) -> Result<Document, Errors> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        #[expect(
            clippy::naive_bytecount,
            reason = "an error path; not worth the `bytecount` crate"
        )]
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        // A byte order mark is no column an editor shows.
        let from = if start == 0 && good.starts_with("\u{feff}".as_bytes()) {
            3
        } else {
            start
        };
        let column = String::from_utf8_lossy(&good[from..]).chars().count() + 1;
        let err = Error::new(line, column, "expected UTF-8 text: invalid byte sequence");
        Errors::new(vec![err]).with_path(path)
    })?;
    Document::parse(text).map_err(|e| e.with_path(path))
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;
    use crate::m1::Status;

    const SEED: &str = include_str!("../../tests/fixtures/m1/seed.md");

    fn seed() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("M1.md");
        std::fs::write(&file, SEED).unwrap();
        (dir, file)
    }

    fn save_by_rename(path: &Path, text: &str) {
        let tmp = path.with_extension("hand~");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    #[test]
    fn a_save_in_the_instant_before_the_swap_is_merged() {
        let (_dir, file) = seed();
        let (mut store, _) = Store::open(&file).unwrap();
        store.before_swap =
            Some(|p| save_by_rename(p, &SEED.replace("GOAL: /edit", "GOAL: /EDIT")));
        let doc = store.commit(&[Edit::Status(Status::Done)]).unwrap();
        let expected = SEED
            .replace("GOAL: /edit", "GOAL: /EDIT")
            .replace("STATUS: RUNNING ", "STATUS: DONE    ");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), expected);
        assert_eq!(doc.render(), expected);
        assert_eq!(store.last_merge(), Some(ConflictMerged { rounds: 1 }));
        assert!(store.reload().unwrap().is_none());
    }

    #[test]
    fn a_malformed_save_in_the_instant_before_the_swap_is_put_back() {
        let (_dir, file) = seed();
        let (mut store, _) = Store::open(&file).unwrap();
        store.before_swap = Some(|p| save_by_rename(p, "GOAL: x\n  BROKEN\n"));
        let err = store.commit(&[Edit::Status(Status::Done)]).unwrap_err();
        assert!(matches!(err, StoreError::DiskInvalid(_)), "{err:#}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "GOAL: x\n  BROKEN\n"
        );
    }

    #[test]
    fn a_stale_save_made_while_no_store_watched_is_read_against_the_versions_one_knew() {
        let (_dir, file) = seed();
        let (mut first, _) = Store::open_with_history(&file).unwrap();
        first
            .commit(&[crate::m1::keys::Top::NextAction.set("step 3 next")])
            .unwrap();
        first.commit(&[Edit::Status(Status::Done)]).unwrap();
        drop(first);
        // The seed as an editor loaded it before both writes, with a line typed into it.
        let theirs = SEED.replace("GOAL: /edit", "GOAL: /EDIT");
        save_by_rename(&file, &theirs);
        let (mut second, doc) = Store::open_with_history(&file).unwrap();
        let r = second.take_restored().expect("read as a stale save");
        assert_eq!(r.versions_back, 2, "{r:?}");
        assert_eq!(
            doc.get(&["GOAL"]).as_deref(),
            Some("/EDITのSIGTERMバグを修正")
        );
        assert_eq!(doc.view().status, Status::Done);
        second.commit(&[]).unwrap();
        let on_disk = std::fs::read_to_string(&file).unwrap();
        assert!(on_disk.contains("NEXT_ACTION: step 3 next"), "{on_disk}");
        // A plain open (`loop status`) neither reads nor writes the versions.
        let (mut plain, _) = Store::open(&file).unwrap();
        assert!(plain.take_restored().is_none());
    }

    #[test]
    fn a_hand_edit_of_the_newest_text_made_while_no_store_watched_is_taken_as_it_is() {
        let (_dir, file) = seed();
        let (mut first, _) = Store::open_with_history(&file).unwrap();
        first.commit(&[Edit::Status(Status::Done)]).unwrap();
        drop(first);
        let theirs = std::fs::read_to_string(&file)
            .unwrap()
            .replace("GOAL: /edit", "GOAL: /EDIT");
        save_by_rename(&file, &theirs);
        let (mut second, doc) = Store::open_with_history(&file).unwrap();
        assert!(second.take_restored().is_none());
        assert_eq!(doc.render(), theirs);
    }

    /// The journal of `file` as a runner killed between its swap and its note leaves it:
    /// without the line noted after the swap.
    fn cut_the_last_noted_version(file: &Path) {
        let versions = crate::layout::Layout::versions(file);
        let text = std::fs::read_to_string(&versions).unwrap();
        let kept: Vec<&str> = text.lines().collect();
        let cut = kept[..kept.len() - 1].join("\n") + "\n";
        std::fs::write(&versions, cut).unwrap();
    }

    /// A runner killed right after its write replaced the file, before it noted the new
    /// version in the journal: the next runner took its own last write for a hand edit
    /// ("changed by hand while no runner ran: `PARALLEL.STEP_3.BASE` …").
    #[test]
    fn a_runners_own_last_write_is_not_taken_for_a_hand_edit_when_it_died_before_noting_it() {
        let (_dir, file) = seed();
        let (mut first, _) = Store::open_with_history(&file).unwrap();
        first.commit(&[Edit::Status(Status::Done)]).unwrap();
        drop(first);
        cut_the_last_noted_version(&file);
        let (mut second, doc) = Store::open_with_history(&file).unwrap();
        assert_eq!(second.take_edited_while_away(), Vec::<String>::new());
        assert!(second.take_restored().is_none());
        assert_eq!(doc.view().status, Status::Done);
    }

    /// The same cut, but the text on file is not the one the runner was writing (a person
    /// saved over it): that is a hand edit, and is said.
    #[test]
    fn a_hand_edit_over_a_write_never_noted_is_still_a_hand_edit() {
        let (_dir, file) = seed();
        let (mut first, _) = Store::open_with_history(&file).unwrap();
        first.commit(&[Edit::Status(Status::Done)]).unwrap();
        drop(first);
        cut_the_last_noted_version(&file);
        let theirs = std::fs::read_to_string(&file)
            .unwrap()
            .replace("GOAL: /edit", "GOAL: /EDIT");
        save_by_rename(&file, &theirs);
        let (mut second, _) = Store::open_with_history(&file).unwrap();
        let away = second.take_edited_while_away();
        assert!(away.iter().any(|c| c.starts_with("GOAL")), "{away:?}");
    }

    #[test]
    fn a_new_loop_forgets_the_versions_of_the_one_before() {
        let (_dir, file) = seed();
        let (mut first, _) = Store::open_with_history(&file).unwrap();
        first.commit(&[Edit::Status(Status::Done)]).unwrap();
        drop(first);
        Store::create(&file, SEED).unwrap();
        let (mut second, doc) = Store::open_with_history(&file).unwrap();
        assert!(second.take_restored().is_none());
        assert_eq!(doc.render(), SEED);
    }

    thread_local! {
        /// The editor's open file, for the hook below.
        static EDITOR: std::cell::RefCell<Option<std::fs::File>> = const { std::cell::RefCell::new(None) };
    }

    /// An editor that saves in place opens the file just before the swap (its path still
    /// names the old file), and truncates and writes it a moment later.
    fn open_before_the_swap(p: &Path) {
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        EDITOR.with(|e| *e.borrow_mut() = Some(f));
    }

    /// The editor's save, written `after` the hook on a thread of its own, then closed.
    fn write_through_the_editor(text: &str, after: Duration) -> std::thread::JoinHandle<()> {
        use std::io::{Seek, Write};
        let mut f = EDITOR.with(|e| e.borrow_mut().take()).unwrap();
        let text = text.to_owned();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            f.set_len(0).unwrap();
            f.rewind().unwrap();
            f.write_all(text.as_bytes()).unwrap();
        })
    }

    #[test]
    fn an_in_place_save_that_overlaps_the_runners_write_is_not_lost() {
        let (_dir, file) = seed();
        let (mut store, _) = Store::open_with_history(&file).unwrap();
        // The hook runs inside the commit; the editor's thread writes once the commit is at
        // its swap (or past it).
        let theirs = SEED.replace("GOAL: /edit", "GOAL: /EDIT");
        let hook_then_write = |p: &Path| {
            open_before_the_swap(p);
            WRITER.with(|w| {
                *w.borrow_mut() = Some(write_through_the_editor(
                    &SEED.replace("GOAL: /edit", "GOAL: /EDIT"),
                    Duration::from_millis(30),
                ));
            });
        };
        store.before_swap = Some(hook_then_write);
        store.commit(&[Edit::Status(Status::Done)]).unwrap();
        WRITER.with(|w| w.borrow_mut().take().unwrap().join().unwrap());
        // Whether the commit waited for the editor or the save landed in the file it
        // displaced, the next look has both.
        let doc = match store.reload().unwrap() {
            Some(doc) => doc,
            None => Document::parse(&std::fs::read_to_string(&file).unwrap()).unwrap(),
        };
        assert_eq!(
            doc.get(&["GOAL"]).as_deref(),
            Some("/EDITのSIGTERMバグを修正"),
            "{theirs}"
        );
        assert_eq!(doc.view().status, Status::Done, "{}", doc.render());
        store.commit(&[]).unwrap();
        let on_disk = std::fs::read_to_string(&file).unwrap();
        assert!(on_disk.contains("GOAL: /EDIT"), "{on_disk}");
        assert!(on_disk.contains("STATUS: DONE"), "{on_disk}");
    }

    thread_local! {
        static WRITER: std::cell::RefCell<Option<std::thread::JoinHandle<()>>> = const { std::cell::RefCell::new(None) };
    }

    /// How many saves [`save_in_place_on_what_is_there`] made.
    static SAVES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    const SAVES_MAX: usize = 20;

    /// An editor that reloads the file whenever it changes and saves in place right after,
    /// adding a line `# save N` each time (up to [`SAVES_MAX`]).
    fn save_in_place_on_what_is_there(p: &Path) {
        use std::sync::atomic::Ordering;
        let n = SAVES.fetch_add(1, Ordering::SeqCst) + 1;
        if n > SAVES_MAX {
            return;
        }
        let text = format!("{}# save {n}\n", std::fs::read_to_string(p).unwrap());
        std::fs::write(p, text).unwrap();
    }

    // In a process of its own (`rusty_fork_test!` starts the test binary again for it alone):
    // a child another test forks in the instant the editor has the file open holds its
    // descriptor until it execs, the lease is refused meanwhile, and the rounds it counts
    // would be that other test's.
    rusty_fork::rusty_fork_test! {
        #![rusty_fork(timeout_ms = 60000)]

        #[test]
        fn a_commit_that_keeps_losing_to_saves_in_place_loses_none_of_them() {
            let (_dir, file) = seed();
            let (mut store, _) = Store::open_with_history(&file).unwrap();
            // A save lands before every swap the commit tries: each round finds the file changed.
            store.before_every_swap = Some(save_in_place_on_what_is_there);
            let doc = store.commit(&[Edit::Status(Status::Done)]).unwrap();
            store.before_every_swap = None;
            assert!(store.reload().unwrap().is_none());
            let on_disk = std::fs::read_to_string(&file).unwrap();
            assert_eq!(doc.render(), on_disk);
            assert!(on_disk.starts_with("STATUS: DONE"), "{on_disk}");
            let made = SAVES
                .load(std::sync::atomic::Ordering::SeqCst)
                .min(SAVES_MAX);
            let lost: Vec<usize> = (1..=made)
                .filter(|n| !on_disk.contains(&format!("# save {n}\n")))
                .collect();
            assert!(lost.is_empty(), "saves lost: {lost:?} of {made}\n{on_disk}");
            // Through at the round after the one it lost, however many saves would still come.
            assert_eq!(store.last_merge(), Some(ConflictMerged { rounds: 1 }));
        }
    }
}
