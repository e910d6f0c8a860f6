//! Against the real Claude Code CLI, installed from npm (skipped, saying so, where it cannot
//! be), talking to the loopback Messages API mock: what only the real CLI could show.
//!
//! A revoked key: the loop halts as soon as the CLI's first retry of the 401 shows in its
//! stream, not after its ten retries (about 3 minutes). The reviewer's call, as the loop
//! builds it: it cannot change the project even where a user's rule would allow the tool.
//!
//! The Codex CLI, the same way against the Responses API mock: a stop that ends the sandboxed
//! command, and `loop doctor` on both. What Codex does as Gemini does (a two-step loop whose
//! retries resume their threads, a runner killed during a step) is in `real_backends.rs`.

use std::time::Duration;

use m1loop::agent::{AgentConfig, Session, invocation, new_session_id};
use m1loop::engine::RunKind;
use m1loop::m1::{Document, Status};

use crate::support::real_cli::{
    Mock, VERSIONS, claude_loop_or_skip, claude_or_skip, codex_or_skip, run_with_codex_mock,
    run_with_mock,
};
use crate::support::{PATIENCE, Temp, TestLoop, summary};

/// A third of the CLI's own retrying: a loop that halts later did not notice the retries.
const WELL_BEFORE_THE_RETRIES_END: Duration = Duration::from_secs(60);

fn a_revoked_key_halts_the_loop(version: &str) {
    let Some(env) = claude_loop_or_skip(TestLoop::new(), version) else {
        return;
    };
    let mock = Mock {
        tool: "-",
        command: "",
        env: &[
            ("MOCK_ERROR_STATUS", "401"),
            ("MOCK_ERROR_TYPE", "authentication_error"),
        ],
    };
    let cmd = env.cmd(&["start", "g", "--step", "one", "--quiet"]);
    let out = run_with_mock(&cmd, &mock, None, WELL_BEFORE_THE_RETRIES_END);
    env.assert_exit(&out, 3);
    env.assert_status(Status::Waiting);
    let m = env.m1();
    let error = m.results[&1].error.clone().unwrap_or_default();
    assert!(error.contains("authentication"), "{version}: {error}");
    assert!(env.log().contains("auth: task"), "{version}: {}", env.log());
    env.assert_no_processes();
}

/// A real loop of the real CLI against a key the API refuses waited out the CLI's ten
/// retries, about 3 minutes, before it halted. Fixed in 94d022b, checked against the real CLI
/// in cb2c313 (issue 18).
#[test]
fn a_revoked_key_halts_a_loop_of_the_real_cli_within_seconds_2_1_330() {
    a_revoked_key_halts_the_loop(VERSIONS[0]);
}

/// As above, with 2.1.197.
#[test]
fn a_revoked_key_halts_a_loop_of_the_real_cli_within_seconds_2_1_197() {
    a_revoked_key_halts_the_loop(VERSIONS[1]);
}

/// A git project whose local settings allow `Bash(touch:*)` (what "don't ask again" leaves),
/// and a HOME whose settings allow Bash, Write and Edit; the reviewer is asked to review and
/// the model answers with `touch made_by_reviewer.txt`.
fn reviewer_runs_touch(version: &str) {
    let Some(claude) = claude_or_skip(version) else {
        return;
    };
    let t = Temp::new();
    let project = t.join("project");
    t.write(
        "project/.claude/settings.local.json",
        r#"{"permissions":{"allow":["Bash(touch:*)"]}}"#,
    );
    t.write(
        "home/.claude/settings.json",
        r#"{"permissions":{"allow":["Bash","Write","Edit"]}}"#,
    );
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .status()
        .unwrap();
    assert!(git.success());
    let m = Document::parse("STATUS: RUNNING\nGOAL: g\n")
        .unwrap()
        .view();
    let program = claude.display().to_string();
    let cfg = RunKind::Review.agent_config(
        AgentConfig {
            program,
            ..AgentConfig::default()
        },
        &m,
    );
    let inv = invocation(&cfg, "Review the step.", &Session::New(new_session_id()));
    let mut cmd = inv.command();
    cmd.current_dir(&project).env("HOME", t.join("home"));
    let mock = Mock {
        tool: "Bash",
        command: "touch made_by_reviewer.txt",
        env: &[],
    };
    let prompt = t.write("prompt.md", &inv.input);
    let out = run_with_mock(&cmd, &mock, Some(&prompt), PATIENCE);
    let stream = summary(&out.stdout);
    assert!(
        stream.result.as_ref().is_some_and(|r| !r.is_error),
        "{version}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stream.unavailable_tools,
        ["Bash"],
        "{version}: Bash was offered"
    );
    assert!(
        !project.join("made_by_reviewer.txt").exists(),
        "{version}: the reviewer changed the project"
    );
}

