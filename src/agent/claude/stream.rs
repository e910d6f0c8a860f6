//! Reading Claude Code's `--output-format stream-json` output: one JSON object per line.
//!
//! The runner reads the agent's stdout file while the agent is still writing it, and after a
//! kill the last line may be cut anywhere, so the reader is incremental (bytes in any
//! chunking give the same summary) and never fails: a line that is not a JSON object is
//! counted as garbage and skipped.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A line longer than this without a newline is dropped as garbage, so a runaway writer
/// cannot make the reader hold unbounded memory.
const MAX_LINE_BYTES: usize = 64 << 20;

/// What the stream has said so far.
#[derive(Clone, Debug, Default)]
pub struct StreamSummary {
    /// From the `system/init` event, replaced by the final `result`'s (the id to resume).
    pub session_id: Option<String>,
    /// The last `result` event.
    pub result: Option<ResultEvent>,
    /// What this run cost, in dollars. Not the result's `total_cost_usd`: after `--resume`,
    /// 2.1.330 reports the whole session's total there, and only its
    /// `model_usage_since_last_result` says what was spent since the result before (summed
    /// over every result of the run). Older CLIs report each run alone in `total_cost_usd`.
    pub cost_usd: Option<f64>,
    /// The last `rate_limit_event` (the machine-readable usage-limit reset time).
    pub rate_limit: Option<RateLimitInfo>,
    /// The text of the last assistant message that had any text.
    pub last_assistant_text: Option<String>,
    /// What the agent did last, in one short line: a tool call (`Bash: cargo test`), the
    /// first line of its latest text, or the result. Shown live while a step runs.
    pub last_activity: Option<String>,
    /// Tools the agent called but could not use, by the CLI's own answer in the call's
    /// `tool_result` (e.g. `No such tool available: Bash` when a deny rule removed the tool,
    /// which `permission_denials` does not list), deduplicated, in order of first refusal.
    /// They are merged into the result's `permission_denials` too.
    pub unavailable_tools: Vec<String>,
    /// The calls of the run that may have written files, each as `Tool: what` (`Bash: touch
    /// x`, `Write: a.txt`, Codex's `edit: a.txt`): a Claude Code tool call other than those
    /// that only read (see [`touches_no_file`]), unless the CLI refused it; a Codex file change.
    /// What tells whether a change to the project during a review can be the reviewer's.
    pub writes: Vec<String>,
    /// The API error the CLI was last retrying (`system/api_retry`, or a synthetic assistant
    /// message carrying an API error), e.g. `429 rate_limit`: what a process killed before
    /// its result was waiting on.
    pub api_error: Option<String>,
    /// The HTTP status of the API error the CLI was last retrying (`system/api_retry`'s
    /// `error_status`).
    pub api_error_status: Option<u16>,
    /// Compactions of the session's context that happened (`system/compact_boundary`). The
    /// `PreCompact` hook runs before a compaction that may still fail.
    pub compactions: u32,
    /// Why each compaction that was tried failed (`system/status` with `compact_result`
    /// `failed`: `Not enough messages to compact.`, `too_few_groups`, …).
    pub compactions_failed: Vec<String>,
    /// Tokens in the session's context at its last assistant message: that message's input,
    /// cache reads and cache writes (what the model read to answer).
    pub context_tokens: Option<u64>,
    /// Each model of the result's `modelUsage` with its context window: a `[1m]` model's
    /// window is not what a `--resume` gets (see [`StreamSummary::context_pct`]).
    pub model_windows: Vec<(String, u64)>,
    /// Background tasks of the session (a `run_in_background` shell, …) that the CLI stopped
    /// after its result: work the agent left running when it answered, cut off unfinished
    /// (since 2.1.163 `-p` stops them about 5 s after the result). Their descriptions.
    pub background_stopped: Vec<String>,
    /// Tokens the session has used so far, as a CLI that counts tokens, not dollars, reports
    /// them (Codex's `turn.completed.usage`, the thread's total: input and output).
    pub session_tokens: Option<u64>,
    /// Lines that parsed as JSON objects.
    pub events: usize,
    /// Lines that did not (cut, binary, stray prints).
    pub garbage_lines: usize,
}

/// The fields of a `{"type":"result"}` event that decide what happened.
#[derive(Clone, Debug, Default)]
pub struct ResultEvent {
    /// `success`, `error_max_turns`, `error_max_budget_usd`, `error_during_execution`, ...
    /// API errors also say `success`: `is_error` is what tells.
    pub subtype: String,
    pub is_error: bool,
    pub api_error_status: Option<u16>,
    /// The final text (absent for the `error_*` subtypes, which carry `errors`).
    pub result: Option<String>,
    pub errors: Vec<String>,
    pub session_id: Option<String>,
    pub total_cost_usd: Option<f64>,
    pub num_turns: Option<u32>,
    pub duration_ms: Option<u64>,
    /// Tool names of the calls the permission settings silently refused, followed by those
    /// of [`StreamSummary::unavailable_tools`] not listed already.
    pub permission_denials: Vec<String>,
    /// The same calls as the narrowest rules that would allow them (`Bash(chmod +x tool.sh)`,
    /// see [`super::permission::narrowest`]), each once: what a DENIED gate's `allow` allows.
    pub denied_rules: Vec<String>,
    /// The tool call a `PreToolUse` hook deferred (`stop_reason: "tool_deferred"`): the run
    /// ended there, and `--resume` without a prompt runs the hook again for it.
    pub deferred: Option<DeferredCall>,
}

