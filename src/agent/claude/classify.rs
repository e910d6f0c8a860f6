//! What an agent call's outcome means for the loop: go on, wait and retry, wait for a human,
//! or count a failed attempt.
//!
//! Exit codes alone decide nothing: the real CLI exits 1 for every failure and reports API
//! errors as `subtype: "success"` with `is_error: true`. So the class comes from the final
//! `result` event, the `rate_limit_event`, the texts (result, errors, stderr) and, when there
//! is no result at all, from how the process ended.

use std::fmt;
use std::sync::LazyLock;

use chrono::{DateTime, TimeZone, Utc};
use regex::Regex;

use super::reset_time::reset_from_text;
use super::stream::{ResultEvent, StreamSummary};
use crate::agent::reset_minute::Reset;

/// How the agent process ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The runner (timeout, idle timeout, stop) ended it.
    pub killed_by_runner: bool,
}

/// Why the CLI refused the call as given: the runner must change the call, not repeat it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BugKind {
    /// `--resume` of a session the CLI does not know: start a fresh session instead.
    UnknownSession,
    /// `--session-id` of a session that exists already: resume it instead.
    SessionInUse,
    /// `--session-id` that is not a UUID.
    InvalidSessionId,
    /// `--session-id` together with `--resume`.
    BothSessionFlags,
    /// A flag this CLI version does not have.
    UnknownOption,
    /// A flag's value missing or invalid, or a stray argument.
    BadArgument,
    /// `--output-format stream-json` without `--verbose`.
    StreamJsonNeedsVerbose,
    /// `--dangerously-skip-permissions` while running as root.
    BypassPermissionsAsRoot,
    /// `--model` names a model that does not exist or is not available.
    UnknownModel,
    /// Started inside another Claude Code session (`CLAUDECODE` was not removed).
    NestedSession,
    /// The session's context no longer fits the model's window (`Prompt is too long`):
    /// resuming it can only fail again.
    ContextTooLong,
}

/// The class of one call's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Class {
    /// A final result without error, and a clean exit.
    Success,
    /// Rate limit, overload, 5xx, network, a hang the runner killed, or a kill while the CLI
    /// was retrying an API error: wait and retry, without counting a failed attempt. A kill
    /// from outside with no sign of an API error is [`Class::Other`].
    Transient(String),
    /// The subscription's usage window is spent: wait until `resets_at` (when known).
    UsageLimit {
        resets_at: Option<DateTime<Utc>>,
        /// How `resets_at` was guessed when the agent's words did not fix it (a time
        /// without a day, a minute just past), for the loop to say beside its wait.
        guess: Option<String>,
        message: String,
    },
    /// Credentials missing, invalid or without permission: a human must act.
    Auth(String),
    /// Credit balance or the configured budget is exhausted: a human must act.
    Billing(String),
    /// The call itself is wrong; repeating it unchanged can only fail again.
    InvocationBug { kind: BugKind, message: String },
    /// Anything else: a failed attempt.
    Other(String),
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Success => f.write_str("success"),
            Self::Transient(m) => write!(f, "transient error: {m}"),
            Self::UsageLimit {
                resets_at: Some(at),
                message,
                ..
            } => write!(f, "usage limit until {}: {message}", at.to_rfc3339()),
            Self::UsageLimit {
                resets_at: None,
                message,
                ..
            } => write!(f, "usage limit (reset time unknown): {message}"),
            Self::Auth(m) => write!(f, "authentication problem: {m}"),
            Self::Billing(m) => write!(f, "billing problem: {m}"),
            Self::InvocationBug { kind, message } => {
                write!(f, "invalid call ({kind:?}): {message}")
            }
            Self::Other(m) => write!(f, "failed: {m}"),
        }
    }
}

