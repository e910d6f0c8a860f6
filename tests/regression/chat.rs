//! The chat (`loop telegram`) and `loop notify`: commands that stopped more than their loop,
//! raced the runner they stopped, or left files where no loop is; notices that did not say
//! where they went.

use std::time::Duration;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use crate::support::bot::{
    CHAT, DEADLINE, TOKEN, fake_loop, record, replies, setup, start_bot, with_telegram,
};
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{Guard, TestLoop, run, stderr, wait_until, write_executable};

/// The chat's `/resume`, sent right after `/stop`, removed the stop file at once and met "a
/// runner already drives" (or cancelled a stop the runner had not seen yet). Fixed in 63a137f
/// (issue 18): it waits for the stopped runner to let go.
#[test]
fn resume_right_after_stop_waits_for_the_stopped_runner_instead_of_meeting_it() {
    let tg = FakeTelegram::start();
    let env = with_telegram(TestLoop::new(), &tg.base_url());
    // The stopped step takes a second to end, as the real CLI may: its runner lets go of the
    // loop only then, long after the bot has read both messages.
    let slow_to_end = Action::done("ok")
        .sleep_ms(60_000)
        .heartbeat_ms(500)
        .sigterm_exit_ms(1000);
    env.scenario(&Scenario::new().step(1, [slow_to_end, Action::done("ok")]));
    let mut runner = env.spawn(&["start", "g", "--step", "a long step"]);
    env.wait_for_calls(1, 1);
    let mut bot = env.spawn(&["telegram", "--poll-timeout", "1s"]);

    tg.push_message(CHAT, "/stop");
    tg.push_message(CHAT, "/resume");
    assert!(
        wait_until(Duration::from_secs(30), || replies(&tg)
            .iter()
            .any(|t| t.contains("Resuming"))),
        "{:?}",
        replies(&tg)
    );
    let reply = replies(&tg)
        .into_iter()
        .find(|t| t.contains("Resuming"))
        .unwrap();
    assert!(
        !reply.contains("already runs") && !reply.contains("(exit"),
        "{reply}"
    );
    assert_eq!(
        runner.wait(Duration::from_secs(30)).code(),
        Some(3),
        "stopped"
    );
    env.wait_for_status(Status::Done, Duration::from_secs(30));
    assert!(!env.stop.exists());
    bot.kill9();
    env.assert_no_processes();
}

/// A `/resume` while a runner still holds the loop waits for it (at most 10 s, as `loop stop`
/// does), then says so and leaves the stop file. Fixed in 63a137f (issue 18).
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
    assert!(s.stop.exists(), "the stop may still be under way");
}

/// `/stop` created the machine-wide stop file, which stopped every loop on the machine.
/// Fixed in b9af3f3: it runs `loop stop` for its own loop.
#[test]
fn a_command_from_another_chat_does_nothing_and_stop_from_ours_runs_loop_stop() {
    let s = setup();
    let tg = FakeTelegram::start();
    let _bot = start_bot(&s, &tg.base_url());
    tg.push_message(999, "/stop");
    assert!(
        wait_until(DEADLINE, || s.log().contains("in chat 999 (only chat")),
        "{}",
        s.log()
    );
    assert!(!s.stop.exists(), "a stranger stopped the loop");

    tg.push_message(CHAT, "/stop");
    assert!(wait_until(DEADLINE, || record(&s).len() == 1));
    let f = s.file.display().to_string();
    assert_eq!(record(&s)[0], format!("--file|{f}|stop|"));
    assert!(wait_until(DEADLINE, || replies(&tg).iter().any(|t| t
        .contains("fake loop: --file")
        && t.contains("/resume carries it on"))));
    assert!(!s.stop.exists(), "the machine-wide stop file was created");
    assert!(
        tg.sent().iter().all(|m| m.chat_id == CHAT.to_string()),
        "nothing said to the stranger"
    );
}

/// `/resume` removed the machine-wide stop file and any `STOP` beside M1.md, a person's too.
/// Fixed in b9af3f3: `loop stop` leaves the loop's `STOP` only when the runner did not let go
/// in time, and `/resume` takes away that one (a phone cannot), no `STOP` it did not leave.
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
    assert!(loop_stop.exists());
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 2));
    assert_eq!(record(&s)[1], format!("--file|{f}|resume|--detach|"));
    assert!(!loop_stop.exists(), "the STOP the bot's /stop left stayed");
    assert!(!s.stop.exists());

    // A STOP a person put there is theirs: /resume runs `resume` (which refuses) and keeps it.
    std::fs::write(&loop_stop, "by hand").unwrap();
    tg.push_message(CHAT, "/resume");
    assert!(wait_until(DEADLINE, || record(&s).len() == 3));
    assert_eq!(std::fs::read_to_string(&loop_stop).unwrap(), "by hand");
}

/// `loop telegram` where no loop is (no `state/M1.md` here or above, no `--file`) made a
/// `./state/` for its own files in whatever directory it was started. Fixed in af5fd86: they
/// go to the per-user directory, as `fire` and `notify`'s do, and a loop's `state/` is made
/// only by a `/loop` that starts one.
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

/// Without Telegram, `loop notify` said its message "was written to the log", not which log:
/// outside a loop that is the per-user one, which nobody would guess. Fixed in 3821b28.
#[test]
fn notify_without_telegram_says_which_log_it_wrote_to() {
    let env = TestLoop::new();
    let out = env.run_ok(&["--file", "state/M1.md", "notify", "in the loop"]);
    let log = env.state().join("loop.log");
    assert!(
        stderr(&out).contains(&format!("written to {}", log.display()))
            || stderr(&out).contains("written to state/loop.log"),
        "{}",
        stderr(&out)
    );
    let away = TestLoop::new().without_state();
    let out = run(away.cmd(&["notify", "anywhere"]).env_remove("LOOP_FILE"));
    assert!(out.status.success(), "{}", stderr(&out));
    let user_log = away.xdg().join("m1loop").join("loop.log");
    assert!(
        stderr(&out).contains(&format!("written to {}", user_log.display())),
        "{}",
        stderr(&out)
    );
    assert!(
        std::fs::read_to_string(user_log)
            .unwrap()
            .contains("anywhere")
    );
}

/// "Telegram notifications are off" went into the log before every notification of every
/// process (each `loop notify`, each runner). Fixed in 3821b28: it is said once per log.
#[test]
fn the_telegram_hint_is_logged_once_not_before_every_notification() {
    let env = TestLoop::new();
    for msg in ["one", "two", "three"] {
        env.run_ok(&["--file", "state/M1.md", "notify", msg]);
    }
    env.scenario(&Scenario::new().otherwise(Action::done("ok")));
    env.run_ok(&["start", "g", "--step", "a"]);
    let log = env.log();
    assert_eq!(log.matches("notify (").count(), 5, "{log}");
    assert_eq!(
        log.matches("Telegram notifications are off").count(),
        1,
        "{log}"
    );
}
