//! What a run's output says, in the loop's terms, whichever backend wrote it: the
//! [`StreamSummary`] every backend's reader fills, and the reader itself. An agent CLI prints
//! one JSON object per line; the runner reads that file while the agent is still writing it,
//! and after a kill the last line may be cut anywhere, so the reader is incremental (bytes in
//! any chunking give the same summary) and never fails: a line that is not a JSON object is
//! counted as garbage and skipped. What each object means is the backend's [`Dialect`].

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A run's output read as it grows: the live line and the runner's watch read it between
/// wake-ups.
pub(crate) trait Follow {
    /// Reads what was added since the last call; whether anything was.
    fn poll(&mut self) -> bool;
    /// What the output has said so far.
    fn summary(&self) -> &StreamSummary;
}

/// What one backend's output events mean: each JSON object of a run's output, read into the
/// loop's [`StreamSummary`] (the shared reader splits the lines and skips the garbage).
pub(crate) trait Dialect: std::fmt::Debug + Send {
    /// Reads one event into `s`.
    fn event(&mut self, s: &mut StreamSummary, obj: &serde_json::Map<String, serde_json::Value>);

    /// Whether the CLI says on stderr what the loop must know while it runs (what it is
    /// retrying, when its stdout says nothing meanwhile).
    fn reads_stderr(&self) -> bool {
        false
    }

    /// Reads one line of stderr into `s` (only when [`Dialect::reads_stderr`]).
    fn stderr_line(&mut self, _s: &mut StreamSummary, _line: &str) {}
}

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
    /// that only read (see Claude Code's `touches_no_file`), unless the CLI refused it; a Codex file change.
    /// What tells whether a change to the project during a review can be the reviewer's.
    pub writes: Vec<String>,
    /// The API error the CLI was last retrying (`system/api_retry`, or a synthetic assistant
    /// message carrying an API error), e.g. `429 rate_limit`: what a process killed before
    /// its result was waiting on.
    pub api_error: Option<String>,
    /// The HTTP status of the API error the CLI was last retrying (`system/api_retry`'s
    /// `error_status`).
    pub api_error_status: Option<u16>,
    /// Which of its own attempts at one request the CLI last said failed on a rate limit or
    /// quota (a 429), as a CLI that says so only on stderr counts them (Gemini CLI's `Attempt
    /// 2 failed with status 429`); `None` once the API answers or another error is retried.
    pub rate_limit_attempt: Option<u32>,
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
    /// Tokens this run alone used, as a CLI that counts tokens per run reports them (Gemini
    /// CLI's `result.stats.total_tokens`: a resumed session's earlier runs are not in it).
    pub run_tokens: Option<u64>,
    /// The run's tokens as its result's `usage` counts them (Claude Code): what the model
    /// read (cache reads and writes included) and what it wrote. What a trace reports.
    pub usage_tokens: Option<(u64, u64)>,
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

/// Incremental reader of one backend's output: [`feed`](Self::feed) bytes as they arrive.
pub struct StreamReader {
    pending: Vec<u8>,
    /// Inside an over-long line that was already counted as garbage.
    skipping: bool,
    dialect: Box<dyn Dialect>,
    summary: StreamSummary,
}

impl std::fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader")
            .field("dialect", &self.dialect)
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

impl Default for StreamReader {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamReader {
    /// A reader of Claude Code's stream-json, the default backend's output.
    #[must_use]
    pub fn new() -> Self {
        Self::of(crate::m1::settings::AgentKind::default())
    }

    /// A reader of `backend`'s output.
    #[must_use]
    pub fn of(backend: crate::m1::settings::AgentKind) -> Self {
        Self::with(super::backend_for(backend).dialect())
    }

    pub(crate) fn with(dialect: Box<dyn Dialect>) -> Self {
        Self {
            pending: Vec::new(),
            skipping: false,
            dialect,
            summary: StreamSummary::default(),
        }
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

    /// Ends the stream: a last line without a newline is parsed too (the CLIs always end
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
                self.dialect.event(&mut self.summary, &obj);
            }
            _ => self.summary.garbage_lines += 1,
        }
    }
}

