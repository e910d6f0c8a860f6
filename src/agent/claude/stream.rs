//! Claude Code's `--output-format stream-json`, read into the loop's [`StreamSummary`]: the
//! `system/init` event names the session, `assistant` events carry text and tool calls, `user`
//! events the tools' answers (a refusal among them), `rate_limit_event` the usage window, and
//! the final `result` the answer, its cost and its denials.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::agent::output::Dialect;
use crate::agent::output::{DeferredCall, RateLimitInfo, ResultEvent, StreamSummary};

/// What Claude Code's events mean, with what it must remember between them.
#[derive(Debug, Default)]
pub(crate) struct ClaudeStream {
    /// Tool names by `tool_use` id, to name the tool a `tool_result` answers.
    tool_names: HashMap<String, String>,
    /// Background tasks by id: what each is (description, else command).
    background: HashMap<String, String>,
    /// The `tool_use` id of each of [`StreamSummary::writes`], in the same order: a refusal
    /// takes the call back out.
    write_ids: Vec<String>,
}

impl Dialect for ClaudeStream {
    fn event(&mut self, summary: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
        let session = str_field(obj, "session_id");
        // The result and the system events that name the session set it themselves; any other
        // event's session id is taken only while none is known.
        let named = match obj.get("type").and_then(Value::as_str) {
            Some("result") => {
                result(summary, obj);
                true
            }
            Some("system") => self.system(summary, obj, session.clone()),
            Some("rate_limit_event") => {
                if let Some(Value::Object(info)) = obj.get("rate_limit_info") {
                    summary.rate_limit = Some(RateLimitInfo {
                        status: str_field(info, "status").unwrap_or_default(),
                        resets_at: info.get("resetsAt").and_then(as_i64),
                        kind: str_field(info, "rateLimitType"),
                    });
                }
                false
            }
            Some("assistant") => {
                self.assistant(summary, obj);
                false
            }
            Some("user") => {
                let s = &mut *summary;
                for (id, tool) in refused_tools(obj, &self.tool_names) {
                    // A refused call did not run: it wrote nothing.
                    if let Some(i) = id.and_then(|id| self.write_ids.iter().position(|w| *w == id))
                    {
                        self.write_ids.remove(i);
                        s.writes.remove(i);
                    }
                    if !s.unavailable_tools.contains(&tool) {
                        s.unavailable_tools.push(tool);
                    }
                }
                if let Some(result) = s.result.as_mut() {
                    merge_denials(result, &s.unavailable_tools);
                }
                false
            }
            _ => false,
        };
        if !named && summary.session_id.is_none() {
            summary.session_id = session;
        }
    }
}

impl ClaudeStream {
    /// A `system` event; whether it took care of the session id.
    fn system(
        &mut self,
        s: &mut StreamSummary,
        obj: &serde_json::Map<String, Value>,
        session: Option<String>,
    ) -> bool {
        match obj.get("subtype").and_then(Value::as_str) {
            Some("init") => {
                if session.is_some() {
                    s.session_id = session;
                }
                true
            }
            Some("task_started") => {
                if let Some(id) = str_field(obj, "task_id") {
                    let what = str_field(obj, "description")
                        .or_else(|| str_field(obj, "command"))
                        .unwrap_or_else(|| id.clone());
                    self.background.insert(id, what);
                }
                true
            }
            Some("task_updated" | "task_notification") => {
                let status = obj
                    .get("patch")
                    .and_then(|p| p.get("status"))
                    .or_else(|| obj.get("status"))
                    .and_then(Value::as_str);
                if s.result.is_some()
                    && matches!(status, Some("killed" | "stopped"))
                    && let Some(what) =
                        str_field(obj, "task_id").and_then(|id| self.background.get(&id).cloned())
                    && !s.background_stopped.contains(&what)
                {
                    s.background_stopped.push(what);
                }
                true
            }
            Some("api_retry") => {
                let status = obj.get("error_status").and_then(Value::as_u64);
                s.api_error_status = status.and_then(|n| u16::try_from(n).ok());
                let error = str_field(obj, "error");
                s.api_error = Some(match (status, error) {
                    (Some(st), Some(e)) => format!("{st} {e}"),
                    (Some(st), None) => st.to_string(),
                    (None, Some(e)) => e,
                    (None, None) => "an API error".to_owned(),
                });
                false
            }
            Some("compact_boundary") => {
                s.compactions += 1;
                false
            }
            Some("status") => {
                if obj.get("compact_result").and_then(Value::as_str) == Some("failed") {
                    let why = str_field(obj, "compact_error").unwrap_or_else(|| "failed".into());
                    s.compactions_failed.push(why);
                }
                false
            }
            _ => false,
        }
    }

