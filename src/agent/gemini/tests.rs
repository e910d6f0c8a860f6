use super::*;
use crate::agent::outcome::BugKind;
use crate::agent::{Class, ExitInfo};
use chrono::{DateTime, Utc};

fn fixture(stem: &str) -> (StreamSummary, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini");
    let out = Gemini
        .read_output(&dir.join(format!("{stem}.stdout.jsonl")))
        .unwrap();
    let err = std::fs::read_to_string(dir.join(format!("{stem}.stderr"))).unwrap();
    (out, err)
}

fn cfg() -> AgentConfig {
    AgentConfig {
        backend: crate::m1::settings::AgentKind::Gemini,
        program: "gemini".into(),
        permission_mode: Some(PermissionMode::AcceptEdits),
        files_dir: Some(PathBuf::from("/state")),
        ..AgentConfig::default()
    }
}

fn args(c: &AgentConfig, session: &Session) -> Vec<String> {
    Gemini.invocation(c, "", session).unwrap().args
}

#[test]
fn a_real_gemini_run_gives_its_session_answer_and_its_own_tokens() {
    let (s, _) = fixture("success");
    assert_eq!(
        s.session_id.as_deref(),
        Some("3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b")
    );
    let r = s.result.as_ref().unwrap();
    assert!(!r.is_error);
    assert_eq!(
        r.result.as_deref(),
        Some("I made the file.\nSTEP_DONE: made it")
    );
    assert_eq!(s.run_tokens, Some(214));
    assert_eq!((s.session_tokens, s.cost_usd), (None, None));
    assert_eq!(
        s.writes,
        ["write_file: /home/user/project/made_by_tool.txt"]
    );
    assert_eq!(s.garbage_lines, 0);
    // Resumed: the same session, and this run's tokens alone.
    let (resumed, _) = fixture("resumed");
    assert_eq!(resumed.session_id, s.session_id);
    assert_eq!(resumed.run_tokens, Some(214));
}

#[test]
fn a_call_the_cli_did_not_run_is_no_write() {
    for stem in [
        "shell-denied-auto-edit",
        "default-mode-write-denied",
        "plan-mode-read-only-policy",
    ] {
        let (s, _) = fixture(stem);
        assert!(s.writes.is_empty(), "{stem}: {:?}", s.writes);
    }
    let (ran, _) = fixture("shell-yolo");
    assert_eq!(ran.writes, ["run_shell_command: touch made_by_shell.txt"]);
}

#[test]
fn each_real_gemini_capture_has_its_class() {
    let now: DateTime<Utc> = "2026-11-27T03:47:11Z".parse().unwrap();
    let class = |stem: &str, code| {
        let (out, err) = fixture(stem);
        let exit = ExitInfo {
            code: Some(code),
            ..ExitInfo::default()
        };
        Gemini.classify(&exit, &err, &out, now)
    };
    for stem in [
        "success",
        "resumed",
        "rate-limit-429-recovered",
        "shell-yolo",
    ] {
        assert_eq!(class(stem, 0), Class::Success, "{stem}");
    }
    assert!(matches!(
        class("rate-limit-429-gave-up", 173),
        Class::Transient(_)
    ));
    match class("daily-quota", 173) {
        Class::UsageLimit {
            resets_at, guess, ..
        } => {
            assert_eq!(resets_at, Some("2026-11-27T08:00:00Z".parse().unwrap()));
            assert!(guess.unwrap().contains("midnight Pacific"));
        }
        c => panic!("{c:?}"),
    }
    assert!(matches!(class("invalid-api-key", 144), Class::Auth(_)));
    for stem in ["no-auth-setting", "no-api-key"] {
        match class(stem, 41) {
            Class::Auth(m) => assert!(m.contains("no credentials"), "{m}"),
            c => panic!("{stem}: {c:?}"),
        }
    }
    let bug = |stem: &str, code| match class(stem, code) {
        Class::InvocationBug { kind, .. } => kind,
        c => panic!("{stem}: {c:?}"),
    };
    assert_eq!(bug("resume-unknown-session", 42), BugKind::UnknownSession);
    // A resume in a project the CLI has no session of at all: its other words for it.
    assert_eq!(
        bug("resume-in-a-project-without-sessions", 42),
        BugKind::UnknownSession
    );
    assert_eq!(bug("session-id-in-use", 42), BugKind::SessionInUse);
    assert_eq!(bug("unknown-option", 1), BugKind::UnknownOption);
    assert_eq!(bug("bad-approval-mode", 1), BugKind::BadArgument);
    assert_eq!(bug("empty-prompt", 42), BugKind::BadArgument);
    assert_eq!(bug("unknown-model", 1), BugKind::UnknownModel);
    match class("turn-limit", 53) {
        Class::Other(m) => assert!(m.contains("max session turns"), "{m}"),
        c => panic!("{c:?}"),
    }
}

