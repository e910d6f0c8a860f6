//! Durations as users write them on the command line, in `loop.yaml` and in M1.md: `90s`,
//! `5m`, `1h30m`, `2h`, `500ms`. Every number carries its unit: a bare `60` was once taken as
//! seconds, and a step timeout meant as an hour killed every real step after a minute.

use std::fmt::Write as _;
use std::time::Duration;

/// The longest duration [`parse`] takes: a year. A limit (a step's timeout, a task's) is a
/// watchdog, and a longer one means "none"; what is longer is refused, not cut to fit, so that
/// a value is either used exactly as written or not at all.
pub(crate) const MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration such as `90s`, `5m`, `1h30m` or `500ms`. At most [`MAX`]. A number
/// without its unit is refused with the two units it most likely means (`10s` or `10m`):
/// guessing one would be wrong for someone, silently.
///
/// # Errors
/// A message that quotes the input and says what was expected.
pub(crate) fn parse(input: &str) -> Result<Duration, String> {
    let d = parse_any(input)?;
    match d {
        Some(d) if d <= MAX => Ok(d),
        _ => Err(format!(
            "invalid duration {input:?}: longer than a year ({}), the longest a duration may be",
            exact(MAX)
        )),
    }
}

/// [`parse`] without its cap: `None` for a duration too long for any cap.
fn parse_any(input: &str) -> Result<Option<Duration>, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err(format!(
            "invalid duration {input:?}: expected e.g. 90s, 5m, 1h30m"
        ));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid duration {input:?}: a duration needs its unit: `{s}s` or `{s}m` (ms, s, m \
             or h)"
        ));
    }
    let mut total = Some(Duration::ZERO);
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "invalid duration {input:?}: expected a number at {rest:?}"
            ));
        }
        let number = &rest[..digits];
        // Digits alone: only too many of them fail to parse.
        let n: Option<u64> = number.parse().ok();
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scaled = |secs: u64| n.and_then(|n| n.checked_mul(secs)).map(Duration::from_secs);
        let part = match unit {
            "ms" => n.map(Duration::from_millis),
            "s" | "sec" | "secs" => scaled(1),
            "m" | "min" | "mins" => scaled(60),
            "h" | "hr" | "hrs" => scaled(3600),
            "" => {
                return Err(format!(
                    "invalid duration {input:?}: missing unit after {number} (use ms, s, m or h)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {input:?}: unknown unit {other:?} (use ms, s, m or h)"
                ));
            }
        };
        total = total.zip(part).and_then(|(t, p)| t.checked_add(p));
    }
    Ok(total)
}

/// Formats a duration exactly, in the form [`parse`] reads back: `40s`, `15m`, `1h30m`,
/// `1m30s`, `500ms`. Never rounded (below a millisecond is dropped, as `parse` cannot say it).
#[must_use]
pub(crate) fn exact(d: Duration) -> String {
    let ms = d.subsec_millis();
    let secs = d.as_secs();
    if ms != 0 {
        return format!("{}ms", u128::from(secs) * 1000 + u128::from(ms));
    }
    if secs == 0 {
        return "0s".into();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if m > 0 {
        let _ = write!(out, "{m}m");
    }
    if s > 0 {
        let _ = write!(out, "{s}s");
    }
    out
}

/// Formats a duration compactly for people: `45s`, `12m03s`, `2h05m`.
#[must_use]
pub(crate) fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        if d.as_millis() < 10_000 && secs < 10 {
            return format!("{:.1}s", d.as_secs_f64());
        }
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
    }

    #[test]
    fn a_number_without_its_unit_is_refused_with_the_units_it_could_mean() {
        for (bare, want) in [
            ("60", "`60s` or `60m`"),
            ("0", "`0s` or `0m`"),
            (" 10 ", "`10s`"),
        ] {
            let err = parse(bare).unwrap_err();
            assert!(err.contains(want), "{bare:?}: {err}");
        }
    }

    #[test]
    fn rejects_garbage_with_the_input_quoted() {
        for bad in ["", "m", "5x", "1h30", "-5s", "1.5h"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn a_duration_past_a_year_is_refused_not_cut_to_fit() {
        assert_eq!(parse("8760h"), Ok(MAX));
        for long in [
            "8760h1s",
            "31536001s",
            "99999999999999999h",
            "99999999999999999999999ms",
            "18446744073709551615s1s",
        ] {
            let err = parse(long).unwrap_err();
            assert!(err.contains("longer than a year (8760h)"), "{long}: {err}");
        }
    }

    #[test]
    fn exact_reads_back_unrounded() {
        for (d, want) in [
            (Duration::from_secs(40), "40s"),
            (Duration::from_secs(3), "3s"),
            (Duration::from_secs(900), "15m"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3661), "1h1m1s"),
            (Duration::from_millis(1500), "1500ms"),
        ] {
            assert_eq!(exact(d), want);
            assert_eq!(parse(want), Ok(d));
        }
    }

    #[test]
    fn human_is_compact() {
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_secs(45)), "45s");
        assert_eq!(human(Duration::from_secs(723)), "12m03s");
        assert_eq!(human(Duration::from_secs(7500)), "2h05m");
    }
}