/// A reviewer in plan mode ran a Bash call that a project's allow rule covered, and wrote
/// files into the next commit. Fixed in 777ef11 (issue 18): it is
/// offered only Read, Grep and Glob (`--tools`).
#[test]
fn the_reviewer_cannot_run_a_tool_a_users_rule_allows_on_the_real_cli_2_1_330() {
    reviewer_runs_touch(VERSIONS[0]);
}

/// As above, with 2.1.197.
#[test]
fn the_reviewer_cannot_run_a_tool_a_users_rule_allows_on_the_real_cli_2_1_197() {
    reviewer_runs_touch(VERSIONS[1]);
}

/// A step whose agent asks with `AskUserQuestion` (one question, two options): the loop's hook
/// defers it, the loop waits on an ASK gate offering the options, and `loop answer` resumes
/// the session with no prompt, where the hook gives the call the answer.
fn a_question_tool_call_becomes_a_gate(version: &str) {
    let Some(env) = claude_loop_or_skip(TestLoop::new(), version) else {
        return;
    };
    let input = r#"{"questions":[{"question":"Which database should the cache use?","header":"Database","options":[{"label":"SQLite","description":"one file"},{"label":"Postgres","description":"the server we have"}],"multiSelect":false}]}"#;
    let mock = Mock {
        tool: "AskUserQuestion",
        command: "",
        env: &[("MOCK_TOOL_INPUT", input)],
    };
    let start = env.cmd(&["start", "g", "--step", "add a cache", "--quiet"]);
    let out = run_with_mock(&start, &mock, None, PATIENCE);
    env.assert_exit(&out, 3);
    let m = env.m1();
    let g = m
        .gate("G1")
        .unwrap_or_else(|| panic!("{version}: no gate\n{}\n{}", env.text(), env.log()))
        .clone();
    assert_eq!(
        g.question.as_deref(),
        Some("Which database should the cache use?"),
        "{version}"
    );
    assert_eq!(g.options, ["SQLite", "Postgres"], "{version}");
    assert!(g.tool_use.is_some(), "{version}: {g:?}");
    let answer = env.cmd(&["answer", "G1", "SQLite", "--quiet"]);
    let out = run_with_mock(&answer, &mock, None, PATIENCE);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let report = env.m1().results[&1].report.clone().unwrap();
    let stdout = std::fs::read_to_string(env.state().join(report)).unwrap();
    assert!(
        stdout.contains(r#"\"Which database should the cache use?\"=\"SQLite\""#),
        "{version}: the call got the answer as its result: {stdout}"
    );
    env.assert_no_processes();
}

/// Answered only by editing M1.md before: the agent's question tool was not offered in `-p`,
/// and a question it asked that way was never seen.
#[test]
fn a_question_tool_call_of_the_real_cli_waits_on_a_gate_and_gets_the_answer_2_1_330() {
    a_question_tool_call_becomes_a_gate(VERSIONS[0]);
}

/// As above, with 2.1.197.
#[test]
fn a_question_tool_call_of_the_real_cli_waits_on_a_gate_and_gets_the_answer_2_1_197() {
    a_question_tool_call_becomes_a_gate(VERSIONS[1]);
}

/// One command denied (`chmod +x tool.sh`, which no default rule allows), allowed on its
/// DENIED gate: the gate allows that command (`Bash(chmod +x tool.sh)`), which the real CLI
/// then runs, and not all of Bash.
fn a_denied_command_allowed_on_its_gate_runs(version: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(env) = claude_loop_or_skip(TestLoop::new(), version) else {
        return;
    };
    let tool = env.path().join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    let mock = Mock {
        tool: "Bash",
        command: "chmod +x tool.sh",
        env: &[],
    };
    let start = env.cmd(&["start", "g", "--step", "make tool.sh runnable", "--quiet"]);
    let out = run_with_mock(&start, &mock, None, PATIENCE);
    env.assert_exit(&out, 3);
    let g = env.m1().gate("G1").cloned();
    let g = g.unwrap_or_else(|| panic!("{version}: no gate\n{}", env.log()));
    assert_eq!(g.tools, ["Bash(chmod +x tool.sh)"], "{version}");
    assert_eq!(
        g.options,
        ["allow", "allow-all", "skip", "stop"],
        "{version}"
    );
    let answer = env.cmd(&["answer", "G1", "allow", "--quiet"]);
    let out = run_with_mock(&answer, &mock, None, PATIENCE);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let mode = std::fs::metadata(&tool).unwrap().permissions().mode();
    assert_ne!(mode & 0o111, 0, "{version}: the allowed command ran");
    let allowed = env.m1().agent.allowed_tools.unwrap_or_default();
    assert!(
        allowed.contains(&"Bash(chmod +x tool.sh)".to_owned())
            && !allowed.contains(&"Bash".to_owned()),
        "{version}: {allowed:?}"
    );
    env.assert_no_processes();
}

/// A DENIED gate's `allow` added bare `Bash` for one denied command: all of Bash for every
/// later step (issue "Fourth trial from outside", item 8).
#[test]
fn a_denied_command_allowed_on_its_gate_runs_on_the_real_cli_2_1_330() {
    a_denied_command_allowed_on_its_gate_runs(VERSIONS[0]);
}

/// As above, with 2.1.197.
#[test]
fn a_denied_command_allowed_on_its_gate_runs_on_the_real_cli_2_1_197() {
    a_denied_command_allowed_on_its_gate_runs(VERSIONS[1]);
}

/// A loop whose cap is smaller than its first run's cost: the run is given the cap
/// (`--max-budget-usd`), the real CLI ends it there, and the loop waits on a COST gate
/// instead of going on past its cap.
fn the_cost_cap_ends_a_real_run_and_waits_on_a_gate(version: &str) {
    let Some(env) = claude_loop_or_skip(TestLoop::new(), version) else {
        return;
    };
    // 200,000 input tokens a request: more than $0.50 on every model the CLI defaults to.
    let mock = Mock {
        tool: "-",
        command: "",
        env: &[("MOCK_INPUT_TOKENS", "200000")],
    };
    let args = TestLoop::start_args(&["one", "two"], &["--max-cost-usd", "0.5"]);
    let out = run_with_mock(
        &env.cmd(&[&args[..], &["--quiet"]].concat()),
        &mock,
        None,
        PATIENCE,
    );
    env.assert_exit(&out, 3);
    let m = env.m1();
    let g = m.gate("G1").cloned();
    let g = g.unwrap_or_else(|| panic!("{version}: no gate\n{}\n{}", env.text(), env.log()));
    assert_eq!(g.kind, m1loop::m1::GateKind::Cost, "{version}");
    assert!(
        env.log().contains("Reached maximum budget ($0.5)"),
        "{version}: {}",
        env.log()
    );
    assert!(
        m.results[&1].error.is_none(),
        "{version}: not a failed attempt"
    );
    env.assert_no_processes();
}

/// `--max-cost-usd 1` stopped at $1.20: the cap was checked between steps only (issue
/// "Fourth trial from outside", item 8).
#[test]
fn the_cost_cap_ends_a_run_of_the_real_cli_and_waits_on_a_gate_2_1_330() {
    the_cost_cap_ends_a_real_run_and_waits_on_a_gate(VERSIONS[0]);
}

/// As above, with 2.1.197.
#[test]
fn the_cost_cap_ends_a_run_of_the_real_cli_and_waits_on_a_gate_2_1_197() {
    the_cost_cap_ends_a_real_run_and_waits_on_a_gate(VERSIONS[1]);
}

/// `loop doctor` on the real CLIs here: every check of both backends passes (Telegram and the
/// daemon are off, which is no failure).
#[test]
fn loop_doctor_passes_on_the_real_claude_code_and_codex_clis() {
    let (Some(claude), Some(codex)) = (claude_or_skip(VERSIONS[0]), codex_or_skip()) else {
        return;
    };
    let env = TestLoop::new();
    let config = env.temp.join("config");
    let env = env
        .env("LOOP_AGENT", &claude)
        .env("LOOP_AGENT_CODEX", &codex)
        .env("XDG_CONFIG_HOME", config);
    let out = env.run_for(
        &["doctor", "--backend", "claude", "--backend", "codex"],
        PATIENCE * 6,
    );
    let text = crate::support::assert_doctor_passed(
        &out,
        &[
            "claude: program",
            "claude: flags",
            "claude: permission modes",
            "claude: contract",
            "codex: program",
            "codex: flags",
            "codex: sandboxes",
            "codex: contract",
            "stop file",
            "state directory",
        ],
    );
    assert!(text.contains("a resume kept the session"), "{text}");
    assert!(text.contains("the SessionStart hook fired"), "{text}");
}

/// A stop ends every process of a real Codex step, though Codex runs the agent's command in a
/// sandbox of its own (`bwrap --new-session`): outside the task's process group and session.
/// (The patterns are anchored: the script and the mock carry the marker in their own command
/// lines.)
#[test]
fn a_stop_ends_every_process_of_a_real_codex_step_its_sandbox_included() {
    let Some(codex) = codex_or_skip() else {
        return;
    };
    let env = TestLoop::new();
    let home = env.temp.join("codex-home");
    let user_home = env.temp.join("home");
    let env = env.env("LOOP_AGENT", &codex).env("HOME", user_home);
    let marker = "sleep 4242.4242";
    let wait = crate::support::once_running(marker, 600);
    let script = format!(
        r#""$0" start g --backend codex --step "wait" --quiet &
r=$!
{wait}"$0" stop
wait $r
echo "runner exited $?""#
    );
    let out = run_with_codex_mock(&env.sh(&script), &home, marker, &[], PATIENCE * 6);
    let said = format!(
        "{}\n{}",
        crate::support::stdout(&out),
        crate::support::stderr(&out)
    );
    assert_eq!(crate::support::code(&out), 0, "{said}\n{}", env.log());
    assert!(
        said.contains("runner exited 3"),
        "WAITING after the stop: {said}"
    );
    env.assert_status(Status::Waiting);
    env.assert_logged("stop: `loop stop`");
    let left = || {
        std::process::Command::new("pgrep")
            .args(["-f", &format!("^{marker}")])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    assert!(
        crate::support::wait_until(Duration::from_secs(10), || left().is_empty()),
        "the sandboxed command outlived the stop: {}",
        left()
    );
    env.assert_no_processes();
}

/// The real Claude Code installed under `$HOME` the way nvm installs a global package (a link
/// in `~/.nvm/versions/node/<v>/bin` into `lib/node_modules`), with nothing granted by hand:
/// a sandboxed loop of it runs its tool, and `~/.ssh` stays unreadable to it.
#[test]
fn the_real_claude_code_installed_under_home_the_nvm_way_runs_sandboxed_with_no_flag() {
    let Some(claude) = claude_or_skip(VERSIONS[0]) else {
        return;
    };
    if !crate::support::bwrap_here() {
        println!("skipped: the real Claude Code under $HOME …: bubblewrap cannot run here");
        return;
    }
    let env = TestLoop::new();
    let home = env.temp.join("home");
    let key = home.join(".ssh/id_test");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, "SECRET-KEY-of-the-person").unwrap();
    // As `npm install -g` under nvm lays it out, linked (not copied) from the test's install.
    let prefix = home.join(".nvm/versions/node/v20.0.0");
    let modules = prefix.join("lib/node_modules");
    std::fs::create_dir_all(&modules).unwrap();
    let scope = claude
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("@anthropic-ai");
    let copied = std::process::Command::new("cp")
        .arg("-al")
        .arg(&scope)
        .arg(&modules)
        .status()
        .is_ok_and(|s| s.success());
    if !copied {
        println!("skipped: the real Claude Code under $HOME …: cannot link its package there");
        return;
    }
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink(
        "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
        prefix.join("bin/claude"),
    )
    .unwrap();
    let mut path = vec![prefix.join("bin")];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let env = env
        .env("HOME", &home)
        .env("NVM_DIR", home.join(".nvm"))
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("LOOP_AGENT", prefix.join("bin/claude"));
    let mock = Mock {
        tool: "Bash",
        command: "cat \"$HOME/.ssh/id_test\" > saw-ssh.txt 2>&1; echo ran > ran.txt",
        env: &[],
    };
    let start = env.cmd(&[
        "start",
        "g",
        "--step",
        "look around",
        "--allowed-tools",
        "Bash",
        "--quiet",
    ]);
    let out = run_with_mock(&start, &mock, None, PATIENCE);
    env.assert_exit(&out, 0);
    env.assert_status(Status::Done);
    let read = |f: &str| std::fs::read_to_string(env.path().join(f)).unwrap_or_default();
    assert_eq!(read("ran.txt"), "ran\n", "its tool ran:\n{}", env.log());
    let saw = read("saw-ssh.txt");
    assert!(!saw.contains("SECRET") && !saw.is_empty(), "{saw}");
    assert!(
        env.text().contains("SANDBOX: bwrap"),
        "it ran sandboxed:\n{}",
        env.text()
    );
    env.assert_no_processes();
}
