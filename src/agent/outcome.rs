//! What an agent call's outcome means for the loop, whichever backend ran it: go on, wait and
//! retry, wait for a human, or count a failed attempt ([`Class`]); and the rules every backend
//! shares to tell which ([`classify_with`]), after its own words for what only it says.
//!
//! Exit codes alone decide nothing: Claude Code exits 1 for every failure and reports API
//! errors as `subtype: "success"` with `is_error: true`. So the class comes from the final
//! `result` event, the texts (result, errors, stderr) and, when there is no result at all,
//! from how the process ended.

use std::fmt;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::Regex;

use super::output::{ResultEvent, StreamSummary};

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
    /// The program could not start in the loop's sandbox: it reached for a path the sandbox
    /// hides (a version manager under `$HOME`). The message says which, and what grants it.
    Sandboxed,
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
    /// Ended while the CLI was in a storm of rate-limit retries (see
    /// [`super::StreamSummary::rate_limit_storm`]), by the runner, which does not sit through
    /// the CLI's minutes of silent retries, or by anyone: waited out as [`Class::Transient`]
    /// is, and not a failed attempt however it was ended.
    RateLimited(String),
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
            Self::RateLimited(m) => write!(f, "rate limit: {m}"),
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

/// What a backend's own rules see of a run that did not answer cleanly.
#[derive(Debug)]
pub(crate) struct Unanswered<'a> {
    /// Every text that can name the failure: the result's text and errors, stderr.
    pub text: String,
    /// One readable line for M1.md and the log.
    pub message: String,
    /// The HTTP status of the API error the result reports.
    pub status: Option<u16>,
    pub stream: &'a StreamSummary,
}

/// Classifies one finished call by the rules every backend shares, `own` (the backend's own
/// words: its refusals of the call, its usage limit) asked first once the call is known not
/// to have answered cleanly: a clean answer and exit are a success; then billing, auth and
/// transient words and statuses; a kill before any result is an outage when the runner made
/// it or the CLI was retrying an API error, else a failed attempt, as is everything else.
#[must_use]
pub(crate) fn classify_with(
    exit: &ExitInfo,
    stderr: &str,
    stream: &StreamSummary,
    own: impl FnOnce(&Unanswered<'_>) -> Option<Class>,
) -> Class {
    let result = stream.result.as_ref();
    let died = died(exit);
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
    let failed = Unanswered {
        text: all_text(result, stderr),
        message: message(result, stderr, exit),
        status: result.and_then(|r| r.api_error_status),
        stream,
    };
    if let Some(class) = own(&failed) {
        return class;
    }
    let Unanswered {
        text,
        message,
        status,
        ..
    } = failed;
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
        // its minutes of retries): only a human can fix that.
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

/// The first line of `text` that holds `needle`, trimmed, as one line of at most 300
/// characters: the words of its CLI that a backend's own rules quote.
#[must_use]
pub(crate) fn line_with(text: &str, needle: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains(needle))
        .map(|l| crate::text::one_line(l.trim(), 300))
}

/// The invocation bug of the first of `bugs` (the CLI's words, and what they mean) that
/// `text` holds, with the line that holds them.
#[must_use]
pub(crate) fn invocation_bug(text: &str, bugs: &[(&str, BugKind)]) -> Option<Class> {
    bugs.iter().find_map(|(needle, kind)| {
        line_with(text, needle).map(|message| Class::InvocationBug {
            kind: *kind,
            message,
        })
    })
}

/// Whether the process was ended by a signal (the runner's or another's), not by itself.
#[must_use]
pub(crate) fn died(exit: &ExitInfo) -> bool {
    exit.killed_by_runner
        || exit.signal.is_some()
        // Node turns SIGINT/SIGKILL/SIGTERM into these codes itself.
        || matches!(exit.code, Some(130 | 137 | 143))
}

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
pub(crate) fn stderr_tail(stderr: &str) -> String {
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

pub(crate) fn describe_exit(exit: &ExitInfo) -> String {
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
