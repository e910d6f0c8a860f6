//! Several `loop notify` processes at once share one outbox: every message arrives exactly
//! once, none is lost to a concurrent append or to a concurrent flush marking messages sent.

use std::time::Duration;

use crate::support::TestLoop;
use crate::support::telegram_fake::{FakeTelegram, Reply};

#[test]
fn concurrent_notifiers_deliver_every_message_exactly_once() {
    let tg = FakeTelegram::start();
    let env = TestLoop::new()
        .env(
            "TELEGRAM_BOT_TOKEN",
            "777:AAconcurrencyTOKEN_secret_value_1234",
        )
        .env("TELEGRAM_CHAT_ID", "77")
        .env("TELEGRAM_API_BASE", tg.base_url())
        .env("LOOP_NOTIFY_BACKOFF_MS", "5");
    // Some failures so that processes leave messages behind for each other to flush.
    tg.script_send([
        Reply::ServerError,
        Reply::Drop,
        Reply::ServerError,
        Reply::Drop,
    ]);
    let spawn = |msg: String| env.spawn(&["--file", "state/M1.md", "notify", &msg]);
    let mut children: Vec<_> = (0..8).map(|i| spawn(format!("message {i}"))).collect();
    for c in &mut children {
        c.wait(Duration::from_secs(60));
    }
    let out = env.run(&["--file", "state/M1.md", "notify", "--flush"]);
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
