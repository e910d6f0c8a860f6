//! The simulated agent refuses what the real CLI refuses, in its words, so the adapter's
//! classifier recognises each refusal; hangs and leftover processes behave as real ones do.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use chrono::Utc;
use m1loop::agent::{
    AgentConfig, BugKind, Class, ExitInfo, Session, classify, invocation, new_session_id,
};
use m1loop::bridge::procfs;

use crate::support::{Guard, SIM, Temp, run, stderr, summary, wait_until};

fn refused(out: &std::process::Output) -> (i32, String, BugKind) {
    let exit = ExitInfo {
        code: out.status.code(),
        ..ExitInfo::default()
    };
    assert!(out.stdout.is_empty(), "a refusal prints nothing on stdout");
    let err = stderr(out);
    match classify(&exit, &err, &summary(&out.stdout), Utc::now()) {
        Class::InvocationBug { kind, .. } => (out.status.code().unwrap(), err, kind),
        other => panic!("{err}: classified {other:?}"),
    }
}

#[test]
fn each_refusal_has_the_cli_s_text_and_class() {
    let d = Temp::new();
    let id = new_session_id();
    let cases: Vec<(Vec<&str>, &str, BugKind)> = vec![
        (
            vec!["--bogus"],
            "error: unknown option '--bogus'\n",
            BugKind::UnknownOption,
        ),
        (
            vec!["--session-id", "not-a-uuid"],
            "Error: Invalid session ID. Must be a valid UUID.\n",
            BugKind::InvalidSessionId,
        ),
        (
            vec!["--session-id", &id, "--resume", &id],
            "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.\n",
            BugKind::BothSessionFlags,
        ),
        (
            vec!["--model"],
            "error: option '--model <value>' argument missing\n",
            BugKind::BadArgument,
        ),
    ];
    for (extra, text, kind) in cases {
        let out = run(d.sim(1, &extra));
        assert_eq!(refused(&out), (1, text.to_owned(), kind), "{extra:?}");
    }
}

#[test]
fn stream_json_without_verbose_is_refused() {
    let d = Temp::new();
    let out = run(d.sim_raw(1, &["-p", "x", "--output-format", "stream-json"]));
    let want = "Error: When using --print, --output-format=stream-json requires --verbose\n";
    assert_eq!(
        refused(&out),
        (1, want.to_owned(), BugKind::StreamJsonNeedsVerbose)
    );
}

#[test]
fn a_nested_call_is_refused_and_the_log_says_why() {
    let d = Temp::new();
    let mut cmd = d.sim(1, &[]);
    cmd.env("CLAUDECODE", "1")
        .env("CLAUDE_CODE_ENTRYPOINT", "cli");
    let out = run(cmd);
    let (code, err, kind) = refused(&out);
    assert_eq!((code, kind), (1, BugKind::NestedSession));
    assert!(
        err.contains("unset the CLAUDECODE environment variable"),
        "{err}"
    );
    let log = d.calls();
    assert_eq!(log[0]["claudecode_env"], true);
    assert_eq!(log[0]["entrypoint_env"], true);
}

#[test]
fn the_adapter_s_own_invocation_is_accepted() {
    let d = Temp::new();
    let cfg = AgentConfig {
        backend: m1loop::m1::AgentKind::Claude,
        program: SIM.to_owned(),
        permission_mode: Some(m1loop::m1::PermissionMode::AcceptEdits),
        allowed_tools: vec!["Bash(git commit:*)".into(), "Edit".into()],
        tools: None,
        max_turns: Some(5),
        max_budget_usd: Some(1.5),
        model: Some("sonnet".into()),
        extra_args: vec!["--dangerously-skip-permissions".into()],
        confined: false,
        files_dir: None,
    };
    let template = d.sim(1, &[]);
    let (new, resumed) = (new_session_id(), new_session_id());
    for session in [Session::New(new.clone()), Session::Resume(resumed.clone())] {
        let inv = invocation(&cfg, "-leading dash prompt", &session);
        let input = d.write("input", &inv.input);
        let mut cmd = inv.command();
        crate::support::take_env_and_dir(&mut cmd, &template);
        let out = cmd
            .current_dir(d.path())
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{session:?}: {}", stderr(&out));
        assert_eq!(
            summary(&out.stdout).session_id.as_deref(),
            Some(session.id())
        );
    }
    let log = d.calls();
    assert_eq!(log[0]["startup_failure_results"], "1");
    assert_eq!(log[0]["prompt"], "-leading dash prompt");
    assert_eq!(
        (&log[0]["session_id"], &log[0]["resume"]),
        (&new.into(), &serde_json::Value::Null)
    );
    assert_eq!(
        (&log[1]["session_id"], &log[1]["resume"]),
        (&serde_json::Value::Null, &resumed.into())
    );
}

