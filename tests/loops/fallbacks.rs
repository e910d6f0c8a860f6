//! A fallback chain (`AGENT.FALLBACK: codex, gemini`): a step whose backend's usage limit
//! resets too late goes on with the next backend of the chain after the one it runs on, never
//! back to one whose limit it met, and waits when the chain has none left. A single fallback,
//! as older files write it, reads and behaves as it did.

use chrono::Utc;
use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{AgentKind, Status};
use serde_json::Value;

use crate::support::{PATIENCE, SIM, TestLoop, argv, wait_until};

fn every_backend() -> TestLoop {
    TestLoop::new()
        .env("LOOP_AGENT_CLAUDE", SIM)
        .env("LOOP_AGENT_CODEX", SIM)
        .env("LOOP_AGENT_GEMINI", SIM)
        .env("TZ", "UTC")
}

/// The backend a call of the simulated agent went to, by the dialect of its arguments.
fn backend_of(call: &Value) -> AgentKind {
    let args = argv(call);
    if args.first().map(String::as_str) == Some("exec") {
        AgentKind::Codex
    } else if args.iter().any(|a| a == "--approval-mode") {
        AgentKind::Gemini
    } else {
        AgentKind::Claude
    }
}

fn backends_called(env: &TestLoop) -> Vec<AgentKind> {
    env.calls().iter().map(backend_of).collect()
}

/// Whether M1.md holds a wait (as a runner writes it while it waits).
fn waits(env: &TestLoop) -> bool {
    std::fs::read_to_string(env.state().join("M1.md")).is_ok_and(|t| t.contains("WAIT_UNTIL:"))
}

/// Codex's refusal naming a reset `days` from now, with its date.
fn codex_limit_in_days(days: i64) -> String {
    let at = Utc::now() + chrono::Duration::days(days);
    format!(
        "You’ve hit your usage limit. Upgrade to Pro or try again at {}.",
        at.format("%b %-d, %Y %-I:%M %p")
    )
}

#[test]
fn a_fallback_chain_moves_a_step_on_when_the_first_fallbacks_limit_is_spent_too() {
    let env = every_backend();
    let claude_reset = Utc::now().timestamp() + 3 * 3600;
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::usage_limit(claude_reset),
            Action::error(&codex_limit_in_days(2)),
            Action::done("ok"),
        ],
    ));
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--fallback",
        "codex",
        "--fallback",
        "gemini",
    ]);
    env.assert_status(Status::Done);
    assert_eq!(
        backends_called(&env),
        [AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini]
    );
    let m = env.m1();
    assert_eq!(m.agent.fallback, [AgentKind::Codex, AgentKind::Gemini]);
    let r = &m.results[&1];
    assert_eq!(r.backend, Some(AgentKind::Gemini));
    assert_eq!(r.attempts, Some(1), "neither limit was a failed attempt");
    let log = env.log();
    assert!(
        log.contains("goes on with codex") && log.contains("goes on with gemini"),
        "{log}"
    );
    assert_eq!(env.calls()[2]["resume"], Value::Null, "a fresh session");
}

/// A chain from `loop.yaml`'s list: each backend of it is tried once, and with none left the
/// step waits on the one it ran on last, never going back to Claude. The flag takes the chain
/// with commas too.
#[test]
fn a_step_whose_whole_fallback_chain_is_spent_waits_and_never_goes_back() {
    let env = every_backend();
    std::fs::write(
        env.state().join("loop.yaml"),
        "agent:\n  fallback: [codex, gemini]\n",
    )
    .unwrap();
    let claude_reset = Utc::now().timestamp() + 3 * 3600;
    let gemini_reset = Utc::now().timestamp() + 3600;
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::usage_limit(claude_reset),
            Action::error(&codex_limit_in_days(2)),
            Action::done("ok").limited_until(gemini_reset),
            Action::done("ok"),
        ],
    ));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    assert!(wait_until(PATIENCE, || waits(&env)), "{}", env.text());
    assert_eq!(
        backends_called(&env),
        [AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini]
    );
    let m = env.m1();
    assert_eq!(m.agent.fallback, [AgentKind::Codex, AgentKind::Gemini]);
    assert_eq!(m.results[&1].backend, Some(AgentKind::Gemini));
    env.run_ok(&["stop"]);
    runner.wait(PATIENCE);
    assert_eq!(env.calls().len(), 3, "no run after the wait began");

    let flag = every_backend();
    flag.scenario(&Scenario::new().step(
        1,
        [
            Action::usage_limit(claude_reset),
            Action::error(&codex_limit_in_days(2)),
            Action::done("ok"),
        ],
    ));
    flag.run_ok(&["start", "g", "--step", "one", "--fallback", "codex,gemini"]);
    flag.assert_status(Status::Done);
    assert_eq!(
        backends_called(&flag),
        [AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini]
    );
}

/// `fallback: codex` in `loop.yaml` is written `FALLBACK: codex` as before; the step goes to
/// Codex, and Codex's own limit, far off, is waited for: there is nowhere further to go.
#[test]
fn a_single_fallback_reads_and_behaves_as_before() {
    let env = every_backend();
    std::fs::write(env.state().join("loop.yaml"), "agent:\n  fallback: codex\n").unwrap();
    let claude_reset = Utc::now().timestamp() + 3 * 3600;
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::usage_limit(claude_reset),
            Action::error(&codex_limit_in_days(2)),
            Action::done("ok"),
        ],
    ));
    let mut runner = env.spawn(&["start", "g", "--step", "one"]);
    assert!(wait_until(PATIENCE, || waits(&env)), "{}", env.text());
    let text = env.text();
    assert!(
        text.lines().any(|l| l.trim() == "FALLBACK: codex"),
        "{text}"
    );
    let m = env.m1();
    assert_eq!(m.agent.fallback, [AgentKind::Codex]);
    assert_eq!(m.results[&1].backend, Some(AgentKind::Codex));
    let until = m.current.wait_until.expect("a wait");
    assert!(
        until > Utc::now() + chrono::Duration::days(1),
        "it waits for Codex's reset: {until}"
    );
    assert_eq!(backends_called(&env), [AgentKind::Claude, AgentKind::Codex]);
    env.run_ok(&["stop"]);
    runner.wait(PATIENCE);
}
