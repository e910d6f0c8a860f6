//! `loop telegram` driven from a loopback Bot API, with a recording script in place of `loop`
//! for the child commands it runs (`LOOP_BOT_EXEC`): what the chat tests share.

use std::path::PathBuf;
use std::time::Duration;

use super::telegram_fake::FakeTelegram;
use super::{Guard, TestLoop, write_executable};

pub const TOKEN: &str = "55555:AAbotTOKENsecret_for-the-bot-tests-xyz";
pub const CHAT: i64 = 4242;
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A running `loop telegram`, killed when dropped.
pub struct Bot {
    pub child: Guard,
    stderr: PathBuf,
}

impl Bot {
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// A loop's directory with a recording script in place of `loop` for the bot's child commands.
pub fn setup() -> TestLoop {
    let s = TestLoop::new();
    let script = "#!/bin/sh\nprintf '%s|' \"$@\" >> \"$FAKE_LOOP_RECORD\"\nprintf '\\n' >> \"$FAKE_LOOP_RECORD\"\necho \"fake loop: $*\"\n";
    write_executable(&fake_loop(&s), script);
    s
}

/// The script the bot runs in place of `loop`.
pub fn fake_loop(s: &TestLoop) -> PathBuf {
    s.temp.join("fake-loop.sh")
}

/// The child commands the bot ran, one a line, their arguments ended by `|`.
pub fn record(s: &TestLoop) -> Vec<String> {
    let text = std::fs::read_to_string(s.temp.join("record")).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

/// `loop telegram` for the loop of `s`, polling `base`, its child commands recorded.
pub fn start_bot(s: &TestLoop, base: &str) -> Bot {
    bot(s, base, true)
}

/// `loop telegram` for the loop of `s`, polling `base`, running the real `loop` for its child
/// commands (with the loop's own environment: its agent, its stop file).
pub fn start_real_bot(s: &TestLoop, base: &str) -> Bot {
    bot(s, base, false)
}

fn bot(s: &TestLoop, base: &str, recorded: bool) -> Bot {
    let stderr = s.temp.join(format!("bot-stderr-{}", rand_suffix()));
    let file = s.file.display().to_string();
    let mut cmd = s.cmd(&["--file", &file, "telegram", "--poll-timeout", "1s"]);
    cmd.env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", base)
        .stderr(std::fs::File::create(&stderr).unwrap());
    if recorded {
        cmd.env("LOOP_BOT_EXEC", fake_loop(s))
            .env("FAKE_LOOP_RECORD", s.temp.join("record"));
    }
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

/// `env` sending its notifications to the chat [`CHAT`] of the Bot API at `base`.
pub fn with_telegram(env: TestLoop, base: &str) -> TestLoop {
    env.env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_CHAT_ID", CHAT.to_string())
        .env("TELEGRAM_API_BASE", base)
}

/// What the bot said in the chat.
pub fn replies(tg: &FakeTelegram) -> Vec<String> {
    tg.sent().into_iter().map(|s| s.text).collect()
}