/// A result's `deferred_tool_use`. When one answer made several calls and the hook deferred
/// them all, it names only the last: the others never get a result (captures
/// `tool-deferred-two-calls*`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeferredCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

impl DeferredCall {
    /// An `AskUserQuestion` call's questions, each with its options' labels; `None` for any
    /// other tool, or an input without a question.
    #[must_use]
    pub fn questions(&self) -> Option<Vec<(String, Vec<String>)>> {
        if self.name != "AskUserQuestion" {
            return None;
        }
        let qs: Vec<(String, Vec<String>)> = self.input["questions"]
            .as_array()?
            .iter()
            .filter_map(|q| {
                let text = q["question"].as_str()?.trim().to_owned();
                let options = q["options"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o["label"].as_str().or_else(|| o.as_str()))
                    .map(|l| l.trim().to_owned())
                    .filter(|l| !l.is_empty())
                    .collect();
                (!text.is_empty()).then_some((text, options))
            })
            .collect();
        (!qs.is_empty()).then_some(qs)
    }
}

/// A `rate_limit_event`'s `rate_limit_info`.
#[derive(Clone, Debug)]
pub struct RateLimitInfo {
    /// `allowed`, `allowed_warning` or `rejected`.
    pub status: String,
    /// Epoch seconds when the window resets.
    pub resets_at: Option<i64>,
    /// `rateLimitType`, e.g. `five_hour`, `seven_day`.
    pub kind: Option<String>,
}

/// Incremental stream-json reader: [`feed`](Self::feed) bytes as they arrive.
#[derive(Debug, Default)]
pub struct StreamReader {
    pending: Vec<u8>,
    /// Inside an over-long line that was already counted as garbage.
    skipping: bool,
    /// Tool names by `tool_use` id, to name the tool a `tool_result` answers.
    tool_names: HashMap<String, String>,
    /// Background tasks by id: what each is (description, else command).
    background: HashMap<String, String>,
    /// The `tool_use` id of each of [`StreamSummary::writes`], in the same order: a refusal
    /// takes the call back out.
    write_ids: Vec<String>,
    summary: StreamSummary,
}

