//! The time of `loop start --at`: `02:00` (today, or tomorrow once it has passed), a date and
//! a time (`2026-12-01 02:00`), both in local time, or a full RFC 3339 time.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

/// The instant `text` names, read at `now` in `tz`. A local time that does not exist that day
/// (spring forward) is the first minute after the gap; one that happens twice, the first.
///
/// # Errors
/// What `text` should look like.
pub fn parse<Tz: TimeZone>(
    text: &str,
    now: DateTime<Utc>,
    tz: &Tz,
) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.with_timezone(&Utc));
    }
    let bad = || {
        format!(
            "--at `{t}` is not a time: give 02:00 (today, or tomorrow once it has passed), \
             2026-12-01 02:00 (local time), or 2026-12-01T02:00:00+01:00"
        )
    };
    if let Ok(time) = NaiveTime::parse_from_str(t, "%H:%M") {
        let today = now.with_timezone(tz).date_naive();
        let at = super::cron::resolve(tz, today.and_time(time)).ok_or_else(bad)?;
        if at > now {
            return Ok(at);
        }
        let tomorrow: NaiveDate = today + Duration::days(1);
        return super::cron::resolve(tz, tomorrow.and_time(time)).ok_or_else(bad);
    }
    for format in ["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(n) = NaiveDateTime::parse_from_str(t, format) {
            return super::cron::resolve(tz, n).ok_or_else(bad);
        }
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use chrono_tz::Europe::Berlin;

    use super::parse;

    #[test]
    fn a_time_of_day_is_today_or_else_tomorrow() {
        let now = Utc.with_ymd_and_hms(2026, 11, 29, 1, 30, 0).unwrap(); // 02:30 in Berlin
        let at = parse("03:00", now, &Berlin).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 11, 29, 2, 0, 0).unwrap());
        let at = parse("02:00", now, &Berlin).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 11, 30, 1, 0, 0).unwrap());
    }

    #[test]
    fn a_date_and_time_is_local_and_an_offset_is_kept() {
        let now = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
        let at = parse("2026-12-01 02:00", now, &Berlin).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 12, 1, 1, 0, 0).unwrap());
        let at = parse("2026-12-01T02:00:00Z", now, &Berlin).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 12, 1, 2, 0, 0).unwrap());
        // Spring forward: 02:30 does not exist on 29 March 2026; 03:00 CEST does.
        let at = parse("2026-03-29 02:30", now, &Berlin).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).unwrap());
        assert!(
            parse("tomorrow", now, &Berlin)
                .unwrap_err()
                .contains("is not a time")
        );
    }
}
