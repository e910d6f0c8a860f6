//! What a schedule asks for now, as one pure function of its entry, its ledger and the time:
//! no clock and no I/O, so every rule is a test of a few lines.
//!
//! Rules, as systemd's `Persistent=` timers catch up: due times while the daemon was not
//! running (the machine off) are started once, the latest of them, if it is less than the
//! catch-up window old; older ones are skipped and said so.

use chrono::{DateTime, TimeZone, Utc};

use super::file::{Entry, When};
use super::ledger::History;

/// What to do for one schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing until then.
    Wait(DateTime<Utc>),
    /// Nothing, ever (paused, a one-shot that is over, or a time that never comes).
    Never,
    /// Start the loop of this due time; `coalesced`: earlier due times missed with it.
    Start { due: DateTime<Utc>, coalesced: bool },
    /// A start was begun for this due time and its outcome is not known: look.
    Unresolved(DateTime<Utc>),
    /// Due times from `first` up to `through` were missed by more than the window.
    Missed {
        first: DateTime<Utc>,
        through: DateTime<Utc>,
    },
}

/// What `entry` asks for at `now`, wall-clock times read in `tz`.
#[must_use]
pub fn next<Tz: TimeZone>(entry: &Entry, h: &History, now: DateTime<Utc>, tz: &Tz) -> Next {
    if let Some((due, ..)) = &h.open {
        return Next::Unresolved(*due);
    }
    if entry.paused {
        return Next::Never;
    }
    let window = chrono::Duration::from_std(entry.catch_up).unwrap_or(chrono::Duration::MAX);
    match &entry.when {
        When::At(t) => {
            if h.closed.iter().any(|(due, _)| due == t) {
                Next::Never
            } else if *t > now {
                Next::Wait(*t)
            } else if now - *t <= window {
                Next::Start {
                    due: *t,
                    coalesced: false,
                }
            } else {
                Next::Missed {
                    first: *t,
                    through: *t,
                }
            }
        }
        When::Every { cron, .. } => {
            // Due times after SINCE (a due time at SINCE itself counts) and after the ledger's.
            let since = entry.since - chrono::Duration::seconds(1);
            let lower = h.last_due.map_or(since, |d| d.max(since));
            let Some(first) = cron.next_after(lower, tz) else {
                return Next::Never;
            };
            if first > now {
                return Next::Wait(first);
            }
            let window_start = (now - window).max(lower);
            let mut latest = None;
            let mut t = window_start;
            while let Some(n) = cron.next_after(t, tz).filter(|n| *n <= now) {
                latest = Some(n);
                t = n;
            }
            match latest {
                Some(due) => Next::Start {
                    due,
                    coalesced: first < due,
                },
                None => Next::Missed {
                    first,
                    through: now,
                },
            }
        }
    }
}

#[cfg(test)]
#[path = "due_tests.rs"]
mod tests;
