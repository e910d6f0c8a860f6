//! When a usage limit resets, from the wall-clock minute an agent CLI prints for it. Both CLIs
//! cut the moment down to its minute (Codex: a reset at 21:43:48 is `try again at 9:43 PM`;
//! Claude Code: `resets 5:06am (UTC)` for 05:06:50), and name no day when it is near. Read as
//! the minute's start, a limit that resets within the minute of the refusal looked already
//! past, and so a day away; and a wake at that start, before the real reset, met a second
//! refusal of the same minute, by then past. So the minute is read as its end, a minute that
//! ended a moment ago as "due now", and a day-long wait guessed from a time without a day is
//! said wherever the wait is shown.

use chrono::{DateTime, Duration, NaiveDate, NaiveTime, TimeZone, Utc};

/// A minute that ended at most this long ago was named by a limit that is due: the service
/// is a little late, or the clocks disagree a little, never a day off.
const JUST_PAST: Duration = Duration::minutes(5);

/// How long after a refusal naming a minute just past the loop tries again.
const TRY_AGAIN_AFTER: Duration = Duration::minutes(1);

/// A wait this long or longer, read from a time without a day, is a guess worth saying.
const LONG_GUESS: Duration = Duration::hours(12);

/// A reset as read from the agent's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reset {
    pub(crate) at: DateTime<Utc>,
    /// How `at` was guessed, when the words alone do not fix it (a bare time past or far
    /// off, a minute just past): the loop says so beside its wait.
    pub(crate) guess: Option<String>,
}

/// The reset named by `time` on no day, as `shown` (the words as printed), in `tz`: the end
/// of the next such minute, or, when one ended within [`JUST_PAST`], a short wait from now.
#[must_use]
pub(crate) fn bare<Tz: TimeZone>(
    now: DateTime<Utc>,
    time: NaiveTime,
    tz: &Tz,
    shown: &str,
) -> Option<Reset> {
    let today = now.with_timezone(tz).date_naive();
    // Yesterday's too: a refusal printed just before midnight and read just after it.
    let ends = [today.pred_opt()?, today, today.succ_opt()?]
        .into_iter()
        .filter_map(|day| minute_end(day, time, tz));
    let end = ends.into_iter().find(|end| *end > now - JUST_PAST)?;
    if end <= now {
        return Some(just_past(now, end, shown));
    }
    let guess = (end - now >= LONG_GUESS).then(|| {
        format!(
            "the agent named only `{shown}`, without a day: read as the next one, {} away",
            span(end - now)
        )
    });
    Some(Reset { at: end, guess })
}

/// The reset named by `time` on `day`, as `shown`, in `tz`: the minute's end; a minute that
/// ended within [`JUST_PAST`] is due, tried again shortly; one long past is left as it is,
/// for the loop to treat as an unknown reset.
#[must_use]
pub(crate) fn dated<Tz: TimeZone>(
    now: DateTime<Utc>,
    day: NaiveDate,
    time: NaiveTime,
    tz: &Tz,
    shown: &str,
) -> Option<Reset> {
    let end = minute_end(day, time, tz)?;
    if end <= now && end > now - JUST_PAST {
        return Some(just_past(now, end, shown));
    }
    Some(Reset {
        at: end,
        guess: None,
    })
}

/// The end of the minute `time` on `day` in `tz`.
fn minute_end<Tz: TimeZone>(day: NaiveDate, time: NaiveTime, tz: &Tz) -> Option<DateTime<Utc>> {
    let start = tz.from_local_datetime(&day.and_time(time)).earliest()?;
    Some(start.with_timezone(&Utc) + Duration::minutes(1))
}

fn just_past(now: DateTime<Utc>, end: DateTime<Utc>, shown: &str) -> Reset {
    Reset {
        at: now + TRY_AGAIN_AFTER,
        guess: Some(format!(
            "the agent named `{shown}`, a minute that ended {} ago: the limit is due, so it \
             tries again in {}",
            span(now - end),
            span(TRY_AGAIN_AFTER)
        )),
    }
}

/// `3h12m`, `40s`: a span as a person reads it.
fn span(d: Duration) -> String {
    let s = d.num_seconds().max(0);
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// An instant as RFC 3339 writes it, for the tests of reset times.
#[cfg(test)]
pub(crate) fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("an RFC 3339 instant")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    fn bare_utc(now: &str, h: u32, m: u32) -> Reset {
        let utc = FixedOffset::east_opt(0).unwrap();
        bare(
            at(now),
            NaiveTime::from_hms_opt(h, m, 0).unwrap(),
            &utc,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn a_minute_still_running_or_ahead_resets_at_its_end() {
        let r = bare_utc("2026-11-26T21:43:48Z", 21, 43);
        assert_eq!(
            r,
            Reset {
                at: at("2026-11-26T21:44:00Z"),
                guess: None
            }
        );
        let r = bare_utc("2026-11-26T18:00:00Z", 21, 43);
        assert_eq!(
            r,
            Reset {
                at: at("2026-11-26T21:44:00Z"),
                guess: None
            }
        );
    }

    #[test]
    fn a_minute_just_past_is_due_and_tried_again_shortly() {
        let r = bare_utc("2026-11-26T21:44:30Z", 21, 43);
        assert_eq!(r.at, at("2026-11-26T21:45:30Z"));
        assert!(r.guess.unwrap().contains("ended 30s ago"));
        // Across midnight: yesterday's minute, printed before it, read after it.
        let r = bare_utc("2026-11-27T00:00:05Z", 23, 59);
        assert_eq!(r.at, at("2026-11-27T00:01:05Z"));
    }

    #[test]
    fn a_minute_long_past_is_the_next_days_and_the_guess_is_said() {
        let r = bare_utc("2026-11-26T21:50:00Z", 21, 43);
        assert_eq!(r.at, at("2026-11-27T21:44:00Z"));
        let guess = r.guess.unwrap();
        assert!(
            guess.contains("without a day") && guess.contains("23h54m"),
            "{guess}"
        );
        // A wait of a few hours, as a 5-hour window makes, is no guess worth a word.
        let r = bare_utc("2026-11-26T23:00:00Z", 3, 0);
        assert_eq!(
            r,
            Reset {
                at: at("2026-11-27T03:01:00Z"),
                guess: None
            }
        );
    }

    #[test]
    fn a_dated_minute_is_its_end_and_just_past_is_due() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let day = NaiveDate::from_ymd_opt(2026, 11, 26).unwrap();
        let time = NaiveTime::from_hms_opt(23, 4, 0).unwrap();
        let r = dated(at("2026-11-24T06:00:00Z"), day, time, &utc, "t").unwrap();
        assert_eq!(
            r,
            Reset {
                at: at("2026-11-26T23:05:00Z"),
                guess: None
            }
        );
        let r = dated(at("2026-11-26T23:06:00Z"), day, time, &utc, "t").unwrap();
        assert_eq!(r.at, at("2026-11-26T23:07:00Z"));
        let r = dated(at("2026-11-27T06:00:00Z"), day, time, &utc, "t").unwrap();
        assert_eq!(
            r,
            Reset {
                at: at("2026-11-26T23:05:00Z"),
                guess: None
            }
        );
    }
}
