//! Notifications that held a loop up: the runner sent each message itself and waited for
//! Telegram before it went on, so a Telegram that does not answer (a hung proxy, a stalled
//! server) or refuses connections cost the loop the time of every try.

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::bot::{replies, with_telegram};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{PATIENCE, TestLoop, procs, run, stderr, stdout, wait_until};

/// Messages queued in the outbox and not yet settled (sent or rejected).
fn pending(env: &TestLoop) -> usize {
    let text = std::fs::read_to_string(env.state().join("outbox.jsonl")).unwrap_or_default();
    let records: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let settled: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["kind"] != "message")
        .map(|r| &r["id"])
        .collect();
    records
        .iter()
        .filter(|r| r["kind"] == "message" && !settled.contains(&&r["id"]))
        .count()
}

/// The processes delivering this loop's outbox (`loop __deliver`), as `pid command line`.
fn deliverers(env: &TestLoop) -> Vec<String> {
    env.processes()
        .into_iter()
        .filter(|p| p.contains("__deliver"))
        .collect()
}

/// With `TELEGRAM_API_BASE` on a server that accepts connections and never answers, a 1-step
/// loop of under a second took 2 min 13 s, its first step starting 2 min 10 s late: the runner
/// sent the started message itself, and every later one, waiting out each try's timeout before
/// it decided anything more (issue "Fourth trial from outside", item 2). Messages are now
/// delivered by a process of their own that the runner never waits on.
#[test]
fn a_telegram_that_never_answers_does_not_hold_up_the_loop() {
    let tg = FakeTelegram::start();
    tg.hang();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("parsed")));
    let mut runner = env.spawn(&["start", "ship the parser", "--step", "write it"]);
    // One try of a send waits 30 s for an answer; a runner that waited on even one would not
    // be done by now.
    let status = runner.wait(PATIENCE);
    assert_eq!(status.code(), Some(0), "{}", env.log());
    env.assert_status(Status::Done);
    // The structural proof: the loop ran to its end and its runner exited while Telegram still
    // held the first message's request open, unanswered, so nothing the loop did waited on it.
    assert!(
        tg.held() >= 1,
        "no request held open when the runner exited (held {}, abandoned {})",
        tg.held(),
        tg.abandoned()
    );
    assert_eq!(tg.abandoned(), 0, "a client gave up on a held request");
    assert!(tg.sent().is_empty());
    assert_eq!(pending(&env), 2, "started and done wait in the outbox");

    // Telegram answers again: every message arrives, in order, once.
    tg.answer_again();
    assert!(
        wait_until(PATIENCE, || pending(&env) == 0
            && deliverers(&env).is_empty()),
        "pending {}, deliverers {:?}\n{}",
        pending(&env),
        deliverers(&env),
        env.log()
    );
    let got = replies(&tg);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].contains("ship the parser") && got[0].contains("write it"),
        "{got:?}"
    );
    assert!(
        got[1].contains("DONE") && got[1].contains("parsed"),
        "{got:?}"
    );
    env.assert_no_processes();
}

/// With the connection refused, each message still cost the loop the waits between its tries
/// (about 3 s with the default backoff): the runner retried the send itself (issue "Fourth
/// trial from outside", item 2). Here a try is followed by a 10-minute wait, which only the
/// delivery process sits out.
#[test]
fn a_telegram_that_refuses_connections_does_not_hold_up_the_loop() {
    let env = with_telegram(TestLoop::new(), &FakeTelegram::down_base_url())
        .env("LOOP_NOTIFY_BACKOFF_MS", "600000");
    env.scenario(&Scenario::new().otherwise(Action::done("parsed")));
    let mut runner = env.spawn(&["start", "ship the parser", "--step", "write it"]);
    let status = runner.wait(PATIENCE);
    assert_eq!(status.code(), Some(0), "{}", env.log());
    env.assert_status(Status::Done);
    assert_eq!(
        pending(&env),
        2,
        "nothing lost: started and done are queued"
    );

    // The delivery process waits out its backoff with its turn to send (a second one may wait
    // in line behind it); end them, as a reboot would, and the next command delivers the
    // backlog.
    let sending = deliverers(&env);
    assert!(!sending.is_empty(), "no delivery process");
    for p in &sending {
        procs::sigkill(p.split_whitespace().next().unwrap().parse().unwrap());
    }
    assert!(wait_until(PATIENCE, || deliverers(&env).is_empty()));
    let tg = FakeTelegram::start();
    let env = env.env("TELEGRAM_API_BASE", tg.base_url());
    let out = run(env.cmd(&["--file", "state/M1.md", "notify", "--flush"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "sent 2, still pending 0, rejected 0");
    let got = replies(&tg);
    assert!(
        got.len() == 2 && got[0].contains("ship the parser") && got[1].contains("DONE"),
        "{got:?}"
    );
}

/// A parallel loop whose runner died and was revived by the loop of one of its steps told its
/// DONE to its log instead of Telegram: the steps' runners were started without the Telegram
/// settings (so that only the parallel loop notifies), and the revived runner inherited their
/// environment. Found by the soak once it notified a Telegram of its own (`--parallel`, the
/// runner killed mid-loop). A step's loop now keeps the settings and notifies only its log
/// because it has a parent.
#[test]
fn a_parallel_loop_revived_by_one_of_its_steps_still_tells_its_done_on_telegram() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new().with_git(), &tg.base_url()).env("LOOP_REVIVE", "on");
    env.plan_parallel(&[("a", 1500), ("b", 1500)], &[]);
    let mut runner = env.spawn(&["resume"]);
    assert!(wait_until(PATIENCE, || env.calls_for(1) >= 1 && env.calls_for(2) >= 1));
    runner.kill9();
    env.wait_for_status(Status::Done, PATIENCE);
    env.assert_logged("revived by the loop of one of its steps");
    assert!(
        wait_until(PATIENCE, || replies(&tg).iter().any(|t| t.contains("DONE"))),
        "{:?}\n{}",
        replies(&tg),
        env.log()
    );
    // Only the parallel loop tells (each message starts with its goal): its steps' loops do not.
    assert!(
        replies(&tg)
            .iter()
            .all(|t| t.starts_with("g\n") || t.starts_with("✅ <b>g</b>\n")),
        "{:?}",
        replies(&tg)
    );
    env.assert_no_processes();
}

