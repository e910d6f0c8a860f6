//! How a Claude Code run ended, in the loop's classes: what only Claude Code says is read
//! here (its refusals of the call, its usage limit with the reset time of its
//! `rate_limit_event` or its words); the rest by the rules every backend shares
//! ([`classify_with`]).

use std::sync::LazyLock;

use chrono::{DateTime, TimeZone, Utc};
use regex::Regex;

use super::reset_time::reset_from_text;
use crate::agent::outcome::{BugKind, Class, ExitInfo, Unanswered, classify_with};
use crate::agent::output::StreamSummary;
use crate::agent::reset_minute::Reset;

/// Classifies one finished call of Claude Code. `now` resolves a reset time given only as a
/// clock time.
#[must_use]
pub fn classify(
    exit: &ExitInfo,
    stderr: &str,
    stream: &StreamSummary,
    now: DateTime<Utc>,
) -> Class {
    classify_with(exit, stderr, stream, |f| own(exit, stderr, f, now))
}

/// What only Claude Code says: its refusals of the call, its usage limit.
pub(super) fn own(
    _exit: &ExitInfo,
    _stderr: &str,
    f: &Unanswered<'_>,
    now: DateTime<Utc>,
) -> Option<Class> {
    if let Some(kind) = bug_kind(&f.text, f.status) {
        return Some(Class::InvocationBug {
            kind,
            message: f.message.clone(),
        });
    }
    let rejected = f
        .stream
        .rate_limit
        .as_ref()
        .filter(|r| r.status == "rejected");
    if rejected.is_some() || USAGE_LIMIT.is_match(&f.text) {
        let reset = rejected
            .and_then(|r| r.resets_at)
            .and_then(|epoch| Utc.timestamp_opt(epoch, 0).single())
            .map(|at| Reset { at, guess: None })
            .or_else(|| reset_from_text(&f.text, now));
        return Some(Class::UsageLimit {
            resets_at: reset.as_ref().map(|r| r.at),
            guess: reset.and_then(|r| r.guess),
            message: f.message.clone(),
        });
    }
    None
}

static USAGE_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)you've hit your [^\n]*limit|usage limit reached|limit reached[^\n]*resets")
        .expect("valid regex")
});
/// The CLI's refusals of the call as given, matched on their own wording.
fn bug_kind(text: &str, status: Option<u16>) -> Option<BugKind> {
    const TABLE: [(&str, BugKind); 13] = [
        (
            "No conversation found with session ID",
            BugKind::UnknownSession,
        ),
        ("is already in use", BugKind::SessionInUse),
        ("Invalid session ID", BugKind::InvalidSessionId),
        (
            "--session-id can only be used with",
            BugKind::BothSessionFlags,
        ),
        ("requires --verbose", BugKind::StreamJsonNeedsVerbose),
        (
            "cannot be used with root/sudo",
            BugKind::BypassPermissionsAsRoot,
        ),
        ("error: unknown option", BugKind::UnknownOption),
        ("[claude-code:unrecognized_model]", BugKind::UnknownModel),
        ("issue with the selected model", BugKind::UnknownModel),
        ("inside another Claude Code session", BugKind::NestedSession),
        ("error: too many arguments", BugKind::BadArgument),
        // The CLI's words (2.1.197, 2.1.330), and the API's in its 400 answer.
        ("Prompt is too long", BugKind::ContextTooLong),
        ("prompt is too long", BugKind::ContextTooLong),
    ];
    static BAD_ARGUMENT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"error: option '[^']*' argument|error: missing required argument")
            .expect("valid regex")
    });
    if let Some((_, kind)) = TABLE.iter().find(|(needle, _)| text.contains(needle)) {
        return Some(*kind);
    }
    if BAD_ARGUMENT.is_match(text) {
        return Some(BugKind::BadArgument);
    }
    (status == Some(404)).then_some(BugKind::UnknownModel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::output::StreamReader;

    fn stream(text: &str) -> StreamSummary {
        let mut r = StreamReader::new();
        r.feed(text.as_bytes());
        r.finish()
    }

    fn sigterm_capture() -> StreamSummary {
        stream(include_str!(
            "../../../tests/fixtures/claude-code/sigterm.stdout.jsonl"
        ))
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 2, 6, 51).unwrap()
    }

    #[test]
    fn a_failed_run_is_reported_with_its_exit_code_and_stderr_tail() {
        let s = stream(
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["the tool crashed"]}"#,
        );
        let exit = ExitInfo {
            code: Some(1),
            ..ExitInfo::default()
        };
        let stderr = "starting\nwarning: x\nfatal: disk full\n";
        match classify(&exit, stderr, &s, now()) {
            Class::Other(m) => assert_eq!(
                m,
                "the tool crashed (exited with code 1; stderr: starting / warning: x / fatal: disk full)"
            ),
            c => panic!("{c:?}"),
        }
        // With nothing on stderr, the exit code alone; never said twice.
        match classify(&exit, "", &s, now()) {
            Class::Other(m) => assert_eq!(m, "the tool crashed (exited with code 1)"),
            c => panic!("{c:?}"),
        }
        match classify(&exit, "fatal: disk full", &stream(""), now()) {
            Class::Other(m) => assert_eq!(m, "fatal: disk full (exited with code 1)"),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn an_agent_killed_from_outside_is_a_failed_attempt_not_an_api_outage() {
        let s = sigterm_capture();
        assert!(s.result.is_none() && s.api_error.is_none());
        // As Node reports it (exit 143), and as a bare signal (SIGKILL leaves no code).
        let node_exit = ExitInfo {
            code: Some(143),
            ..ExitInfo::default()
        };
        let kill9 = ExitInfo {
            code: None,
            signal: Some(9),
            killed_by_runner: false,
        };
        for (exit, how) in [(node_exit, "exited with code 143"), (kill9, "signal 9")] {
            match classify(&exit, "", &s, now()) {
                Class::Other(m) => {
                    assert!(
                        m.contains(how) && m.contains("before a result event"),
                        "{m}"
                    );
                }
                c => panic!("{exit:?}: {c:?}"),
            }
        }
        let empty = StreamSummary::default();
        assert!(matches!(
            classify(&kill9, "", &empty, now()),
            Class::Other(_)
        ));
    }

    #[test]
    fn an_agent_killed_while_the_cli_retried_an_api_error_waits_as_transient() {
        let retrying = format!(
            "{}\n{}\n",
            include_str!("../../../tests/fixtures/claude-code/sigterm.stdout.jsonl").trim_end(),
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1015,"error_status":529,"error":"overloaded","session_id":"s"}"#
        );
        let s = stream(&retrying);
        assert_eq!(s.api_error.as_deref(), Some("529 overloaded"));
        let kill9 = ExitInfo {
            code: None,
            signal: Some(9),
            killed_by_runner: false,
        };
        match classify(&kill9, "", &s, now()) {
            Class::Transient(m) => assert!(m.contains("529 overloaded"), "{m}"),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn the_runner_s_own_kill_of_a_hang_stays_transient() {
        let killed = ExitInfo {
            code: Some(143),
            signal: None,
            killed_by_runner: true,
        };
        assert!(matches!(
            classify(&killed, "", &sigterm_capture(), now()),
            Class::Transient(_)
        ));
    }
}
