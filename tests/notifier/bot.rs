//! `loop telegram` against a loopback Bot API: who is obeyed, which child commands run, that
//! no command runs twice across a restart, and that outages and 409 do not stop the bot.
//! Child `loop` commands go to a recording script (`LOOP_BOT_EXEC`), so these tests need
//! neither `start` nor `resume` to exist.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::telegram_fake::{FakeTelegram, Reply};
use crate::support::{Guard, TestLoop, run, wait_until, write_executable};

const TOKEN: &str = "55555:AAbotTOKENsecret_for-the-bot-tests-xyz";
const CHAT: i64 = 4242;
const DEADLINE: Duration = Duration::from_secs(30);

/// A running `loop telegram`, killed when dropped.
struct Bot {
    child: Guard,
    stderr: PathBuf,
}

impl Bot {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// A loop's directory with a recording script in place of `loop` for the bot's child commands.
fn setup() -> TestLoop {
    let s = TestLoop::new();
    let script = "#!/bin/sh\nprintf '%s|' \"$@\" >> \"$FAKE_LOOP_RECORD\"\nprintf '\\n' >> \"$FAKE_LOOP_RECORD\"\necho \"fake loop: $*\"\n";
    write_executable(&fake_loop(&s), script);
    s
}

fn fake_loop(s: &TestLoop) -> PathBuf {
    s.temp.join("fake-loop.sh")
}

fn record(s: &TestLoop) -> Vec<String> {
    let text = std::fs::read_to_string(s.temp.join("record")).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

fn start_bot(s: &TestLoop, base: &str) -> Bot {
    let stderr = s.temp.join(format!("bot-stderr-{}", rand_suffix()));
    let file = s.file.display().to_string();
    let mut cmd = s.cmd(&["--file", &file, "telegram", "--poll-timeout", "1s"]);
    cmd.env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", base)
        .env("LOOP_BOT_EXEC", fake_loop(s))
        .env("FAKE_LOOP_RECORD", s.temp.join("record"))
        .stderr(std::fs::File::create(&stderr).unwrap());
    Bot {
        child: Guard::spawn(&mut cmd),
        stderr,
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn replies(tg: &FakeTelegram) -> Vec<String> {
    tg.sent().into_iter().map(|s| s.text).collect()
}

fn exists(p: &Path) -> bool {
    p.exists()
}

#[test]
fn a_command_from_another_chat_does_nothing_and_stop_from_ours_runs_loop_stop() {
    let s = setup();
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    tg.push_message(999, "/stop");
    assert!(
        wait_until(DEADLINE, || s
            .log()
            .contains("ignored a message from chat 999")),
        "{}",
        s.log()
    );
    assert!(!exists(&s.stop), "a stranger stopped the loop");

    tg.push_message(CHAT, "/stop");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    let f = s.file.display().to_string();
    assert_eq!(record(&s)[0], format!("--file|{f}|stop|"));
    assert!(wait_until(DEADLINE, || replies(&tg).iter().any(|t| t
        .contains("fake loop: --file")
        && t.contains("/resume carries it on"))));
    assert!(!exists(&s.stop), "the machine-wide stop file was created");
    assert!(
        tg.sent().iter().all(|m| m.chat_id == CHAT.to_string()),
        "nothing said to the stranger"
    );
}

#[test]
fn loop_status_and_resume_run_the_exact_child_commands() {
    let s = setup();
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    let f = s.file.display().to_string();

    tg.push_message(CHAT, "/loop fix the SIGTERM bug");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    assert_eq!(
        record(&s)[0],
        format!("--file|{f}|start|--detach|fix the SIGTERM bug|")
    );
    assert!(wait_until(DEADLINE, || replies(&tg)
        .iter()
        .any(|t| t.contains("fake loop: --file"))));

    tg.push_message(CHAT, "/status@m1loop_bot");
    assert!(wait_until(DEADLINE, || record(&s).len() == 2));
    assert_eq!(record(&s)[1], format!("--file|{f}|status|"));

    // The machine-wide stop file is a person's emergency brake: /resume runs `resume`, which
    // refuses and says how to clear it, and leaves it in place.
    std::fs::write(&s.stop, "stop").unwrap();
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 3));
    assert_eq!(record(&s)[2], format!("--file|{f}|resume|--detach|"));
    assert!(
        exists(&s.stop),
        "/resume removed the machine-wide stop file"
    );
}

#[test]
fn resume_while_a_runner_holds_the_loop_waits_for_it_then_says_so_and_keeps_the_stop_file() {
    let s = setup();
    let _runner = m1loop::runner::lock::acquire(&s.file).unwrap();
    std::fs::write(&s.stop, "stop").unwrap();
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    let asked = std::time::Instant::now();
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || replies(&tg)
        .iter()
        .any(|t| t.contains("still drives the loop 10s later"))));
    assert!(asked.elapsed() >= Duration::from_secs(10), "it waited");
    assert!(record(&s).is_empty(), "`resume` was not run");
    assert!(exists(&s.stop), "the stop may still be under way");
}

#[test]
fn a_restarted_bot_runs_no_command_twice() {
    let s = setup();
    let tg = FakeTelegram::start();
    let bot = start_bot(&s, &tg.base_url());
    let id = tg.push_message(CHAT, "/loop once only");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    let offset_file = s.state().join("telegram.offset");
    assert_eq!(
        std::fs::read_to_string(&offset_file).unwrap().trim(),
        (id + 1).to_string()
    );
    drop(bot);

    let before = tg.count("getUpdates");
    let _bot = start_bot(&s, &tg.base_url());
    assert!(wait_until(DEADLINE, || tg.count("getUpdates") >= before + 3));
    let later: Vec<_> = tg
        .requests()
        .into_iter()
        .filter(|r| r.method == "getUpdates")
        .skip(before)
        .collect();
    assert!(
        later.iter().all(|r| r.body["offset"] == id + 1),
        "{later:?}"
    );
    assert_eq!(
        record(&s).len(),
        1,
        "the command ran again after the restart"
    );
}

