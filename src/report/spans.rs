//! The timeline's spans, from the records: each task of the ledger (an attempt or a review)
//! with its exit record and its VERIFY's, each gate from the line that opened it to its
//! decision, and each merge of a loop that ran its steps at once from its lines in the log.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::{Outcome, Span, SpanKind};
use crate::bridge::{TaskReport, TaskState};
use crate::engine::LedgerVerdict as Verdict;
use crate::engine::ledger::Entry;
use crate::m1::keys::ResultKey;
use crate::m1::{Gate, GateState, Review};

/// A line of the loop's log: when, and what it said after the time.
pub(super) type Event<'a> = (DateTime<Utc>, &'a str);

/// The lines of `text` (a part of `loop.log`), each with its time; lines without one are left
/// out.
pub(super) fn events(text: &str) -> Vec<Event<'_>> {
    text.lines()
        .filter_map(|l| {
            let (stamp, said) = l.split_once(' ')?;
            let t = DateTime::parse_from_rfc3339(stamp).ok()?;
            Some((t.with_timezone(&Utc), said))
        })
        .collect()
}

/// The spans of one task of the ledger: its run, then its VERIFY when it had one.
pub(super) fn of_task(state_dir: &Path, e: &Entry, lane: &str) -> Vec<Span> {
    let Ok(task) = crate::bridge::check(state_dir, &e.task_id) else {
        return Vec::new();
    };
    let Some(start) = task.started_at else {
        return Vec::new();
    };
    let (outcome, detail) = judged(e, &task);
    let mut spans = vec![Span {
        kind: if e.review {
            SpanKind::Review
        } else {
            SpanKind::Attempt
        },
        n: e.attempt,
        task: Some(e.task_id.clone()),
        lane: lane.to_owned(),
        started_at: start,
        ended_at: ended(&task),
        outcome,
        detail,
    }];
    if !e.review {
        spans.extend(verify_spans(state_dir, &e.task_id, lane));
    }
    spans
}

/// The spans of every VERIFY run of step task `step_task` (one, or more where a runner
/// resumed after a crash ran it again, or a merge was tried again).
pub(super) fn verify_spans(state_dir: &Path, step_task: &str, lane: &str) -> Vec<Span> {
    crate::verify::task_ids(state_dir, step_task)
        .iter()
        .filter_map(|id| verify_span(state_dir, id, lane))
        .collect()
}

/// A VERIFY task's span: passed, failed (with its exit code), timed out, stopped.
fn verify_span(state_dir: &Path, id: &str, lane: &str) -> Option<Span> {
    let task = crate::bridge::check(state_dir, id).ok()?;
    let (outcome, detail) = match task.state {
        TaskState::Done => (Outcome::Passed, None),
        TaskState::Failed => (
            Outcome::Failed,
            Some(
                task.exit_code
                    .map_or_else(|| "ended by a signal".to_owned(), |c| format!("exit {c}")),
            ),
        ),
        TaskState::Timeout => (Outcome::Failed, Some("timed out".to_owned())),
        TaskState::Killed => (Outcome::Stopped, None),
        TaskState::Running => (Outcome::Running, None),
        TaskState::Lost => (Outcome::Unjudged, Some("lost".to_owned())),
    };
    Some(Span {
        kind: SpanKind::Verify,
        n: 0,
        task: Some(id.to_owned()),
        lane: lane.to_owned(),
        started_at: task.started_at?,
        ended_at: ended(&task),
        outcome,
        detail,
    })
}

/// When a task ended; a lost one, at its start (nothing says when it died).
fn ended(task: &TaskReport) -> Option<DateTime<Utc>> {
    match task.state {
        TaskState::Running => None,
        TaskState::Lost => task.started_at,
        _ => task.ended_at,
    }
}

