//! Against the real Gemini CLI (0.61.0), installed from npm and run only in a network
//! namespace of its own, talking to the loopback Gemini API mock (skipped, saying so, where it
//! cannot be): a 429 the CLI retries by itself with nothing on stdout, a 503 retried until the
//! idle limit, and `loop doctor`. What Gemini does as Codex does (a two-step loop whose
//! retries resume their sessions, a runner killed during a step) is in `real_backends.rs`.

use std::path::PathBuf;

use m1loop::m1::Status;

use crate::support::real_gemini::{gemini_or_skip, run_with_gemini_mock};
use crate::support::{PATIENCE, TestLoop};

/// A loop whose agent is the real Gemini CLI, and the `$HOME` its runs are to get; or `None`
/// after saying on stderr why the test is skipped.
fn gemini_loop_or_skip() -> Option<(TestLoop, PathBuf)> {
    let gemini = gemini_or_skip()?;
    let env = TestLoop::new();
    let home = env.temp.join("home");
    Some((env.env("LOOP_AGENT", &gemini), home))
}

/// A 429 the CLI retries by itself (saying so on stderr only): the loop shows it waits, sees
/// the storm at the CLI's second retry (about 5 s in), ends the run and waits it out itself, and
/// the step is done in one attempt.
#[test]
fn a_429_the_real_gemini_cli_retries_shows_as_a_wait_and_costs_no_attempt() {
    let Some((env, home)) = gemini_loop_or_skip() else {
        return;
    };
    let start = env.cmd(&TestLoop::start_args(
        &["make the file"],
        &["--backend", "gemini"],
    ));
    let out = run_with_gemini_mock(
        &start,
        &home,
        "",
        &[("MOCK_ERROR_STATUS", "429"), ("MOCK_ERROR_COUNT", "2")],
        PATIENCE * 6,
    );
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let said = crate::support::stdout(&out);
    assert!(
        said.contains("waiting: the API answered status 429, the CLI retries (attempt 2)"),
        "{said}"
    );
    assert_eq!(env.m1().results[&1].attempts, Some(1), "{}", env.text());
    let log = env.log();
    assert!(log.contains("keeps retrying a rate limit"), "{log}");
    assert!(log.contains("backoff"), "{log}");
    env.assert_no_processes();
}

/// Four 503s with an idle limit longer than the CLI takes to start, and shorter than its
/// later pauses between retries (5 s, 10 s, 20 s, 30 s, each ±30 %): the run is ended while
/// the CLI waits, which is the outage, waited out, never a failed attempt. (A 429 is ended
/// sooner, as a storm of rate-limit retries.) The limit, 15 s, leaves a loaded machine room
/// to start the CLI (at 8 s, a CLI that started slowly was ended before it said anything,
/// and each attempt failed); the fourth pause is longer than it whatever the jitter.
#[test]
fn a_real_gemini_run_ended_by_the_idle_limit_while_it_retries_a_503_is_no_failed_attempt() {
    let Some((env, home)) = gemini_loop_or_skip() else {
        return;
    };
    let start = env.cmd(&TestLoop::start_args(
        &["make the file"],
        &["--backend", "gemini", "--idle-timeout", "15s", "--quiet"],
    ));
    let out = run_with_gemini_mock(
        &start,
        &home,
        "",
        &[("MOCK_ERROR_STATUS", "503"), ("MOCK_ERROR_COUNT", "4")],
        PATIENCE * 9,
    );
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let log = env.log();
    assert!(log.contains("while the CLI was retrying"), "{log}");
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(1), "{}", env.text());
    assert!(env.path().join("made_by_tool.txt").exists(), "{log}");
    env.assert_no_processes();
}

/// `loop doctor --backend gemini` on the real CLI, in its own network namespace: its flags
/// are in its help, the approval mode in force among those it knows, and its contract run
/// against the doctor's own stand-in API answers and resumes.
#[test]
fn loop_doctor_passes_on_the_real_gemini_cli() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let config = env.temp.join("config");
    let home = env.temp.join("home");
    let env = env
        .env("LOOP_AGENT_GEMINI", &gemini)
        .env("XDG_CONFIG_HOME", config);
    let mut doctor = env.cmd(&["doctor", "--backend", "gemini"]);
    // With no loop here, the backend asked for is a new loop's: its program is `LOOP_AGENT`'s
    // where set, as `loop start --backend gemini` takes it, else `LOOP_AGENT_GEMINI`'s.
    doctor.env_remove("LOOP_AGENT");
    let out = run_with_gemini_mock(&doctor, &home, "", &[], PATIENCE * 6);
    let text = crate::support::assert_doctor_passed(
        &out,
        &[
            "gemini: program",
            "gemini: flags",
            "gemini: approval modes",
            "gemini: contract",
        ],
    );
    assert!(text.contains("0.61.0"), "{text}");
    assert!(text.contains("a resume kept the session"), "{text}");
}
