//! Loops started at a time: `loop start --at` and `loop schedule`, started by `loop daemon`
//! once and only once, whatever is killed when.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use m1loop::m1::Status;

use crate::support::answers::steady;
use crate::support::{TestLoop, stdout, wait_until};

/// The ledger's lines about started loops, per schedule id.
fn started(env: &TestLoop) -> Vec<(String, String)> {
    let ledger = env.xdg().join("m1loop/schedules.ledger.jsonl");
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["what"] == "started")
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_owned(),
                v["loop_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// In a few seconds, as `--at` takes it.
fn in_ms(ms: i64) -> String {
    (Utc::now() + chrono::Duration::milliseconds(ms)).to_rfc3339()
}

/// How many loops were written in the loop file's directory: its M1.md, and each archive
/// (`M1.<time>.md`) a second start would have made of the first. (Not `start:` lines in the
/// log: a start killed between its M1.md and its log line is a loop all the same.)
fn starts_in(file: &Path) -> usize {
    std::fs::read_dir(file.parent().unwrap())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("M1.") && path.extension().is_some_and(|x| x == "md")
        })
        .count()
}

#[test]
fn a_queued_start_waits_with_its_time_and_the_daemon_starts_it_once() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    let out = env.run_ok(&["start", "g", "--step", "a", "--at", &in_ms(1500)]);
    assert!(stdout(&out).contains("queued S1"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("no `loop daemon` runs"),
        "{}",
        stdout(&out)
    );
    assert!(!env.file.exists(), "nothing starts before its time");
    let status = env.run_ok(&["status"]);
    assert!(
        stdout(&status).contains("QUEUED  starts at"),
        "{}",
        stdout(&status)
    );
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.file.exists()
            && env.m1().status == Status::Done),
        "{}",
        env.log()
    );
    assert_eq!(started(&env).len(), 1);
    assert_eq!(starts_in(&env.file), 1);
    let schedules = std::fs::read_to_string(env.xdg().join("m1loop/schedules.md")).unwrap();
    assert!(
        !schedules.contains("## S1"),
        "a queued start that is over leaves the file:\n{schedules}"
    );
}

#[test]
fn loop_stop_cancels_a_queued_start() {
    let env = TestLoop::new();
    env.run_ok(&["start", "g", "--step", "a", "--at", "2099-01-01T02:00:00Z"]);
    let out = env.run_ok(&["stop"]);
    assert!(
        stdout(&out).contains("cancelled the queued start S1"),
        "{}",
        stdout(&out)
    );
    let list = env.run_ok(&["schedule", "list"]);
    assert!(stdout(&list).contains("no schedules"), "{}", stdout(&list));
}

#[test]
fn a_daemon_killed_at_random_around_due_times_starts_each_once() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    let files: Vec<PathBuf> = (1..=4)
        .map(|i| env.temp.join(format!("p{i}/state/M1.md")))
        .collect();
    for (i, f) in files.iter().enumerate() {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        let at = in_ms(800 + 500 * i64::try_from(i).unwrap());
        env.run_ok(&[
            "--file",
            &f.display().to_string(),
            "start",
            "g",
            "--step",
            "a",
            "--at",
            &at,
        ]);
    }
    // Killed every few hundred milliseconds, at a moment the clock picks, and started again.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        let mut daemon = env.spawn(&["daemon", "--every", "1s"]);
        let jitter = u64::from(Utc::now().timestamp_subsec_micros() % 400);
        std::thread::sleep(Duration::from_millis(100 + jitter));
        daemon.kill9();
    }
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || started(&env).len() >= 4),
        "{:?}",
        started(&env)
    );
    let mut ids: Vec<String> = started(&env).into_iter().map(|(id, _)| id).collect();
    ids.sort();
    assert_eq!(ids, ["S1", "S2", "S3", "S4"], "each due time started once");
    for f in &files {
        assert_eq!(starts_in(f), 1, "{}", f.display());
    }
}

