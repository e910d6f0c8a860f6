//! Codex's `exec --json` events, read into the loop's [`StreamSummary`].
//!
//! What a run prints (captures in `tests/fixtures/codex/`, CLI 0.169.0):
//! `thread.started {thread_id}` first and only there (the id to resume), `turn.started`,
//! `item.started` / `item.completed` (an `agent_message`'s `text`, a `command_execution`'s
//! `command`, a `file_change`, a warning item of type `error`), then `turn.completed {usage}`
//! or `turn.failed {error.message}`; `error` events say what the CLI is retrying
//! (`Reconnecting... 2/5 (…)`). `usage` is the thread's total so far, not the run's.

use serde_json::Value;

use crate::agent::output::Dialect;
use crate::agent::output::{ResultEvent, StreamSummary};

/// What Codex's events mean (each stands alone: nothing is remembered between them).
#[derive(Debug, Default)]
pub(crate) struct CodexStream;

impl Dialect for CodexStream {
    fn event(&mut self, s: &mut StreamSummary, obj: &serde_json::Map<String, Value>) {
        if let Some(kind) = obj.get("type").and_then(Value::as_str) {
            event(s, kind, obj);
        }
    }
}

/// Reads one Codex event of type `kind` into `s`.
fn event(s: &mut StreamSummary, kind: &str, obj: &serde_json::Map<String, Value>) {
    match kind {
        "thread.started" => {
            if let Some(id) = obj.get("thread_id").and_then(Value::as_str) {
                s.session_id = Some(id.to_owned());
            }
        }
        "item.started" | "item.completed" => {
            if let Some(Value::Object(item)) = obj.get("item") {
                self::item(s, kind == "item.completed", item);
            }
        }
        "turn.completed" => {
            let usage = obj.get("usage");
            let field = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
            if let (Some(input), Some(output)) = (field("input_tokens"), field("output_tokens")) {
                s.session_tokens = Some(input + output);
            }
            s.result = Some(ResultEvent {
                subtype: "success".to_owned(),
                result: Some(s.last_assistant_text.clone().unwrap_or_default()),
                session_id: s.session_id.clone(),
                ..ResultEvent::default()
            });
            s.last_activity = Some(format!(
                "result: {}",
                crate::agent::verdict::ended_with(
                    s.last_assistant_text.as_deref().unwrap_or_default()
                )
            ));
        }
        "turn.failed" => {
            let message = obj
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the turn failed")
                .to_owned();
            s.last_activity = Some(crate::text::one_line(&message, 120));
            s.result = Some(ResultEvent {
                subtype: "error_during_execution".to_owned(),
                is_error: true,
                errors: vec![message],
                session_id: s.session_id.clone(),
                ..ResultEvent::default()
            });
        }
        "error" => {
            // What the CLI retries (`Reconnecting... 1/5 (…)`), or its last word before
            // `turn.failed`: what a run killed before its end was waiting on.
            if let Some(m) = obj.get("message").and_then(Value::as_str) {
                s.api_error = Some(m.to_owned());
            }
        }
        _ => {}
    }
}

/// An item as it starts or completes: the agent's text, a command, a file change.
fn item(s: &mut StreamSummary, completed: bool, item: &serde_json::Map<String, Value>) {
    let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::trim);
    match item.get("type").and_then(Value::as_str) {
        Some("agent_message") if completed => {
            if let Some(t) = text("text").filter(|t| !t.is_empty()) {
                s.last_assistant_text = Some(t.to_owned());
                s.last_activity = t
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .map(|l| crate::text::one_line(l, 120));
            }
        }
        Some("command_execution") => {
            if let Some(c) = text("command") {
                s.last_activity = Some(crate::text::one_line(&format!("exec: {c}"), 120));
            }
        }
        Some("file_change") => {
            let paths: Vec<&str> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("path").and_then(Value::as_str))
                .collect();
            let edit = crate::text::one_line(&format!("edit: {}", paths.join(", ")), 120);
            if completed {
                // A change Codex made to the project's files.
                s.writes.push(edit.clone());
            }
            s.last_activity = Some(edit);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn read_stream_file(path: &Path) -> std::io::Result<crate::agent::StreamSummary> {
        crate::agent::read_output(crate::m1::settings::AgentKind::Codex, path)
    }

    fn fixture(stem: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex")
            .join(format!("{stem}.stdout.jsonl"))
    }

    #[test]
    fn a_real_codex_run_gives_its_thread_answer_and_the_threads_tokens() {
        let s = read_stream_file(&fixture("success")).unwrap();
        assert_eq!(
            s.session_id.as_deref(),
            Some("01a20c3f-bf4f-7683-8fe8-c069783ccdc9")
        );
        let r = s.result.as_ref().unwrap();
        assert!(!r.is_error);
        assert_eq!(
            r.result.as_deref(),
            Some("I tried to make the file.\nSTEP_DONE: made it")
        );
        assert_eq!(s.session_tokens, Some(214));
        assert_eq!(s.cost_usd, None);
        assert_eq!(s.garbage_lines, 0);
        // Resumed: the thread's total, the first run's included.
        let resumed = read_stream_file(&fixture("resumed")).unwrap();
        assert_eq!(resumed.session_id, s.session_id);
        assert_eq!(resumed.session_tokens, Some(428));
    }

    #[test]
    fn a_failed_turn_is_an_error_result_with_the_clis_words() {
        let s = read_stream_file(&fixture("usage-limit")).unwrap();
        let r = s.result.as_ref().unwrap();
        assert!(r.is_error);
        assert!(
            r.errors[0].starts_with("You’ve hit your usage limit."),
            "{r:?}"
        );
        let s = read_stream_file(&fixture("server-error-500")).unwrap();
        assert!(s.api_error.unwrap().contains("high demand"));
    }
}