#[test]
fn outages_and_a_409_do_not_stop_the_bot() {
    let s = setup();
    let tg = FakeTelegram::start();
    tg.script_updates([
        Reply::Drop,
        Reply::ServerError,
        Reply::Conflict,
        Reply::Drop,
    ]);
    let mut bot = start_bot(&s, &tg.base_url());
    assert!(
        wait_until(DEADLINE, || bot
            .stderr()
            .contains("another client is reading")),
        "{}",
        bot.stderr()
    );
    tg.push_message(CHAT, "/stop");
    assert!(
        wait_until(DEADLINE, || record(&s).len() == 1),
        "{}",
        bot.stderr()
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "the bot exited");
    assert!(bot.stderr().contains("500"), "{}", bot.stderr());
}

#[test]
fn an_unreachable_server_is_waited_out_and_the_token_never_shows() {
    let s = setup();
    let mut bot = start_bot(&s, &FakeTelegram::down_base_url());
    assert!(
        wait_until(DEADLINE, || bot.stderr().contains("getUpdates failed")),
        "{}",
        bot.stderr()
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "the bot exited");
    let secret = TOKEN.split_once(':').unwrap().1;
    assert!(!bot.stderr().contains(secret));
    assert!(!s.log().contains(secret));
}

#[test]
fn without_settings_the_bot_says_what_is_missing() {
    let s = setup();
    let out = run(s
        .cmd(&["telegram"])
        .env_remove("TELEGRAM_BOT_TOKEN")
        .env("TELEGRAM_CHAT_ID", "1"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TELEGRAM_BOT_TOKEN is not"), "{err}");
}

#[test]
fn a_second_bot_for_the_same_loop_is_a_loop_in_the_way_not_an_internal_error() {
    let s = setup();
    let tg = FakeTelegram::start();
    let mut first = start_bot(&s, &tg.base_url());
    assert!(
        wait_until(DEADLINE, || s.log().contains("polling for commands")),
        "{}{}",
        s.log(),
        first.stderr()
    );
    let file = s.file.display().to_string();
    let out = run(s
        .cmd(&["--file", &file, "telegram", "--poll-timeout", "1s"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", tg.base_url()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("already running"), "{err}");
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "the first bot exited"
    );
}

/// `loop telegram` where no loop is (no `state/M1.md` here or above, no `--file`) made a
/// `./state/` for its own files: they go to the per-user directory, as `fire` and `notify`'s
/// do, and a loop's `state/` is made only by a `/loop` that starts one.
#[test]
fn loop_telegram_where_no_loop_is_leaves_no_state_directory() {
    let s = setup().without_state();
    let tg = FakeTelegram::start();
    let mut cmd = s.cmd(&["telegram", "--poll-timeout", "1s"]);
    cmd.env_remove("LOOP_FILE")
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", tg.base_url())
        .env("LOOP_BOT_EXEC", fake_loop(&s))
        .env("FAKE_LOOP_RECORD", s.temp.join("record"));
    let _bot = Guard::spawn(&mut cmd);
    let user_log = s.xdg().join("m1loop").join("loop.log");
    assert!(
        wait_until(DEADLINE, || std::fs::read_to_string(&user_log)
            .is_ok_and(|l| l.contains("polling for commands"))),
        "{}",
        std::fs::read_to_string(&user_log).unwrap_or_default()
    );
    tg.push_message(CHAT, "/status");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    assert_eq!(record(&s)[0], "--file|state/M1.md|status|");
    assert!(
        !s.state().exists(),
        "loop telegram made a state/ where no loop is"
    );
}

/// `/stop` created the machine-wide stop file, stopping every loop on the machine: it runs
/// `loop stop` for its loop. `loop stop` leaves the loop's `STOP` only when the runner did not
/// let go in time; `/resume` takes that one away (a phone cannot), and no `STOP` it did not
/// leave.
#[test]
fn resume_removes_a_stop_only_when_the_bots_own_stop_left_it() {
    let s = setup();
    let loop_stop = s.state().join("STOP");
    // A `loop stop` whose runner did not let go within its patience: its STOP stays, exit 1.
    let script = format!(
        "#!/bin/sh\nprintf '%s|' \"$@\" >> \"$FAKE_LOOP_RECORD\"\nprintf '\\n' >> \
         \"$FAKE_LOOP_RECORD\"\nif [ \"$3\" = stop ]; then echo 'stopped by loop stop (pid 1)' > \
         '{}'; echo 'the runner has not stopped within 10s'; exit 1; fi\necho \"fake loop: $*\"\n",
        loop_stop.display()
    );
    write_executable(&fake_loop(&s), &script);
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    let f = s.file.display().to_string();

    tg.push_message(CHAT, "/stop");
    assert!(wait_until(DEADLINE, || replies(&tg).iter().any(|t| t
        .contains("not stopped within 10s")
        && t.contains("(exit 1)"))));
    assert!(exists(&loop_stop));
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 2));
    assert_eq!(record(&s)[1], format!("--file|{f}|resume|--detach|"));
    assert!(!exists(&loop_stop), "the STOP the bot's /stop left stayed");
    assert!(!exists(&s.stop));

    // A STOP a person put there is theirs: /resume runs `resume` (which refuses) and keeps it.
    std::fs::write(&loop_stop, "by hand").unwrap();
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 3));
    assert_eq!(std::fs::read_to_string(&loop_stop).unwrap(), "by hand");
}