    fn assistant(&mut self, s: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
        if let Some(used) = context_used(obj) {
            s.context_tokens = Some(used);
            // The API answered: whatever the CLI was retrying is behind it.
            s.api_error_status = None;
        }
        if let Some(text) = assistant_text(obj) {
            if obj.get("is_api_error_message").and_then(Value::as_bool) == Some(true) {
                s.api_error = Some(text.clone());
            }
            s.last_activity = first_line(&text).map(str::to_owned);
            s.last_assistant_text = Some(text);
        }
        let calls = tool_calls(obj);
        if let Some(call) = calls.last() {
            s.last_activity = Some(call.clone());
        }
        for ((id, name), call) in tool_uses(obj).into_iter().zip(calls) {
            if !touches_no_file(&name) {
                self.write_ids.push(id.clone());
                s.writes.push(call);
            }
            self.tool_names.insert(id, name);
        }
    }
}

fn result(s: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
    let windows: Vec<(String, u64)> = obj
        .get("modelUsage")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(model, u)| Some((model.clone(), u.get("contextWindow")?.as_u64()?)))
        .collect();
    if !windows.is_empty() {
        s.model_windows = windows;
    }
    if let Some(Value::Object(usage)) = obj.get("usage") {
        let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let read =
            n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens");
        s.usage_tokens = Some((read, n("output_tokens")));
    }
    let mut result = result_event(obj);
    s.cost_usd = match obj
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
    {
        Some(since) => {
            let spent: f64 = since
                .values()
                .filter_map(|u| u.get("costUSD").and_then(Value::as_f64))
                .sum();
            Some(s.cost_usd.unwrap_or(0.0) + spent)
        }
        None => result.total_cost_usd,
    };
    merge_denials(&mut result, &s.unavailable_tools);
    if result.session_id.is_some() {
        s.session_id.clone_from(&result.session_id);
    }
    s.last_activity = Some(if result.is_error {
        "result: an error".to_owned()
    } else {
        format!(
            "result: {}",
            crate::agent::verdict::ended_with(result.result.as_deref().unwrap_or_default())
        )
    });
    s.result = Some(result);
}