#[test]
fn a_malformed_schedules_file_is_said_with_its_line_and_never_rewritten() {
    let env = TestLoop::new();
    let dir = env.xdg().join("m1loop");
    std::fs::create_dir_all(&dir).unwrap();
    let text = "## S1\nEVERY: 0 25 * * *\nGOAL: g\n";
    std::fs::write(dir.join("schedules.md"), text).unwrap();
    let out = env.run_exits(2, &["schedule", "pause", "S1"]);
    let err = crate::support::stderr(&out);
    assert!(err.contains("schedules.md:2:10: `25` is no hour"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("schedules.md")).unwrap(),
        text
    );
}

#[test]
fn schedule_add_list_pause_resume_rm_edit_the_file() {
    let env = TestLoop::new();
    let out = env.run_ok(&[
        "schedule",
        "add",
        "bump the deps",
        "--every",
        "weekdays 02:00",
        "--verify",
        "true",
    ]);
    assert!(
        stdout(&out).contains("added schedule S1"),
        "{}",
        stdout(&out)
    );
    let path = env.xdg().join("m1loop/schedules.md");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("EVERY: weekdays 02:00\n") && text.contains("FLAGS: --verify true\n"),
        "{text}"
    );
    env.run_ok(&["schedule", "pause", "S1"]);
    assert!(stdout(&env.run_ok(&["schedule", "list"])).contains("S1  paused"));
    env.run_ok(&["schedule", "resume", "S1"]);
    assert!(stdout(&env.run_ok(&["schedule", "list"])).contains("S1  next "));
    let bad = env.run_exits(
        2,
        &[
            "schedule",
            "add",
            "g",
            "--every",
            "daily 02:00",
            "--no-such-flag",
        ],
    );
    assert!(crate::support::stderr(&bad).contains("not `loop start`'s"));
    env.run_ok(&["schedule", "rm", "S1"]);
    assert!(!std::fs::read_to_string(&path).unwrap().contains("## S1"));
}

/// The ledger's lines, as JSON.
fn ledger(env: &TestLoop) -> Vec<serde_json::Value> {
    std::fs::read_to_string(env.xdg().join("m1loop/schedules.ledger.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Writes the schedules file and the ledger as a person, or a killed daemon, left them.
fn leave(env: &TestLoop, schedules: &str, ledger: &[serde_json::Value]) {
    let dir = env.xdg().join("m1loop");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("schedules.md"), schedules).unwrap();
    let lines: String = ledger.iter().map(|v| v.to_string() + "\n").collect();
    std::fs::write(dir.join("schedules.ledger.jsonl"), lines).unwrap();
}

/// A queued start of the test's loop, due at `due`.
fn queued(env: &TestLoop, due: &str) -> String {
    format!(
        "## S1\nAT: {due}\nGOAL: g\nFILE: {}\nPROJECT: {}\nFLAGS: --step a\nSINCE: {due}\n",
        env.file.display(),
        env.path().display()
    )
}

fn intent(due: &str, file: &Path, prior: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "id": "S1", "due": due, "at": due, "what": "intent", "file": file, "prior": prior,
    })
}

#[test]
fn an_intent_a_killed_daemon_left_without_a_loop_is_started_once() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    let due = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    leave(&env, &queued(&env, &due), &[intent(&due, &env.file, None)]);
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || started(&env).len() == 1),
        "{:?}",
        ledger(&env)
    );
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    assert_eq!(starts_in(&env.file), 1);
}

#[test]
fn an_intent_a_killed_daemon_left_after_its_loop_was_written_is_not_started_again() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    env.run_ok(&["start", "g", "--step", "a"]);
    let id = env.m1().loop_id.unwrap();
    let due = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    leave(
        &env,
        &queued(&env, &due),
        &[intent(&due, &env.file, Some("an0ther1d000"))],
    );
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || started(&env).len() == 1),
        "{:?}",
        ledger(&env)
    );
    assert_eq!(
        started(&env)[0].1,
        id,
        "the loop found is the one that was written"
    );
    // The file leaves the queued start once it is over: the daemon has looked and decided.
    assert!(wait_until(Duration::from_secs(30), || {
        !std::fs::read_to_string(env.xdg().join("m1loop/schedules.md"))
            .unwrap()
            .contains("## S1")
    }));
    assert_eq!(starts_in(&env.file), 1);
}

