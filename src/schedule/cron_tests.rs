use chrono::{DateTime, Datelike, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Europe::Berlin;

use super::Cron;

/// A wall-clock time in Berlin, as an instant (the earlier one when it happens twice).
fn berlin(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Berlin
        .with_ymd_and_hms(y, mo, d, h, mi, 0)
        .earliest()
        .unwrap()
        .with_timezone(&Utc)
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

/// The next `n` due times after `from`, in UTC.
fn next_n(expr: &str, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let cron = Cron::parse(expr).unwrap();
    let mut out = Vec::new();
    let mut t = from;
    for _ in 0..n {
        t = cron.next_after(t, &Berlin).unwrap();
        out.push(t);
    }
    out
}

/// An instant as [`assert_due`] is given it: a wall-clock time in Berlin (`2026-11-30 09:00`,
/// the earlier one when it happens twice), or a time in UTC (`2026-10-25 00:00Z`).
fn instant(text: &str) -> DateTime<Utc> {
    let (wall, in_utc) = text.strip_suffix('Z').map_or((text, false), |w| (w, true));
    let t = NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M").unwrap();
    let (y, mo, d) = (t.year(), t.month(), t.day());
    let (h, mi) = (t.hour(), t.minute());
    if in_utc {
        utc(y, mo, d, h, mi)
    } else {
        berlin(y, mo, d, h, mi)
    }
}

/// Asserts that `expr`'s next due times after `from` are `want`, in order ([`instant`]s).
#[track_caller]
fn assert_due(expr: &str, from: &str, want: &[&str]) {
    let want: Vec<DateTime<Utc>> = want.iter().map(|w| instant(w)).collect();
    assert_eq!(
        next_n(expr, instant(from), want.len()),
        want,
        "`{expr}` after {from}"
    );
}

#[test]
fn weekdays_at_two_skip_the_weekend() {
    // Friday 27 November 2026, after 02:00.
    assert_due(
        "weekdays 02:00",
        "2026-11-27 03:00",
        &["2026-11-30 02:00", "2026-12-01 02:00"],
    );
    assert_eq!(
        Cron::parse("weekdays 02:00"),
        Cron::parse("0 2 * * mon-fri")
    );
}

#[test]
fn a_due_time_is_strictly_after_the_instant_given() {
    assert_due("0 2 * * *", "2026-11-30 02:00", &["2026-12-01 02:00"]);
}

#[test]
fn a_thirty_first_skips_the_months_without_one() {
    assert_due(
        "0 0 31 * *",
        "2026-01-31 01:00",
        &["2026-03-31 00:00", "2026-05-31 00:00", "2026-07-31 00:00"],
    );
}

#[test]
fn a_leap_day_comes_every_four_years() {
    assert_due(
        "30 6 29 2 *",
        "2026-11-29 00:00",
        &["2028-02-29 06:30", "2032-02-29 06:30"],
    );
}

#[test]
fn the_thirtieth_of_february_is_never_due() {
    let cron = Cron::parse("0 0 30 2 *").unwrap();
    assert_eq!(cron.next_after(utc(2026, 1, 1, 0, 0), &Berlin), None);
}

#[test]
fn a_time_in_the_spring_forward_gap_is_due_once_right_after_it() {
    // 29 March 2026: 02:00 CET becomes 03:00 CEST, so 02:30 does not exist that day.
    let got = next_n("30 2 * * *", berlin(2026, 3, 28, 12, 0), 2);
    assert_eq!(
        got[0],
        utc(2026, 3, 29, 1, 0),
        "03:00 CEST, the end of the gap"
    );
    assert_eq!(got[1], berlin(2026, 3, 30, 2, 30));
    // Every quarter hour: the gap's four times are one due time, not four.
    assert_due(
        "*/15 * * * *",
        "2026-03-29 01:50",
        &[
            "2026-03-29 01:00Z",
            "2026-03-29 01:15Z",
            "2026-03-29 01:30Z",
        ],
    );
}

#[test]
fn a_time_in_the_fall_back_overlap_is_due_once_at_its_first_occurrence() {
    // 25 October 2026: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
    let got = next_n("30 2 * * *", berlin(2026, 10, 24, 12, 0), 2);
    assert_eq!(got[0], utc(2026, 10, 25, 0, 30), "02:30 CEST, the first");
    assert_eq!(got[1], berlin(2026, 10, 26, 2, 30), "not 02:30 CET as well");
}

#[test]
fn a_quarter_hourly_schedule_does_not_run_twice_through_the_repeated_hour() {
    // 25 October 2026: 02:00-02:59 happens in CEST (00:00Z-00:59Z), then again in CET.
    assert_due(
        "*/15 * * * *",
        "2026-10-25 01:50",
        &[
            "2026-10-25 00:00Z",
            "2026-10-25 00:15Z",
            "2026-10-25 00:30Z",
            "2026-10-25 00:45Z",
            // 03:00 CET: the second 02:00-02:45 are the same wall-clock times, not again.
            "2026-10-25 02:00Z",
            "2026-10-25 02:15Z",
        ],
    );
}

#[test]
fn both_days_restricted_means_either_as_in_vixie_cron() {
    // The 1st of the month or a Monday.
    assert_due(
        "0 9 1 * mon",
        "2026-11-27 00:00",
        &["2026-11-30 09:00", "2026-12-01 09:00", "2026-12-07 09:00"],
    );
}

#[test]
fn phrases_read_as_the_cron_they_say() {
    for (phrase, cron) in [
        ("daily 06:30", "30 6 * * *"),
        ("every day at 6:30", "30 6 * * *"),
        ("06:30", "30 6 * * *"),
        ("weekends 10:00", "0 10 * * 0,6"),
        ("mondays,fridays 09:00", "0 9 * * 1,5"),
        ("every sunday at 23:59", "59 23 * * 0"),
        ("hourly", "0 * * * *"),
        ("@weekly", "0 0 * * 7"),
    ] {
        assert_eq!(Cron::parse(phrase), Cron::parse(cron), "{phrase}");
    }
}

#[test]
fn an_error_names_the_character_it_is_at() {
    let e = Cron::parse("0 25 * * *").unwrap_err();
    assert_eq!(e.offset, 2);
    assert!(e.message.contains("`25` is no hour"), "{}", e.message);
    let e = Cron::parse("0 2 * * 1,mon-xyz").unwrap_err();
    assert_eq!(e.offset, 10, "{}", e.message);
    let e = Cron::parse("sometimes").unwrap_err();
    assert!(
        e.message.contains("neither a cron expression"),
        "{}",
        e.message
    );
    let e = Cron::parse("*/0 * * * *").unwrap_err();
    assert!(e.message.contains("above 0"), "{}", e.message);
}