fn result_event(obj: &serde_json::Map<String, Value>) -> ResultEvent {
    let errors = match obj.get("errors") {
        Some(Value::Array(items)) => items.iter().map(value_text).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    let denied: Vec<(String, String)> = match obj.get("permission_denials") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|d| match d {
                Value::Object(o) => {
                    let tool = str_field(o, "tool_name")?;
                    let input = o.get("tool_input").cloned().unwrap_or(Value::Null);
                    let rule = super::permission::narrowest(&tool, &input);
                    Some((tool, rule))
                }
                Value::String(name) => Some((name.clone(), name.clone())),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let permission_denials = denied.iter().map(|(tool, _)| tool.clone()).collect();
    let mut denied_rules: Vec<String> = Vec::new();
    for (_, rule) in denied {
        if !denied_rules.contains(&rule) {
            denied_rules.push(rule);
        }
    }
    ResultEvent {
        subtype: str_field(obj, "subtype").unwrap_or_default(),
        is_error: obj
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        api_error_status: obj
            .get("api_error_status")
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok()),
        result: str_field(obj, "result"),
        errors,
        session_id: str_field(obj, "session_id"),
        total_cost_usd: obj.get("total_cost_usd").and_then(Value::as_f64),
        num_turns: obj
            .get("num_turns")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        duration_ms: obj.get("duration_ms").and_then(as_u64_lenient),
        permission_denials,
        denied_rules,
        deferred: match obj.get("deferred_tool_use") {
            Some(Value::Object(d)) => Some(DeferredCall {
                id: str_field(d, "id").unwrap_or_default(),
                name: str_field(d, "name").unwrap_or_default(),
                input: d.get("input").cloned().unwrap_or(Value::Null),
            }),
            _ => None,
        },
    }
}

/// The text blocks of an assistant message, joined; `None` when it has none (tool calls).
fn assistant_text(obj: &serde_json::Map<String, Value>) -> Option<String> {
    let content = obj.get("message")?.get("content")?;
    let texts: Vec<&str> = match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
    if texts.is_empty() {
        None
    } else {
        Some(texts.join("\n"))
    }
}

/// What the model read to write this assistant message: its usage's input tokens, cache
/// reads and cache writes. `None` for the CLI's own `<synthetic>` messages (an API error, a
/// prompt too long): their usage is zero and says nothing of the context.
fn context_used(obj: &serde_json::Map<String, Value>) -> Option<u64> {
    let message = obj.get("message")?;
    if message.get("model").and_then(Value::as_str) == Some("<synthetic>") {
        return None;
    }
    let usage = message.get("usage")?;
    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens"))
}

/// The first non-blank line of a text, for a one-line activity.
fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

/// The input of a tool call that says most about it, by the names Claude Code's tools use.
const TELLING_INPUTS: [&str; 6] = [
    "command",
    "file_path",
    "pattern",
    "url",
    "description",
    "path",
];

/// Each `tool_use` block of an assistant message as `Tool: what` (`Bash: cargo test`,
/// `Edit: src/main.rs`), or the tool's name alone when no input tells more.
fn tool_calls(obj: &serde_json::Map<String, Value>) -> Vec<String> {
    tool_use_blocks(obj)
        .filter_map(|b| {
            let name = b.get("name").and_then(Value::as_str)?;
            let input = b.get("input");
            let what = TELLING_INPUTS
                .iter()
                .find_map(|k| input?.get(k)?.as_str())
                .and_then(first_line);
            Some(match what {
                Some(w) => format!("{name}: {w}"),
                None => name.to_owned(),
            })
        })
        .collect()
}

/// The `tool_use` blocks of an assistant message's content.
fn tool_use_blocks(obj: &serde_json::Map<String, Value>) -> impl Iterator<Item = &Value> {
    obj.get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
}

/// Appends the tools in `unavailable` that the result's denials do not name yet (a removed
/// tool has no narrower rule than its name).
fn merge_denials(result: &mut ResultEvent, unavailable: &[String]) {
    for tool in unavailable {
        if !result.permission_denials.contains(tool) {
            result.permission_denials.push(tool.clone());
        }
        if !result.denied_rules.contains(tool) {
            result.denied_rules.push(tool.clone());
        }
    }
}

/// `(id, name)` of each `tool_use` block of an assistant message that has a name (as
/// [`tool_calls`] lists them, in the same order); a block without an id gets an empty one.
fn tool_uses(obj: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    tool_use_blocks(obj)
        .filter_map(|b| {
            let name = b.get("name").and_then(Value::as_str)?;
            let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
            Some((id.to_owned(), name.to_owned()))
        })
        .collect()
}

/// Claude Code's tools that write no file of the project: those that only read (the
/// reviewer's [`crate::agent::READ_ONLY_TOOLS`]), the web, the session's own to-do list and
/// its questions. Every other tool (Bash, Write, Edit, a subagent, an MCP server's tools) may.
#[must_use]
pub(crate) fn touches_no_file(tool: &str) -> bool {
    const ALSO: [&str; 6] = [
        "LS",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "AskUserQuestion",
        "ExitPlanMode",
    ];
    crate::agent::READ_ONLY_TOOLS.contains(&tool) || ALSO.contains(&tool)
}

/// How the CLI answers a tool call it did not run because the tool may not be used: removed
/// by a deny rule (`No such tool available: Bash. Bash exists but is not enabled in this
/// context.`), or not permitted (`Claude requested permissions to write to F, but you haven't
/// granted it yet.`, `Permission to use Bash with command X has been denied.`). Anchored at
/// the start, so a command's own output that quotes these words is not taken for a refusal;
/// ordinary tool errors (`Exit code 2 ...`, `InputValidationError: ...`, a missing file) never
/// match.
static REFUSAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?s)^\s*(?:<tool_use_error>)?\s*(?:Error:\s*)?(?:No such tool available: (?P<gone>[^\s.<]+)|Permission to use (?P<denied>[^\s.]+).*has been denied|Claude requested permissions? to (?:use (?P<asked>[^\s,]+))?.*haven't granted it yet)",
    )
    .expect("valid regex")
});

