//! Against the real Codex and Gemini CLIs, each installed from npm and talking to the project's
//! loopback mock of its API (skipped, saying so, where it cannot be), what both must do alike,
//! written once and run per backend: a two-step loop whose first turns fail, so that each
//! step's retry must resume its session, and a runner killed during a step, revived, judging
//! that run once. Each case is a test per backend, named `CASE::BACKEND`. What only one CLI
//! shows is in `real_cli.rs` (Claude Code, Codex) and `real_gemini.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use m1loop::m1::Status;
use serde_json::Value;

use crate::support::real_cli::{codex_or_skip, run_with_codex_mock};
use crate::support::real_gemini::{gemini_or_skip, mock_requests, run_with_gemini_mock};
use crate::support::{PATIENCE, TestLoop, per_backend};

/// Runs a command of the loop with a CLI's API mock: the CLI's own home (made for it), the
/// shell command the mock has the CLI's tool run (`""`: its own choice), the mock's
/// environment, and how long it may take.
type WithMock = fn(&Command, &Path, &str, &[(&str, &str)], Duration) -> Output;

/// A real CLI, as the shared cases need to know it.
pub struct RealBackend {
    /// Its name on the command line (`--backend NAME`).
    name: &'static str,
    /// Its program, installed; `None` after saying why the test is skipped.
    or_skip: fn() -> Option<PathBuf>,
    /// Runs a command of the loop with the CLI's mock.
    with_mock: WithMock,
    /// Where under the test's directory the CLI's home is.
    cli_home: &'static str,
    /// What the mock has the tool run in a two-step loop (`""`: its own choice).
    makes_the_file: &'static str,
    /// `loop start`'s arguments beyond the backend for a step that runs a shell command.
    runs_commands: &'static [&'static str],
    /// How long, in tenths of a second, its step may take to start the mock's command.
    starts_within: u32,
    /// A command its step runs and a test waits for, seen by `pgrep` across the machine: each
    /// backend's is its own, so that its test does not take another's for it.
    marker: &'static str,
    /// The runs of the loop in the mock's log, each request's (session, turn).
    runs_of: fn(&[Value]) -> Vec<(String, u64)>,
    /// Whether the mock's log names a session as the loop records it.
    logs_the_loops_session: bool,
    /// Checks what only this CLI shows of the two-step loop `env`, given the mock's log.
    two_steps: fn(env: &TestLoop, requests: &[Value]),
}

