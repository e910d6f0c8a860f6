//! Loops on the Codex backend (`--backend codex`), with the simulated agent speaking Codex's
//! `--json` events, in what only Codex does: a hand edit it cannot honour, its usage limit
//! waited for by the minute it names, a fallback from it to Claude, its review inside the
//! loop's sandbox, and the thread it names on record while the run goes on. What it does as
//! Gemini does is in `backends.rs`.

use chrono::{Timelike, Utc};
use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{AgentKind, Status};
use serde_json::Value;

use super::backends::{CODEX, review_call};
use crate::support::{TestLoop, argv, wait_until};

fn codex_loop() -> TestLoop {
    CODEX.test_loop()
}

fn is_codex(call: &Value) -> bool {
    (CODEX.is_call)(call)
}

#[test]
fn a_hand_edit_codex_cannot_honour_halts_the_loop_naming_the_line() {
    let env = codex_loop();
    env.scenario(&Scenario::new());
    env.run_ok(&[
        "start",
        "g",
        "--backend",
        "codex",
        "--step",
        "one",
        "--plan-only",
    ]);
    let text = env
        .text()
        .replace("  BACKEND: codex\n", "  BACKEND: codex\n  MAX_TURNS: 5\n");
    std::fs::write(env.state().join("M1.md"), text).unwrap();
    env.run_exits(3, &["resume"]);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    assert!(
        m.last_action
            .unwrap_or_default()
            .contains("cannot honour AGENT.MAX_TURNS"),
        "{}",
        env.text()
    );
    assert!(env.calls().is_empty(), "nothing ran");
}

/// Starts a Codex loop of step one whose agent answers as `scenario`, in the background, and
/// waits until M1.md holds the wait a usage limit set.
#[track_caller]
fn started_until_it_waits(env: &TestLoop, scenario: &Scenario) -> crate::support::Guard {
    env.scenario(scenario);
    let runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    assert!(
        wait_until(crate::support::PATIENCE, || waits(env)),
        "{}",
        env.text()
    );
    runner
}

/// Codex's sentence for a spent limit, as 0.169.0 writes it: a curly apostrophe and the
/// machine's local time, without a zone.
fn codex_limit(at: chrono::DateTime<Utc>) -> String {
    let (pm, hour) = at.hour12();
    format!(
        "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit \
         https://chatgpt.com/settings/usage to purchase more credits or try again at {hour}:{:02} {}.",
        at.minute(),
        if pm { "PM" } else { "AM" }
    )
}

#[test]
fn a_codex_usage_limit_waits_until_the_reset_it_names() {
    let env = codex_loop().env("TZ", "UTC");
    let reset = (Utc::now() + chrono::Duration::hours(2))
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap();
    let mut runner = started_until_it_waits(
        &env,
        &Scenario::new().step(1, [Action::error(&codex_limit(reset)), Action::done("ok")]),
    );
    let m = env.m1();
    // The minute named, cut down from the moment itself, is over at its end.
    assert_eq!(
        m.current.wait_until,
        Some(end_of_minute(reset)),
        "{}",
        env.text()
    );
    assert!(m.agent.fallback.is_empty());
    env.run_ok(&["stop"]);
    runner.wait(crate::support::PATIENCE);
    assert_eq!(env.calls_for(1), 1, "it waits; it does not run again");
    env.assert_logged("usage limit");
}

/// Waits until at least `room` seconds of the current minute are left, so that what the test
/// does next happens within one minute of the clock.
fn room_in_the_minute(room: u32) {
    assert!(wait_until(std::time::Duration::from_secs(61), || {
        60 - Utc::now().second() >= room
    }));
}

/// The end of the minute `t` is in: when a limit Codex names by that minute has reset.
fn end_of_minute(t: chrono::DateTime<Utc>) -> chrono::DateTime<Utc> {
    t.with_second(0).and_then(|t| t.with_nanosecond(0)).unwrap() + chrono::Duration::minutes(1)
}

/// Whether M1.md holds a wait (as a runner writes it while it waits).
fn waits(env: &TestLoop) -> bool {
    std::fs::read_to_string(env.state().join("M1.md")).is_ok_and(|t| t.contains("WAIT_UNTIL:"))
}

/// Codex prints the reset cut down to its minute (21:43:48 is `9:43 PM`): a limit that resets
/// within the minute of the refusal was read as tomorrow's, and a wake at the printed minute,
/// before the real reset, met a second refusal of that minute, by then past, read as
/// tomorrow's too. The simulated agent refuses every call before the reset, as the service
/// does.
#[test]
fn a_codex_limit_that_resets_within_the_printed_minute_is_waited_for_not_read_as_tomorrow() {
    let env = codex_loop().env("TZ", "UTC");
    room_in_the_minute(12);
    let reset = Utc::now().timestamp() + 4;
    let minute_end = end_of_minute(chrono::DateTime::from_timestamp(reset, 0).unwrap());
    let mut runner = started_until_it_waits(
        &env,
        &Scenario::new().step(1, Action::done("ok").limited_until(reset)),
    );
    let m = env.m1();
    assert_eq!(m.current.wait_until, Some(minute_end), "{}", env.text());
    // The wake at the minute's end comes after the reset: the step runs, no second refusal.
    let ended = runner.wait(std::time::Duration::from_secs(90));
    assert!(ended.success(), "{}", env.text());
    env.assert_status(Status::Done);
    assert_eq!(env.calls_for(1), 2, "one refusal, then the work");
}

