//! When a usage limit resets, read from the CLI's text when the stream carried no
//! `rate_limit_event` (older versions, or a stream cut short).
//!
//! Two forms exist: `Claude AI usage limit reached|<epoch>` (older CLIs) and a wall-clock time
//! such as `You've hit your session limit · resets 5:10am (UTC)`. A bare time means the next
//! such moment after `now`, which is passed in so that the answer is a pure function.

use std::sync::LazyLock;

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, TimeZone, Utc};
use regex::Regex;

static EPOCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)usage limit reached\s*\|\s*(\d{9,13})").expect("valid regex")
});

/// `resets 5:06am (UTC)`, `resets at 17:00 (GMT+9)`, `reset at 3pm`.
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix) \breset s? (?:\s+at)? \s+
          (?P<h>\d{1,2}) (?: : (?P<m>\d{2}) )? \s* (?P<ampm>am|pm)?
          (?: \s* \( (?P<zone>[^)]*) \) )?",
    )
    .expect("valid regex")
});

static OFFSET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:utc|gmt)?\s*(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d{2}))?$")
        .expect("valid regex")
});

/// The reset moment named in `text`, if it names one this can resolve. A wall-clock time
/// resolves only in UTC/GMT or a numeric offset (`UTC+9`, `+09:00`), or with no zone at all
/// (taken as UTC); a named zone such as `Asia/Tokyo` gives `None` rather than a guess.
#[must_use]
pub(crate) fn reset_from_text(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Some(caps) = EPOCH.captures(text) {
        let mut epoch: i64 = caps[1].parse().ok()?;
        if epoch > 100_000_000_000 {
            epoch /= 1000; // milliseconds
        }
        return Utc.timestamp_opt(epoch, 0).single();
    }
    let caps = CLOCK.captures(text)?;
    let mut hour: u32 = caps["h"].parse().ok()?;
    let minute: u32 = caps
        .name("m")
        .map_or(Some(0), |m| m.as_str().parse().ok())?;
    match caps.name("ampm").map(|m| m.as_str().to_ascii_lowercase()) {
        Some(ampm) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour %= 12;
            if ampm == "pm" {
                hour += 12;
            }
        }
        // Without am/pm only a 24-hour `H:MM` is a time; `resets 5` is not.
        None if caps.name("m").is_none() => return None,
        None => {}
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let offset = zone_offset(caps.name("zone").map_or("", |z| z.as_str()))?;
    next_after(now, time, offset)
}

/// The offset a zone label stands for; `None` for names that need a time-zone database.
fn zone_offset(zone: &str) -> Option<FixedOffset> {
    let zone = zone.trim();
    if zone.is_empty() || ["utc", "gmt", "z"].contains(&zone.to_ascii_lowercase().as_str()) {
        return FixedOffset::east_opt(0);
    }
    let caps = OFFSET.captures(zone)?;
    let hours: i32 = caps["h"].parse().ok()?;
    let minutes: i32 = caps
        .name("m")
        .map_or(Some(0), |m| m.as_str().parse().ok())?;
    let secs = (hours * 60 + minutes) * 60;
    FixedOffset::east_opt(if &caps["sign"] == "-" { -secs } else { secs })
}

/// The first moment strictly after `now` whose wall-clock time in `offset` is `time`.
fn next_after(now: DateTime<Utc>, time: NaiveTime, offset: FixedOffset) -> Option<DateTime<Utc>> {
    let local_now = now.with_timezone(&offset);
    let today = offset
        .from_local_datetime(&local_now.date_naive().and_time(time))
        .single()?;
    let at = if today > local_now {
        today
    } else {
        today + Duration::days(1)
    };
    Some(at.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn later_today() {
        let now = at("2026-11-22T02:06:51Z");
        let text = "You've hit your session limit · resets 5:06am (UTC)";
        assert_eq!(reset_from_text(text, now), Some(at("2026-11-22T05:06:00Z")));
    }

    #[test]
    fn already_passed_today_means_tomorrow() {
        let now = at("2026-11-22T06:00:00Z");
        assert_eq!(
            reset_from_text("resets 5:06am (UTC)", now),
            Some(at("2026-11-23T05:06:00Z"))
        );
        // Exactly now is not "after now".
        let now = at("2026-11-22T05:06:00Z");
        assert_eq!(
            reset_from_text("resets 5:06am (UTC)", now),
            Some(at("2026-11-23T05:06:00Z"))
        );
    }

    #[test]
    fn noon_midnight_and_hour_only() {
        let now = at("2026-11-22T02:00:00Z");
        assert_eq!(
            reset_from_text("resets 12am (UTC)", now),
            Some(at("2026-11-23T00:00:00Z"))
        );
        assert_eq!(
            reset_from_text("resets 12pm", now),
            Some(at("2026-11-22T12:00:00Z"))
        );
        assert_eq!(
            reset_from_text("resets 3pm (GMT)", now),
            Some(at("2026-11-22T15:00:00Z"))
        );
    }

    #[test]
    fn numeric_offsets() {
        let now = at("2026-11-22T02:00:00Z"); // 11:00 in +09:00
        assert_eq!(
            reset_from_text("resets 1pm (UTC+9)", now),
            Some(at("2026-11-22T04:00:00Z"))
        );
        assert_eq!(
            reset_from_text("resets at 17:30 (-05:00)", now),
            Some(at("2026-11-22T22:30:00Z"))
        );
    }

    #[test]
    fn older_epoch_form() {
        let now = at("2026-11-22T02:00:00Z");
        assert_eq!(
            reset_from_text("Claude AI usage limit reached|1795324010", now),
            Some(at("2026-11-22T05:06:50Z"))
        );
    }

    #[test]
    fn unresolvable_forms() {
        let now = at("2026-11-22T02:00:00Z");
        assert_eq!(reset_from_text("resets 5:06am (Asia/Tokyo)", now), None);
        assert_eq!(reset_from_text("resets 5", now), None);
        assert_eq!(reset_from_text("resets 13pm (UTC)", now), None);
        assert_eq!(reset_from_text("no time here", now), None);
    }
}
