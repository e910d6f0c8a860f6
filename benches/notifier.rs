//! How long notifications take, end to end, against the loopback fake Bot API: one `notify`
//! (render, split, outbox append with fsync, send, mark sent) and flushing a backlog.
//! Prints figures; asserts nothing. Run: `cargo bench --bench notifier 2>/dev/null` (stderr
//! shows the simulated outage being reported).

#[path = "../tests/support/telegram_fake.rs"]
#[expect(
    dead_code,
    reason = "the bench uses the fake's server, not every reply the tests script"
)]
mod telegram_fake;

use std::time::Instant;

use m1loop::notifier::{self, Event};
use telegram_fake::{FakeTelegram, Reply};

fn main() {
    let tg = FakeTelegram::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // SAFETY: single-threaded here; the fake's threads never read the environment.
    unsafe {
        std::env::set_var("TELEGRAM_BOT_TOKEN", "1:AAbenchTOKEN");
        std::env::set_var("TELEGRAM_CHAT_ID", "1");
        std::env::set_var("TELEGRAM_API_BASE", tg.base_url());
        std::env::set_var("LOOP_NOTIFY_BACKOFF_MS", "1");
    }
    let mut n = notifier::from_env(&state);
    let event = Event::StepDone {
        goal: "bench".into(),
        step: 1,
        total: 3,
        summary: "ok".into(),
    };
    let runs = 200;
    let t = Instant::now();
    for _ in 0..runs {
        n.notify(&event);
    }
    let per = t.elapsed() / runs;
    println!("notify, one short message, delivered: {per:?} per message ({runs} runs)");

    // A backlog: the server drops 3 tries of the first message, so everything stays queued.
    let backlog = 200;
    tg.script_send([Reply::Drop, Reply::Drop, Reply::Drop]);
    for i in 0..backlog {
        if i == 0 {
            n.notify(&Event::Text(format!("queued {i}")));
        } else {
            // Queue without sending: the outage is simulated by a closed port.
            unsafe { std::env::set_var("TELEGRAM_API_BASE", FakeTelegram::down_base_url()) };
            notifier::from_env(&state).notify(&Event::Text(format!("queued {i}")));
        }
    }
    unsafe { std::env::set_var("TELEGRAM_API_BASE", tg.base_url()) };
    let t = Instant::now();
    let report = notifier::flush(&state);
    let took = t.elapsed();
    println!(
        "flush of a {backlog}-message backlog: {took:?} ({} sent, {} pending)",
        report.sent, report.pending
    );

    let long = Event::Text("line of output\n".repeat(2000));
    let t = Instant::now();
    let text = notifier::render(&long);
    println!(
        "render of a {}-character message: {:?}",
        text.len(),
        t.elapsed()
    );
}