#[test]
fn a_run_killed_while_the_cli_retried_a_429_waits_and_one_killed_otherwise_fails() {
    let (out, err) = fixture("rate-limit-429-gave-up");
    // Cut before its result: what a kill during the CLI's retries leaves.
    let mut cut = StreamSummary {
        result: None,
        ..out
    };
    cut.last_activity = None;
    let killed = ExitInfo {
        code: None,
        signal: Some(15),
        killed_by_runner: true,
    };
    let now = Utc::now();
    match Gemini.classify(&killed, &err, &cut, now) {
        Class::Transient(m) => assert!(m.contains("status 429"), "{m}"),
        c => panic!("{c:?}"),
    }
    let from_outside = ExitInfo {
        killed_by_runner: false,
        ..killed
    };
    assert!(matches!(
        Gemini.classify(&from_outside, "", &cut, now),
        Class::Other(_)
    ));
}

#[test]
fn a_storm_of_429s_is_seen_at_the_clis_second_retry_and_a_run_ended_in_one_is_rate_limited() {
    use crate::agent::output::Dialect;
    // The three ways 0.61.0 words a retry of a 429 (`retryWithBackoff`, `logRetryAttempt`).
    let quota = "Quota exceeded for quota metric 'Generate Content API requests per minute'";
    let storms = [
        "Attempt {n} failed with status 429. Retrying with backoff... _ApiError: x".to_owned(),
        "Attempt {n} failed with 429 error (no Retry-After header). Retrying with backoff..."
            .to_owned(),
        format!("Attempt {{n}} failed: {quota}. Retrying after 5123ms..."),
    ];
    for line in &storms {
        let nth = |n: u32| line.replace("{n}", &n.to_string());
        let (mut d, mut s) = (stream::GeminiStream::default(), StreamSummary::default());
        d.stderr_line(&mut s, &nth(1));
        assert!(!s.rate_limit_storm(), "one 429 is no storm: {line}");
        d.stderr_line(&mut s, "    at async retryWithBackoff (file:///x.js:1:2)");
        d.stderr_line(&mut s, &nth(2));
        assert!(s.rate_limit_storm(), "{line}");
        let stderr = format!("{}\n{}\n", nth(1), nth(2));
        assert!(classify::storm(&stderr).is_some(), "{line}");
        // Ended in it, by the runner or by anyone: the limit, not a failed attempt.
        for exit in [
            ExitInfo {
                code: None,
                signal: Some(15),
                killed_by_runner: true,
            },
            ExitInfo {
                code: Some(143),
                signal: None,
                killed_by_runner: false,
            },
        ] {
            match Gemini.classify(&exit, &stderr, &StreamSummary::default(), Utc::now()) {
                Class::RateLimited(m) => assert!(m.contains("Attempt 2 failed"), "{m}"),
                c => panic!("{line}: {c:?}"),
            }
        }
    }
    // A 5xx retried is no rate limit; an answer ends a storm; a new request counts anew.
    let (mut d, mut s) = (stream::GeminiStream::default(), StreamSummary::default());
    for n in 1..=3 {
        d.stderr_line(
            &mut s,
            &format!("Attempt {n} failed with status 503. Retrying..."),
        );
    }
    assert!(!s.rate_limit_storm());
    d.stderr_line(
        &mut s,
        "Attempt 2 failed with status 429. Retrying with backoff...",
    );
    assert!(s.rate_limit_storm());
    let answer = r#"{"type":"message","role":"assistant","content":"Done.","delta":true}"#;
    let answer: serde_json::Map<String, serde_json::Value> = serde_json::from_str(answer).unwrap();
    d.event(&mut s, &answer);
    assert!(!s.rate_limit_storm());
    d.stderr_line(
        &mut s,
        "Attempt 1 failed with status 429. Retrying with backoff...",
    );
    assert!(!s.rate_limit_storm());
    // The CLI giving up is no retry: it ends by itself, and its exit is judged.
    let gave_up = "Attempt 10 failed: Resource has been exhausted. Max attempts reached";
    assert_eq!(classify::storm(gave_up), None);
}

