//! When a usage limit resets, read from the CLI's text when the stream carried no
//! `rate_limit_event` (older versions, or a stream cut short).
//!
//! Two forms exist: `Claude AI usage limit reached|<epoch>` (older CLIs) and a wall-clock time
//! such as `You've hit your session limit · resets 5:10am (UTC)`. The time is cut down to its
//! minute (05:06:50 prints `5:06am`) and names no day: it is read by the rules both CLIs
//! share ([`reset_minute`]), from `now`, which is passed in so that the answer is a pure
//! function.

use std::sync::LazyLock;

use chrono::{DateTime, FixedOffset, NaiveTime, TimeZone, Utc};
use regex::Regex;

use crate::agent::reset_minute::{self, Reset};

static EPOCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)usage limit reached\s*\|\s*(\d{9,13})").expect("valid regex")
});

/// `resets 5:06am (UTC)`, `resets at 17:00 (GMT+9)`, `reset at 3pm`.
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix) \breset s? (?:\s+at)? \s+ (?P<when>
          (?P<h>\d{1,2}) (?: : (?P<m>\d{2}) )? \s* (?P<ampm>am|pm)?
          (?: \s* \( (?P<zone>[^)]*) \) )? )",
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
pub(crate) fn reset_from_text(text: &str, now: DateTime<Utc>) -> Option<Reset> {
    if let Some(caps) = EPOCH.captures(text) {
        let mut epoch: i64 = caps[1].parse().ok()?;
        if epoch > 100_000_000_000 {
            epoch /= 1000; // milliseconds
        }
        let at = Utc.timestamp_opt(epoch, 0).single()?;
        return Some(Reset { at, guess: None });
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
    reset_minute::bare(now, time, &offset, caps["when"].trim())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::reset_minute::at;

    /// The reset the words name, without how it was guessed.
    fn reset(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        reset_from_text(text, now).map(|r| r.at)
    }

    #[test]
    fn later_today_at_the_end_of_the_printed_minute() {
        let now = at("2026-11-22T02:06:51Z");
        let text = "You've hit your session limit · resets 5:06am (UTC)";
        assert_eq!(reset(text, now), Some(at("2026-11-22T05:07:00Z")));
    }

    #[test]
    fn long_past_today_means_tomorrow_and_says_it_guessed() {
        let now = at("2026-11-22T06:00:00Z");
        let r = reset_from_text("resets 5:06am (UTC)", now).unwrap();
        assert_eq!(r.at, at("2026-11-23T05:07:00Z"));
        assert!(r.guess.unwrap().contains("`5:06am (UTC)`, without a day"));
    }

    /// The CLI cuts 05:06:50 down to `5:06am`: read within that minute, it is not past.
    #[test]
    fn a_limit_that_resets_within_the_printed_minute_is_not_read_as_tomorrow() {
        let now = at("2026-11-22T05:06:00Z");
        assert_eq!(
            reset("resets 5:06am (UTC)", now),
            Some(at("2026-11-22T05:07:00Z"))
        );
        let now = at("2026-11-22T05:06:59Z");
        assert_eq!(
            reset("resets 5:06am (UTC)", now),
            Some(at("2026-11-22T05:07:00Z"))
        );
    }

    #[test]
    fn noon_midnight_and_hour_only() {
        let now = at("2026-11-22T02:00:00Z");
        assert_eq!(
            reset("resets 12am (UTC)", now),
            Some(at("2026-11-23T00:01:00Z"))
        );
        assert_eq!(reset("resets 12pm", now), Some(at("2026-11-22T12:01:00Z")));
        assert_eq!(
            reset("resets 3pm (GMT)", now),
            Some(at("2026-11-22T15:01:00Z"))
        );
    }

    #[test]
    fn numeric_offsets() {
        let now = at("2026-11-22T02:00:00Z"); // 11:00 in +09:00
        assert_eq!(
            reset("resets 1pm (UTC+9)", now),
            Some(at("2026-11-22T04:01:00Z"))
        );
        assert_eq!(
            reset("resets at 17:30 (-05:00)", now),
            Some(at("2026-11-22T22:31:00Z"))
        );
    }

    #[test]
    fn older_epoch_form() {
        let now = at("2026-11-22T02:00:00Z");
        assert_eq!(
            reset("Claude AI usage limit reached|1795324010", now),
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
