//! A loop's notifications through the real binary to a loopback Bot API.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::bot::{CHAT, TOKEN, replies, with_telegram};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{TestLoop, files, stderr, stdout, wait_until};

#[test]
fn a_loops_done_and_failed_messages_arrive_in_the_configured_chat() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("wrote the parser")));
    env.run_ok(&["start", "ship the parser", "--step", "write it"]);
    assert!(wait_until(Duration::from_secs(10), || replies(&tg)
        .iter()
        .any(|t| t.contains("DONE"))));
    let sent = tg.sent();
    assert!(
        sent.iter().all(|s| s.chat_id == CHAT.to_string()),
        "{sent:?}"
    );
    let done = sent.iter().find(|s| s.text.contains("DONE")).unwrap();
    assert!(
        done.text.contains("ship the parser") && done.text.contains("wrote the parser"),
        "{}",
        done.text
    );
    assert!(
        sent[0].text.contains("ship the parser") && sent[0].text.contains("write it"),
        "started: {}",
        sent[0].text
    );

    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::says(
        "I changed parse.rs, but `cargo build` still says: expected `;`\nSTEP_FAILED: the tests \
         do not build",
    )));
    env.run_exits(
        1,
        &[
            "start",
            "fix the build",
            "--step",
            "fix it",
            "--max-retries",
            "2",
        ],
    );
    assert!(wait_until(Duration::from_secs(10), || replies(&tg)
        .iter()
        .any(|t| t.contains("FAILED"))));
    let failed = replies(&tg)
        .into_iter()
        .find(|t| t.contains("FAILED"))
        .unwrap();
    assert!(
        failed.contains("fix the build") && failed.contains("the tests do not build"),
        "{failed}"
    );
    // The agent's own last answer, not the loop's log of task and session ids.
    assert!(
        failed.contains("The agent&#39;s last answer")
            || failed.contains("The agent's last answer"),
        "{failed}"
    );
    assert!(failed.contains("I changed parse.rs"), "{failed}");
    assert!(!failed.contains("session"), "{failed}");
}

#[test]
fn with_telegram_down_the_loop_finishes_and_the_next_command_delivers_the_backlog_once() {
    let env = with_telegram(TestLoop::new(), &FakeTelegram::down_base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    // A failed notification never fails the loop.
    env.run_ok(&["start", "survive the outage", "--step", "a", "--step", "b"]);

    let tg = FakeTelegram::start();
    let env = env.env("TELEGRAM_API_BASE", tg.base_url());
    let out = env.run_ok(&["resume"]);
    // Delivered beside the command, by a process of its own that ends once it has.
    let delivering = |env: &TestLoop| env.processes().iter().any(|p| p.contains("__deliver"));
    assert!(
        wait_until(Duration::from_secs(10), || replies(&tg).len() >= 2
            && !delivering(&env)),
        "{:?} {:?}\n{}",
        replies(&tg),
        env.processes(),
        env.log()
    );
    let got = replies(&tg);
    assert_eq!(got.len(), 2, "started and done, once each: {got:?}");
    assert!(
        got[0].contains("survive the outage") && got[1].contains("DONE"),
        "{got:?}"
    );
    // Nothing is sent twice on the command after that.
    let _ = env.run(&["resume"]);
    assert!(wait_until(Duration::from_secs(10), || !delivering(&env)));
    assert_eq!(replies(&tg).len(), 2);

    // The token is in no file of the loop and in no output, though every send failed once.
    let out2 = env.run(&["status"]);
    for o in [&out, &out2] {
        assert!(!stdout(o).contains(TOKEN) && !stderr(o).contains(TOKEN));
    }
    let secret = TOKEN.split(':').nth(1).unwrap();
    for entry in files(&env.state()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(secret), "token in {}", entry.display());
    }
}

#[test]
fn stop_from_the_configured_chat_halts_a_running_loop_and_a_strangers_does_not() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("ok").sleep_ms(60_000).heartbeat_ms(500)));
    let mut runner = env.spawn(&["start", "g", "--step", "a long step"]);
    env.wait_for_calls(1, 1);
    let mut bot = env.spawn(&["telegram", "--poll-timeout", "1s"]);

    tg.push_message(999, "/stop");
    assert!(
        wait_until(Duration::from_secs(20), || env.log().contains("chat 999")),
        "{}",
        env.log()
    );
    assert!(!env.stop.exists(), "a stranger stopped the loop");

    tg.push_message(CHAT, "/stop");
    let status = runner.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(3), "{}", env.log());
    env.assert_status(Status::Waiting);
    // This loop only, as `loop stop`: no machine-wide stop file, and nothing left to remove.
    assert!(
        wait_until(Duration::from_secs(20), || replies(&tg)
            .iter()
            .any(|t| t.contains("the loop is WAITING"))),
        "{:?}",
        replies(&tg)
    );
    assert!(
        !env.stop.exists(),
        "/stop stopped every loop on the machine"
    );
    assert!(!env.state().join("STOP").exists());
    bot.kill9();
    env.assert_no_processes();
}
