//! The start ledger (`schedules.ledger.jsonl` beside the schedules file): what became of each
//! due time, so that one is started once and only once, whatever is killed when.
//!
//! A start is written down before it happens: an `intent` (the schedule, the due time, the
//! loop's M1.md and the `LOOP_ID` it held before), flushed to the disk, then the start, then
//! `started` with the new loop's `LOOP_ID`. A daemon that finds an intent without its outcome
//! after a restart looks at the M1.md: a `LOOP_ID` other than the one before means the loop was
//! started; the same one means it was not, and it is started now. A line cut short by a kill
//! is the last one, never flushed, and is read as not written.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The schedule's id.
    pub id: String,
    /// The due time this line is about (for `skipped`: every due time up to it).
    pub due: DateTime<Utc>,
    /// When it was written.
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub what: What,
}

/// What a line says of its due time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum What {
    /// About to start the loop of `file`, whose `LOOP_ID` was `prior` (none: no loop there).
    Intent {
        file: PathBuf,
        prior: Option<String>,
    },
    /// Started: the loop of `file` with this `LOOP_ID`.
    Started { file: PathBuf, loop_id: String },
    /// Not started, and never will be (missed by more than the catch-up window, or the
    /// previous loop still ran).
    Skipped { why: String },
    /// The start was tried and refused; not tried again.
    Failed { why: String },
}

impl What {
    /// Whether this line closes its due time.
    #[must_use]
    pub fn is_outcome(&self) -> bool {
        !matches!(self, Self::Intent { .. })
    }
}

/// Appends `record` and flushes it to the disk before returning.
///
/// # Errors
/// When the ledger cannot be written, naming it.
pub fn append(path: &Path, record: &Record) -> anyhow::Result<()> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("while opening the ledger {}", path.display()))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_data())
        .with_context(|| format!("while writing the ledger {}", path.display()))
}

/// Every whole line of the ledger (none when it does not exist).
#[must_use]
pub fn read(path: &Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What the ledger says of one schedule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// The latest due time any line names: none before it is considered again.
    pub last_due: Option<DateTime<Utc>>,
    /// An intent with no outcome after it: the start may or may not have happened.
    pub open: Option<(DateTime<Utc>, PathBuf, Option<String>)>,
    /// The due times closed, with their outcome.
    pub closed: Vec<(DateTime<Utc>, What)>,
}

/// The history of schedule `id`.
#[must_use]
pub fn history(records: &[Record], id: &str) -> History {
    let mut h = History::default();
    for r in records.iter().filter(|r| r.id == id) {
        h.last_due = h.last_due.max(Some(r.due));
        match &r.what {
            What::Intent { file, prior } => h.open = Some((r.due, file.clone(), prior.clone())),
            w => {
                if h.open.as_ref().is_some_and(|(due, ..)| *due == r.due) {
                    h.open = None;
                }
                h.closed.push((r.due, w.clone()));
            }
        }
    }
    h
}
