//! Loops on the Gemini CLI backend (`--backend gemini`), with the simulated agent speaking
//! Gemini's `stream-json` events, in what only Gemini does: every run made trusted, an API
//! error the CLI retries (on stderr only) waited out, a 429 storm, its daily quota sent to the
//! fallback, a runner killed during a Gemini step, `loop doctor`, plan mode, and a CLI without
//! credentials. What it does as Codex does is in `backends.rs`.

use chrono::Utc;
use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::{AgentKind, Status};
use serde_json::Value;

use super::backends::GEMINI;
use crate::support::{PATIENCE, TestLoop, argv, flag_value, stderr, stdout, wait_until};

fn gemini_loop() -> TestLoop {
    GEMINI.test_loop()
}

fn is_gemini(call: &Value) -> bool {
    (GEMINI.is_call)(call)
}

#[test]
fn every_gemini_run_is_trusted_and_loses_the_variable_that_would_lower_its_mode() {
    let env = gemini_loop().env("GEMINI_RESTRICTED_MODE", "true");
    env.scenario(&Scenario::new());
    env.run_ok(&["start", "g", "--backend", "gemini", "--step", "one"]);
    let calls = env.calls();
    assert!(argv(&calls[0]).iter().any(|a| a == "--skip-trust"));
    let names: Vec<&str> = calls[0]["env_names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!names.contains(&"GEMINI_RESTRICTED_MODE"), "{names:?}");
}

/// Gemini CLI retries a 5xx by itself for minutes, saying so on stderr only. The loop shows
/// it waits, and an idle timeout that ends the run meanwhile is the outage it is, waited out
/// without a failed attempt. (A 429 is ended sooner, as a storm of rate-limit retries.)
#[test]
fn an_api_error_the_cli_retries_on_stderr_only_is_waited_out_not_a_failed_attempt() {
    let env = gemini_loop();
    let retrying = Action::hang()
        .api_retry(503, "overloaded")
        .api_retry(503, "overloaded");
    env.scenario(&Scenario::new().step(1, [retrying, Action::done("ok")]));
    let out = env.run_ok(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--step",
        "one",
        "--idle-timeout",
        "2s",
    ]);
    env.assert_status(Status::Done);
    let said = stdout(&out);
    assert!(
        said.contains("waiting: the API answered status 503, the CLI retries (attempt 2)"),
        "{said}"
    );
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(1), "the outage was no failed attempt");
    let log = env.log();
    assert!(log.contains("while the CLI was retrying"), "{log}");
    assert_eq!(env.calls().len(), 2);
}

/// A call of the simulated Gemini CLI in a 429 storm: it retries a rate limit by itself,
/// `every_ms` apart, saying so on stderr only, with nothing on stdout, and never gives up
/// (the real CLI keeps at it for about four minutes).
fn a_429_storm(every_ms: u64) -> Action {
    (0..1000).fold(Action::hang().api_retry_every_ms(every_ms), |a, _| {
        a.api_retry(429, "rate_limit")
    })
}

/// A 429 storm is seen from the CLI's stderr while it runs, not minutes later: the runner ends
/// the run itself and waits it out as the loop's own backoff (the wait on record in M1.md and
/// in `loop status`), and no attempt is counted for it.
#[test]
fn a_gemini_429_storm_is_seen_within_seconds_and_waited_out_as_a_limit_not_a_failed_attempt() {
    let env = gemini_loop();
    env.scenario(
        &Scenario::new().step(1, [a_429_storm(300), a_429_storm(300), Action::done("ok")]),
    );
    let runner = env.spawn(&["start", "g", "--backend", "gemini", "--step", "one"]);
    // Each storm would go on for ever: only the runner's own end of it gets the loop on.
    let mut status = String::new();
    let waits_shown = wait_until(PATIENCE, || {
        status = stdout(&env.run(&["status"]));
        status.contains("Wait until")
    });
    assert!(
        waits_shown,
        "{status}
{}
{}",
        env.text(),
        env.log()
    );
    assert!(status.contains("STATUS       RUNNING"), "{status}");
    assert!(status.contains("429"), "the wait says why: {status}");
    let m = env.m1();
    assert!(m.current.wait_until.is_some(), "{}", env.text());
    assert!(
        m.current
            .wait_reason
            .as_deref()
            .unwrap_or("")
            .contains("429"),
        "{}",
        env.text()
    );
    let done = wait_until(PATIENCE, || env.m1().status == Status::Done);
    drop(runner);
    assert!(done, "{}\n{}", env.text(), env.log());
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(1), "the storms were no failed attempts");
    assert_eq!(r.transient, 2, "{}", env.text());
    let log = env.log();
    assert!(log.contains("rate limit"), "{log}");
    assert!(log.contains("backoff"), "{log}");
    assert_eq!(env.calls().len(), 3);
    env.assert_no_processes();
}

