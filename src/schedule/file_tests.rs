use super::{Problem, When, parse, quote_words, remove, set_key, split_words};

const FILE: &str = "# my schedules\n\
\n\
## S1\n\
EVERY: weekdays 02:00\n\
GOAL: bump the dependencies\n\
FILE: /p/app/state/M1.md\n\
FLAGS: --verify 'cargo test' --max-cost-usd 5\n\
SINCE: 2026-11-29T03:00:00Z\n\
# keep this one quiet\n\
\n\
## S2\n\
AT: 2026-11-30T02:00:00+01:00\n\
GOAL: once\n\
FILE: /p/other/state/M1.md\n\
CATCH_UP: 1h\n\
PAUSED: no\n\
SINCE: 2026-11-29T03:00:00Z\n";

#[test]
fn a_schedule_file_reads_as_its_entries() {
    let entries = parse(FILE).unwrap();
    assert_eq!(entries.len(), 2);
    let s1 = &entries[0];
    assert!(matches!(&s1.when, When::Every { text, .. } if text == "weekdays 02:00"));
    assert_eq!(s1.flags, ["--verify", "cargo test", "--max-cost-usd", "5"]);
    assert_eq!(s1.project, std::path::Path::new("/p/app"));
    assert_eq!(s1.catch_up, super::DEFAULT_CATCH_UP);
    assert_eq!(entries[1].catch_up, std::time::Duration::from_secs(3600));
    assert!(
        matches!(entries[1].when, When::At(t) if t.to_rfc3339() == "2026-11-30T01:00:00+00:00")
    );
}

#[test]
fn a_mistake_is_reported_at_its_line_and_column() {
    let bad = FILE
        .replace("weekdays 02:00", "0 2 * * 1-9")
        .replace("PAUSED: no", "PAUSED: maybe")
        .replace("CATCH_UP: 1h", "CATCHUP: 1h");
    let problems = parse(&bad).unwrap_err();
    let at: Vec<(usize, usize)> = problems.iter().map(|p| (p.line, p.col)).collect();
    assert_eq!(at, [(4, 16), (15, 1), (16, 9)], "{problems:?}");
    assert!(
        problems[0].message.contains("`9` is no weekday"),
        "{problems:?}"
    );
}

#[test]
fn an_entry_without_its_goal_or_time_is_a_mistake() {
    let problems = parse("## S9\nFILE: relative/M1.md\n").unwrap_err();
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        problems[0],
        Problem {
            line: 1,
            col: 1,
            message: "schedule S9 has no EVERY (or AT)".into()
        }
    );
    assert!(
        messages.iter().any(|m| m.contains("not an absolute path")),
        "{messages:?}"
    );
    assert!(parse("stray text\n").is_err());
}

#[test]
fn pausing_changes_one_line_and_keeps_the_rest() {
    let paused = set_key(FILE, "S2", "PAUSED", "yes").unwrap();
    assert_eq!(paused, FILE.replace("PAUSED: no", "PAUSED: yes"));
    // S1 has no PAUSED line: one is added at the end of its entry, before the blank line.
    let paused = set_key(FILE, "S1", "PAUSED", "yes").unwrap();
    assert_eq!(
        paused,
        FILE.replace(
            "# keep this one quiet\n",
            "# keep this one quiet\nPAUSED: yes\n"
        )
    );
    assert!(parse(&paused).unwrap()[0].paused);
    assert_eq!(set_key(FILE, "S7", "PAUSED", "yes"), None);
}

#[test]
fn removing_an_entry_keeps_every_other_line() {
    let without = remove(FILE, "S1").unwrap();
    assert!(
        without.starts_with("# my schedules\n\n## S2\n"),
        "{without}"
    );
    assert_eq!(parse(&without).unwrap().len(), 1);
    let without = remove(FILE, "S2").unwrap();
    assert!(without.ends_with("# keep this one quiet\n"), "{without}");
}

#[test]
fn flags_survive_quoting_and_reading_back() {
    let words: Vec<String> = ["--verify", "cargo test && echo 'ok'", "--step", "a\\b", ""]
        .map(String::from)
        .to_vec();
    assert_eq!(split_words(&quote_words(&words)).unwrap(), words);
    assert_eq!(split_words("a 'b").unwrap_err().0, 2);
}
