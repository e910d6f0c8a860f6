//! Against the real Gemini CLI (0.61.0), installed from npm and run only in a network
//! namespace of its own, talking to the loopback Gemini API mock (skipped, saying so, where it
//! cannot be): a two-step loop whose files the CLI's own tools write and whose retries resume
//! their sessions, a 429 the CLI retries by itself with nothing on stdout, the same ended by
//! the idle limit, a runner killed during a step, and `loop doctor`.

use m1loop::m1::Status;

use crate::support::real_gemini::{gemini_or_skip, mock_requests, run_with_gemini_mock};
use crate::support::{PATIENCE, TestLoop};

/// The requests of the loop's runs (those that offer tools; the CLI's own side calls offer
/// none), as the mock logged them: (its session, its turn, how many prompts it carries).
fn turns_of(requests: &[serde_json::Value]) -> Vec<(String, u64, usize)> {
    requests
        .iter()
        .filter(|q| q["tools"].as_u64().unwrap_or(0) > 0)
        .map(|q| {
            (
                q["session"].as_str().unwrap_or_default().to_owned(),
                q["turn"].as_u64().unwrap_or(0),
                q["prompts"].as_array().map_or(0, Vec::len),
            )
        })
        .collect()
}

/// A loop on the real Gemini CLI: two steps, each of whose sessions fails its first turn
/// (`MOCK_FAILED_TURNS=1`), so each step's retry must resume its session (`-r`); the file each
/// step makes is written by the CLI's own `write_file` tool, inside the loop's sandbox.
#[test]
fn a_two_step_gemini_loop_of_the_real_cli_reaches_done_and_each_retry_resumes_its_session() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("home");
    let log = env.temp.join("mock.jsonl");
    let env = env.env("LOOP_AGENT", &gemini);
    let start = env.cmd(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--step",
        "make the file",
        "--step",
        "make it again",
        "--quiet",
    ]);
    let log_arg = log.display().to_string();
    let out = run_with_gemini_mock(
        &start,
        &home,
        "",
        &[("MOCK_FAILED_TURNS", "1"), ("MOCK_LOG", &log_arg)],
        PATIENCE * 6,
    );
    let requests = mock_requests(&log);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let made = std::fs::read_to_string(env.path().join("made_by_tool.txt"))
        .unwrap_or_else(|e| panic!("{e}: {}\n{requests:?}", env.log()));
    // The last run (step 2's retry) wrote it, in its session's second turn.
    assert_eq!(made, "made in turn 2\n");
    let m = env.m1();
    let mut sessions = Vec::new();
    let mut tokens = 0;
    for step in [1, 2] {
        let r = &m.results[&step];
        assert_eq!(r.attempts, Some(2), "step {step}: {}", env.text());
        tokens += r.tokens.unwrap_or(0);
        sessions.push(r.session_id.clone().expect("the session on record"));
    }
    // Each run's tokens are its own (the mock answers every request with 107, the CLI's
    // choice of a model among them), added once: the loop counted every request.
    assert_eq!(tokens, 107 * requests.len() as u64, "{}", env.text());
    assert_ne!(sessions[0], sessions[1]);
    // Eight requests with tools: per step, a session's first turn (two requests) and its
    // second turn (two more), the second carrying the first's prompt: the retry resumed it.
    let turns = turns_of(&requests);
    assert_eq!(turns.len(), 8, "{requests:#?}");
    let keys: Vec<&String> = turns.iter().map(|(s, _, _)| s).collect();
    assert_eq!(keys[0], keys[3], "{requests:#?}");
    assert_eq!(keys[4], keys[7], "{requests:#?}");
    assert_ne!(keys[0], keys[4], "{requests:#?}");
    let shape: Vec<(u64, usize)> = turns.iter().map(|(_, t, n)| (*t, *n)).collect();
    assert_eq!(
        shape,
        [
            (1, 1),
            (1, 1),
            (2, 2),
            (2, 2),
            (1, 1),
            (1, 1),
            (2, 2),
            (2, 2)
        ],
        "{requests:#?}"
    );
    let first = &turns[0].0;
    eprintln!(
        "the mock's log of step 1's session, resumed by its retry:\n{}",
        requests
            .iter()
            .filter(|q| q["session"] == first.as_str())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    env.assert_no_processes();
}

