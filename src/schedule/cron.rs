//! When a schedule is due: a cron expression (five fields, read as Vixie cron reads them) or a
//! plain phrase (`weekdays 02:00`), and the next time it names after an instant, in a time
//! zone that is passed in (the machine's, or a fixed one in a test).
//!
//! Written here rather than taken from a crate: the schedule file wants an error's column
//! inside the expression, the phrases are ours, and what happens on a day the clock changes
//! must be said and tested here. The rule is Vixie cron's:
//!
//! - **Spring forward**, a wall-clock time that does not exist that day (02:30 when 02:00 jumps
//!   to 03:00) is due at the first minute after the gap (03:00 new time), once.
//! - **Fall back**, a wall-clock time that happens twice (02:30 when 03:00 goes back to 02:00)
//!   is due at its first occurrence only.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};

/// A parsed schedule of wall-clock times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday 0.
    weekdays: u8,
    /// The day-of-month field was `*` (then only the weekday field restricts the day).
    any_day: bool,
    /// The weekday field was `*`.
    any_weekday: bool,
}

/// What is wrong in an expression, and where (a character offset into it, from 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    pub offset: usize,
    pub message: String,
}

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// The longest a search for the next due time looks ahead: past the next leap day.
const SEARCH_DAYS: i64 = 366 * 9;