#[test]
fn a_due_time_whose_previous_loop_still_runs_is_skipped_and_said() {
    let env = TestLoop::new();
    env.scenario(&steady(60_000));
    env.run_ok(&["start", "g", "--step", "a", "--detach"]);
    env.wait_for_calls(1, 1);
    let id = env.m1().loop_id.unwrap();
    env.run_ok(&["start", "g2", "--step", "b", "--at", &in_ms(300)]);
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(30), || ledger(&env)
            .iter()
            .any(|v| v["what"] == "skipped")),
        "{:?}",
        ledger(&env)
    );
    let skipped = ledger(&env)
        .into_iter()
        .find(|v| v["what"] == "skipped")
        .unwrap();
    assert!(
        skipped["why"]
            .as_str()
            .unwrap()
            .contains("still runs (STATUS RUNNING)"),
        "{skipped}"
    );
    assert_eq!(env.m1().loop_id.unwrap(), id, "no second loop");
    assert!(
        wait_until(Duration::from_secs(10), || env.log().contains("still runs")),
        "said in the loop's log (its chat, when it has one):\n{}",
        env.log()
    );
    env.run_ok(&["stop"]);
}

#[test]
fn a_time_missed_while_off_is_started_once_within_its_window_and_skipped_past_it() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    let two_ago = chrono::Local::now() - chrono::Duration::minutes(2);
    let cron = two_ago.format("%M %H * * *").to_string();
    let since = (Utc::now() - chrono::Duration::days(1)).to_rfc3339();
    let other = env.temp.join("other/state/M1.md");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    let text = format!(
        "## S1\nEVERY: {cron}\nGOAL: g\nFILE: {}\nFLAGS: --step a\nSINCE: {since}\n\n\
         ## S2\nEVERY: {cron}\nGOAL: g\nFILE: {}\nFLAGS: --step a\nCATCH_UP: 1m\nSINCE: {since}\n",
        env.file.display(),
        other.display()
    );
    leave(&env, &text, &[]);
    let _daemon = env.spawn(&["daemon", "--every", "1s"]);
    assert!(
        wait_until(Duration::from_secs(60), || ledger(&env).len() >= 3),
        "{:?}",
        ledger(&env)
    );
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    let whats: Vec<(String, String)> = ledger(&env)
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_owned(),
                v["what"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        whats.contains(&("S1".into(), "started".into())),
        "{whats:?}"
    );
    assert!(
        whats.contains(&("S2".into(), "skipped".into())),
        "{whats:?}"
    );
    assert_eq!(starts_in(&env.file), 1);
    assert!(
        !other.exists(),
        "a time missed by more than its window starts nothing"
    );
}

#[test]
fn at_and_schedule_from_the_chat_queue_and_schedule_as_the_shell_does() {
    use crate::support::bot::{CHAT, replies, with_telegram};
    use crate::support::telegram_fake::FakeTelegram;
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    let mut bot = env.spawn(&["telegram", "--poll-timeout", "1s"]);
    tg.push_message(CHAT, "/at 2099-01-01T02:00:00Z bump the deps");
    assert!(
        wait_until(Duration::from_secs(30), || replies(&tg)
            .iter()
            .any(|t| t.contains("queued S1"))),
        "{:?}",
        replies(&tg)
    );
    tg.push_message(
        CHAT,
        "/schedule add \u{201c}weekdays 02:00\u{201d} triage the issues",
    );
    assert!(
        wait_until(Duration::from_secs(30), || replies(&tg)
            .iter()
            .any(|t| t.contains("added schedule S2"))),
        "{:?}",
        replies(&tg)
    );
    tg.push_message(CHAT, "/schedule");
    assert!(
        wait_until(Duration::from_secs(30), || replies(&tg)
            .iter()
            .any(|t| t.contains("S2  next") && t.contains("triage the issues"))),
        "{:?}",
        replies(&tg)
    );
    let text = std::fs::read_to_string(env.xdg().join("m1loop/schedules.md")).unwrap();
    assert!(
        text.contains(&format!("FILE: {}\n", env.file.display())),
        "{text}"
    );
    assert!(text.contains("EVERY: weekdays 02:00\n"), "{text}");
    bot.kill9();
}

