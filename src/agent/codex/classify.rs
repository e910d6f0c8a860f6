//! How a Codex run ended, in the loop's classes. What only Codex says is read here (its
//! usage-limit sentence, its refusals of the call); the rest (a clean answer, an API error's
//! status, a kill) by the rules every backend shares ([`classify_with`]).

use std::sync::LazyLock;

use chrono::{DateTime, Local, NaiveDate, NaiveTime, TimeZone, Utc};
use regex::Regex;

use crate::agent::outcome::{BugKind, Class, ExitInfo, Unanswered, invocation_bug, line_with};
use crate::agent::reset_minute::{self, Reset};

/// What only Codex says, in its errors, its last `error` event and stderr: its usage limit,
/// its refusals of the call, a refused key, what it retried. `now` resolves the reset time,
/// which Codex gives as a wall-clock time of the machine's own zone (the runner's, which the
/// agent inherits).
pub(super) fn own(
    _exit: &ExitInfo,
    stderr: &str,
    f: &Unanswered<'_>,
    now: DateTime<Utc>,
) -> Option<Class> {
    let output = f.stream;
    let mut text: Vec<&str> = output
        .result
        .as_ref()
        .map(|r| r.errors.iter().map(String::as_str).collect())
        .unwrap_or_default();
    text.extend(output.api_error.as_deref());
    text.push(stderr);
    let text = text.join("\n");
    let first = |needle: &str| line_with(&text, needle);
    if USAGE_LIMIT.is_match(&text) {
        let message = first("usage limit").unwrap_or_else(|| "usage limit".to_owned());
        let reset = reset_at(&text, now, &Local);
        return Some(Class::UsageLimit {
            resets_at: reset.as_ref().map(|r| r.at),
            guess: reset.and_then(|r| r.guess),
            message,
        });
    }
    if let Some(bug) = invocation_bug(&text, &BUGS) {
        return Some(bug);
    }
    if let Some(message) = first("401 Unauthorized").or_else(|| first("403 Forbidden")) {
        return Some(Class::Auth(message));
    }
    TRANSIENT
        .find(&text)
        .and_then(|m| first(m.as_str()))
        .map(Class::Transient)
}

/// Codex's refusals of the call as given (0.169.0's words).
const BUGS: [(&str, BugKind); 4] = [
    ("no rollout found for thread id", BugKind::UnknownSession),
    ("error: unexpected argument", BugKind::UnknownOption),
    ("error: invalid value", BugKind::BadArgument),
    ("error: a value is required", BugKind::BadArgument),
];

/// `You’ve hit your usage limit.` (a curly apostrophe in 0.169.0; a straight one read too).
static USAGE_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)you(?:'|’)ve hit your usage limit|usage_limit_reached").expect("valid regex")
});

/// What Codex says while the service fails, or after it gave up retrying.
static TRANSIENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)exceeded retry limit|high demand|stream disconnected|Reconnecting\.\.\.|unexpected status (?:429|5\d\d)|error sending request|connection refused",
    )
    .expect("valid regex")
});

/// `try again at 8:57 AM.` (a reset on the same day: Codex names the day of any other),
/// `try again at Nov 26th, 2026 11:04 PM.`, both in the zone `tz` (Codex writes the machine's
/// local time, without a zone, cut down to the minute); `try again in 3 hours` too.
static AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix) try \s+ again \s+ at \s+ (?P<when>
          (?: (?P<mon>[A-Za-z]{3}) [a-z]* \s+ (?P<day>\d{1,2}) (?:st|nd|rd|th)? ,? \s+ (?P<year>\d{4}) ,? \s+ )?
          (?P<h>\d{1,2}) : (?P<m>\d{2}) (?: \s* (?P<ampm>[AP]M) )? )",
    )
    .expect("valid regex")
});

static IN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)try\s+again\s+in\s+(?P<n>\d+)\s*(?P<unit>second|minute|hour|day)s?")
        .expect("valid regex")
});

