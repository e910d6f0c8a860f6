//! What the simulated agent does on each call: a JSON scenario
//! `{"plan": ACTION, "steps": {"2": [ACTION, ...]}, "review": ACTION, "default": ACTION}`.
//!
//! Step 0 (the planning call) uses `plan`; step N uses `steps["N"]`, indexed by how many
//! times that step has been called in its loop (the count lives in a state directory, one
//! directory per `LOOP_ID`, so it survives the process and starts again for another loop);
//! past the end the last entry repeats. The format is documented in the crate's README. Anything not listed uses `default`.
//! A reviewer's call (`LOOP_REVIEW` set) uses `review`, indexed by the reviews of its step,
//! when the scenario has one; else it is a call of its step like any other, except that an
//! action with no `result` answers it with an approval (`REVIEW_APPROVE: …`), as a step's
//! answers `STEP_DONE: …`.
//!
//! A scenario can also be built in code ([`Scenario::new`], [`Action::done`] and the like, in
//! `build`) and written out as this JSON: the same structs read and write it, so the two
//! cannot drift apart.

mod build;

pub use build::IntoActions;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call's behaviour. Every field is optional; written out, a field left at its default
/// is left out, as a scenario written by hand would.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each flag is a field of the JSON scenario format, set independently of the others"
)]
pub struct Action {
    /// Time to "work" before the result.
    #[serde(skip_serializing_if = "is_zero")]
    pub sleep_ms: u64,
    /// While working (or hanging), emit an assistant event this often.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    /// Emit `system/init`, then never finish.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hang: bool,
    /// `system/api_retry` events right after `system/init`, one per retry of a failed request,
    /// e.g. `{"error_status": 401, "error": "authentication_failed"}` (as in the capture
    /// `auth-401-retrying-killed-2.1.197`); with `hang`, the CLI is still retrying.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_retries: Vec<serde_json::Map<String, Value>>,
    /// As Gemini CLI, the time between two of `api_retries` on stderr (none: all at once), as
    /// the CLI waits before each retry: a storm of retries that lasts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_retry_every_ms: Option<u64>,
    /// Exit code; default 0, or 1 when `is_error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// The result text; `{step}`, `{attempt}` and `{session_id}` are filled in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Default `success` (as the CLI says even for API errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_error_status: Option<u16>,
    /// Written to stderr right after start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Files to create (or bump), relative to the working directory: as Claude Code, each is a
    /// `Bash` call (`touch PATH`), which a call not offered `Bash` (`--tools`) cannot make.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub touch: Vec<String>,
    /// Files to write: as Claude Code, each is a `Write` call, which a call not offered
    /// `Write` (`--tools`) cannot make.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<WriteFile>,
    /// Shell commands the agent runs (as its Bash tool would), with `sh -c` in the working
    /// directory, one after another after the files are written; whether each succeeds
    /// changes nothing else (a command can say what it saw in a file of its own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bash: Vec<String>,
    /// An older CLI that offers every tool whatever `--tools` says: its `touch` and `write`
    /// calls run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignores_tools: bool,
    /// Leave a `sleep N` behind in the call's process group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grandchild_sleep_s: Option<f64>,
    /// Default 0.01.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Tools reported as silently denied: a tool's name (`Write`), or `Bash: COMMAND` for a
    /// command (in the denial's `tool_input`), which is not denied when `--allowedTools` covers
    /// it (`Bash`, `Bash(COMMAND)`, `Bash(PREFIX:*)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<String>,
    /// Emitted as a `rate_limit_event`'s `rate_limit_info`, e.g.
    /// `{"status":"rejected","resetsAt":1795324010}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<serde_json::Map<String, Value>>,
    /// The account's usage limit is spent until this moment (Unix seconds): every call before
    /// it is refused as the CLI refuses it, naming the reset as the CLI prints it, a
    /// wall-clock minute cut down (a reset at 21:43:48 is `9:43 PM`): Codex's `try again at
    /// 9:43 PM.` in the machine's zone, Claude Code's `resets 9:43pm (UTC)` with the moment
    /// itself in a rejected `rate_limit_event`. A call at or after it does the rest of the
    /// action. So a wake at the printed minute, before the moment, meets a second refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_until: Option<i64>,
    /// Replay a real capture: `<stem>.stdout.jsonl` and `<stem>.stderr`, verbatim. A relative
    /// stem is taken from the scenario file's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixture: Option<String>,
    /// End without a result event.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_result: bool,
    /// Compact the context while working, as the CLI does when it fills up: run the
    /// `PreCompact` hooks of the call's `--settings`, then its `SessionStart` hooks with source
    /// `compact`, and note what they printed in `<CLAUDE_SIM_LOG>.hooks.jsonl`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compact: bool,
    /// The compaction fails, with this reason (as `Not enough messages to compact.`): the
    /// `PreCompact` hooks still run, nothing else does, and no `compact_boundary` follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_error: Option<String>,
    /// Leave a background task (this description) running when answering: the stream shows
    /// it started, and, after the result, stopped by the CLI (as in the capture
    /// `background-task-stopped-after-result`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background_task: Option<String>,
    /// Tokens the session's context holds when the answer is written: the answer's usage
    /// reads them from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    /// The model the answer and the result's `modelUsage` name (default: `--model`, else
    /// `claude-sim`), e.g. `claude-opus-4-8[1m]`, the 1M variant 2.1.197 runs a fresh session
    /// with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The context window `modelUsage` reports (default 200,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Tools the agent calls that the CLI has removed (as a deny rule in the user's settings
    /// does): each call gets the CLI's `No such tool available` error `tool_result`, the
    /// answer goes on as given, and `permission_denials` stays empty, as in the capture
    /// `tool-removed-by-deny-rule`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable_tools: Vec<String>,
    /// Before its answer, the agent asks with `AskUserQuestion`: this question, these
    /// options. Offered only with a permission host (`--permission-prompt-tool`); a
    /// `PreToolUse` hook of the call's `--settings` that defers it ends the run there
    /// (`stop_reason: "tool_deferred"`), and `--resume` without a prompt asks the hook again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<(String, Vec<String>)>,
    /// After the work and the answer, but before the result event, the process kills itself
    /// with this signal: an agent killed from outside (an OOM kill, a stray `kill -9`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killed_by_signal: Option<i32>,
    /// On SIGTERM, end only this long after it (with 143, as a process the signal killed
    /// reports), as an agent that first writes its session out does: whoever stops the call
    /// waits that long for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigterm_exit_ms: Option<u64>,
    /// After the replayed capture (`fixture`), stay this long before exiting: a run whose
    /// stream its watcher reads while the process still runs, as on a busy machine.
    #[serde(skip_serializing_if = "is_zero")]
    pub linger_ms: u64,
}

