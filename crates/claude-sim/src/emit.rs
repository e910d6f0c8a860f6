//! The simulated agent's stream-json events, shaped like the real CLI's (see the capture
//! `success.stdout.jsonl`): `system/init`, `assistant` (text or a tool call), `user` (a tool's
//! error result), `rate_limit_event`, `result`.

use serde_json::{Value, json};

/// The version the simulation claims, so a log shows at once that no real CLI ran.
pub(crate) const VERSION: &str = "2.1.330-sim";

const TOOLS: [&str; 10] = [
    "Task",
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "NotebookEdit",
    "Read",
    "WebFetch",
    "WebSearch",
    "Write",
];

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The first event of every call.
#[must_use]
pub(crate) fn init(session_id: &str, cwd: &str, model: &str, permission_mode: &str) -> Value {
    json!({
        "type": "system", "subtype": "init", "cwd": cwd, "session_id": session_id,
        "tools": TOOLS, "mcp_servers": [], "model": model, "permissionMode": permission_mode,
        "slash_commands": [], "apiKeySource": "none", "claude_code_version": VERSION,
        "output_style": "default", "agents": [], "skills": [], "plugins": [], "uuid": uuid(),
    })
}

/// An assistant message with one text block. An API error's message is synthetic in the
/// real CLI, with the error's status attached.
#[must_use]
pub(crate) fn assistant(
    session_id: &str,
    model: &str,
    text: &str,
    api_error: Option<u16>,
) -> Value {
    let mut v = json!({
        "type": "assistant",
        "message": {
            "id": format!("msg_sim_{}", &uuid()[..8]), "type": "message", "role": "assistant",
            "model": if api_error.is_some() { "<synthetic>" } else { model },
            "content": [{"type": "text", "text": text}],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        },
        "parent_tool_use_id": null, "session_id": session_id, "uuid": uuid(),
    });
    if let Some(status) = api_error {
        v["is_api_error_message"] = json!(true);
        v["api_error_status"] = json!(status);
    }
    v
}

/// An assistant message calling `tool` (with empty input) as `tool_use_id`.
#[must_use]
pub(crate) fn tool_use(session_id: &str, model: &str, tool_use_id: &str, tool: &str) -> Value {
    json!({
        "type": "assistant",
        "message": {
            "id": format!("msg_sim_{}", &uuid()[..8]), "type": "message", "role": "assistant",
            "model": model,
            "content": [{"type": "tool_use", "id": tool_use_id, "name": tool, "input": {}}],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        "parent_tool_use_id": null, "session_id": session_id, "uuid": uuid(),
    })
}

/// The CLI's answer to a call of a tool a deny rule removed (real text, CLI 2.1.197).
#[must_use]
pub(crate) fn no_such_tool(tool: &str) -> String {
    format!(
        "<tool_use_error>Error: No such tool available: {tool}. {tool} exists but is not enabled in this context. Use one of the available tools instead.</tool_use_error>"
    )
}

/// The `user` event carrying a successful `tool_result` for `tool_use_id`.
#[must_use]
pub(crate) fn tool_result_ok(session_id: &str, tool_use_id: &str) -> Value {
    json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"tool_use_id": tool_use_id, "type": "tool_result", "content": "Done", "is_error": false}
        ]},
        "parent_tool_use_id": null, "session_id": session_id, "uuid": uuid(),
    })
}

/// The `user` event carrying an error `tool_result` for `tool_use_id`.
#[must_use]
pub(crate) fn tool_result_error(session_id: &str, tool_use_id: &str, text: &str) -> Value {
    let plain = text
        .trim_start_matches("<tool_use_error>")
        .trim_end_matches("</tool_use_error>");
    json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "content": text, "is_error": true, "tool_use_id": tool_use_id}
        ]},
        "parent_tool_use_id": null, "session_id": session_id, "uuid": uuid(),
        "tool_use_result": plain,
    })
}

/// Claude Code's words for a spent limit that resets at `until` (Unix seconds): the minute,
/// cut down, in UTC.
#[must_use]
pub(crate) fn usage_limit(until: i64) -> String {
    let at = chrono::DateTime::from_timestamp(until, 0).unwrap_or_default();
    format!(
        "You've hit your session limit · resets {} (UTC)",
        at.format("%-I:%M%P")
    )
}

/// A `rate_limit_event` carrying `info` (given fields kept, `rateLimitType` defaulted).
#[must_use]
pub(crate) fn rate_limit(session_id: &str, info: &serde_json::Map<String, Value>) -> Value {
    let mut info = info.clone();
    info.entry("rateLimitType").or_insert(json!("five_hour"));
    json!({"type": "rate_limit_event", "rate_limit_info": info,
           "uuid": uuid(), "session_id": session_id})
}