/// Reads a whole output file (a finished task's stdout) in `dialect`.
///
/// # Errors
/// Only when the file cannot be read; its content never makes this fail.
pub(crate) fn read_file(path: &Path, dialect: Box<dyn Dialect>) -> std::io::Result<StreamSummary> {
    let mut file = std::fs::File::open(path)?;
    let mut reader = StreamReader::with(dialect);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(reader.finish());
        }
        reader.feed(&buf[..n]);
    }
}

/// Follows an output file that is still being written, and its stderr where the dialect reads
/// it: each [`Follow::poll`] reads only the bytes added since the last one.
#[derive(Debug)]
pub(crate) struct Follower {
    stdout: Grown,
    /// Its stderr, and the end of a line not ended yet, when the dialect reads it.
    stderr: Option<(Grown, Vec<u8>)>,
    reader: StreamReader,
}

/// A file read as it grows.
#[derive(Debug)]
struct Grown {
    path: PathBuf,
    offset: u64,
}

impl Grown {
    /// What was appended since the last call. A file not there yet reads as empty.
    fn read(&mut self) -> Vec<u8> {
        use std::io::{Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        let n = file.read_to_end(&mut buf).unwrap_or(0);
        buf.truncate(n);
        self.offset += n as u64;
        buf
    }
}

impl Follower {
    #[must_use]
    pub(crate) fn new(stdout: &Path, stderr: &Path, dialect: Box<dyn Dialect>) -> Self {
        let grown = |p: &Path| Grown {
            path: p.to_path_buf(),
            offset: 0,
        };
        Self {
            stdout: grown(stdout),
            stderr: dialect.reads_stderr().then(|| (grown(stderr), Vec::new())),
            reader: StreamReader::with(dialect),
        }
    }
}

impl Follow for Follower {
    /// Reads what was appended since the last call (stderr first: what stdout says after it
    /// is newer); whether anything was.
    fn poll(&mut self) -> bool {
        let mut any = false;
        if let Some((file, partial)) = &mut self.stderr {
            let bytes = file.read();
            any |= !bytes.is_empty();
            partial.extend_from_slice(&bytes);
            while let Some(end) = partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = partial.drain(..=end).collect();
                let r = &mut self.reader;
                r.dialect
                    .stderr_line(&mut r.summary, String::from_utf8_lossy(&line).trim_end());
            }
        }
        let bytes = self.stdout.read();
        self.reader.feed(&bytes);
        any || !bytes.is_empty()
    }

    fn summary(&self) -> &StreamSummary {
        self.reader.summary()
    }
}

/// What the agent did last, from the end of an output file (at most its last 256 KiB), read
/// in `dialect`: for `loop status`, which looks once and must not read an hour of output.
#[must_use]
pub(crate) fn last_activity(path: &Path, dialect: Box<dyn Dialect>) -> Option<String> {
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
    let mut reader = StreamReader::with(dialect);
    reader.feed(whole);
    reader.summary().last_activity.clone()
}

/// The attempt whose failure on a 429 makes a storm (see [`StreamSummary::rate_limit_storm`]):
/// the second. One 429 is often a burst that the CLI's first wait (about 5 s) rides out; a
/// second means the limit still holds after it, and from there Gemini CLI waits 10 s, 20 s,
/// then 30 s at a time, up to about four minutes, while the loop would only say RUNNING. The
/// second failure comes about 5 s into the storm: seen within seconds, and the loop's own
/// backoff (2 s doubling, each wait on record) takes over, resuming the session.
pub(crate) const STORM_ATTEMPT: u32 = 2;

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

    /// Whether the CLI is in a storm of rate-limit retries: it has retried a 429 of one request
    /// [`STORM_ATTEMPT`] times or more, and would go on for minutes, printing nothing on
    /// stdout, while the loop can wait the same out itself and say so.
    #[must_use]
    pub fn rate_limit_storm(&self) -> bool {
        self.result.is_none() && self.rate_limit_attempt.is_some_and(|n| n >= STORM_ATTEMPT)
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
