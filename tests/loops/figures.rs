//! The loop's figures held to the runs it made: the attempts and the cost M1.md records, `loop
//! status` (and `--json`) shows, the report (`loop report --format json`) counts and the last
//! message the chat gets says, against the simulated agent's calls and the cost each was given.
//! One count of attempts (the attempts the agent's calls were made for, reviews apart) and one
//! sum of cost (every run the loop paid for), whatever became of the step: run again by `loop
//! retry`, skipped, run at once with others, sent back by its review, or carried on by the
//! fallback backend.

use std::collections::BTreeSet;

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{GateKind, Status, StepState};
use serde_json::Value;

use crate::support::answers::{approve, changes, work};
use crate::support::bot::with_telegram;
use crate::support::telegram_fake::FakeTelegram;
use crate::support::{PATIENCE, SIM, TestLoop, is_review, stdout, wait_until};

/// The attempts the agent's calls were made for: each (step, attempt) once, reviews apart (a
/// run cut off and carried on is the same attempt).
fn attempts_called(env: &TestLoop) -> u64 {
    let key = |v: &Value| v.as_u64().or_else(|| v.as_str()?.parse().ok());
    let made: BTreeSet<(u64, u64)> = env
        .calls()
        .iter()
        .filter(|c| !is_review(c) && !reviewed_by_codex(c))
        .filter_map(|c| Some((key(&c["step"])?, key(&c["attempt"])?)))
        .collect();
    made.len() as u64
}

/// A reviewer's call on the Codex backend: its prompt is a review's.
fn reviewed_by_codex(call: &Value) -> bool {
    call["prompt"]
        .as_str()
        .is_some_and(|p| p.starts_with("You review one step"))
}

/// Whether two sums of dollars are the same to the hundredth of a cent.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.000_05
}

fn json(env: &TestLoop, args: &[&str]) -> Value {
    let out = stdout(&env.run_ok(args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} is no JSON ({e}): {out}"))
}

/// `loop status` and `loop status --json`: what they say the loop attempted and spent.
fn status_figures(env: &TestLoop) -> (u64, f64, String) {
    let v = json(env, &["status", "--json"]);
    let attempts = v["total_attempts"].as_u64().unwrap_or(0);
    let cost = v["total_cost_usd"].as_f64().unwrap_or(0.0);
    (attempts, cost, stdout(&env.run_ok(&["status"])))
}

/// Every figure the loop shows agrees with the runs: `attempts` attempts and `cost` dollars,
/// in M1.md, `loop status`, the report and the DONE message the chat gets from the outbox.
#[track_caller]
fn assert_figures(env: &TestLoop, tg: &FakeTelegram, attempts: u64, cost: f64) {
    let m = env.m1();
    let text = env.text();
    let recorded: u64 = m
        .results
        .values()
        .map(|r| u64::from(r.attempts.unwrap_or(0)))
        .sum();
    assert_eq!(recorded, attempts, "M1.md's ATTEMPTS\n{text}");
    let spent: f64 = m.results.values().filter_map(|r| r.cost_usd).sum();
    assert!(
        same(spent, cost),
        "M1.md's COST_USD add up to {spent}, not {cost}\n{text}"
    );

    let report = json(env, &["report", "--format", "json"]);
    let totals = &report["totals"];
    assert_eq!(
        totals["attempts"].as_u64(),
        Some(attempts),
        "the report's total: {totals}"
    );
    let reported = totals["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!(
        same(reported, cost),
        "the report's total cost {reported}, not {cost}"
    );
    let steps = report["steps"].as_array().unwrap();
    let by_step: u64 = steps.iter().filter_map(|s| s["attempts"].as_u64()).sum();
    assert_eq!(by_step, attempts, "the report's steps: {steps:?}");
    let step_costs: f64 = steps.iter().filter_map(|s| s["cost_usd"].as_f64()).sum();
    assert!(
        same(step_costs, cost),
        "the report's steps add up to {step_costs}, not {cost}: {steps:?}"
    );
    assert!(
        steps.iter().all(|s| s["cost_usd"].is_number()),
        "every step that ran has its cost: {steps:?}"
    );

    let (said, total, human) = status_figures(env);
    assert_eq!(said, attempts, "loop status --json: total_attempts\n{text}");
    assert!(
        same(total, cost),
        "loop status --json: total_cost_usd {total}, not {cost}"
    );
    assert!(
        human.contains(&format!("COST         ${cost:.2}\n")),
        "loop status says ${cost:.2}:\n{human}"
    );

    let done = || {
        tg.sent()
            .into_iter()
            .map(|s| s.text)
            .rfind(|t| t.contains("DONE:</b>"))
    };
    assert!(
        wait_until(PATIENCE, || done().is_some()),
        "no DONE message: {:?}",
        tg.sent()
    );
    let done = done().unwrap();
    assert!(
        done.contains(&format!(", ${cost:.2}")),
        "the DONE message says ${cost:.2}: {done}"
    );
}

fn telegram_loop(tg: &FakeTelegram) -> TestLoop {
    with_telegram(TestLoop::new().with_git(), &tg.base_url())
}

/// Issue: three agent runs of a step (two failed, a `loop retry`, passed) read `ATTEMPTS: 3`
/// in M1.md and 5 in the report, its step and its total.
#[test]
fn attempts_before_a_loop_retry_are_counted_once() {
    let tg = FakeTelegram::start();
    let env = telegram_loop(&tg);
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::failed("the tests do not build").cost(0.03),
            Action::failed("the tests still do not build").cost(0.05),
            Action::done("ok").cost(0.07),
        ],
    ));
    env.run_exits(1, &["start", "g", "--step", "a", "--max-retries", "2"]);
    env.run_ok(&["retry"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls().len(), 3);
    assert_eq!(attempts_called(&env), 3);
    assert_figures(&env, &tg, 3, 0.15);
}

