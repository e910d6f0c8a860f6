//! Gemini CLI's `--output-format stream-json` events, read into the loop's [`StreamSummary`].
//!
//! What a run prints (captures in `tests/fixtures/gemini/`, CLI 0.61.0): `init {session_id,
//! model}` first, the prompt as a `message` of role `user`, the answer as `message`s of role
//! `assistant` that are deltas of one text (`delta: true`), `tool_use {tool_name, tool_id,
//! parameters}` and `tool_result {tool_id, status, output, error: {type, message}}`, warnings
//! as `error {severity, message}`, and last `result {status, error?, stats}`, whose `stats`
//! count this run's tokens alone (a resumed session's earlier runs are not in them).
//!
//! What it retries it says on stderr only (`Attempt 3 failed with status 429. Retrying with
//! backoff...`), for minutes with nothing on stdout: a run followed as it grows reads those
//! lines too ([`Dialect::stderr_line`]), so the loop shows it waits, and a kill meanwhile is
//! read as the outage it is.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::agent::output::Dialect;
use crate::agent::output::{ResultEvent, StreamSummary};

/// What Gemini CLI's events mean, with what it must remember between them.
#[derive(Debug, Default)]
pub(crate) struct GeminiStream {
    /// The agent's text since its last tool call: the deltas of its current answer.
    text: String,
    /// A tool call came after the text: the next delta begins a new answer.
    tool_since_text: bool,
    /// The `tool_id` of each of [`StreamSummary::writes`], in the same order: a call the CLI
    /// did not run is taken back out.
    write_ids: Vec<String>,
    /// Tool names by `tool_id`.
    tools: HashMap<String, String>,
}

impl Dialect for GeminiStream {
    fn event(&mut self, s: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
        let text = |k: &str| obj.get(k).and_then(Value::as_str);
        match text("type") {
            Some("init") => {
                if let Some(id) = text("session_id") {
                    s.session_id = Some(id.to_owned());
                }
            }
            Some("message") if text("role") == Some("assistant") => {
                Self::answered(s);
                if self.tool_since_text {
                    self.text.clear();
                    self.tool_since_text = false;
                }
                self.text.push_str(text("content").unwrap_or_default());
                let answer = self.text.trim();
                if !answer.is_empty() {
                    s.last_assistant_text = Some(answer.to_owned());
                    s.last_activity = answer
                        .lines()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .map(|l| crate::text::one_line(l, 120));
                }
            }
            Some("tool_use") => {
                Self::answered(s);
                self.tool_since_text = true;
                let name = text("tool_name").unwrap_or("a tool").to_owned();
                let id = text("tool_id").unwrap_or_default().to_owned();
                let call = call_line(&name, obj.get("parameters"));
                if !touches_no_file(&name) {
                    self.write_ids.push(id.clone());
                    s.writes.push(call.clone());
                }
                s.last_activity = Some(call);
                self.tools.insert(id, name);
            }
            Some("tool_result") if text("status") == Some("error") => {
                let id = text("tool_id").unwrap_or_default();
                let error = obj.get("error");
                let kind = error.and_then(|e| e.get("type")).and_then(Value::as_str);
                if kind.is_some_and(|k| NOT_RUN.contains(&k))
                    && let Some(i) = self.write_ids.iter().position(|w| w == id)
                {
                    // The CLI did not run it: it wrote nothing.
                    self.write_ids.remove(i);
                    s.writes.remove(i);
                }
                let message = error
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                let tool = self.tools.get(id).map_or("a tool", String::as_str);
                s.last_activity = Some(crate::text::one_line(&format!("{tool}: {message}"), 120));
            }
            Some("error") => {
                if let Some(m) = text("message") {
                    s.last_activity = Some(crate::text::one_line(m, 120));
                }
            }
            Some("result") => Self::result(s, obj),
            _ => {}
        }
    }

    fn reads_stderr(&self) -> bool {
        true
    }

    /// `Attempt 3 failed with status 429. Retrying with backoff...` (or `Attempt 3 failed:
    /// WHY. Retrying after 5000ms...`): the CLI is waiting out an API error.
    ///
    /// A 429 is said `with status 429`, `with 429 error (no Retry-After header)`, or, for a
    /// quota whose answer says how long to wait, `failed: WHY. Retrying after Nms` (0.61.0's
    /// `RetryableQuotaError`, which only a 429, 499 or 503 of the quota kind makes): each is a
    /// rate limit's retry, counted in [`StreamSummary::rate_limit_attempt`].
    fn stderr_line(&mut self, s: &mut StreamSummary, line: &str) {
        let Some(c) = RETRY.captures(line) else {
            return;
        };
        let n: u32 = c["n"].parse().unwrap_or(u32::MAX);
        let quota = c.name("quota").is_some();
        let status = c
            .name("status")
            .or_else(|| c.name("bare"))
            .and_then(|m| m.as_str().parse().ok());
        s.api_error_status = status;
        s.rate_limit_attempt = (quota || status == Some(429)).then_some(n);
        let what = match (status, quota) {
            (Some(st), _) => format!("status {st}"),
            (None, true) => "a quota error".to_owned(),
            (None, false) => "an API error".to_owned(),
        };
        s.api_error = Some(format!("{what} (attempt {n} of the CLI's own)"));
        s.last_activity = Some(format!(
            "waiting: the API answered {what}, the CLI retries (attempt {n})"
        ));
    }
}