/// The CLI's note that it retries a failed request (`attempt` of 10), carrying `info`'s
/// `error_status` and `error`.
#[must_use]
pub(crate) fn api_retry(
    session_id: &str,
    attempt: u32,
    info: &serde_json::Map<String, Value>,
) -> Value {
    let mut v = json!({"type": "system", "subtype": "api_retry", "attempt": attempt,
        "max_retries": 10, "retry_delay_ms": 500 << attempt.min(6),
        "session_id": session_id, "uuid": uuid()});
    if let Some(v) = v.as_object_mut() {
        v.extend(info.clone());
    }
    v
}

/// What goes into the final `result` event.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResultSpec<'a> {
    pub session_id: &'a str,
    pub subtype: &'a str,
    pub is_error: bool,
    pub api_error_status: Option<u16>,
    pub text: &'a str,
    pub duration_ms: u64,
    /// The model `modelUsage` names, and its context window.
    pub model: &'a str,
    pub context_window: u64,
    /// What this call cost.
    pub cost_usd: f64,
    /// What its session cost so far, this call included.
    pub session_cost_usd: f64,
    pub permission_denials: &'a [String],
}

/// The final event. As in the real CLI, `error_*` subtypes carry `errors` instead of `result`;
/// as in 2.1.330 (capture `cost-resumed-run`), `total_cost_usd` and `modelUsage` are the
/// session's totals and `model_usage_since_last_result` is this call's share.
#[must_use]
pub(crate) fn result(r: &ResultSpec<'_>) -> Value {
    let denials: Vec<Value> = r
        .permission_denials
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let (tool, input) = match denied_command(entry) {
                // As the real CLI lists a denied command (capture `error-max-turns`).
                Some(command) => ("Bash", json!({"command": command, "description": "run it"})),
                None => (entry.as_str(), json!({})),
            };
            json!({"tool_name": tool, "tool_use_id": format!("toolu_sim_{i}"), "tool_input": input})
        })
        .collect();
    let terminal = if r.api_error_status.is_some() {
        "api_error"
    } else {
        "completed"
    };
    let mut v = json!({
        "type": "result", "subtype": r.subtype, "is_error": r.is_error,
        "api_error_status": r.api_error_status, "duration_ms": r.duration_ms,
        "duration_api_ms": r.duration_ms / 2, "num_turns": 1,
        "session_id": r.session_id, "total_cost_usd": r.session_cost_usd,
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 5},
        "permission_denials": denials, "terminal_reason": terminal, "uuid": uuid(),
        "modelUsage": {r.model: {"inputTokens": 10, "outputTokens": 5,
                       "costUSD": r.session_cost_usd, "contextWindow": r.context_window}},
        "result_index": 0,
        "model_usage_since_last_result": {r.model: {"inputTokens": 10, "outputTokens": 5,
                       "costUSD": r.cost_usd, "contextWindow": r.context_window}},
    });
    if r.subtype == "success" {
        v["result"] = json!(r.text);
    } else {
        v["errors"] = json!([r.text]);
    }
    v
}

/// A background task's event: `task_started`, or a `task_updated` / `task_notification`
/// with its new `status`, as the CLI writes them (task id `b_sim`).
#[must_use]
pub(crate) fn task(
    session_id: &str,
    subtype: &str,
    description: &str,
    status: Option<&str>,
) -> Value {
    let mut v = json!({"type": "system", "subtype": subtype, "task_id": "b_sim",
        "tool_use_id": "toolu_sim_bg", "description": description, "uuid": uuid(),
        "session_id": session_id});
    match (subtype, status) {
        ("task_updated", Some(s)) => v["patch"] = json!({"status": s}),
        (_, Some(s)) => v["status"] = json!(s),
        _ => v["task_type"] = json!("local_bash"),
    }
    v
}

/// The command of a scenario's denial `Bash: COMMAND`; `None` for a bare tool name.
#[must_use]
pub(crate) fn denied_command(entry: &str) -> Option<&str> {
    entry
        .strip_prefix("Bash:")
        .map(str::trim)
        .filter(|c| !c.is_empty())
}

/// Whether `--allowedTools` rules cover the denial `entry`, as the real CLI's rules do: the
/// tool's bare name; for a command, `Bash(COMMAND)` exactly or a prefix rule `Bash(PREFIX:*)`.
#[must_use]
pub(crate) fn allowed(entry: &str, rules: &[String]) -> bool {
    let Some(command) = denied_command(entry) else {
        return false;
    };
    rules.iter().any(|rule| {
        let Some(inner) = rule.strip_prefix("Bash(").and_then(|r| r.strip_suffix(')')) else {
            return rule == "Bash";
        };
        match inner.strip_suffix(":*") {
            Some(prefix) => command == prefix || command.starts_with(&format!("{prefix} ")),
            None => command == inner,
        }
    })
}