/// The calls a `user` event's error `tool_result`s say could not be used: each call's id, and
/// its tool.
fn refused_tools(
    obj: &serde_json::Map<String, Value>,
    tool_names: &HashMap<String, String>,
) -> Vec<(Option<String>, String)> {
    let Some(Value::Array(blocks)) = obj.get("message").and_then(|m| m.get("content")) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .filter(|b| b.get("is_error").and_then(Value::as_bool) == Some(true))
        .filter_map(|b| {
            let text = tool_result_text(b.get("content")?);
            let caps = REFUSAL.captures(&text)?;
            let id = b.get("tool_use_id").and_then(Value::as_str);
            let named = id.and_then(|id| tool_names.get(id).cloned());
            let said = caps
                .name("gone")
                .or_else(|| caps.name("denied"))
                .or_else(|| caps.name("asked"))
                .map(|m| m.as_str().to_owned());
            Some((
                id.map(str::to_owned),
                named
                    .or(said)
                    .unwrap_or_else(|| "an unnamed tool".to_owned()),
            ))
        })
        .collect()
}

/// A `tool_result`'s content: a string, or text blocks.
fn tool_result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn str_field(obj: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a count written as a float is a whole number"
    )]
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

fn as_u64_lenient(v: &Value) -> Option<u64> {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a count written as a float is a whole number ≥ 0"
    )]
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::output::Follow as _;
    use crate::agent::output::{Follower, StreamReader, last_activity, read_file};
    use std::path::Path;

    fn claude() -> Box<dyn Dialect> {
        Box::new(ClaudeStream::default())
    }

    fn read_stream_file(path: &Path) -> std::io::Result<StreamSummary> {
        read_file(path, claude())
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-code")
            .join(format!("{name}.stdout.jsonl"))
    }

    #[test]
    fn a_call_that_writes_is_one_only_when_the_cli_ran_it_in_real_captures() {
        // Plan mode let a Bash call through that an allow rule covered: it ran.
        let ran = read_stream_file(&fixture("reviewer-plan-mode-allow-rule")).unwrap();
        assert_eq!(ran.writes, ["Bash: touch made_by_tool.txt"]);
        // `--tools Read,Grep,Glob`: the same call refused, `No such tool available`.
        let refused = read_stream_file(&fixture("reviewer-tools-read-only")).unwrap();
        assert!(refused.writes.is_empty(), "{:?}", refused.writes);
        assert_eq!(refused.unavailable_tools, ["Bash"]);
        // Tools that only read are no writes.
        let read = read_stream_file(&fixture("success-after-tool-use")).unwrap();
        assert!(
            read.writes
                .iter()
                .all(|w| !w.starts_with("Read") && !w.starts_with("Grep")),
            "{:?}",
            read.writes
        );
    }

    fn activities(stream: &str) -> Vec<Option<String>> {
        let mut reader = StreamReader::with(claude());
        stream
            .lines()
            .map(|l| {
                reader.feed(format!("{l}\n").as_bytes());
                reader.summary().last_activity.clone()
            })
            .collect()
    }

    #[test]
    fn the_latest_activity_follows_tool_calls_text_and_the_result_of_a_real_capture() {
        let text = std::fs::read_to_string(fixture("success-after-tool-use")).unwrap();
        let seen: Vec<String> = activities(&text).into_iter().flatten().collect();
        assert_eq!(seen.first().unwrap(), "Bash: touch created_by_tool.txt");
        assert!(
            seen.contains(&"Hello from mock. n_messages=4".to_owned()),
            "{seen:?}"
        );
        // The mock's answer has no verdict line: it answered, and is never shown as done.
        assert_eq!(seen.last().unwrap(), "result: answered");
    }

    #[test]
    fn background_work_the_cli_stopped_after_the_result_is_read_from_a_real_capture() {
        let stopped = read_stream_file(&fixture("background-task-stopped-after-result")).unwrap();
        assert_eq!(stopped.background_stopped, ["long job"]);
        assert!(stopped.result.is_some_and(|r| !r.is_error));
        let plain = read_stream_file(&fixture("success-after-tool-use")).unwrap();
        assert!(plain.background_stopped.is_empty());
    }

    #[test]
    fn an_auth_error_the_api_then_answered_is_no_longer_failing() {
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":401,"error":"authentication_failed"}"#;
        let answer = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10}}}"#;
        let mut reader = StreamReader::with(claude());
        reader.feed(format!("{retry}\n").as_bytes());
        assert!(reader.summary().auth_failing());
        reader.feed(format!("{answer}\n").as_bytes());
        assert!(!reader.summary().auth_failing());
    }

    #[test]
    fn a_tool_call_without_a_telling_input_is_named_alone_and_text_gives_its_first_line() {
        let call = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"TodoWrite","input":{"todos":[]}}]}}"#;
        let text = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"\n  Reading the code.\nThen more."}]}}"#;
        let got = activities(&format!("{call}\n{text}"));
        assert_eq!(got[0].as_deref(), Some("TodoWrite"));
        assert_eq!(got[1].as_deref(), Some("Reading the code."));
    }

    #[test]
    fn the_follower_reads_only_what_was_appended_and_a_cut_line_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout");
        let mut f = Follower::new(&path, &dir.path().join("stderr"), claude());
        assert!(!f.poll(), "no file yet reads as nothing");
        let call = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Read","input":{"file_path":"src/lib.rs"}}]}}"#;
        std::fs::write(&path, &call[..20]).unwrap();
        assert!(f.poll());
        assert_eq!(
            f.summary().last_activity,
            None,
            "half a line is not an event"
        );
        std::fs::write(&path, format!("{call}\n")).unwrap();
        assert!(f.poll());
        assert_eq!(
            f.summary().last_activity.as_deref(),
            Some("Read: src/lib.rs")
        );
        assert!(!f.poll(), "nothing new");
    }

    #[test]
    fn last_activity_reads_the_tail_of_a_long_stream_past_a_cut_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout");
        let filler = format!(
            "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}\n",
            "x".repeat(1000)
        );
        let call = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"cargo test\nand more"}}]}}"#;
        std::fs::write(&path, format!("{}{call}\n", filler.repeat(600))).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 256 * 1024);
        assert_eq!(
            last_activity(&path, claude()).as_deref(),
            Some("Bash: cargo test")
        );
        assert_eq!(last_activity(&dir.path().join("missing"), claude()), None);
    }
}