const CODEX: RealBackend = RealBackend {
    name: "codex",
    or_skip: codex_or_skip,
    with_mock: run_with_codex_mock,
    cli_home: "codex-home",
    makes_the_file: "touch made_by_tool.txt",
    runs_commands: &[],
    starts_within: 600,
    marker: "sleep 2.4242",
    runs_of: |requests| {
        requests
            .iter()
            .map(|q| {
                (
                    q["thread"].as_str().unwrap_or_default().to_owned(),
                    q["turn"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    },
    logs_the_loops_session: true,
    two_steps: |env, requests| {
        let m = env.m1();
        for step in [1, 2] {
            let r = &m.results[&step];
            let thread = r.session_id.clone().expect("the thread on record");
            // Both turns of the step went to the same thread: the retry resumed it.
            let turns: Vec<u64> = requests
                .iter()
                .filter(|q| q["thread"] == thread.as_str())
                .map(|q| q["turn"].as_u64().unwrap())
                .collect();
            assert!(
                turns.contains(&1) && turns.contains(&2),
                "step {step}, thread {thread}: {turns:?}\n{requests:?}"
            );
            // Two turns of two requests of 107 tokens each, counted once.
            assert_eq!(r.tokens, Some(428), "step {step}: {}", env.text());
        }
    },
};

const GEMINI: RealBackend = RealBackend {
    name: "gemini",
    or_skip: gemini_or_skip,
    with_mock: run_with_gemini_mock,
    cli_home: "home",
    makes_the_file: "",
    // A shell command of its own runs in `yolo` mode.
    runs_commands: &["--permission-mode", "bypassPermissions"],
    starts_within: 900,
    marker: "sleep 2.4243",
    runs_of: |requests| {
        turns_of(requests)
            .into_iter()
            .map(|(s, t, _)| (s, t))
            .collect()
    },
    logs_the_loops_session: false,
    two_steps: |env, requests| {
        let made = std::fs::read_to_string(env.path().join("made_by_tool.txt")).unwrap();
        // The last run (step 2's retry) wrote it, with the CLI's own `write_file` tool, in its
        // session's second turn.
        assert_eq!(made, "made in turn 2\n");
        let m = env.m1();
        let tokens: u64 = [1, 2].iter().filter_map(|s| m.results[s].tokens).sum();
        // Each run's tokens are its own (the mock answers every request with 107, the CLI's
        // choice of a model among them), added once: the loop counted every request.
        assert_eq!(tokens, 107 * requests.len() as u64, "{}", env.text());
        // Eight requests with tools: per step, a session's first turn (two requests) and its
        // second turn (two more), the second carrying the first's prompt: the retry resumed it.
        let turns = turns_of(requests);
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
    },
};

/// The requests of a Gemini loop's runs (those that offer tools; the CLI's own side calls
/// offer none), as the mock logged them: (its session, its turn, how many prompts it carries).
pub fn turns_of(requests: &[Value]) -> Vec<(String, u64, usize)> {
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

/// A loop of the real CLI `program` in a temporary directory, with a HOME of its own; the
/// CLI's home for its mock.
fn real_loop(b: &RealBackend, program: &Path) -> (TestLoop, PathBuf) {
    let env = TestLoop::new();
    let cli_home = env.temp.join(b.cli_home);
    let home = env.temp.join("home");
    (env.env("LOOP_AGENT", program).env("HOME", home), cli_home)
}

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    /// Two steps, each of whose sessions fails its first turn (`MOCK_FAILED_TURNS=1`), so each
    /// step's retry must resume its session; the file the mock asks for is made by the CLI's
    /// own tool, inside the loop's sandbox.
    fn a_two_step_loop_of_the_real_cli_reaches_done_and_each_retry_resumes_its_session(
        b: &RealBackend
    ) {
        let Some(program) = (b.or_skip)() else {
            return;
        };
        let (env, cli_home) = real_loop(b, &program);
        let log = env.temp.join("mock.jsonl");
        let start = env.cmd(&[
            "start", "g", "--backend", b.name, "--step", "make the file", "--step",
            "make it again", "--quiet",
        ]);
        let log_arg = log.display().to_string();
        let out = (b.with_mock)(
            &start,
            &cli_home,
            b.makes_the_file,
            &[("MOCK_FAILED_TURNS", "1"), ("MOCK_LOG", &log_arg)],
            PATIENCE * 6,
        );
        let requests = mock_requests(&log);
        env.assert_exit(&out, 0);
        env.assert_status(Status::Done);
        assert!(
            env.path().join("made_by_tool.txt").exists(),
            "{}\n{requests:?}",
            env.log()
        );
        let m = env.m1();
        for step in [1, 2] {
            let r = &m.results[&step];
            assert_eq!(r.attempts, Some(2), "step {step}: {}", env.text());
            assert!(r.session_id.is_some(), "step {step}'s session on record");
        }
        assert_ne!(m.results[&1].session_id, m.results[&2].session_id);
        (b.two_steps)(&env, &requests);
        env.assert_no_processes();
    }
}

per_backend! {
    [codex = CODEX, gemini = GEMINI]
    /// A runner killed with `kill -9` while a real step runs (a shell command of the CLI's)
    /// comes back by itself when the step ends (the step's supervisor revives it), and judges
    /// that run once: nothing is asked of the API again.
    fn a_runner_killed_during_a_real_step_is_revived_and_judges_it_once(b: &RealBackend) {
        let Some(program) = (b.or_skip)() else {
            return;
        };
        let (env, cli_home) = real_loop(b, &program);
        let env = env.env("LOOP_REVIVE", "on");
        let log = env.temp.join("mock.jsonl");
        let wait = crate::support::once_running(b.marker, b.starts_within);
        let script = format!(
            r#""$0" start g --backend {} {} --step "wait" --quiet &
r=$!
{wait}kill -9 $r
for _ in $(seq 1 {}); do grep -q '^STATUS: DONE' "$LOOP_FILE" && break; sleep 0.1; done
grep '^STATUS' "$LOOP_FILE""#,
            b.name,
            b.runs_commands.join(" "),
            b.starts_within
        );
        let log_arg = log.display().to_string();
        let out = (b.with_mock)(
            &env.sh(&script),
            &cli_home,
            b.marker,
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
        let runs = (b.runs_of)(&requests);
        assert!(
            !runs.is_empty() && runs.iter().all(|(s, t)| *s == runs[0].0 && *t == 1),
            "{requests:#?}"
        );
        if b.logs_the_loops_session {
            assert_eq!(r.session_id.as_deref(), Some(runs[0].0.as_str()), "{requests:#?}");
        }
        env.assert_no_processes();
    }
}
