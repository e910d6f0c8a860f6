//! `loop telegram` against a loopback Bot API: who is obeyed, which child commands run, that
//! no command runs twice across a restart, and that outages and 409 do not stop the bot.
//! Child `loop` commands go to a recording script (`LOOP_BOT_EXEC`), so these tests need
//! neither `start` nor `resume` to exist.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::telegram_fake::{FakeTelegram, Reply, wait_for};

const TOKEN: &str = "55555:AAbotTOKENsecret_for-the-bot-tests-xyz";
const CHAT: i64 = 4242;
const DEADLINE: Duration = Duration::from_secs(30);

struct Setup {
    dir: tempfile::TempDir,
}

/// A running `loop telegram`, killed when dropped.
struct Bot {
    child: Child,
    stderr: PathBuf,
}

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bot {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Setup {
    fn new() -> Self {
        let s = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        // Written by a child process, so no test thread holds the file open for writing while
        // another forks (which would make exec fail with "text file busy").
        let script = "#!/bin/sh\nprintf '%s|' \"$@\" >> \"$FAKE_LOOP_RECORD\"\nprintf '\\n' >> \"$FAKE_LOOP_RECORD\"\necho \"fake loop: $*\"\n";
        let ok = Command::new("sh")
            .args([
                "-c",
                "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
                "sh",
                script,
            ])
            .arg(s.script())
            .status()
            .unwrap();
        assert!(ok.success());
        s
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("state").join("M1.md")
    }
    fn script(&self) -> PathBuf {
        self.dir.path().join("fake-loop.sh")
    }
    fn record(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.path().join("record")).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    }
    fn stop_file(&self) -> PathBuf {
        self.dir.path().join("stop-file")
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/loop.log")).unwrap_or_default()
    }

    fn bot(&self, base: &str) -> Bot {
        let stderr = self
            .dir
            .path()
            .join(format!("bot-stderr-{}", rand_suffix()));
        let child = Command::new(env!("CARGO_BIN_EXE_loop"))
            .current_dir(self.dir.path())
            .arg("--file")
            .arg(self.file())
            .args(["telegram", "--poll-timeout", "1s"])
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_CHAT_ID", CHAT.to_string())
            .env("TELEGRAM_API_BASE", base)
            .env("LOOP_STOP_FILE", self.stop_file())
            .env("LOOP_NOTIFY_BACKOFF_MS", "10")
            .env("LOOP_BOT_EXEC", self.script())
            .env("FAKE_LOOP_RECORD", self.dir.path().join("record"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Bot { child, stderr }
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
fn a_command_from_another_chat_does_nothing_and_stop_from_ours_creates_the_stop_file() {
    let s = Setup::new();
    let tg = FakeTelegram::start();
    let _bot = s.bot(&tg.base_url());
    tg.push_message(999, "/stop");
    assert!(
        wait_for(DEADLINE, || s
            .log()
            .contains("ignored a message from chat 999")),
        "{}",
        s.log()
    );
    assert!(!exists(&s.stop_file()), "a stranger stopped the loop");

    tg.push_message(CHAT, "/stop");
    assert!(wait_for(DEADLINE, || exists(&s.stop_file())));
    assert!(wait_for(DEADLINE, || replies(&tg)
        .iter()
        .any(|t| t.contains("Stop file created"))));
    assert!(
        tg.sent().iter().all(|m| m.chat_id == CHAT.to_string()),
        "nothing said to the stranger"
    );
}

#[test]
fn loop_status_and_resume_run_the_exact_child_commands() {
    let s = Setup::new();
    let tg = FakeTelegram::start();
    let _bot = s.bot(&tg.base_url());
    let f = s.file().display().to_string();

    tg.push_message(CHAT, "/loop fix the SIGTERM bug");
    assert!(wait_for(DEADLINE, || s.record().len() == 1));
    assert_eq!(
        s.record()[0],
        format!("--file|{f}|start|--detach|fix the SIGTERM bug|")
    );
    assert!(wait_for(DEADLINE, || replies(&tg)
        .iter()
        .any(|t| t.contains("fake loop: --file"))));

    tg.push_message(CHAT, "/status@m1loop_bot");
    assert!(wait_for(DEADLINE, || s.record().len() == 2));
    assert_eq!(s.record()[1], format!("--file|{f}|status|"));

    std::fs::write(s.stop_file(), "stop").unwrap();
    tg.push_message(CHAT, "/resume");
    assert!(wait_for(DEADLINE, || s.record().len() == 3));
    assert_eq!(s.record()[2], format!("--file|{f}|resume|--detach|"));
    assert!(
        !exists(&s.stop_file()),
        "/resume clears the stop file it would refuse on"
    );
}

#[test]
fn a_restarted_bot_runs_no_command_twice() {
    let s = Setup::new();
    let tg = FakeTelegram::start();
    let bot = s.bot(&tg.base_url());
    let id = tg.push_message(CHAT, "/loop once only");
    assert!(wait_for(DEADLINE, || s.record().len() == 1));
    let offset_file = s.dir.path().join("state/telegram.offset");
    assert_eq!(
        std::fs::read_to_string(&offset_file).unwrap().trim(),
        (id + 1).to_string()
    );
    drop(bot);

    let before = tg.count("getUpdates");
    let _bot = s.bot(&tg.base_url());
    assert!(wait_for(DEADLINE, || tg.count("getUpdates") >= before + 3));
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
        s.record().len(),
        1,
        "the command ran again after the restart"
    );
}

#[test]
fn outages_and_a_409_do_not_stop_the_bot() {
    let s = Setup::new();
    let tg = FakeTelegram::start();
    tg.script_updates([
        Reply::Drop,
        Reply::ServerError,
        Reply::Conflict,
        Reply::Drop,
    ]);
    let mut bot = s.bot(&tg.base_url());
    assert!(
        wait_for(DEADLINE, || bot
            .stderr()
            .contains("another client is reading")),
        "{}",
        bot.stderr()
    );
    tg.push_message(CHAT, "/stop");
    assert!(
        wait_for(DEADLINE, || exists(&s.stop_file())),
        "{}",
        bot.stderr()
    );
    assert!(bot.child.try_wait().unwrap().is_none(), "the bot exited");
    assert!(bot.stderr().contains("500"), "{}", bot.stderr());
}

#[test]
fn an_unreachable_server_is_waited_out_and_the_token_never_shows() {
    let s = Setup::new();
    let mut bot = s.bot(&FakeTelegram::down_base_url());
    assert!(
        wait_for(DEADLINE, || bot.stderr().contains("getUpdates failed")),
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
    let s = Setup::new();
    let out = Command::new(env!("CARGO_BIN_EXE_loop"))
        .current_dir(s.dir.path())
        .args(["telegram"])
        .env_remove("TELEGRAM_BOT_TOKEN")
        .env("TELEGRAM_CHAT_ID", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TELEGRAM_BOT_TOKEN is not"), "{err}");
}