impl StreamReader {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes of the stream; complete lines are parsed at once, a trailing
    /// partial line waits for the rest.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(pos);
            rest = &tail[1..];
            if self.skipping {
                self.skipping = false;
                continue;
            }
            if self.pending.is_empty() {
                self.line(line);
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                self.line(&whole);
            }
        }
        if !self.skipping {
            self.pending.extend_from_slice(rest);
            if self.pending.len() > MAX_LINE_BYTES {
                self.pending = Vec::new();
                self.skipping = true;
                self.summary.garbage_lines += 1;
            }
        }
    }

    /// The summary of the complete lines seen so far.
    #[must_use]
    pub fn summary(&self) -> &StreamSummary {
        &self.summary
    }

    /// Ends the stream: a last line without a newline is parsed too (the CLI always ends
    /// lines, so an unterminated one is usually cut by a kill and counts as garbage).
    #[must_use]
    pub fn finish(mut self) -> StreamSummary {
        if !self.skipping && !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.line(&last);
        }
        self.summary
    }

    fn line(&mut self, raw: &[u8]) {
        let trimmed = raw.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        match serde_json::from_slice::<Value>(trimmed) {
            Ok(Value::Object(obj)) => {
                self.summary.events += 1;
                self.event(&obj);
            }
            _ => self.summary.garbage_lines += 1,
        }
    }

    fn event(&mut self, obj: &serde_json::Map<String, Value>) {
        let session = str_field(obj, "session_id");
        // The result and the system events that name the session set it themselves; any other
        // event's session id is taken only while none is known.
        let named = match obj.get("type").and_then(Value::as_str) {
            Some("result") => {
                self.result(obj);
                true
            }
            Some("system") => self.system(obj, session.clone()),
            Some("rate_limit_event") => {
                if let Some(Value::Object(info)) = obj.get("rate_limit_info") {
                    self.summary.rate_limit = Some(RateLimitInfo {
                        status: str_field(info, "status").unwrap_or_default(),
                        resets_at: info.get("resetsAt").and_then(as_i64),
                        kind: str_field(info, "rateLimitType"),
                    });
                }
                false
            }
            Some("assistant") => {
                self.assistant(obj);
                false
            }
            // Codex's `--json` events (`thread.started`, `item.completed`, `turn.failed`, …).
            Some(kind) if kind == "error" || kind.contains('.') => {
                crate::agent::codex::stream::event(&mut self.summary, kind, obj)
            }
            Some("user") => {
                let s = &mut self.summary;
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
        if !named && self.summary.session_id.is_none() {
            self.summary.session_id = session;
        }
    }

    fn result(&mut self, obj: &serde_json::Map<String, Value>) {
        let s = &mut self.summary;
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

    /// A `system` event; whether it took care of the session id.
    fn system(&mut self, obj: &serde_json::Map<String, Value>, session: Option<String>) -> bool {
        let s = &mut self.summary;
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

    fn assistant(&mut self, obj: &serde_json::Map<String, Value>) {
        let s = &mut self.summary;
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

/// Reads a whole stream-json file (e.g. a finished task's stdout).
///
/// # Errors
/// Only when the file cannot be read; its content never makes this fail.
pub fn read_stream_file(path: &Path) -> std::io::Result<StreamSummary> {
    let mut file = std::fs::File::open(path)?;
    let mut reader = StreamReader::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(reader.finish());
        }
        reader.feed(&buf[..n]);
    }
}

/// Follows a stream-json file that is still being written: each [`poll`](Self::poll) reads
/// only the bytes added since the last one.
#[derive(Debug)]
pub(crate) struct StreamFollower {
    path: std::path::PathBuf,
    offset: u64,
    reader: StreamReader,
}

impl StreamFollower {
    #[must_use]
    pub(crate) fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
            reader: StreamReader::new(),
        }
    }

    /// Reads what was appended since the last call; whether anything was. A file not there
    /// yet reads as empty.
    pub(crate) fn poll(&mut self) -> bool {
        use std::io::{Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return false;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut buf = Vec::new();
        let n = file.read_to_end(&mut buf).unwrap_or(0);
        self.offset += n as u64;
        self.reader.feed(&buf[..n]);
        n > 0
    }

    /// The summary of the complete lines read so far.
    #[must_use]
    pub(crate) fn summary(&self) -> &StreamSummary {
        self.reader.summary()
    }
}

/// What the agent did last, from the end of a stream-json file (at most its last 256 KiB):
/// for `loop status`, which looks once and must not read an hour of output.
#[must_use]
pub(crate) fn last_activity(path: &Path) -> Option<String> {
    use std::io::{Seek, SeekFrom};
    const TAIL: u64 = 256 * 1024;
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).ok()?;
    // Begun mid-file: the first line is cut, so reading starts after it.
    let whole = if start > 0 {
        let cut = buf.iter().position(|&b| b == b'\n')?;
        &buf[cut + 1..]
    } else {
        &buf[..]
    };
    let mut reader = StreamReader::new();
    reader.feed(whole);
    reader.summary().last_activity.clone()
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

/// The context window of a model that does not say, and of a `[1m]` model resumed without
/// asking for the 1M variant.
const STANDARD_WINDOW: u64 = 200_000;

impl StreamSummary {
    /// The model's context window, from the result's `modelUsage` (the largest, if several
    /// models answered).
    #[must_use]
    pub fn context_window(&self) -> Option<u64> {
        self.model_windows.iter().map(|(_, w)| *w).max()
    }

    /// Whether the CLI is retrying an authentication error (401, 403) before any result:
    /// it retries a revoked key for about 3 minutes, though only a human can fix it.
    #[must_use]
    pub fn auth_failing(&self) -> bool {
        matches!(self.api_error_status, Some(401 | 403))
    }

    /// How full the context was at the end, in percent of the window a `--resume` of the
    /// session will have, called with `--model resume_model` (`None`: no `--model`). That is not
    /// always the window this run had: 2.1.197 runs a fresh session without `--model` as the 1M
    /// variant (`claude-opus-4-8[1m]`) and its resume as the plain model, with 200,000 tokens
    /// (captures `context-250k-fresh-2.1.197`, `cost-resumed-run-2.1.197`); a resume that
    /// names a `[1m]` model itself keeps it. 2.1.330 names no `[1m]` and keeps its window.
    #[must_use]
    pub fn context_pct(&self, resume_model: Option<&str>) -> Option<u32> {
        let used = self.context_tokens?;
        let keeps_1m = resume_model.is_some_and(|m| m.ends_with("[1m]"));
        let window = self
            .model_windows
            .iter()
            .map(|(model, w)| {
                if model.ends_with("[1m]") && !keeps_1m {
                    STANDARD_WINDOW.min(*w)
                } else {
                    *w
                }
            })
            .filter(|w| *w > 0)
            .max()
            .unwrap_or(STANDARD_WINDOW);
        u32::try_from(used.saturating_mul(100) / window).ok()
    }
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
        let mut reader = StreamReader::new();
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
        let mut reader = StreamReader::new();
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
        let mut f = StreamFollower::new(&path);
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
        assert_eq!(last_activity(&path).as_deref(), Some("Bash: cargo test"));
        assert_eq!(last_activity(&dir.path().join("missing")), None);
    }
}
