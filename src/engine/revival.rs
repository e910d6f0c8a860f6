//! Whether a loop whose runner may have died needs reviving, and whether a runner that keeps
//! dying may be revived again: decided from what the runner's lock, the stop files, M1.md and
//! the record of earlier revivals say (`runner::revive` looks, and carries the decision out).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::m1::{M1, Status};

/// Revivals of one loop within [`REVIVAL_WINDOW`] after which it is not revived again.
pub(crate) const MAX_REVIVALS: usize = 3;

/// The window in which [`MAX_REVIVALS`] revivals mean the runner keeps dying.
pub(crate) const REVIVAL_WINDOW: Duration = Duration::from_secs(10 * 60);

/// What a look at a loop that may need reviving found, and what was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Revival {
    /// A runner holds the loop's lock: nothing to do.
    Driven,
    /// The loop is not RUNNING (or M1.md is missing or invalid): nothing to do.
    Idle,
    /// A stop file is present: a revival would only be refused.
    Stopped,
    /// The loop waits out a backoff or usage limit until then; revive it at that time.
    WaitsUntil(DateTime<Utc>),
    /// A runner was started in the background for it.
    Started,
    /// The runner died too often: the loop was put in WAITING instead.
    Halted(String),
}

/// Whether the loop needs a runner now: `driven` (its lock is held), `stopped` (a stop file
/// applies), `m` (M1.md, when it could be read).
#[must_use]
pub(crate) fn look(driven: bool, stopped: bool, m: Option<&M1>, now: DateTime<Utc>) -> Revival {
    if driven {
        return Revival::Driven;
    }
    if stopped {
        return Revival::Stopped;
    }
    let Some(m) = m.filter(|m| m.status == Status::Running) else {
        return Revival::Idle;
    };
    match super::wait_until(m) {
        Some(until) if m.current.task_id.is_none() && until > now => Revival::WaitsUntil(until),
        _ => Revival::Started,
    }
}

/// The revivals (when, and by whom) within [`REVIVAL_WINDOW`] before `now`.
#[must_use]
pub(crate) fn recent(all: &[(DateTime<Utc>, String)], now: DateTime<Utc>) -> Vec<&str> {
    let window = chrono::Duration::from_std(REVIVAL_WINDOW).unwrap_or_default();
    all.iter()
        .filter(|(at, _)| now - *at <= window)
        .map(|(_, by)| by.as_str())
        .collect()
}

/// Why a runner that keeps dying is not revived again, when it is not: the reason, and how
/// a person goes on.
#[must_use]
pub(crate) fn too_many(recent: &[&str], by: &str, state_dir: &str) -> Option<(String, String)> {
    if recent.len() < MAX_REVIVALS {
        return None;
    }
    let minutes = REVIVAL_WINDOW.as_secs() / 60;
    let reason = format!(
        "the runner died {} times within {minutes} minutes after it was revived (last by {}); \
         not reviving it again",
        recent.len(),
        recent.last().copied().unwrap_or(by)
    );
    let how = format!(
        "see loop.log and runner.out in {state_dir} for why the runner dies, then `loop resume`"
    );
    Some((reason, how))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::Document;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_running_loop_with_no_runner_is_revived_unless_it_waits_or_a_stop_holds_it() {
        let now = at("2026-11-22T03:00:00Z");
        let running = Document::parse("STATUS: RUNNING\nGOAL: g\n")
            .unwrap()
            .view();
        assert_eq!(look(false, false, Some(&running), now), Revival::Started);
        assert_eq!(look(true, false, Some(&running), now), Revival::Driven);
        assert_eq!(look(false, true, Some(&running), now), Revival::Stopped);
        assert_eq!(look(false, false, None, now), Revival::Idle);
        let waiting = Document::parse(
            "STATUS: RUNNING\nGOAL: g\nCURRENT:\n  WAIT_UNTIL: 2026-11-22T03:05:00Z\n",
        )
        .unwrap()
        .view();
        assert_eq!(
            look(false, false, Some(&waiting), now),
            Revival::WaitsUntil(at("2026-11-22T03:05:00Z"))
        );
    }

    #[test]
    fn the_third_revival_within_ten_minutes_is_the_last() {
        let now = at("2026-11-22T03:00:00Z");
        let all = vec![
            (at("2026-11-22T02:40:00Z"), "old".to_string()),
            (at("2026-11-22T02:55:00Z"), "a".to_string()),
            (at("2026-11-22T02:58:00Z"), "b".to_string()),
        ];
        let r = recent(&all, now);
        assert_eq!(r, ["a", "b"]);
        assert!(too_many(&r, "c", "state").is_none());
        let mut three = r.clone();
        three.push("c");
        let (reason, how) = too_many(&three, "c", "state").unwrap();
        assert!(reason.contains("3 times") && how.contains("loop resume"));
    }
}