/// A wake before the reset (here a person's `loop resume` right after a `loop stop`) meets a
/// second refusal of the same minute: the loop waits for that minute's end again, not a day.
#[test]
fn a_second_refusal_at_a_wake_before_the_reset_waits_for_the_minutes_end_not_a_day() {
    let env = codex_loop().env("TZ", "UTC");
    room_in_the_minute(25);
    let reset = Utc::now().timestamp() + 15;
    let minute_end = end_of_minute(chrono::DateTime::from_timestamp(reset, 0).unwrap());
    let mut runner = started_until_it_waits(
        &env,
        &Scenario::new().step(1, Action::done("ok").limited_until(reset)),
    );
    env.run_ok(&["stop"]);
    runner.wait(crate::support::PATIENCE);
    let mut resumed = env.spawn(&["resume"]);
    let refused_twice = || env.log().matches("usage limit: Step 1 waits until").count() == 2;
    assert!(
        wait_until(crate::support::PATIENCE, refused_twice),
        "{}",
        env.log()
    );
    assert_eq!(env.calls_for(1), 2, "the wake before the reset was refused");
    assert!(
        Utc::now().timestamp() < reset,
        "the second call came before the reset"
    );
    assert_eq!(
        env.m1().current.wait_until,
        Some(minute_end),
        "{}",
        env.text()
    );
    env.run_ok(&["stop"]);
    resumed.wait(crate::support::PATIENCE);
}

/// Codex names a reset by the time alone when it falls on the same day; a bare time long past
/// can only be guessed at (the next day's, here). A day's wait from such a guess is said where
/// a person looks first: `NEXT_ACTION`.
#[test]
fn a_day_long_wait_read_from_a_bare_time_is_said_in_next_action() {
    let env = codex_loop().env("TZ", "UTC");
    room_in_the_minute(10);
    let named = Utc::now() - chrono::Duration::hours(3);
    let mut runner = started_until_it_waits(
        &env,
        &Scenario::new().step(1, [Action::error(&codex_limit(named)), Action::done("ok")]),
    );
    let m = env.m1();
    let until = m.current.wait_until.expect("a wait");
    assert_eq!(until, end_of_minute(named) + chrono::Duration::days(1));
    let next = m.next_action.unwrap_or_default();
    let (pm, hour) = named.hour12();
    let shown = format!(
        "{hour}:{:02} {}",
        named.minute(),
        if pm { "PM" } else { "AM" }
    );
    assert!(
        next.contains(&shown) && next.contains("without a day"),
        "NEXT_ACTION says the wait is a guess from `{shown}`: {next}"
    );
    env.run_ok(&["stop"]);
    runner.wait(crate::support::PATIENCE);
}

#[test]
fn a_codex_usage_limit_far_off_continues_the_step_on_claude_and_a_near_one_waits() {
    let env = codex_loop().env("TZ", "UTC");
    let far = Utc::now() + chrono::Duration::days(2);
    let far_text = format!(
        "You’ve hit your usage limit. Upgrade to Pro or try again at {}.",
        far.format("%b %-d, %Y %-I:%M %p")
    );
    env.scenario(&Scenario::new().step(1, [Action::error(&far_text), Action::done("ok")]));
    env.run_ok(&[
        "start",
        "g",
        "--backend",
        "codex",
        "--step",
        "one",
        "--fallback",
        "claude",
        "--fallback-after",
        "1h",
    ]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert!(is_codex(&calls[0]) && !is_codex(&calls[1]), "{calls:?}");
    assert_eq!(env.m1().results[&1].backend, Some(AgentKind::Claude));
}

/// Inside the loop's sandbox, Codex nests none of its own: the reviewer's work tree is
/// read-only by construction, and a retry of a step is given the same.
#[test]
fn codex_reviews_reading_only_inside_the_loops_sandbox_without_one_of_its_own() {
    if !crate::support::bwrap_here() {
        return;
    }
    let env = codex_loop();
    let args = argv(&review_call(&env, &CODEX));
    assert_eq!(
        args[3..5],
        ["--dangerously-bypass-approvals-and-sandbox", "-"],
        "{args:?}"
    );
}

#[test]
fn the_thread_codex_names_is_on_record_while_its_run_goes_on() {
    let env = codex_loop();
    env.scenario(&Scenario::new().step(1, Action::done("ok").sleep_ms(1500)));
    let mut runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    let named = || {
        env.log()
            .lines()
            .find_map(|l| l.split("the agent named its session ").nth(1))
            .map(str::to_owned)
    };
    assert!(
        wait_until(crate::support::PATIENCE, || named().is_some()),
        "{}",
        env.log()
    );
    let during = env.m1();
    runner.wait(crate::support::PATIENCE);
    let thread = named().unwrap();
    assert_eq!(during.current.session_id.as_deref(), Some(thread.as_str()));
    assert_eq!(
        env.m1().results[&1].session_id.as_deref(),
        Some(thread.as_str())
    );
    env.assert_status(Status::Done);
}