/// A 429 the CLI retries by itself (saying so on stderr only): the loop shows it waits, sees
/// the storm at the CLI's second retry (about 5 s in), ends the run and waits it out itself, and
/// the step is done in one attempt.
#[test]
fn a_429_the_real_gemini_cli_retries_shows_as_a_wait_and_costs_no_attempt() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("home");
    let env = env.env("LOOP_AGENT", &gemini);
    let start = env.cmd(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--step",
        "make the file",
    ]);
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

/// Three 503s with an idle limit longer than the CLI takes to start, and shorter than its
/// pauses between its later retries (10 s, then 20 s, each ±30 %): the run is ended while the
/// CLI waits, which is the outage, waited out, never a failed attempt. (A 429 is ended sooner,
/// as a storm of rate-limit retries.)
#[test]
fn a_real_gemini_run_ended_by_the_idle_limit_while_it_retries_a_503_is_no_failed_attempt() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("home");
    let env = env.env("LOOP_AGENT", &gemini);
    let start = env.cmd(&[
        "start",
        "g",
        "--backend",
        "gemini",
        "--step",
        "make the file",
        "--idle-timeout",
        "8s",
        "--quiet",
    ]);
    let out = run_with_gemini_mock(
        &start,
        &home,
        "",
        &[("MOCK_ERROR_STATUS", "503"), ("MOCK_ERROR_COUNT", "3")],
        PATIENCE * 6,
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

/// A runner killed with `kill -9` while a real Gemini step runs (a shell command of its own,
/// in `yolo` mode) comes back by itself when the step ends and judges that run once: nothing
/// is asked of the API again.
#[test]
fn a_runner_killed_during_a_real_gemini_step_is_revived_and_judges_it_once() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("home");
    let log = env.temp.join("mock.jsonl");
    let env = env.env("LOOP_AGENT", &gemini).env("LOOP_REVIVE", "on");
    let marker = "sleep 2.4242";
    let wait = crate::support::once_running(marker, 900);
    let script = format!(
        r#""$0" start g --backend gemini --permission-mode bypassPermissions --step "wait" --quiet &
r=$!
{wait}kill -9 $r
for _ in $(seq 1 900); do grep -q '^STATUS: DONE' "$LOOP_FILE" && break; sleep 0.1; done
grep '^STATUS' "$LOOP_FILE""#
    );
    let log_arg = log.display().to_string();
    let out = run_with_gemini_mock(
        &env.sh(&script),
        &home,
        marker,
        &[("MOCK_LOG", &log_arg)],
        PATIENCE * 6,
    );
    let said = crate::support::stdout(&out);
    assert!(
        said.contains("STATUS: DONE"),
        "{said}\n{}\n{}",
        crate::support::stderr(&out),
        env.log()
    );
    env.assert_logged("revive");
    let r = &env.m1().results[&1];
    assert_eq!(r.attempts, Some(1), "{}", env.text());
    // One session, one turn: the step was not run again after the kill.
    let requests = mock_requests(&log);
    let turns = turns_of(&requests);
    assert!(
        !turns.is_empty() && turns.iter().all(|(s, t, _)| *s == turns[0].0 && *t == 1),
        "{requests:#?}"
    );
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
    let text = crate::support::stdout(&out);
    assert_eq!(crate::support::code(&out), 0, "{text}");
    for check in [
        "gemini: program",
        "gemini: flags",
        "gemini: approval modes",
        "gemini: contract",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}: {text}"
        );
    }
    assert!(text.contains("0.61.0"), "{text}");
    assert!(text.contains("a resume kept the session"), "{text}");
}
