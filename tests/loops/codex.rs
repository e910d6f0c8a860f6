//! Loops on the Codex backend (`--backend codex`), with the simulated agent speaking Codex's
//! `--json` events: each step's thread on record, a retry resuming it with the same sandbox,
//! the thread's cumulative tokens counted once, settings Codex cannot honour refused before
//! anything is written, its usage limit waited for, a fallback from one backend to the other,
//! and Codex reviewing Claude's work without writing.

use chrono::{Timelike, Utc};
use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{AgentKind, Status};
use serde_json::Value;

use crate::support::bot::with_telegram;
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{PATIENCE, SIM, TestLoop, argv, is_review, stderr, stdout, wait_until};

fn codex_loop() -> TestLoop {
    TestLoop::new()
        .env("LOOP_AGENT_CODEX", SIM)
        .env("LOOP_AGENT_CLAUDE", SIM)
}

/// A reviewer's call, whichever backend: its prompt is a review's.
fn reviews(call: &Value) -> bool {
    is_review(call)
        || call["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("You review one step"))
}

fn is_codex(call: &Value) -> bool {
    argv(call).first().map(String::as_str) == Some("exec")
}

#[test]
fn a_two_step_codex_loop_records_each_steps_thread_and_a_retry_resumes_it_with_its_sandbox() {
    // Unconfined by the loop, Codex's own sandbox is what keeps the run in the project.
    let env = codex_loop().env("LOOP_SANDBOX", "off");
    env.scenario(
        &Scenario::new()
            .step(1, [Action::failed("not yet"), Action::done("one")])
            .step(2, Action::done("two")),
    );
    let out = env.run_ok(&[
        "start",
        "g",
        "--backend",
        "codex",
        "--step",
        "one",
        "--step",
        "two",
    ]);
    env.assert_status(Status::Done);
    assert!(
        stderr(&out).contains("DONE: 2 step(s), 3,150 tokens"),
        "{}",
        stderr(&out)
    );
    let status = stdout(&env.run_ok(&["status"]));
    assert!(status.contains("TOKENS       3,150"), "{status}");
    let m = env.m1();
    assert_eq!(m.agent.backend, Some(AgentKind::Codex));
    assert_eq!(m.agent.allowed_tools, None, "no Claude tool list for Codex");
    let calls = env.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls.iter().all(is_codex), "{calls:?}");
    let (one, two) = (&m.results[&1], &m.results[&2]);
    let thread = one.session_id.clone().expect("step 1's thread on record");
    assert_ne!(
        one.session_id, two.session_id,
        "each step has its own thread"
    );
    // The first run names no thread (Codex names it); the retry resumes it, with the
    // sandbox given again before `resume` (a resumed run does not keep it).
    assert_eq!(calls[0]["resume"], Value::Null);
    assert_eq!(
        argv(&calls[1]),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "resume",
            thread.as_str(),
            "-"
        ]
    );
    // Codex reports the thread's total: 1050 after the first run, 2100 after the second.
    assert_eq!((one.tokens, one.session_tokens), (Some(2100), Some(2100)));
    assert_eq!(two.tokens, Some(1050));
    assert_eq!(one.attempts, Some(2));
    // No hooks: a fresh thread's prompt carries the loop's state itself.
    let first = env.prompt(0);
    assert!(
        first.contains("autonomous loop") && first.contains("one"),
        "{first}"
    );
    assert!(
        !env.prompt(1)
            .contains("autonomous loop (m1loop). Its state")
    );
}

