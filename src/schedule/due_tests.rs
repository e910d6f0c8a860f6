use chrono::{DateTime, TimeZone, Utc};

use super::{Next, next};
use crate::schedule::file::{Entry, When, parse};
use crate::schedule::ledger::{History, Record, What, history};

fn t(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, m, 0).unwrap()
}

/// Daily at 02:00 UTC, since the 20th, catch-up window 12h.
fn daily() -> Entry {
    parse("## S1\nEVERY: daily 02:00\nGOAL: g\nFILE: /p/state/M1.md\nSINCE: 2026-11-20T00:00:00Z\n")
        .unwrap()
        .remove(0)
}

fn closed(due: DateTime<Utc>) -> History {
    let r = Record {
        id: "S1".into(),
        due,
        at: due,
        what: What::Started {
            file: "/p/state/M1.md".into(),
            loop_id: "x".into(),
        },
    };
    history(&[r], "S1")
}

#[test]
fn a_schedule_waits_for_its_next_due_time() {
    assert_eq!(
        next(&daily(), &closed(t(27, 2, 0)), t(27, 9, 0), &Utc),
        Next::Wait(t(28, 2, 0))
    );
}

#[test]
fn a_due_time_that_came_is_started_and_then_not_again() {
    let now = t(28, 2, 0);
    assert_eq!(
        next(&daily(), &closed(t(27, 2, 0)), now, &Utc),
        Next::Start {
            due: t(28, 2, 0),
            coalesced: false
        }
    );
    assert_eq!(
        next(&daily(), &closed(t(28, 2, 0)), now, &Utc),
        Next::Wait(t(29, 2, 0))
    );
}

#[test]
fn times_missed_while_off_are_started_once_within_the_window() {
    // Off from the 25th to the 28th at 09:00: only the 28th's 02:00 is within 12h.
    assert_eq!(
        next(&daily(), &closed(t(25, 2, 0)), t(28, 9, 0), &Utc),
        Next::Start {
            due: t(28, 2, 0),
            coalesced: true
        }
    );
}

#[test]
fn a_time_missed_by_more_than_the_window_is_skipped() {
    assert_eq!(
        next(&daily(), &closed(t(27, 2, 0)), t(28, 15, 0), &Utc),
        Next::Missed {
            first: t(28, 2, 0),
            through: t(28, 15, 0)
        }
    );
}

#[test]
fn nothing_before_since_is_ever_started() {
    let mut e = daily();
    e.since = t(28, 2, 30);
    assert_eq!(
        next(&e, &History::default(), t(28, 3, 0), &Utc),
        Next::Wait(t(29, 2, 0))
    );
}

#[test]
fn an_intent_without_its_outcome_is_looked_at_first() {
    let r = Record {
        id: "S1".into(),
        due: t(28, 2, 0),
        at: t(28, 2, 0),
        what: What::Intent {
            file: "/p/state/M1.md".into(),
            prior: None,
        },
    };
    let mut e = daily();
    e.paused = true;
    assert_eq!(
        next(&e, &history(&[r], "S1"), t(28, 2, 1), &Utc),
        Next::Unresolved(t(28, 2, 0))
    );
}

#[test]
fn a_paused_schedule_is_never_due() {
    let mut e = daily();
    e.paused = true;
    assert_eq!(
        next(&e, &History::default(), t(28, 2, 0), &Utc),
        Next::Never
    );
}

#[test]
fn a_queued_start_is_due_once() {
    let mut e = daily();
    e.when = When::At(t(28, 2, 0));
    assert_eq!(
        next(&e, &History::default(), t(28, 1, 0), &Utc),
        Next::Wait(t(28, 2, 0))
    );
    assert_eq!(
        next(&e, &History::default(), t(28, 3, 0), &Utc),
        Next::Start {
            due: t(28, 2, 0),
            coalesced: false
        }
    );
    assert_eq!(
        next(&e, &closed(t(28, 2, 0)), t(28, 3, 0), &Utc),
        Next::Never
    );
}