/// `--at` reads a local time in the machine's time zone (here `TZ`, as a service has it) with
/// cron's daylight-saving rule: a time the clocks skip is the first minute after the change,
/// a time they repeat is its first occurrence.
#[test]
fn at_reads_local_time_across_daylight_saving_changes_in_the_time_zone_of_tz() {
    let env = TestLoop::new().env("TZ", "Europe/Berlin");
    // 28 March 2027: 02:00 CET becomes 03:00 CEST. 31 October 2027: 03:00 CEST becomes 02:00 CET.
    env.run_ok(&["start", "g", "--step", "a", "--at", "2027-03-28 02:30"]);
    env.run_ok(&["start", "g", "--step", "a", "--at", "2027-10-31 02:30"]);
    env.run_ok(&["start", "g", "--step", "a", "--at", "2027-01-15 02:30"]);
    let text = std::fs::read_to_string(env.xdg().join("m1loop/schedules.md")).unwrap();
    let ats: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("AT: "))
        .collect();
    assert_eq!(
        ats,
        [
            "2027-03-28T01:00:00Z",
            "2027-10-31T00:30:00Z",
            "2027-01-15T01:30:00Z"
        ],
        "{text}"
    );
    let status = env.run_ok(&["status"]);
    assert!(
        stdout(&status).contains("starts at 2027-03-28 03:00 +02:00"),
        "{}",
        stdout(&status)
    );
}

/// A loop a schedule started is kept as the service's loops are: a runner killed between its
/// steps (or by a reboot) is revived by the daemon.
#[test]
fn the_daemon_revives_a_loop_a_schedule_started_whose_runner_died() {
    let env = TestLoop::new();
    env.scenario(&steady(1500));
    env.run_ok(&TestLoop::start_args(&["a", "b"], &["--at", &in_ms(300)]));
    // Not the loop of LOOP_FILE to the daemon: only the schedule names it.
    let mut daemon = env.cmd(&["daemon", "--every", "1s"]);
    daemon.env_remove("LOOP_FILE");
    let _daemon = crate::support::Guard::spawn(&mut daemon);
    env.wait_for_calls(1, 1);
    let runner = m1loop::runner::lock::holder(&env.file).expect("a runner drives the loop");
    crate::support::Guard::of_pid(i32::try_from(runner).unwrap()).kill9();
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    assert_eq!(
        (env.calls_for(1), env.calls_for(2)),
        (1, 1),
        "{}",
        env.log()
    );
    assert_eq!(starts_in(&env.file), 1);
}

/// A daemon whose schedules file has a mistake starts nothing from it and says so once, with
/// the line and column, not every round; once the file is fixed, it starts what is due.
#[test]
fn the_daemon_says_a_mistake_in_the_schedules_file_once_and_starts_once_it_is_fixed() {
    let env = TestLoop::new();
    env.scenario(&steady(10));
    let due = (Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    let good = queued(&env, &due);
    leave(
        &env,
        &good.replace("FLAGS: --step a\n", "FLAGS: --step a\nPAUSED: maybe\n"),
        &[],
    );
    let out = env.temp.join("daemon.out");
    // A loop to keep (none is there) has the daemon look every second.
    let other = env.temp.join("other/state/M1.md").display().to_string();
    let mut daemon = env.cmd(&["daemon", "--every", "1s", "--loop", &other]);
    daemon.env_remove("LOOP_FILE");
    daemon.stdout(std::fs::File::create(&out).unwrap());
    let _daemon = crate::support::Guard::spawn(&mut daemon);
    let said = || std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(20), || said()
            .contains("schedules.md:7:9: PAUSED is yes or no")),
        "{}",
        said()
    );
    assert!(
        !wait_until(Duration::from_secs(3), || said()
            .matches("has mistakes")
            .count()
            > 1),
        "said again at the next rounds: {}",
        said()
    );
    assert!(
        !env.file.exists(),
        "nothing starts from a file with a mistake"
    );
    std::fs::write(env.xdg().join("m1loop/schedules.md"), &good).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || started(&env).len() == 1),
        "{}",
        said()
    );
    env.wait_for_status(Status::Done, Duration::from_secs(60));
    assert_eq!(said().matches("has mistakes").count(), 1, "{}", said());
}
