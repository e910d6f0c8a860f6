//! Several `loop notify` processes at once share one outbox: every message arrives exactly
//! once, none is lost to a concurrent append or to a concurrent flush marking messages sent.

use crate::support;

use std::process::{Command, Stdio};

use support::telegram_fake::{FakeTelegram, Reply};

#[test]
fn concurrent_notifiers_deliver_every_message_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let tg = FakeTelegram::start();
    // Some failures so that processes leave messages behind for each other to flush.
    tg.script_send([
        Reply::ServerError,
        Reply::Drop,
        Reply::ServerError,
        Reply::Drop,
    ]);
    let spawn = |msg: String| {
        Command::new(env!("CARGO_BIN_EXE_loop"))
            .current_dir(dir.path())
            .args(["--file", "state/M1.md", "notify", &msg])
            .env(
                "TELEGRAM_BOT_TOKEN",
                "777:AAconcurrencyTOKEN_secret_value_1234",
            )
            .env("TELEGRAM_CHAT_ID", "77")
            .env("TELEGRAM_API_BASE", tg.base_url())
            .env("LOOP_NOTIFY_BACKOFF_MS", "5")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut children: Vec<_> = (0..8).map(|i| spawn(format!("message {i}"))).collect();
    for c in &mut children {
        c.wait().unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_loop"))
        .current_dir(dir.path())
        .args(["--file", "state/M1.md", "notify", "--flush"])
        .env(
            "TELEGRAM_BOT_TOKEN",
            "777:AAconcurrencyTOKEN_secret_value_1234",
        )
        .env("TELEGRAM_CHAT_ID", "77")
        .env("TELEGRAM_API_BASE", tg.base_url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut texts: Vec<String> = tg.sent().into_iter().map(|s| s.text).collect();
    texts.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("message {i}")).collect();
    assert_eq!(texts, expected, "each message exactly once");
}