/// Classifies one finished call. `now` resolves a reset time given only as a clock time.
#[must_use]
pub fn classify(
    exit: &ExitInfo,
    stderr: &str,
    stream: &StreamSummary,
    now: DateTime<Utc>,
) -> Class {
    let result = stream.result.as_ref();
    let died = exit.killed_by_runner
        || exit.signal.is_some()
        // Node turns SIGINT/SIGKILL/SIGTERM into these codes itself.
        || matches!(exit.code, Some(130 | 137 | 143));
    if result.is_some_and(|r| !r.is_error) {
        // A kill after a successful result (a CLI that lingers at exit) loses nothing.
        if exit.code == Some(0) || died {
            return Class::Success;
        }
        return Class::Other(format!(
            "the agent reported success but {}",
            describe_exit(exit)
        ));
    }
    let text = all_text(result, stderr);
    let message = message(result, stderr, exit);
    let status = result.and_then(|r| r.api_error_status);

    if let Some(kind) = bug_kind(&text, status) {
        return Class::InvocationBug { kind, message };
    }
    let rejected = stream
        .rate_limit
        .as_ref()
        .filter(|r| r.status == "rejected");
    if rejected.is_some() || USAGE_LIMIT.is_match(&text) {
        let reset = rejected
            .and_then(|r| r.resets_at)
            .and_then(|epoch| Utc.timestamp_opt(epoch, 0).single())
            .map(|at| Reset { at, guess: None })
            .or_else(|| reset_from_text(&text, now));
        return Class::UsageLimit {
            resets_at: reset.as_ref().map(|r| r.at),
            guess: reset.and_then(|r| r.guess),
            message,
        };
    }
    if BILLING.is_match(&text) || result.is_some_and(|r| r.subtype == "error_max_budget_usd") {
        return Class::Billing(message);
    }
    if matches!(status, Some(401 | 403)) || AUTH.is_match(&text) {
        return Class::Auth(message);
    }
    if matches!(status, Some(408 | 409 | 429 | 500..=599)) || TRANSIENT.is_match(&text) {
        return Class::Transient(message);
    }
    if result.is_none() && died && stream.auth_failing() {
        // Ended while the CLI retried a refused key (by the runner, which does not wait out
        // its 3 minutes of retries): only a human can fix that.
        return Class::Auth(format!(
            "the CLI was retrying an authentication error ({}) when it was ended",
            crate::text::one_line(stream.api_error.as_deref().unwrap_or("401"), 200)
        ));
    }
    if result.is_none() && died {
        let how = describe_exit(exit);
        // The loop's own kill of a hang, or a kill while the CLI was retrying an API error:
        // the outage, not the work, is what stopped it.
        if let Some(api_error) = &stream.api_error {
            return Class::Transient(format!(
                "{how} before a result event, while the CLI was retrying an API error ({})",
                crate::text::one_line(api_error, 200)
            ));
        }
        if exit.killed_by_runner {
            return Class::Transient(format!("{how} before a result event"));
        }
        // Killed from outside (an OOM kill, a stray `kill`, a reboot): nothing says the API
        // is down, so this is a failed attempt, retried in the same session.
        return Class::Other(format!("{how} before a result event"));
    }
    Class::Other(failed_run(message, exit, stderr))
}

static USAGE_LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)you've hit your [^\n]*limit|usage limit reached|limit reached[^\n]*resets")
        .expect("valid regex")
});
static BILLING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)credit balance is too low|insufficient credit|maximum budget")
        .expect("valid regex")
});
static AUTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)invalid api key|not logged in|please run /login|failed to authenticate|oauth token (?:has )?expired|authentication_error",
    )
    .expect("valid regex")
});
static TRANSIENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)overloaded|can't reach the api|connection error|request timed out|socket hang up|fetch failed|\b(?:ECONNRESET|ECONNREFUSED|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH)\b|API Error: 5\d\d",
    )
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

/// Every text that can name the failure: result text, errors, stderr.
fn all_text(result: Option<&ResultEvent>, stderr: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if let Some(r) = result {
        parts.extend(r.result.as_deref());
        parts.extend(r.errors.iter().map(String::as_str));
    }
    parts.push(stderr);
    parts.join("\n")
}

/// One readable line for M1.md and the log: the result's own words, else stderr's last lines,
/// else how the process ended.
fn message(result: Option<&ResultEvent>, stderr: &str, exit: &ExitInfo) -> String {
    const MAX: usize = 500;
    let from_result = result.and_then(|r| {
        let text = match r.result.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => t.to_owned(),
            _ if !r.errors.is_empty() => r.errors.join("; "),
            _ => return None,
        };
        Some(match r.api_error_status {
            Some(s) => format!("{text} (API status {s})"),
            None => text,
        })
    });
    let text = from_result.unwrap_or_else(|| {
        let tail = stderr_tail(stderr);
        if tail.is_empty() {
            format!("{} without a result event", describe_exit(exit))
        } else {
            format!("{tail} ({})", describe_exit(exit))
        }
    });
    crate::text::cut(&text, MAX)
}

/// The last three non-blank lines of stderr, joined.
fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// A failed run as a person needs it to act: what it said, how it exited, and the end of its
/// stderr (a [`message`] taken from the result carries neither).
fn failed_run(message: String, exit: &ExitInfo, stderr: &str) -> String {
    let how = describe_exit(exit);
    if message.contains(&how) {
        return message;
    }
    match stderr_tail(stderr) {
        tail if tail.is_empty() || message.contains(&tail) => format!("{message} ({how})"),
        tail => format!(
            "{message} ({how}; stderr: {})",
            crate::text::one_line(&tail, 200)
        ),
    }
}

fn describe_exit(exit: &ExitInfo) -> String {
    let how = match (exit.code, exit.signal) {
        (_, Some(sig)) => format!("ended by signal {sig}"),
        (Some(code), None) => format!("exited with code {code}"),
        (None, None) => "ended in an unknown way".to_owned(),
    };
    if exit.killed_by_runner {
        format!("was killed by the runner ({how})")
    } else {
        how
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::StreamReader;

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