#[test]
fn the_live_line_says_the_cli_waits_while_it_retries_on_stderr_only() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut f = Gemini.follow(&stdout, &stderr);
    let init = r#"{"type":"init","session_id":"s-1","model":"m"}"#;
    std::fs::write(&stdout, format!("{init}\n")).unwrap();
    std::fs::write(
        &stderr,
        "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: x\nAttempt 2 fa",
    )
    .unwrap();
    assert!(f.poll());
    assert_eq!(f.summary().session_id.as_deref(), Some("s-1"));
    assert_eq!(f.summary().api_error_status, Some(429));
    assert!(
        f.summary()
            .last_activity
            .as_deref()
            .is_some_and(|a| a.contains("the CLI retries (attempt 1)")),
        "{:?}",
        f.summary().last_activity
    );
    let mut more = std::fs::read_to_string(&stderr).unwrap();
    more.push_str("iled with status 503. Retrying with backoff...\n");
    std::fs::write(&stderr, more).unwrap();
    assert!(f.poll());
    assert_eq!(f.summary().api_error_status, Some(503));
    // The API answered: the wait is behind it.
    let answer = r#"{"type":"message","role":"assistant","content":"Done.","delta":true}"#;
    std::fs::write(&stdout, format!("{init}\n{answer}\n")).unwrap();
    assert!(f.poll());
    assert_eq!(f.summary().api_error_status, None);
    assert_eq!(f.summary().last_activity.as_deref(), Some("Done."));
}

#[test]
fn the_answer_is_the_text_after_the_last_tool_call_joined_from_its_deltas() {
    let lines = [
        r#"{"type":"message","role":"assistant","content":"Let me look.","delta":true}"#,
        r#"{"type":"tool_use","tool_name":"read_file","tool_id":"t1","parameters":{"file_path":"a.rs"}}"#,
        r#"{"type":"tool_result","tool_id":"t1","status":"success"}"#,
        r#"{"type":"message","role":"assistant","content":"All good","delta":true}"#,
        r#"{"type":"message","role":"assistant","content":".\nSTEP_DONE: checked","delta":true}"#,
        r#"{"type":"result","status":"success","stats":{"total_tokens":5}}"#,
    ];
    let mut r = crate::agent::StreamReader::of(crate::m1::settings::AgentKind::Gemini);
    r.feed(format!("{}\n", lines.join("\n")).as_bytes());
    let s = r.finish();
    assert_eq!(
        s.result.unwrap().result.as_deref(),
        Some("All good.\nSTEP_DONE: checked")
    );
    assert!(s.writes.is_empty());
    assert_eq!(s.last_activity.as_deref(), Some("result: done"));
}

