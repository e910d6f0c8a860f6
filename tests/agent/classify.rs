//! Classification rules beyond the captured cases: exit codes alone never decide, denials still
//! succeed, a kill after the result loses nothing, refusals are told apart.

use chrono::{TimeZone, Utc};
use m1loop::agent::{BugKind, Class, ExitInfo, StreamSummary, classify};

use crate::support::{exited, stream};

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

const OK: &str =
    r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s"}"#;

#[test]
fn denied_tools_still_succeed_and_are_reported() {
    let s = stream(&[
        r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","permission_denials":[{"tool_name":"Write","tool_use_id":"t","tool_input":{}}]}"#,
    ]);
    assert_eq!(classify(&exited(0), "", &s, now()), Class::Success);
    assert_eq!(s.result.unwrap().permission_denials, ["Write"]);
}

#[test]
fn a_kill_after_a_successful_result_is_success() {
    let s = stream(&[OK]);
    let killed = ExitInfo {
        code: None,
        signal: Some(9),
        killed_by_runner: true,
    };
    assert_eq!(classify(&killed, "", &s, now()), Class::Success);
}

#[test]
fn exit_code_zero_without_a_result_is_not_success() {
    let s = stream(&[r#"{"type":"system","subtype":"init","session_id":"s"}"#]);
    match classify(&exited(0), "", &s, now()) {
        Class::Other(m) => assert!(
            m.contains("exited with code 0 without a result event"),
            "{m}"
        ),
        c => panic!("{c:?}"),
    }
}

#[test]
fn a_successful_result_with_a_failing_exit_is_not_success() {
    let c = classify(&exited(1), "", &stream(&[OK]), now());
    assert!(
        matches!(c, Class::Other(ref m) if m.contains("exited with code 1")),
        "{c:?}"
    );
}

#[test]
fn a_hang_the_runner_killed_is_transient() {
    let s = stream(&[r#"{"type":"system","subtype":"init","session_id":"s"}"#]);
    let killed = ExitInfo {
        code: None,
        signal: Some(15),
        killed_by_runner: true,
    };
    match classify(&killed, "", &s, now()) {
        Class::Transient(m) => assert!(m.contains("killed by the runner"), "{m}"),
        c => panic!("{c:?}"),
    }
}

#[test]
fn cli_refusals_are_told_apart() {
    let none = StreamSummary::default();
    let cases = [
        ("error: unknown option '--bogus'", BugKind::UnknownOption),
        (
            "error: option '--model <model>' argument missing",
            BugKind::BadArgument,
        ),
        (
            "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.",
            BugKind::BothSessionFlags,
        ),
        (
            "Error: Claude Code cannot be launched inside another Claude Code session.",
            BugKind::NestedSession,
        ),
    ];
    for (stderr, kind) in cases {
        match classify(&exited(1), stderr, &none, now()) {
            Class::InvocationBug { kind: k, message } => {
                assert_eq!(k, kind, "{stderr}");
                assert!(
                    message.contains(stderr.lines().next().unwrap()),
                    "{message}"
                );
            }
            c => panic!("{stderr}: {c:?}"),
        }
    }
}

#[test]
fn the_older_usage_limit_text_carries_its_epoch() {
    let s = stream(&[
        r#"{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1767240000"}"#,
    ]);
    assert_eq!(
        classify(&exited(1), "", &s, now()),
        Class::UsageLimit {
            resets_at: Some(Utc.timestamp_opt(1_767_240_000, 0).unwrap()),
            guess: None,
            message: "Claude AI usage limit reached|1767240000".into(),
        }
    );
}

#[test]
fn an_allowed_rate_limit_event_is_not_a_usage_limit() {
    let s = stream(&[
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1}}"#,
        r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500"}"#,
    ]);
    assert!(matches!(
        classify(&exited(1), "", &s, now()),
        Class::Transient(_)
    ));
}

#[test]
fn an_unknown_failure_is_other_with_stderr_s_last_words() {
    let c = classify(
        &exited(3),
        "warming up\nsegfault in module X\n",
        &StreamSummary::default(),
        now(),
    );
    match c {
        Class::Other(m) => assert!(
            m.contains("segfault in module X") && m.contains("code 3"),
            "{m}"
        ),
        c => panic!("{c:?}"),
    }
}