/// How the runner judged a task, from its `judged.json` (a review: what the review said).
fn judged(e: &Entry, task: &TaskReport) -> (Outcome, Option<String>) {
    let Some(j) = &e.judged else {
        return if task.state == TaskState::Running {
            (Outcome::Running, None)
        } else {
            (Outcome::Unjudged, None)
        };
    };
    let said = |key: ResultKey| {
        let path = key.path(e.step);
        j.edits
            .iter()
            .rev()
            .find_map(|s| s.value_at(&path))
            .map(|v| crate::text::one_line(v, 200))
    };
    match j.verdict {
        Verdict::Review => match said(ResultKey::Review).map(|v| Review::parse(&v)) {
            Some(Review::Approved(why)) => (Outcome::Approved, Some(why)),
            Some(Review::Changes(_, what)) => (Outcome::Changes, Some(what)),
            Some(Review::Pending) => (Outcome::Unjudged, None),
            Some(Review::Other(v)) => (Outcome::Failed, Some(v)),
            None => (Outcome::Failed, said(ResultKey::Error)),
        },
        Verdict::Pass => (Outcome::Passed, said(ResultKey::Summary)),
        Verdict::Verify => (Outcome::Passed, None),
        Verdict::Retry | Verdict::Failed => (Outcome::Failed, said(ResultKey::Error)),
        Verdict::Backoff | Verdict::UsageWait => (Outcome::Waited, said(ResultKey::Interrupted)),
        Verdict::Blocked => (Outcome::Blocked, said(ResultKey::Blocked)),
        Verdict::Halt => (Outcome::Halted, said(ResultKey::Error)),
        Verdict::Session | Verdict::Restart => (Outcome::Restarted, said(ResultKey::Handoff)),
        Verdict::Stopped => (Outcome::Stopped, None),
        Verdict::Unknown => (Outcome::Unjudged, None),
    }
}

/// When gate `id` was opened: the first line that names it (`gate: G1 opened: …`, or the
/// step's `fail: …; gate G1 asks what now`).
pub(super) fn opened_at(events: &[Event<'_>], id: &str) -> Option<DateTime<Utc>> {
    let named = [
        format!("gate: {id} "),
        format!("gate {id} "),
        format!("(gate {id})"),
    ];
    events
        .iter()
        .find(|(_, said)| named.iter().any(|n| said.contains(n.as_str())))
        .map(|(t, _)| *t)
}

/// When gate `g` was decided, to the millisecond: its `decide: gate G1` line in the second
/// its `AT` names (which has whole seconds), else `AT`.
pub(super) fn decided_at(events: &[Event<'_>], g: &Gate) -> Option<DateTime<Utc>> {
    let at = g.at?;
    let head = format!("decide: gate {} ", g.id);
    let line = events.iter().find(|(t, said)| {
        said.starts_with(&head) && *t >= at && *t - at < chrono::TimeDelta::seconds(1)
    });
    Some(line.map_or(at, |(t, _)| *t))
}

/// A gate's wait, from its opening (or, with no line for it, the end of the last span before
/// its decision) to its decision; to `end` while it waits.
pub(super) fn gate_span(
    g: &Gate,
    (opened, decided): (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    before: &[Span],
    lane: &str,
    end: DateTime<Utc>,
) -> Option<Span> {
    let until = decided.unwrap_or(end);
    let start = opened.or_else(|| {
        before
            .iter()
            .filter_map(|s| s.ended_at)
            .filter(|t| *t <= until)
            .max()
    })?;
    let decided = g.state == GateState::Decided;
    Some(Span {
        kind: SpanKind::Gate,
        n: crate::m1::gates::gate_number(&g.id).unwrap_or(0),
        task: None,
        lane: lane.to_owned(),
        started_at: start,
        ended_at: decided.then_some(until),
        outcome: if decided {
            Outcome::Decided
        } else {
            Outcome::Pending
        },
        detail: Some(match (&g.choice, &g.by) {
            (Some(c), Some(by)) => format!("{} {}: {c} by {by}", g.id, g.kind),
            (Some(c), None) => format!("{} {}: {c}", g.id, g.kind),
            _ => format!("{} {}: waiting for a decision", g.id, g.kind),
        }),
    })
}

/// The merges of step `n` of a loop that ran its steps at once: each `merge:` line about it,
/// from `since` (its loop's end, or the merge's VERIFY start) to the line.
pub(super) fn merges(events: &[Event<'_>], n: u32, since: Option<DateTime<Utc>>) -> Vec<Span> {
    let about = format!("step {n} ");
    let mut from = since;
    let mut spans = Vec::new();
    for (t, said) in events {
        let Some(what) = said.strip_prefix("merge: ") else {
            continue;
        };
        if !what.contains(&about) || what.contains("goes back to its session") {
            continue;
        }
        let merged = what.starts_with(&format!("step {n} merged into"));
        spans.push(Span {
            kind: SpanKind::Merge,
            n: 0,
            task: None,
            lane: "merge queue".to_owned(),
            started_at: from.filter(|f| f <= t).unwrap_or(*t),
            ended_at: Some(*t),
            outcome: if merged {
                Outcome::Merged
            } else {
                Outcome::Failed
            },
            detail: Some(format!("step {n}: {}", crate::text::one_line(what, 200))),
        });
        from = None;
    }
    spans
}
