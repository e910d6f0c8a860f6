//! How a Gemini CLI run ended, in the loop's classes. What only Gemini CLI says is read here
//! (its exit codes, its refusals of the call, its quota words, the retries it prints on
//! stderr); the rest by the rules every backend shares ([`classify_with`]).
//!
//! Exit codes of 0.61.0: 0 success; 41 no credentials it can use (`Please set an Auth method
//! …`, `… you must specify the GEMINI_API_KEY environment variable`); 42 bad input (an empty
//! prompt, an unknown or taken session id); 44 its sandbox; 52 its configuration; 53 the turn
//! cap of its settings; 1 a flag it does not know; and for an API error the error's HTTP
//! status cut to a byte (429 exits 173, 400 exits 144). A 429 or a 5xx is retried by the CLI
//! for about three minutes (10 attempts, 5 s doubling to 30 s), said on stderr only.

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc, Weekday};
use regex::Regex;

use crate::agent::outcome::{
    BugKind, Class, ExitInfo, Unanswered, died, invocation_bug, line_with,
};
use crate::agent::output::StreamSummary;

/// What only Gemini CLI says. `now` places the reset of a daily quota.
pub(super) fn own(
    exit: &ExitInfo,
    stderr: &str,
    f: &Unanswered<'_>,
    now: DateTime<Utc>,
) -> Option<Class> {
    let text = f.text.as_str();
    let first = |needle: &str| line_with(text, needle);
    if let Some(bug) = invocation_bug(text, &BUGS) {
        return Some(bug);
    }
    if exit.code == Some(41) || NO_CREDENTIALS.is_match(text) {
        let said = first("Auth method")
            .or_else(|| first("GEMINI_API_KEY"))
            .unwrap_or_else(|| f.message.clone());
        return Some(Class::Auth(format!(
            "Gemini CLI has no credentials it can use (exit {}): {said}",
            exit.code.map_or_else(|| "?".to_owned(), |c| c.to_string())
        )));
    }
    if let Some(message) = first("exhausted your daily quota") {
        return Some(Class::UsageLimit {
            resets_at: Some(next_pacific_midnight(now)),
            guess: Some(
                "the Gemini API's daily quotas reset at midnight Pacific time; the CLI does not \
                 say when"
                    .to_owned(),
            ),
            message,
        });
    }
    if let Some(message) = NO_QUOTA.find(text).and_then(|m| first(m.as_str())) {
        return Some(Class::Billing(format!(
            "the model has no quota for this key (limit: 0): {message}"
        )));
    }
    if let Some(message) = first("API key not valid")
        .or_else(|| first("API_KEY_INVALID"))
        .or_else(|| first("PERMISSION_DENIED"))
        .or_else(|| first("UNAUTHENTICATED"))
    {
        return Some(Class::Auth(message));
    }
    if let Some(code @ (42 | 44 | 52 | 55)) = exit.code {
        let what = match code {
            42 => "its input",
            44 => "its sandbox",
            52 => "its configuration",
            _ => "the folder's trust",
        };
        return Some(Class::InvocationBug {
            kind: BugKind::BadArgument,
            message: format!("Gemini CLI refused {what} (exit {code}): {}", f.message),
        });
    }
    if f.stream.result.is_none()
        && died(exit)
        && let Some(retry) = storm(stderr)
    {
        // Ended in a storm of 429s (the runner ends one as soon as it sees it): the limit,
        // not the work, is what stopped it.
        return Some(Class::RateLimited(format!(
            "the CLI kept retrying a rate limit ({retry}); the run {}",
            crate::agent::outcome::describe_exit(exit),
        )));
    }
    if let Some(message) = TRANSIENT.find(text).and_then(|m| first(m.as_str())) {
        return Some(Class::Transient(message));
    }
    if f.stream.result.is_none() && died(exit) {
        // Ended while the CLI waited out an API error it retries (said on stderr only): the
        // outage, not the work, is what stopped it.
        if let Some(retry) = last_retry(stderr) {
            return Some(Class::Transient(format!(
                "{} before a result event, while the CLI was retrying: {retry}",
                crate::agent::outcome::describe_exit(exit),
            )));
        }
    }
    None
}

/// The last retry of an API error the CLI printed on `stderr`, up to its status.
#[must_use]
pub(crate) fn last_retry(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .rev()
        .find_map(|l| RETRYING.find(l).map(|m| l[m.start()..].trim()))
        .map(|l| {
            let said = l.split(" _ApiError").next().unwrap_or(l);
            crate::text::one_line(said, 200)
        })
}