/// A file an action writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    pub path: String,
    pub text: String,
    /// Append instead of replacing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
}

/// For `skip_serializing_if`: a count or time left at its default.
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A parsed scenario file. Written out (`serde_json::to_string`), it is the file's JSON:
/// every entry a list, the step numbers as keys, what is empty left out.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Scenario {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Action>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<u32, Vec<Action>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub review: Vec<Action>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Action>,
    /// Where relative fixture stems are found: where the file was read, not part of it.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

impl Scenario {
    /// Reads and checks a scenario file; the error says which entry is wrong and why.
    ///
    /// # Errors
    /// When the file cannot be read or does not have the scenario's shape.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
        let mut s = Self::parse(&text).map_err(|e| format!("scenario {}: {e}", path.display()))?;
        s.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(s)
    }

    /// Parses scenario JSON.
    ///
    /// # Errors
    /// A message naming the wrong entry.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(mut top) = value else {
            return Err(
                "must be a JSON object {\"plan\", \"steps\", \"review\", \"default\"}".to_owned(),
            );
        };
        let mut s = Self::default();
        if let Some(plan) = top.remove("plan") {
            s.plan = actions(plan, "plan")?;
        }
        if let Some(review) = top.remove("review") {
            s.review = actions(review, "review")?;
        }
        if let Some(default) = top.remove("default") {
            s.default = Some(action(default, "default")?);
        }
        match top.remove("steps") {
            None => {}
            Some(Value::Object(steps)) => {
                for (key, entries) in steps {
                    let n: u32 = key
                        .parse()
                        .map_err(|_| format!("steps: key \"{key}\" is not a step number"))?;
                    s.steps
                        .insert(n, actions(entries, &format!("steps.{key}"))?);
                }
            }
            Some(_) => return Err("steps: must be an object {\"N\": [ACTION, ...]}".to_owned()),
        }
        if let Some(key) = top.keys().next() {
            return Err(format!(
                "unknown key \"{key}\" (expected plan, steps, review, default)"
            ));
        }
        Ok(s)
    }

    /// Which calls a call is counted among, for [`next_call`]: its step's, or, for a reviewer
    /// when the scenario lists `review`, the reviews of its step.
    #[must_use]
    pub fn counter(&self, step: u32, review: bool) -> String {
        if review && !self.review.is_empty() {
            format!("review-{step}")
        } else {
            format!("step-{step}")
        }
    }

    /// The action for the `call`-th call (1-based) of `step` (0 = planning), or of its reviews
    /// when `review` (see [`Scenario::counter`]).
    #[must_use]
    pub fn select(&self, step: u32, call: u32, review: bool) -> Action {
        let listed = if review && !self.review.is_empty() {
            Some(&self.review)
        } else if step == 0 {
            Some(&self.plan)
        } else {
            self.steps.get(&step)
        };
        match listed.filter(|l| !l.is_empty()) {
            Some(list) => {
                let index = usize::try_from(call.max(1) - 1).unwrap_or(usize::MAX);
                list[index.min(list.len() - 1)].clone()
            }
            None => self.default.clone().unwrap_or_default(),
        }
    }
}