#[test]
fn a_gemini_run_is_trusted_starts_the_loops_session_and_a_retry_resumes_it() {
    let inv = Gemini
        .invocation(&cfg(), "do it", &Session::New("s-1".into()))
        .unwrap();
    assert_eq!(
        inv.args,
        [
            "--output-format",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            "auto_edit",
            "--session-id",
            "s-1"
        ]
    );
    assert_eq!(inv.input, "do it");
    assert_eq!(inv.env_remove, ["GEMINI_RESTRICTED_MODE"]);
    assert!(inv.files.is_empty());
    let resumed = args(&cfg(), &Session::Resume("s-1".into()));
    assert_eq!(resumed[5..], ["-r", "s-1"]);
}

#[test]
fn the_loops_intent_maps_to_an_approval_mode_never_wider() {
    let mode = |m| {
        let c = AgentConfig {
            permission_mode: Some(m),
            ..cfg()
        };
        args(&c, &Session::New(String::new()))[4].clone()
    };
    assert_eq!(mode(PermissionMode::AcceptEdits), "auto_edit");
    assert_eq!(mode(PermissionMode::Auto), "auto_edit");
    assert_eq!(mode(PermissionMode::BypassPermissions), "yolo");
    assert_eq!(mode(PermissionMode::Default), "default");
    assert_eq!(mode(PermissionMode::Manual), "default");
    assert_eq!(mode(PermissionMode::DontAsk), "default");
    assert_eq!(mode(PermissionMode::Plan), "plan");
    // A review reads only, whatever the mode: plan, under the loop's read-only policy.
    let review = AgentConfig {
        permission_mode: Some(PermissionMode::BypassPermissions),
        ..cfg()
    }
    .read_only();
    let inv = Gemini
        .invocation(&review, "", &Session::New(String::new()))
        .unwrap();
    assert_eq!(
        inv.args[3..],
        [
            "--approval-mode",
            "plan",
            "--policy",
            "/state/gemini-read-only.toml"
        ]
    );
    assert_eq!(
        inv.files,
        [(
            PathBuf::from("/state/gemini-read-only.toml"),
            READ_ONLY_POLICY.to_owned()
        )]
    );
    assert!(Gemini.reads_only(&inv.args).is_some());
    // Without a place for the policy, a read-only run is refused, never run without it.
    let nowhere = AgentConfig {
        files_dir: None,
        ..review
    };
    assert!(
        Gemini
            .invocation(&nowhere, "", &Session::New(String::new()))
            .is_err()
    );
}

#[test]
fn settings_gemini_cannot_honour_are_refused_by_name() {
    crate::agent::backend::assert_refuses_by_name(&Gemini, &cfg());
}

#[test]
fn a_gemini_run_reads_only_in_plan_mode_under_the_loops_policy_alone() {
    let args = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
    let ours = "--approval-mode plan --policy /s/gemini-read-only.toml";
    assert!(Gemini.reads_only(&args(ours)).is_some());
    for wider in [
        "--approval-mode auto_edit --policy /s/gemini-read-only.toml",
        "--approval-mode plan",
        "--approval-mode plan --policy /s/gemini-read-only.toml --policy /home/me/allow.toml",
        "--approval-mode plan --policy /s/gemini-read-only.toml --yolo",
        "--approval-mode plan --policy /s/gemini-read-only.toml --admin-policy /a.toml",
        "--approval-mode plan --policy /s/gemini-read-only.toml --approval-mode yolo",
    ] {
        assert_eq!(Gemini.reads_only(&args(wider)), None, "{wider}");
    }
}

#[test]
fn a_transcript_is_found_where_gemini_keeps_its_sessions() {
    let home = tempfile::tempdir().unwrap();
    let chats = home.path().join(".gemini/tmp/project/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let id = "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b";
    let path = chats.join("session-2026-11-27T03-44-3f1c2b4a.jsonl");
    std::fs::write(&path, format!("{{\"sessionId\":\"{id}\"}}\n")).unwrap();
    let work = Path::new("/home/user/project");
    assert_eq!(Gemini.transcript(id, work, home.path()), Some(path));
    // The same first 8 characters, another session.
    let other = "3f1c2b4a-0000-4000-8000-000000000000";
    assert_eq!(Gemini.transcript(other, work, home.path()), None);
}