/// `loop stop` while the CLI waits between its retries of a 429 ends all of the run: no CLI is
/// left retrying, and the stop is no failed attempt.
#[test]
fn loop_stop_during_a_gemini_429_storm_leaves_no_cli_retrying() {
    let env = gemini_loop();
    // The first retry printed, the next a minute off: the stop comes while the CLI waits.
    env.scenario(&Scenario::new().step(1, a_429_storm(60_000)));
    let mut runner = env.spawn(&["start", "g", "--backend", "gemini", "--step", "one"]);
    env.wait_for_calls(1, 1);
    let task = env
        .m1()
        .current
        .task_id
        .clone()
        .expect("the task on record");
    let stderr_file = env.task_file(&task, "stderr");
    let retrying =
        || std::fs::read_to_string(&stderr_file).is_ok_and(|t| t.contains("Attempt 1 failed"));
    assert!(wait_until(PATIENCE, retrying), "{}", env.log());
    assert!(
        !crate::support::procs::task_processes(&task).is_empty(),
        "the CLI retries"
    );
    env.run_ok(&["stop"]);
    runner.wait(PATIENCE);
    env.assert_status(Status::Waiting);
    let left = crate::support::procs::task_processes(&task);
    assert!(left.is_empty(), "still retrying: {left:?}");
    assert_eq!(env.m1().results.get(&1).and_then(|r| r.attempts), None);
    env.assert_no_processes();
}

#[test]
fn a_spent_gemini_daily_quota_continues_the_step_on_claude() {
    let env = gemini_loop();
    let spent_until = Utc::now().timestamp() + 3600;
    env.scenario(&Scenario::new().step(
        1,
        [
            Action::done("ok").limited_until(spent_until),
            Action::done("ok"),
        ],
    ));
    env.run_ok(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--step",
        "one",
        "--fallback",
        "claude",
        "--fallback-after",
        "1s",
    ]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(is_gemini(&calls[0]) && !is_gemini(&calls[1]), "{calls:?}");
    let r = &env.m1().results[&1];
    assert_eq!(r.backend, Some(AgentKind::Claude));
    assert_eq!(r.attempts, Some(1), "the quota was no failed attempt");
    env.assert_logged("fallback: Step 1");
    assert!(env.log().contains("midnight Pacific"), "{}", env.log());
}

/// The runner killed (`kill -9`) while a Gemini step runs: the step's run goes on under its
/// supervisor, and `loop resume` adopts its end, judging it once, never running it again.
#[test]
fn a_runner_killed_during_a_gemini_step_is_carried_on_by_resume_without_a_second_run() {
    let env = gemini_loop();
    env.scenario(&Scenario::new().step(1, Action::done("ok").sleep_ms(1500)));
    let mut runner = env.spawn(&["start", "g", "--backend", "gemini", "--step", "one"]);
    env.wait_for_calls(1, 1);
    runner.kill9();
    let task = env
        .m1()
        .current
        .task_id
        .clone()
        .expect("the task on record");
    let ended = || env.check(&task)["state"].as_str() != Some("RUNNING");
    assert!(wait_until(PATIENCE, ended), "{}", env.log());
    env.run_ok(&["resume"]);
    env.assert_status(Status::Done);
    assert_eq!(env.calls().len(), 1, "never run again");
    let r = &env.m1().results[&1];
    assert_eq!(r.tokens, Some(1050));
    assert_eq!(
        r.session_id,
        env.calls()[0]["session_id"].as_str().map(str::to_owned)
    );
}

/// `loop doctor --backend gemini` on the simulated agent: its flags in its help, the approval
/// mode in force among those it knows, and a contract run that answers and resumes.
#[test]
fn doctor_checks_gemini_against_the_simulated_agent() {
    let env = gemini_loop();
    let config = env.temp.join("config");
    let env = env.env("XDG_CONFIG_HOME", config);
    env.scenario(&Scenario::new());
    let out = env.run_for(&["doctor", "--backend", "gemini"], PATIENCE * 4);
    let text = crate::support::assert_doctor_passed(
        &out,
        &[
            "gemini: program",
            "gemini: flags",
            "gemini: approval modes",
            "gemini: contract",
        ],
    );
    assert!(text.contains("--approval-mode auto_edit passed"), "{text}");
    assert!(text.contains("its tokens"), "{text}");
    assert!(text.contains("a resume kept the session"), "{text}");
}

/// `--permission-mode plan` on Gemini reads only: the loop starts (its check of the settings
/// gives the read-only policy a place, as a run does) and the run gets the policy.
#[test]
fn a_gemini_loop_in_plan_mode_starts_and_runs_under_the_read_only_policy() {
    let env = gemini_loop();
    env.scenario(&Scenario::new());
    env.run_ok(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--permission-mode",
        "plan",
        "--step",
        "look",
    ]);
    env.assert_status(Status::Done);
    let calls = env.calls();
    assert_eq!(
        flag_value(&calls[0], "--approval-mode").as_deref(),
        Some("plan")
    );
    assert!(
        flag_value(&calls[0], "--policy").is_some_and(|p| p.ends_with("gemini-read-only.toml")),
        "{calls:?}"
    );
}

/// Gemini CLI with no credentials it can use exits 41 (the real capture, replayed): the loop
/// waits for a person, saying what to set, rather than spending its attempts.
#[test]
fn a_gemini_cli_without_credentials_halts_saying_what_to_set() {
    let env = gemini_loop();
    let capture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gemini/no-auth-setting");
    let mut no_key = Action::fixture(capture);
    no_key.exit = Some(41);
    env.scenario(&Scenario::new().step(1, no_key));
    let out = env.run_exits(3, &["start", "g", "--backend", "gemini", "--step", "one"]);
    env.assert_status(Status::Waiting);
    let said = stderr(&out);
    assert!(
        said.contains("Gemini CLI has no credentials it can use (exit 41)")
            && said.contains("set GEMINI_API_KEY"),
        "{said}"
    );
    let error = env.m1().results[&1].error.clone().unwrap_or_default();
    assert!(error.contains("no credentials"), "{}", env.text());
}