/// The parallel soak killed a runner just after it wrote DONE and before it queued the DONE
/// message: the loop was DONE, nobody was left to carry it on, and the person was never told.
/// The message is now queued before DONE is written, under a key that queues it once.
#[test]
fn a_runner_killed_just_after_writing_done_has_told_it_already() {
    use std::os::unix::process::ExitStatusExt;
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("parsed")));
    let mut c = env.cmd(&["start", "ship the parser", "--step", "write it"]);
    c.env("LOOP_CRASH_AT", "after-done-write@1");
    let status = c.status().unwrap();
    assert_eq!(status.signal(), Some(9), "the runner did not die there");
    env.assert_status(Status::Done);
    assert!(
        wait_until(PATIENCE, || replies(&tg).iter().any(|t| t.contains("DONE"))),
        "{:?}\n{}",
        replies(&tg),
        env.log()
    );
    env.assert_no_processes();
}

/// The other side of the same moment: a runner killed once the DONE message is queued but
/// before DONE is written. The loop carried on ends again, and the person is told once.
#[test]
fn a_runner_killed_just_before_writing_done_tells_it_once() {
    use std::os::unix::process::ExitStatusExt;
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    env.scenario(&Scenario::new().otherwise(Action::done("parsed")));
    let mut c = env.cmd(&["start", "ship the parser", "--step", "write it"]);
    c.env("LOOP_CRASH_AT", "before-done-write@1");
    let status = c.status().unwrap();
    assert_eq!(status.signal(), Some(9), "the runner did not die there");
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert!(
        wait_until(PATIENCE, || pending(&env) == 0
            && deliverers(&env).is_empty()),
        "{}",
        env.log()
    );
    let done: Vec<String> = replies(&tg)
        .into_iter()
        .filter(|t| t.contains("DONE"))
        .collect();
    assert_eq!(done.len(), 1, "{:?}", replies(&tg));
    env.assert_no_processes();
}

/// A runner killed between writing DONE and writing its report (14 of 20 such kills) left a
/// DONE loop whose DONE message named a page that did not exist; `loop resume` said nothing to
/// resume, the daemon left it alone, and `state/commits/<LOOP_ID>/` stayed. Whatever finishes a
/// DONE loop now writes what is missing: `loop resume`, and the daemon.
#[test]
fn a_runner_killed_after_writing_done_leaves_no_loop_without_its_report() {
    use std::os::unix::process::ExitStatusExt;
    for by_daemon in [false, true] {
        let env = TestLoop::new().with_git();
        env.scenario(&Scenario::new().otherwise(Action::done("parsed").write("p.txt", "p\n")));
        let mut c = env.cmd(&["start", "ship the parser", "--step", "write it"]);
        c.env("LOOP_CRASH_AT", "after-done-write@1");
        let status = c.status().unwrap();
        assert_eq!(status.signal(), Some(9), "the runner did not die there");
        env.assert_status(Status::Done);
        let page = env.state().join("M1.report.html");
        assert!(!page.exists(), "the kill came before the report");
        if by_daemon {
            let file = env.file.display().to_string();
            let _daemon = env.spawn(&["daemon", "--loop", &file, "--every", "1s"]);
            assert!(wait_until(PATIENCE, || page.exists()), "{}", env.log());
        } else {
            env.run_ok(&["resume"]);
            assert!(page.exists(), "{}", env.log());
        }
        assert!(
            !env.state()
                .join("commits")
                .read_dir()
                .is_ok_and(|mut d| d.next().is_some()),
            "the steps' commit notes are cleaned up"
        );
        env.assert_logged("the loop's end was left unfinished");
        env.assert_status(Status::Done);
    }
}