/// An entry: one ACTION or a list of them.
fn actions(v: Value, at: &str) -> Result<Vec<Action>, String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| action(item, &format!("{at}[{i}]")))
            .collect(),
        one => Ok(vec![action(one, at)?]),
    }
}

fn action(v: Value, at: &str) -> Result<Action, String> {
    serde_json::from_value(v).map_err(|e| format!("{at}: {e}"))
}

/// Counts one more call among `counter`'s ([`Scenario::counter`]) in `state_dir` and returns
/// its number (1 for the first). The count file is locked while it is updated, so concurrent
/// calls get distinct numbers.
///
/// # Errors
/// When the state directory or count file cannot be used.
pub fn next_call(state_dir: &Path, counter: &str) -> std::io::Result<u32> {
    std::fs::create_dir_all(state_dir)?;
    let path = state_dir.join(format!("{counter}.calls"));
    let mut file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let n = text.trim().parse::<u32>().unwrap_or(0).saturating_add(1);
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(format!("{n}\n").as_bytes())?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_by_step_and_call() {
        let s = Scenario::parse(
            r#"{"plan": {"result": "P"},
                "steps": {"2": [{"result": "a"}, {"result": "b"}]},
                "default": {"result": "D"}}"#,
        )
        .unwrap();
        let r = |step, call| s.select(step, call, false).result.unwrap();
        assert_eq!(r(0, 1), "P");
        assert_eq!(r(0, 5), "P");
        assert_eq!(r(2, 1), "a");
        assert_eq!(r(2, 2), "b");
        assert_eq!(r(2, 3), "b");
        assert_eq!(r(1, 1), "D");
    }

    #[test]
    fn a_reviewer_answers_from_review_when_listed_else_as_a_call_of_its_step() {
        let s = Scenario::parse(
            r#"{"steps": {"2": [{"result": "a"}, {"result": "b"}]},
                "review": [{"result": "R1"}, {"result": "R2"}]}"#,
        )
        .unwrap();
        assert_eq!(s.select(2, 1, true).result.unwrap(), "R1");
        assert_eq!(s.select(2, 9, true).result.unwrap(), "R2");
        assert_eq!(s.select(2, 1, false).result.unwrap(), "a");
        assert_eq!(s.counter(2, true), "review-2");
        assert_eq!(s.counter(2, false), "step-2");
        let without =
            Scenario::parse(r#"{"steps": {"2": [{"result": "a"}, {"result": "b"}]}}"#).unwrap();
        assert_eq!(without.counter(2, true), "step-2");
        assert_eq!(without.select(2, 2, true).result.unwrap(), "b");
    }

    #[test]
    fn errors_name_the_entry() {
        let e = Scenario::parse(r#"{"steps": {"2": [{}, {"slep_ms": 1}]}}"#).unwrap_err();
        assert!(e.starts_with("steps.2[1]: unknown field `slep_ms`"), "{e}");
        let e = Scenario::parse(r#"{"steps": {"two": {}}}"#).unwrap_err();
        assert!(e.contains("\"two\" is not a step number"), "{e}");
        let e = Scenario::parse(r#"{"plans": {}}"#).unwrap_err();
        assert!(e.contains("unknown key \"plans\""), "{e}");
    }

    #[test]
    fn call_numbers_persist_per_step() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(next_call(dir.path(), "step-1").unwrap(), 1);
        assert_eq!(next_call(dir.path(), "step-1").unwrap(), 2);
        assert_eq!(next_call(dir.path(), "step-2").unwrap(), 1);
        assert_eq!(next_call(dir.path(), "step-1").unwrap(), 3);
    }
}
