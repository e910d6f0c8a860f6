//! The library entry point the runner uses, `notifier::from_env`, delivering a loop's events
//! through a delivery process of the real `loop` binary.
//!
//! `from_env` reads the process environment, and every test shares this binary's process, so
//! the test runs in a process of its own (`rusty_fork_test!` starts this binary again for it
//! alone): setting variables there cannot race with another test's thread, or reach it.

use std::path::Path;

use m1loop::notifier::{self, Event};

use crate::support::telegram_fake::{FakeTelegram, Reply};
use crate::support::{LOOP, PATIENCE, Temp, wait_until};

rusty_fork::rusty_fork_test! {
    #![rusty_fork(timeout_ms = 60000)]

    #[test]
    fn a_loops_started_failed_and_done_messages_arrive_with_the_right_chat_and_text() {
        let dir = Temp::new();
        let state = dir.path().join("state");
        let tg = FakeTelegram::start();
        // SAFETY: the only test in this process; no other thread reads the environment.
        unsafe {
            std::env::set_var(
                "TELEGRAM_BOT_TOKEN",
                "987654:AAtokenTOKENtoken_for-events-test",
            );
            std::env::set_var("TELEGRAM_CHAT_ID", "-1001234567890");
            std::env::set_var("TELEGRAM_API_BASE", tg.base_url());
            std::env::set_var("LOOP_NOTIFY_BACKOFF_MS", "10");
        }
        assert_eq!(notifier::setup_hint(), None);

        // A message queued, not sent (no delivery process), as by a command that died: the
        // next notifier's delivery process sends it first, though its first tries fail.
        notifier::from_env(&state, None).notify(&Event::Text("left over".into()));
        assert!(tg.sent().is_empty());
        tg.script_send([Reply::Drop, Reply::Drop, Reply::Drop]);

        let mut n = notifier::from_env(&state, Some(Path::new(LOOP)));
        n.notify(&Event::Started {
            sandbox: None,
            goal: "fix the SIGTERM bug".into(),
            steps: vec!["investigate".into(), "fix".into()],
        });
        n.notify(&Event::Failed {
            goal: "fix the SIGTERM bug".into(),
            step: Some(2),
            reason: "VERIFY exited 1".into(),
            answer: None,
            stderr_tail: vec!["test a ... ok".into(), "test b ... FAILED <panic>".into()],
        });
        n.notify(&Event::Done {
            goal: "fix the SIGTERM bug".into(),
            summaries: vec![(1, "analysis written".into()), (2, "fixed & tested".into())],
            cost_usd: 0.42,
            tokens: 0,
            elapsed_s: 95,
            report: None,
            once: None,
            uncommitted: 0,
            pull_request: None,
        });
        assert!(wait_until(PATIENCE, || tg.sent().len() == 4), "{:?}", tg.sent());

        let sent = tg.sent();
        assert!(sent.iter().all(|s| s.chat_id == "-1001234567890"));
        let texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "left over",
                "▶️ <b>fix the SIGTERM bug</b>\nLoop started, 2 step(s):\n1. investigate\n2. fix",
                "❌ <b>fix the SIGTERM bug</b>\n<b>FAILED at step 2:</b> VERIFY exited 1\n\
                 The end of its stderr:\n<pre>test a ... ok\ntest b ... FAILED &lt;panic&gt;</pre>",
                "✅ <b>fix the SIGTERM bug</b>\n<b>DONE:</b> 2 step(s) in 1m35s, $0.42\n\
                 1. analysis written\n2. fixed &amp; tested",
            ]
        );
        // Marked sent once Telegram accepted it (just after the server counted it).
        let log = || std::fs::read_to_string(state.join("loop.log")).unwrap();
        assert!(wait_until(PATIENCE, || log().contains("sent the done message")), "{}", log());
        let report = notifier::flush(&state, None);
        assert_eq!((report.sent, report.pending, report.rejected), (0, 0, 0));
        let log = log();
        assert!(!log.contains("AAtokenTOKEN"), "{log}");
    }
}