#[test]
fn a_broken_scenario_is_reported_with_where_it_is_wrong() {
    let d = Temp::new();
    d.scenario(r#"{"steps": {"1": [{"sleep_ms": "long"}]}}"#);
    let out = run(d.sim(1, &[]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("scenario.json: steps.1[0]: invalid type: string \"long\""),
        "{err}"
    );
}

#[test]
fn a_hang_is_logged_at_start_and_dies_by_signal() {
    let d = Temp::new();
    d.scenario(r#"{"default": {"hang": true, "heartbeat_ms": 20}}"#);
    let mut cmd = d.sim(1, &[]);
    let out_path = d.path().join("stdout.jsonl");
    cmd.stdout(std::fs::File::create(&out_path).unwrap());
    let mut child = Guard::spawn(&mut cmd);
    assert!(
        wait_until(Duration::from_secs(30), || d.calls().len() == 1),
        "timed out waiting for the call's log line"
    );
    assert_eq!(d.calls()[0]["pid"], child.pid());
    // Heartbeats keep coming; the result never does.
    assert!(
        wait_until(Duration::from_secs(30), || {
            let s = m1loop::agent::read_stream_file(&out_path).unwrap();
            s.events >= 4
        }),
        "timed out waiting for three heartbeats"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.pid()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait(Duration::from_secs(30));
    assert_eq!(status.signal(), Some(15));
    let s = m1loop::agent::read_stream_file(&out_path).unwrap();
    assert!(s.result.is_none());
    let exit = ExitInfo {
        code: None,
        signal: Some(15),
        killed_by_runner: true,
    };
    assert!(matches!(
        classify(&exit, "", &s, Utc::now()),
        Class::Transient(_)
    ));
}

#[test]
fn a_call_told_to_end_slowly_outlives_sigterm_by_that_long() {
    let d = Temp::new();
    d.scenario(r#"{"default": {"hang": true, "sigterm_exit_ms": 400}}"#);
    let mut cmd = d.sim(1, &[]);
    let out_path = d.path().join("stdout.jsonl");
    cmd.stdout(std::fs::File::create(&out_path).unwrap());
    let mut child = Guard::spawn(&mut cmd);
    // The init event comes after SIGTERM is taken in hand.
    assert!(wait_until(Duration::from_secs(30), || {
        m1loop::agent::read_stream_file(&out_path).is_ok_and(|s| s.events >= 1)
    }));
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.pid()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait(Duration::from_secs(30));
    assert!(sent.elapsed() >= Duration::from_millis(400));
    assert_eq!(status.code(), Some(143));
}

#[test]
fn a_grandchild_is_left_behind_in_the_call_s_process_group() {
    use std::os::unix::process::CommandExt;
    let d = Temp::new();
    d.scenario(r#"{"default": {"grandchild_sleep_s": 60}}"#);
    let mut cmd = d.sim(1, &[]);
    cmd.process_group(0);
    let out = run(cmd);
    assert!(out.status.success());
    let err = stderr(&out);
    let pid: i32 = err
        .split("left grandchild pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in {err:?}"));
    let _guard = Guard::of_pid(pid);
    let sim_pid = d.calls()[0]["pid"].as_i64().unwrap();
    // The sim has exited, the sleep lives on.
    let stat = procfs::stat(pid).unwrap();
    assert_ne!(stat.state, 'Z', "the grandchild is alive: {stat:?}");
    assert_eq!(
        i64::from(stat.pgid),
        sim_pid,
        "same process group as the call"
    );
    assert_eq!(procfs::name(pid), "sleep", "{stat:?}");
}

#[test]
fn the_sim_binary_sits_beside_the_loop_binary() {
    let sim = std::path::Path::new(SIM);
    let lp = std::path::Path::new(env!("CARGO_BIN_EXE_loop"));
    assert_eq!(sim.parent(), lp.parent());
    // A test binary lives in deps/, one level below; `locate` finds it from there too.
    let found = m1loop::cli::demo::locate_sim().expect("claude-sim is built");
    assert_eq!(found.canonicalize().unwrap(), sim.canonicalize().unwrap());
}