/// When the limit of `text` resets, in `tz` (the printed minute read as its end: see
/// [`reset_minute`]).
pub(crate) fn reset_at<Tz: TimeZone>(text: &str, now: DateTime<Utc>, tz: &Tz) -> Option<Reset> {
    if let Some(c) = IN.captures(text) {
        let n: i64 = c["n"].parse().ok()?;
        let secs = match c["unit"].to_ascii_lowercase().as_str() {
            "second" => n,
            "minute" => n * 60,
            "hour" => n * 3600,
            _ => n * 86_400,
        };
        return Some(Reset {
            at: now + chrono::Duration::seconds(secs),
            guess: None,
        });
    }
    let c = AT.captures(text)?;
    let mut hour: u32 = c["h"].parse().ok()?;
    let minute: u32 = c["m"].parse().ok()?;
    if let Some(ampm) = c.name("ampm") {
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour %= 12;
        if ampm.as_str().eq_ignore_ascii_case("PM") {
            hour += 12;
        }
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let shown = &c["when"];
    let (Some(mon), Some(day), Some(year)) = (c.name("mon"), c.name("day"), c.name("year")) else {
        return reset_minute::bare(now, time, tz, shown);
    };
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(mon.as_str()))?;
    let date = NaiveDate::from_ymd_opt(
        year.as_str().parse().ok()?,
        u32::try_from(month).ok()? + 1,
        day.as_str().parse().ok()?,
    )?;
    reset_minute::dated(now, date, time, tz, shown)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::backend::Backend;
    use crate::agent::codex::Codex;
    use crate::agent::output::StreamSummary;
    use crate::agent::reset_minute::at;
    use chrono::FixedOffset;

    #[test]
    fn codex_reset_times_are_read_in_the_machines_zone() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let tokyo = FixedOffset::east_opt(9 * 3600).unwrap();
        let now = at("2026-11-24T06:27:43Z");
        let msg = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), \
                   visit https://chatgpt.com/settings/usage to purchase more credits or try \
                   again at 8:57 AM.";
        let reset = |msg, tz| reset_at(msg, now, tz).map(|r| r.at);
        // The minute is cut down: the limit resets by its end.
        assert_eq!(reset(msg, &utc), Some(at("2026-11-24T08:58:00Z")));
        // The same words in Tokyo: 8:57 there is long past, so it is tomorrow's, a guess the
        // loop says it made.
        assert_eq!(reset(msg, &tokyo), Some(at("2026-11-24T23:58:00Z")));
        let guess = reset_at(msg, now, &tokyo).unwrap().guess.unwrap();
        assert!(guess.contains("`8:57 AM`, without a day"), "{guess}");
        let far = "… or try again at Nov 26th, 2026 11:04 PM.";
        assert_eq!(reset(far, &tokyo), Some(at("2026-11-26T14:05:00Z")));
        assert_eq!(
            reset("try again in 3 hours", &utc),
            Some(at("2026-11-24T09:27:43Z"))
        );
        assert_eq!(reset("try again later", &utc), None);
    }

    /// Codex cuts the reset down to its minute: a reset at 21:43:48 prints `9:43 PM`. Read
    /// within that minute, the time is not past: the limit resets by the minute's end.
    #[test]
    fn a_codex_limit_that_resets_within_the_printed_minute_is_not_read_as_tomorrow() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let msg = "You’ve hit your usage limit. … or try again at 9:43 PM.";
        let now = at("2026-11-26T21:43:28Z");
        let reset = reset_at(msg, now, &utc).unwrap();
        assert_eq!((reset.at, reset.guess), (at("2026-11-26T21:44:00Z"), None));
    }

    /// A wake before the real reset (by a clock a little ahead, or a person's `loop resume`)
    /// meets a second refusal of the same minute, now just past: the limit is due, so the
    /// loop tries again shortly, not the next day.
    #[test]
    fn a_second_refusal_naming_a_minute_just_past_tries_again_shortly_not_tomorrow() {
        let utc = FixedOffset::east_opt(0).unwrap();
        let msg = "You’ve hit your usage limit. … or try again at 9:43 PM.";
        let now = at("2026-11-26T21:44:10Z");
        let reset = reset_at(msg, now, &utc).unwrap();
        assert_eq!(reset.at, at("2026-11-26T21:45:10Z"));
        assert!(
            reset
                .guess
                .unwrap()
                .contains("`9:43 PM`, a minute that ended 10s ago")
        );
    }

    fn fixture(stem: &str) -> (StreamSummary, String) {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex");
        let out = crate::agent::read_output(
            crate::m1::settings::AgentKind::Codex,
            &dir.join(format!("{stem}.stdout.jsonl")),
        )
        .unwrap();
        let err = std::fs::read_to_string(dir.join(format!("{stem}.stderr"))).unwrap();
        (out, err)
    }

    #[test]
    fn each_real_codex_capture_has_its_class() {
        let now = at("2026-11-24T06:27:43Z");
        let exit = |code| ExitInfo {
            code: Some(code),
            ..ExitInfo::default()
        };
        let class = |stem: &str, code| {
            let (out, err) = fixture(stem);
            Codex.classify(&exit(code), &err, &out, now)
        };
        assert_eq!(class("success", 0), Class::Success);
        assert_eq!(class("resumed", 0), Class::Success);
        assert!(
            matches!(
                class("usage-limit", 1),
                Class::UsageLimit {
                    resets_at: Some(_),
                    ..
                }
            ),
            "{:?}",
            class("usage-limit", 1)
        );
        assert!(matches!(class("rate-limit-429", 1), Class::Transient(_)));
        assert!(matches!(class("server-error-500", 1), Class::Transient(_)));
        assert!(matches!(class("unauthorized-401", 1), Class::Auth(_)));
        assert!(matches!(
            class("resume-unknown-thread", 1),
            Class::InvocationBug {
                kind: BugKind::UnknownSession,
                ..
            }
        ));
    }
}