impl Cron {
    /// Reads a cron expression (`0 2 * * 1-5`, `@daily`) or a phrase (`weekdays 02:00`,
    /// `daily at 6:30`, `mondays,fridays 09:00`, `hourly`).
    ///
    /// # Errors
    /// What is wrong, and at which character.
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let t = text.trim();
        let lead = text.len() - text.trim_start().len();
        if let Some(cron) = macro_cron(&t.to_ascii_lowercase()) {
            return Self::fields(cron, 0).map_err(|e| CronError { offset: lead, ..e });
        }
        let looks_like_cron = t.split_whitespace().count() == 5
            && t.starts_with(|c: char| c.is_ascii_digit() || c == '*');
        if looks_like_cron {
            return Self::fields(t, lead);
        }
        phrase(t).map_or_else(
            || {
                Err(CronError {
                    offset: lead,
                    message: format!(
                        "`{t}` is neither a cron expression (minute hour day month weekday, \
                         such as `0 2 * * 1-5`) nor a phrase such as `weekdays 02:00`, `daily \
                         06:30`, `mondays 09:00` or `hourly`"
                    ),
                })
            },
            |cron| Self::fields(&cron, 0).map_err(|e| CronError { offset: lead, ..e }),
        )
    }

    fn fields(text: &str, base: usize) -> Result<Self, CronError> {
        let mut parts = Vec::new();
        let mut at = 0;
        for word in text.split_whitespace() {
            let start = text[at..].find(word).map_or(at, |i| at + i);
            at = start + word.len();
            parts.push((base + start, word));
        }
        if parts.len() != 5 {
            return Err(CronError {
                offset: base,
                message: format!(
                    "a cron expression has 5 fields (minute hour day month weekday), this one {}",
                    parts.len()
                ),
            });
        }
        let minutes = field(parts[0], 0, 59, &[], "minute")?;
        let hours = field(parts[1], 0, 23, &[], "hour")?;
        let days = field(parts[2], 1, 31, &[], "day of the month")?;
        let months = field(parts[3], 1, 12, &MONTHS, "month")?;
        // 7 is Sunday too.
        let weekdays = field(parts[4], 0, 7, &WEEKDAYS, "weekday")?;
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Self {
            minutes,
            hours: u32::try_from(hours).unwrap_or(0),
            days: u32::try_from(days).unwrap_or(0),
            months: u16::try_from(months).unwrap_or(0),
            weekdays: u8::try_from(weekdays).unwrap_or(0),
            any_day: parts[2].1.starts_with('*'),
            any_weekday: parts[4].1.starts_with('*'),
        })
    }

    fn day_matches(&self, d: NaiveDate) -> bool {
        if self.months & (1 << d.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().num_days_from_sunday()) != 0;
        // Vixie cron: both restricted means either will do.
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }

    /// The first due time strictly after `after`, with wall-clock times read in `tz`; `None`
    /// when none comes within nine years (the 30th of February).
    #[must_use]
    pub fn next_after<Tz: TimeZone>(&self, after: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(tz).naive_local();
        // From the day before: a time in a gap may resolve to after midnight.
        let first = local.date().pred_opt()?;
        for d in first
            .iter_days()
            .take(usize::try_from(SEARCH_DAYS).unwrap_or(0))
        {
            if !self.day_matches(d) {
                continue;
            }
            for h in (0..24).filter(|h| self.hours & (1 << h) != 0) {
                for m in (0..60).filter(|m| self.minutes & (1 << m) != 0) {
                    let naive = d.and_hms_opt(h, m, 0)?;
                    // Far before `after`: no need to ask the time zone.
                    if naive + Duration::hours(30) < local {
                        continue;
                    }
                    if let Some(t) = resolve(tz, naive)
                        && t > after
                    {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

/// The instant of a wall-clock time in `tz`: the earlier of two (fall back), the first minute
/// after the gap for one that does not exist (spring forward).
pub(super) fn resolve<Tz: TimeZone>(tz: &Tz, naive: NaiveDateTime) -> Option<DateTime<Utc>> {
    let mut n = naive;
    for _ in 0..=(26 * 60) {
        if let Some(t) = instants(tz, n).into_iter().min() {
            return Some(t);
        }
        n += Duration::minutes(1);
    }
    None
}

/// Every instant whose wall clock in `tz` reads `naive`: none in a gap, two in an overlap.
/// Found from the offsets in force a day before, at and a day after, each kept only when the
/// instant it gives reads `naive` back: an instant's local time is never ambiguous, while
/// asking the other way (`from_local_datetime`) is answered differently by different time
/// zone sources (the machine's local zone gave the later of two).
fn instants<Tz: TimeZone>(tz: &Tz, naive: NaiveDateTime) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    for probe in [naive - Duration::days(1), naive, naive + Duration::days(1)] {
        let offset = tz.offset_from_utc_datetime(&probe).fix();
        let t = (naive - Duration::seconds(offset.local_minus_utc().into())).and_utc();
        if tz.offset_from_utc_datetime(&t.naive_utc()).fix() == offset && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// One field: `*`, `N`, `A-B`, each with an optional `/STEP`, comma-separated; names where
/// the field has them. A bit per value.
fn field(
    (offset, text): (usize, &str),
    lo: u32,
    hi: u32,
    names: &[&str],
    what: &str,
) -> Result<u64, CronError> {
    let mut bits = 0u64;
    let mut at = 0;
    for item in text.split(',') {
        let err = |message: String| CronError {
            offset: offset + at,
            message,
        };
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    err(format!(
                        "the step `{s}` of the {what} is not a number above 0"
                    ))
                })?;
                (r, step)
            }
            None => (item, 1),
        };
        let value = |v: &str| -> Result<u32, CronError> {
            let n = v.parse::<u32>().ok().or_else(|| {
                names
                    .iter()
                    .position(|n| v.eq_ignore_ascii_case(n))
                    .and_then(|i| u32::try_from(i).ok())
                    .map(|i| if names.len() == 12 { i + 1 } else { i })
            });
            n.filter(|n| (lo..=hi).contains(n)).ok_or_else(|| {
                err(format!(
                    "`{v}` is no {what} ({lo}-{hi}{})",
                    if names.is_empty() {
                        ""
                    } else {
                        ", or its name"
                    }
                ))
            })
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(a)?, value(b)?);
            if a > b {
                return Err(err(format!(
                    "the range `{range}` of the {what} runs backwards"
                )));
            }
            (a, b)
        } else {
            let a = value(range)?;
            // `5/15` is every 15th from 5 to the end.
            (a, if step > 1 { hi } else { a })
        };
        for v in (a..=b).step_by(usize::try_from(step).unwrap_or(1)) {
            bits |= 1 << v;
        }
        at += item.len() + 1;
    }
    Ok(bits)
}

fn macro_cron(t: &str) -> Option<&'static str> {
    Some(match t {
        "@hourly" | "hourly" | "every hour" => "0 * * * *",
        "@daily" | "@midnight" | "daily" | "every day" => "0 0 * * *",
        "@weekly" | "weekly" => "0 0 * * 0",
        "@monthly" | "monthly" => "0 0 1 * *",
        "@yearly" | "@annually" | "yearly" => "0 0 1 1 *",
        _ => return None,
    })
}

/// A phrase as a cron expression: `[every] DAYS [at] HH:MM`, or `HH:MM` (every day).
fn phrase(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split_whitespace()
        .filter(|w| *w != "every" && *w != "at" && *w != "on")
        .collect();
    let (time, days) = words.split_last()?;
    let (hour, minute) = time.split_once(':')?;
    let (hour, minute): (u32, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    if hour > 23 || minute > 59 {
        return None;
    }
    let days = days.join(" ");
    let dow = match days.as_str() {
        "" | "day" | "days" | "daily" => "*".to_owned(),
        "weekday" | "weekdays" => "1-5".to_owned(),
        "weekend" | "weekends" => "0,6".to_owned(),
        list => {
            let mut out = Vec::new();
            for d in list
                .split([',', ' '])
                .filter(|d| !d.is_empty() && *d != "and")
            {
                let day = d.trim_end_matches('s');
                let n = WEEKDAYS.iter().position(|w| day.starts_with(w))?;
                out.push(n.to_string());
            }
            out.join(",")
        }
    };
    Some(format!("{minute} {hour} * * {dow}"))
}

#[cfg(test)]
#[path = "cron_tests.rs"]
mod tests;