/// What the CLI was retrying, when its `stderr` ends in a storm of rate-limit retries (see
/// [`StreamSummary::rate_limit_storm`]): read line by line as a run followed live reads it,
/// so that the runner's reason to end a run and the judgement of its end agree.
#[must_use]
pub(crate) fn storm(stderr: &str) -> Option<String> {
    use crate::agent::output::Dialect;
    let mut dialect = super::stream::GeminiStream::default();
    let mut s = StreamSummary::default();
    for line in stderr.lines() {
        dialect.stderr_line(&mut s, line);
    }
    s.rate_limit_storm().then(|| last_retry(stderr)).flatten()
}

/// Gemini CLI's refusals of the call as given (0.61.0's words).
const BUGS: [(&str, BugKind); 8] = [
    ("Invalid session identifier", BugKind::UnknownSession),
    // `-r` in a project it has no session of at all (one killed before its first answer
    // left none).
    ("No previous sessions found", BugKind::UnknownSession),
    ("already exists. Use --resume", BugKind::SessionInUse),
    ("Unknown argument", BugKind::UnknownOption),
    ("Invalid values:", BugKind::BadArgument),
    ("Not enough arguments following", BugKind::BadArgument),
    ("No input provided via stdin", BugKind::BadArgument),
    ("ModelNotFoundError", BugKind::UnknownModel),
];

/// No credentials, or none it can use.
static NO_CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Please set an Auth method|you must specify the GEMINI_API_KEY|FatalAuthenticationError",
    )
    .expect("valid regex")
});

/// A quota of nothing: the model is not offered to this key's tier at all.
static NO_QUOTA: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"limit:\s*0(?:[^\d.]|$)").expect("valid regex"));

/// What the CLI says when the service is short of capacity or rate-limits it, after its own
/// retries.
static TRANSIENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)Resource has been exhausted|RESOURCE_EXHAUSTED|exhausted your capacity|MODEL_CAPACITY_EXHAUSTED|RetryableQuotaError|status (?:429|5\d\d)|fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT",
    )
    .expect("valid regex")
});

/// A retry the CLI made, as it prints it on stderr.
static RETRYING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Attempt \d+ failed").expect("valid regex"));

/// The next midnight of US Pacific time after `now`: when the Gemini API's per-day quotas
/// reset. Daylight time runs from the second Sunday of March to the first of November, 2 a.m.
/// local time (10:00 and 09:00 UTC).
#[must_use]
pub(crate) fn next_pacific_midnight(now: DateTime<Utc>) -> DateTime<Utc> {
    let offset = |t: DateTime<Utc>| -> i64 {
        let sunday = |month: u32, nth: u8, hour: u32| {
            NaiveDate::from_weekday_of_month_opt(t.year(), month, Weekday::Sun, nth)
                .and_then(|d| d.and_hms_opt(hour, 0, 0))
                .map(|d| d.and_utc())
        };
        match (sunday(3, 2, 10), sunday(11, 1, 9)) {
            (Some(start), Some(end)) if start <= t && t < end => -7,
            _ => -8,
        }
    };
    let today = (now + Duration::hours(offset(now))).date_naive();
    let midnight = today
        .succ_opt()
        .unwrap_or(today)
        .and_time(NaiveTime::MIN)
        .and_utc();
    [-7, -8]
        .into_iter()
        .map(|o| (o, midnight - Duration::hours(o)))
        .find(|(o, t)| offset(*t) == *o)
        .map_or(midnight + Duration::hours(8), |(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::reset_minute::at;

    #[test]
    fn a_daily_quota_resets_at_the_next_pacific_midnight_in_either_season() {
        for (now, midnight) in [
            // Winter: UTC-8.
            ("2026-11-27T03:47:11Z", "2026-11-27T08:00:00Z"),
            ("2026-11-27T08:00:01Z", "2026-11-28T08:00:00Z"),
            // Summer: UTC-7.
            ("2026-07-01T12:00:00Z", "2026-07-02T07:00:00Z"),
            // The night daylight time ends (Sunday 1 November 2026): Saturday's midnight is
            // still daylight time, Sunday's is not.
            ("2026-10-31T20:00:00Z", "2026-11-01T07:00:00Z"),
            ("2026-11-01T12:00:00Z", "2026-11-02T08:00:00Z"),
        ] {
            assert_eq!(next_pacific_midnight(at(now)), at(midnight), "{now}");
        }
    }
}