/// Issue: a parallel step skipped after three paid attempts was left out of the total (`—` in
/// the report, no total).
#[test]
fn a_skipped_steps_paid_attempts_count_in_the_total() {
    let tg = FakeTelegram::start();
    let env = telegram_loop(&tg);
    let fails = || Action::failed("b does not build").cost(0.03);
    env.scenario(
        &Scenario::new()
            .step(1, Action::done("a").write("a.txt", "a\n").cost(0.05))
            .step(2, [fails(), fails(), fails()]),
    );
    env.run_exits(
        3,
        &TestLoop::start_args(&["a", "b"], &["--parallel", "2", "--max-retries", "3"]),
    );
    let gate = env
        .m1()
        .gates
        .iter()
        .find(|g| g.step == 2 && g.kind == GateKind::Failed && g.is_pending())
        .map_or_else(
            || panic!("no gate of step 2\n{}\n{}", env.text(), env.log()),
            |g| g.id.clone(),
        );
    env.run_ok(&["answer", &gate, "skip"]);
    env.assert_status(Status::Done);
    assert_eq!(env.m1().plan.steps[1].state, StepState::Skipped);
    assert_eq!(env.calls_for(2), 3);
    assert_eq!(attempts_called(&env), 4);
    assert_figures(&env, &tg, 4, 0.14);
}

/// Issue: while steps ran at once, `loop status` said `COST $0.01` when their loops had spent
/// $0.09: what a step's own loop has spent counts as soon as it is spent.
#[test]
fn steps_running_at_once_count_what_they_spent_so_far() {
    let tg = FakeTelegram::start();
    let env = telegram_loop(&tg);
    env.scenario(
        &Scenario::new()
            .step(
                1,
                [
                    Action::failed("a is not there yet").cost(0.03),
                    Action::done("a")
                        .sleep_ms(4000)
                        .write("a.txt", "a\n")
                        .cost(0.04),
                ],
            )
            .step(
                2,
                Action::done("b")
                    .sleep_ms(4000)
                    .write("b.txt", "b\n")
                    .cost(0.05),
            ),
    );
    env.run_ok(&TestLoop::start_args(
        &["a", "b"],
        &["--parallel", "2", "--plan-only"],
    ));
    let mut runner = env.spawn(&["resume"]);
    // Step 1's second attempt and step 2's first run: $0.03 spent, three attempts made.
    let mut last = (0, 0.0, String::new());
    let seen = wait_until(PATIENCE, || {
        last = status_figures(&env);
        env.calls().len() == 3 && last.0 == 3 && same(last.1, 0.03)
    });
    assert!(
        seen,
        "while the steps ran, loop status said {} attempts and ${} (calls: {})\n{}\n{}",
        last.0,
        last.1,
        env.calls().len(),
        last.2,
        env.log()
    );
    assert!(last.2.contains("COST         $0.03\n"), "{}", last.2);
    assert_eq!(runner.wait(PATIENCE).code(), Some(0), "{}", env.log());
    env.assert_status(Status::Done);
    assert_eq!(attempts_called(&env), 3);
    assert_figures(&env, &tg, 3, 0.12);
}

/// A review that asks for changes: the step's second attempt is one more attempt, and every
/// review run is paid for.
#[test]
fn a_review_retake_counts_each_attempt_once_and_every_review_in_the_cost() {
    let tg = FakeTelegram::start();
    let env = telegram_loop(&tg);
    env.scenario(
        &Scenario::new()
            .step(1, [work("half"), work("whole")])
            .review([changes(), approve()]),
    );
    env.run_ok(&["start", "g", "--step", "write a.txt", "--review"]);
    env.assert_status(Status::Done);
    let (steps, reviews) = env.step_and_review_calls();
    assert_eq!((steps.len(), reviews.len()), (2, 2));
    assert_eq!(attempts_called(&env), 2);
    assert_figures(&env, &tg, 2, 0.24);
    let report = json(&env, &["report", "--format", "json"]);
    assert_eq!(report["totals"]["reviews"].as_u64(), Some(2), "{report}");
}

/// A usage limit far off: the step goes on with the fallback backend in the same attempt, and
/// the run the limit cut off is paid for all the same.
#[test]
fn a_step_carried_on_by_the_fallback_backend_counts_the_cut_off_runs_cost() {
    let tg = FakeTelegram::start();
    let env = with_telegram(
        TestLoop::new()
            .with_git()
            .env("LOOP_AGENT_CODEX", SIM)
            .env("LOOP_AGENT_CLAUDE", SIM),
        &tg.base_url(),
    );
    let reset = chrono::Utc::now().timestamp() + 3 * 3600;
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::usage_limit(reset).cost(0.04),
            Action::done("ok").write("a.txt", "a\n"),
        ],
    ));
    env.run_ok(&["start", "g", "--step", "one", "--fallback", "codex"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls().len(), 2, "one run cut off, one on codex");
    assert_eq!(attempts_called(&env), 1);
    // Codex reports tokens, not dollars: the dollars are the cut-off run's.
    assert_figures(&env, &tg, 1, 0.04);
    assert!(
        env.m1().results[&1].tokens.unwrap_or(0) > 0,
        "{}",
        env.text()
    );
}