#[test]
fn settings_codex_cannot_honour_are_refused_before_anything_is_written() {
    let env = codex_loop();
    env.scenario(&Scenario::new());
    for (flags, setting) in [
        (&["--allowed-tools", "Read"][..], "AGENT.ALLOWED_TOOLS"),
        (&["--max-turns", "3"][..], "AGENT.MAX_TURNS"),
        (&["--max-budget-usd", "1"][..], "AGENT.MAX_BUDGET_USD"),
        (&["--max-cost-usd", "5"][..], "LIMITS.MAX_COST_USD"),
    ] {
        let mut args = vec!["start", "g", "--backend", "codex", "--step", "one"];
        args.extend_from_slice(flags);
        let out = env.run_exits(2, &args);
        let said = stderr(&out);
        assert!(
            said.contains(&format!("the agent (codex) cannot honour {setting}")),
            "{said}"
        );
        assert!(!env.state().join("M1.md").exists(), "nothing written");
    }
    assert!(env.calls().is_empty());
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
    env.scenario(
        &Scenario::new().step(1, [Action::error(&codex_limit(reset)), Action::done("ok")]),
    );
    let mut runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    assert!(
        wait_until(crate::support::PATIENCE, || waits(&env)),
        "{}",
        env.text()
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
    env.scenario(&Scenario::new().step(1, Action::done("ok").limited_until(reset)));
    let mut runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    assert!(
        wait_until(crate::support::PATIENCE, || waits(&env)),
        "{}",
        env.text()
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
    env.scenario(&Scenario::new().step(1, Action::done("ok").limited_until(reset)));
    let mut runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    assert!(
        wait_until(crate::support::PATIENCE, || waits(&env)),
        "{}",
        env.text()
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
    env.scenario(
        &Scenario::new().step(1, [Action::error(&codex_limit(named)), Action::done("ok")]),
    );
    let mut runner = env.spawn(&["start", "g", "--backend", "codex", "--step", "one"]);
    assert!(
        wait_until(crate::support::PATIENCE, || waits(&env)),
        "{}",
        env.text()
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
fn a_claude_usage_limit_far_off_continues_the_step_on_codex_in_a_fresh_thread() {
    let tg = FakeTelegram::start();
    let env = with_telegram(codex_loop(), &tg.base_url());
    let reset = Utc::now().timestamp() + 3 * 3600;
    env.scenario(&Scenario::new().step(1, [Action::usage_limit(reset), Action::done("ok")]));
    env.run_ok(&["start", "g", "--step", "one", "--fallback", "codex"]);
    env.assert_status(Status::Done);
    let m = env.m1();
    assert_eq!(m.agent.fallback, [AgentKind::Codex]);
    assert_eq!(
        m.limits.fallback_after,
        Some(std::time::Duration::from_secs(900))
    );
    let r = &m.results[&1];
    assert_eq!(r.backend, Some(AgentKind::Codex));
    assert_eq!(r.attempts, Some(1), "the limit was no failed attempt");
    let calls = env.calls();
    assert_eq!(calls.len(), 2);
    assert!(!is_codex(&calls[0]) && is_codex(&calls[1]), "{calls:?}");
    assert_eq!(calls[1]["resume"], Value::Null, "a fresh thread");
    assert!(
        env.prompt(1).contains("usage limit"),
        "the handoff says why: {}",
        env.prompt(1)
    );
    env.assert_logged("fallback: Step 1");
    let told = || tg.sent().into_iter().map(|s| s.text).collect::<Vec<_>>();
    assert!(
        wait_until(PATIENCE, || told().iter().any(|t| t
            .contains("Usage limit hit on step 1")
            && t.contains("goes on with codex"))),
        "{:?}",
        told()
    );
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

#[test]
fn codex_reviews_claudes_work_reading_only() {
    let env = codex_loop().env("LOOP_SANDBOX", "off");
    let args = codex_review(&env);
    assert_eq!(args[3..5], ["-s", "read-only"], "{args:?}");
}

/// Inside the loop's sandbox, Codex nests none of its own: the reviewer's work tree is
/// read-only by construction, and a retry of a step is given the same.
#[test]
fn codex_reviews_reading_only_inside_the_loops_sandbox_without_one_of_its_own() {
    if !crate::support::bwrap_here() {
        return;
    }
    let env = codex_loop();
    let args = codex_review(&env);
    assert_eq!(
        args[3..5],
        ["--dangerously-bypass-approvals-and-sandbox", "-"],
        "{args:?}"
    );
}

/// A loop whose one step Claude does and Codex reviews, the reviewer trying to write a file:
/// the review call's arguments, after checking the review read only.
fn codex_review(env: &TestLoop) -> Vec<String> {
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("wrote a.txt").write("a.txt", "a\n"))
            .review(Action::approve("fine").touch("made_by_reviewer.txt")),
    );
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "write a.txt",
        "--review",
        "--review-backend",
        "codex",
    ]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    let review: Vec<&Value> = calls.iter().filter(|c| reviews(c)).collect();
    assert_eq!(review.len(), 1, "{calls:?}");
    assert!(is_codex(review[0]) && !is_codex(&calls[0]), "{calls:?}");
    assert!(!env.path().join("made_by_reviewer.txt").exists());
    assert_eq!(
        env.m1().agent.review_backend,
        Some(AgentKind::Codex),
        "{}",
        env.text()
    );
    argv(review[0])
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
