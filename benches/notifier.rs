//! How long notifications take, against the loopback fake Bot API. Prints figures; asserts
//! nothing:
//! - what a runner pays per message (render, split, outbox append with fsync, and making sure
//!   a delivery process is at work), with the `loop` binary delivering beside it;
//! - a flush of a backlog, here and now (`loop notify --flush`);
//! - a 1-step loop's wall time with a Telegram that accepts and never answers, against the
//!   same loop with no Telegram, in the same run, as a ratio: notifications must not slow a
//!   loop down.
//!
//! Run: `cargo bench --bench notifier 2>/dev/null` (stderr shows the simulated outage being
//! reported).

#[path = "../tests/support/telegram_fake.rs"]
#[expect(
    dead_code,
    reason = "the bench uses the fake's server, not every reply the tests script"
)]
mod telegram_fake;

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{LOOP, loop_cmd, ms};
use m1loop::notifier::{self, Event};
use telegram_fake::FakeTelegram;

/// Loops of each kind in the wall-time comparison.
const LOOPS: usize = 15;

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
    let event = Event::StepDone {
        goal: "bench".into(),
        step: 1,
        total: 3,
        summary: "ok".into(),
    };
    let runs = 200;
    // Queueing alone (render, split, append with fsync), in an outbox nobody sends from.
    let queued = tempfile::tempdir().unwrap();
    let mut queue_only = notifier::from_env(&queued.path().join("state"), None);
    let t = Instant::now();
    for _ in 0..runs {
        queue_only.notify(&event);
    }
    println!(
        "notify, one short message, queued only: {:?} per message ({runs} runs)",
        t.elapsed() / runs
    );
    let mut n = notifier::from_env(&state, Some(Path::new(LOOP)));
    let t = Instant::now();
    for _ in 0..runs {
        n.notify(&event);
    }
    let per = t.elapsed() / runs;
    println!(
        "notify, one short message, queued and handed to the delivery process: {per:?} per \
         message ({runs} runs)"
    );
    let t = Instant::now();
    let delivered = wait(Duration::from_secs(60), || tg.sent().len() == runs as usize);
    println!(
        "  ... and delivered by it: {} of {runs}{}",
        tg.sent().len(),
        if delivered {
            format!(", the last {:?} after the last was queued", t.elapsed())
        } else {
            " within a minute".to_owned()
        }
    );

    // A backlog: queued with no delivery process, as by commands that could not send.
    let backlog = 200;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut queue_only = notifier::from_env(&state, None);
    for i in 0..backlog {
        queue_only.notify(&Event::Text(format!("queued {i}")));
    }
    let t = Instant::now();
    let report = notifier::flush(&state, None);
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

    hung_against_none();
}

/// A 1-step loop's wall time with a Telegram that never answers, against none, alternating.
fn hung_against_none() {
    let mut none = Vec::new();
    let mut hung = Vec::new();
    for _ in 0..LOOPS {
        none.push(one_loop(None));
        let tg = FakeTelegram::start();
        tg.hang();
        hung.push(one_loop(Some(&tg)));
    }
    let (none, hung) = (median(&mut none), median(&mut hung));
    println!(
        "1-step loop, wall time (median of {LOOPS}): no Telegram {:.0} ms, a Telegram that \
         never answers {:.0} ms: {:.2}x",
        ms(none),
        ms(hung),
        hung.as_secs_f64() / none.as_secs_f64()
    );
}

/// The wall time of `loop start` of a 1-step loop with an instant agent; with `tg`, notifying
/// it, then letting the delivery process finish once the loop is timed.
fn one_loop(tg: Option<&FakeTelegram>) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("scenario.json"),
        r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#,
    )
    .unwrap();
    let mut cmd = loop_cmd(dir.path(), &["start", "bench", "--step", "one"]);
    if let Some(tg) = tg {
        cmd.env("TELEGRAM_BOT_TOKEN", "1:AAbenchTOKEN")
            .env("TELEGRAM_CHAT_ID", "1")
            .env("TELEGRAM_API_BASE", tg.base_url());
    } else {
        cmd.env_remove("TELEGRAM_CHAT_ID");
    }
    let t = Instant::now();
    let status = cmd.status().unwrap();
    let took = t.elapsed();
    assert!(status.success(), "the bench's loop failed: {status}");
    if let Some(tg) = tg {
        let held = tg.held();
        tg.answer_again();
        let drained = wait(Duration::from_secs(60), || tg.sent().len() == 2);
        if held == 0 || !drained {
            eprintln!(
                "bench: held at the loop's end {held}, delivered after {}",
                tg.sent().len()
            );
        }
    }
    took
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Polls `f` every 5 ms until it holds; false if `within` passes first.
fn wait(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}