impl GeminiStream {
    /// The API answered: whatever the CLI was retrying is behind it.
    fn answered(s: &mut StreamSummary) {
        s.api_error_status = None;
        s.rate_limit_attempt = None;
    }

    /// The run's last event: its status, its error, its tokens.
    fn result(s: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
        let stats = obj.get("stats");
        if let Some(total) = stats
            .and_then(|st| st.get("total_tokens"))
            .and_then(Value::as_u64)
        {
            s.run_tokens = Some(total);
        }
        let failed = obj.get("status").and_then(Value::as_str) != Some("success");
        let error = obj.get("error");
        let field = |k: &str| {
            error
                .and_then(|e| e.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let answer = s.last_assistant_text.clone().unwrap_or_default();
        s.result = Some(if failed {
            let message = field("message").unwrap_or_else(|| "the run failed".to_owned());
            ResultEvent {
                subtype: field("type").unwrap_or_else(|| "error".to_owned()),
                is_error: true,
                errors: vec![message],
                session_id: s.session_id.clone(),
                duration_ms: stats
                    .and_then(|st| st.get("duration_ms"))
                    .and_then(Value::as_u64),
                ..ResultEvent::default()
            }
        } else {
            ResultEvent {
                subtype: "success".to_owned(),
                result: Some(answer.clone()),
                session_id: s.session_id.clone(),
                duration_ms: stats
                    .and_then(|st| st.get("duration_ms"))
                    .and_then(Value::as_u64),
                ..ResultEvent::default()
            }
        });
        s.last_activity = Some(if failed {
            "result: an error".to_owned()
        } else {
            format!("result: {}", crate::agent::verdict::ended_with(&answer))
        });
    }
}

/// What the CLI prints each time it retries an API error.
static RETRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*Attempt (?P<n>\d+) failed(?: with status (?P<status>\d{3})| with (?P<bare>\d{3}) error|(?P<quota>: .*Retrying after \d+ ?ms))?",
    )
    .expect("valid regex")
});

/// The error types of a `tool_result` for a call the CLI did not carry out (refused by its
/// policy or approval mode, not offered, given wrong arguments, outside the workspace), or
/// that changed nothing (an edit that found nothing to change).
const NOT_RUN: [&str; 12] = [
    "policy_violation",
    "tool_not_registered",
    "invalid_tool_params",
    "path_not_in_workspace",
    "permission_denied",
    "attempt_to_create_existing_file",
    "target_is_directory",
    "edit_preparation_failure",
    "edit_no_occurrence_found",
    "edit_expected_occurrence_mismatch",
    "edit_no_change",
    "edit_no_change_llm_judgement",
];

/// Gemini CLI's tools that write no file of the project: those that read or search, the web,
/// the session's own to-dos, topics, plans mode and questions. Every other (`write_file`,
/// `replace`, `run_shell_command`, an MCP server's) may.
fn touches_no_file(tool: &str) -> bool {
    const READ: [&str; 16] = [
        "read_file",
        "read_many_files",
        "list_directory",
        "glob",
        "grep_search",
        "google_web_search",
        "web_fetch",
        "write_todos",
        "ask_user",
        "update_topic",
        "complete_task",
        "enter_plan_mode",
        "exit_plan_mode",
        "get_internal_docs",
        "read_mcp_resource",
        "list_mcp_resources",
    ];
    READ.contains(&tool) || tool.starts_with("tracker_")
}

/// The parameters of a tool call that say most about it, by the names Gemini CLI's tools use.
const TELLING: [&str; 6] = ["command", "file_path", "dir_path", "pattern", "path", "url"];

/// A tool call as one line: `run_shell_command: cargo test`, `write_file: src/lib.rs`.
fn call_line(name: &str, parameters: Option<&Value>) -> String {
    let what = TELLING
        .iter()
        .find_map(|k| parameters?.get(k)?.as_str())
        .and_then(|w| w.lines().map(str::trim).find(|l| !l.is_empty()));
    crate::text::one_line(
        &match what {
            Some(w) => format!("{name}: {w}"),
            None => name.to_owned(),
        },
        120,
    )
}
