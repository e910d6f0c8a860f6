//! The simulated agent speaking as Gemini CLI: called with Gemini's own flags
//! (`--approval-mode`, `--skip-trust`), it takes `gemini`'s headless flags (refusing the rest
//! in yargs' words, exit 1), reads its prompt from standard input, and answers the same
//! scenario in Gemini's `stream-json` events (`init`, the prompt as a `user` message, `tool_use`
//! and `tool_result`, the answer as `assistant` deltas, `result` with this call's own token
//! stats), as 0.61.0 does. As the real CLI: a session id it already has is refused to
//! `--session-id` and an unknown one to `-r` (exit 42); only `auto_edit` and `yolo` write files
//! (a `write_file` call in another mode is refused, `tool_not_registered`); an API error it
//! retries is said on stderr only; a spent daily quota ends the call with exit 173.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::args::{Refusal, SimArgs};

/// Whether `argv` calls Gemini CLI: only it has these flags.
#[must_use]
pub(crate) fn called_as(argv: &[String]) -> bool {
    argv.iter()
        .any(|a| a == "--approval-mode" || a.starts_with("--approval-mode=") || a == "--skip-trust")
}

/// The approval modes 0.61.0 knows.
pub(crate) const MODES: [&str; 4] = ["default", "auto_edit", "yolo", "plan"];

/// Parses `gemini`'s arguments into the simulation's call: `permission_mode` holds the approval
/// mode, `settings` the last `--policy`.
#[must_use]
pub(crate) fn parse(argv: &[String]) -> (SimArgs, Option<Refusal>) {
    let mut a = SimArgs {
        gemini: true,
        print: true,
        ..SimArgs::default()
    };
    let mut i = 0;
    while i < argv.len() {
        let arg = argv[i].as_str();
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg, None),
        };
        let slot = match name {
            "--skip-trust" => continue,
            "-y" | "--yolo" => {
                a.permission_mode = Some("yolo".into());
                continue;
            }
            "-o" | "--output-format" => &mut a.output_format,
            "--approval-mode" => &mut a.permission_mode,
            "-m" | "--model" => &mut a.model,
            "--session-id" => &mut a.session_id,
            "-r" | "--resume" => &mut a.resume,
            "--policy" => &mut a.settings,
            "-p" | "--prompt" => &mut a.prompt,
            _ => {
                let msg = format!("Unknown arguments: {}", name.trim_start_matches('-'));
                return (a, Some(yargs(&msg)));
            }
        };
        let value = match inline {
            Some(v) => v,
            None if i < argv.len() => {
                i += 1;
                argv[i - 1].clone()
            }
            None => {
                let msg = format!(
                    "Not enough arguments following: {}",
                    name.trim_start_matches('-')
                );
                return (a, Some(yargs(&msg)));
            }
        };
        *slot = Some(value);
    }
    if let Some(mode) = a.permission_mode.as_deref()
        && !MODES.contains(&mode)
    {
        let msg = format!(
            "Invalid values:\n  Argument: approval-mode, Given: \"{mode}\", Choices: \"default\", \
             \"auto_edit\", \"yolo\", \"plan\""
        );
        return (a, Some(yargs(&msg)));
    }
    (a, None)
}

/// A refusal of yargs, which prints its words and the usage and exits 1.
fn yargs(message: &str) -> Refusal {
    Refusal {
        message: format!("{message}\nUsage: gemini [options] [command]"),
        code: 1,
    }
}

/// Whether the call may write files: only in `auto_edit` and `yolo`.
#[must_use]
pub(crate) fn may_write(a: &SimArgs) -> bool {
    matches!(a.permission_mode.as_deref(), Some("auto_edit" | "yolo"))
}

/// Where the simulation notes that session `id` exists (its state directory).
fn session_file(state_dir: Option<&Path>, id: &str) -> Option<PathBuf> {
    state_dir.map(|d| d.join(format!("gemini-session-{id}")))
}

/// The refusal of a call for its session id, in 0.61.0's words: an unknown one to `-r`, one
/// that exists to `--session-id`. `None` when the id may be used; the session is then noted.
pub(crate) fn session_refused(a: &SimArgs, state_dir: Option<&Path>, id: &str) -> Option<String> {
    let file = session_file(state_dir, id)?;
    let known = file.is_file();
    let any = std::fs::read_dir(state_dir?).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("gemini-session-")
        })
    });
    if a.resume.is_some() && !any {
        return Some("Error resuming session: No previous sessions found for this project.".into());
    }
    if a.resume.is_some() && !known {
        return Some(format!(
            "Error resuming session: Invalid session identifier \"{id}\".\n  Searched for \
             sessions in {}.\n  Use --list-sessions to see available sessions, then use \
             --resume {{number}}, --resume {{uuid}}, or --resume latest.",
            state_dir
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ));
    }
    if a.resume.is_none() && a.session_id.is_some() && known {
        return Some(format!(
            "Error starting session: Session ID \"{id}\" already exists. Use --resume to resume \
             it, or provide a different ID."
        ));
    }
    let _ = std::fs::create_dir_all(file.parent().unwrap_or(Path::new(".")))
        .and_then(|()| std::fs::write(&file, ""));
    None
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The first event: the session and the model.
#[must_use]
pub(crate) fn init(session_id: &str, model: &str) -> Value {
    json!({"type": "init", "timestamp": now(), "session_id": session_id, "model": model})
}

/// A message: the prompt (`user`), or a delta of the answer (`assistant`).
#[must_use]
pub(crate) fn message(role: &str, content: &str) -> Value {
    let mut v = json!({"type": "message", "timestamp": now(), "role": role, "content": content});
    if role == "assistant" {
        v["delta"] = json!(true);
    }
    v
}

/// A tool call.
#[must_use]
pub(crate) fn tool_use(id: &str, tool: &str, parameters: &Value) -> Value {
    json!({"type": "tool_use", "timestamp": now(), "tool_name": tool, "tool_id": id,
           "parameters": parameters})
}

/// A tool's answer: done, or refused as 0.61.0 refuses a tool the approval mode does not
/// offer.
#[must_use]
pub(crate) fn tool_result(id: &str, tool: &str, ran: bool) -> Value {
    if ran {
        return json!({"type": "tool_result", "timestamp": now(), "tool_id": id,
                      "status": "success"});
    }
    let said = format!(
        "Tool \"{tool}\" not found. Did you mean one of: \"read_file\", \"grep_search\", \
         \"glob\"?"
    );
    json!({"type": "tool_result", "timestamp": now(), "tool_id": id, "status": "error",
           "output": said, "error": {"type": "tool_not_registered", "message": said}})
}

/// The tokens of one call: this call's alone, as 0.61.0's `stats` count them.
const CALL_TOKENS: (u64, u64) = (1000, 50);

/// The last event of a call that answered.
#[must_use]
pub(crate) fn result_success(model: &str, duration_ms: u64, tool_calls: usize) -> Value {
    let (input, output) = CALL_TOKENS;
    let usage = json!({"total_tokens": input + output, "input_tokens": input,
                       "output_tokens": output, "cached": input / 5, "input": input - input / 5});
    let mut stats = usage.clone();
    stats["duration_ms"] = json!(duration_ms);
    stats["tool_calls"] = json!(tool_calls);
    stats["models"] = json!({ model: usage });
    json!({"type": "result", "timestamp": now(), "status": "success", "stats": stats})
}

/// The last event of a call that failed with `kind` saying `message`.
#[must_use]
pub(crate) fn result_error(model: &str, kind: &str, message: &str) -> Value {
    let zero = json!({"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0,
                      "input": 0});
    let mut stats = zero.clone();
    stats["duration_ms"] = json!(0);
    stats["tool_calls"] = json!(0);
    stats["models"] = json!({ model: zero });
    json!({"type": "result", "timestamp": now(), "status": "error",
           "error": {"type": kind, "message": message}, "stats": stats})
}

/// What the CLI prints on stderr for retry `n` of an API error of `status`.
#[must_use]
pub(crate) fn retry_line(n: usize, status: u64) -> String {
    format!(
        "Attempt {n} failed with status {status}. Retrying with backoff... _ApiError: \
         [{{\"error\":{{\"code\":{status},\"message\":\"Resource has been exhausted (e.g. check \
         quota).\",\"status\":\"RESOURCE_EXHAUSTED\"}}}}]"
    )
}

/// A spent daily quota, as the result's error says it (exit 173: the status 429 cut to a
/// byte).
pub(crate) const DAILY_QUOTA: &str = "[API Error: You have exhausted your daily quota on this \
     model.]\nPlease wait and try again later. To increase your limits, request a quota \
     increase through AI Studio, or switch to another /auth method";

/// The exit code of a call ended by an API error of status 429.
pub(crate) const QUOTA_EXIT: i32 = 429 % 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn gemini_flags_are_read_and_the_rest_refused_as_yargs_does() {
        let line = [
            "--output-format",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            "auto_edit",
            "-r",
            "s-1",
        ];
        assert!(called_as(&argv(&line)));
        let (a, err) = parse(&argv(&line));
        assert_eq!(err, None);
        assert_eq!(a.resume.as_deref(), Some("s-1"));
        assert!(may_write(&a));
        let (a, _) = parse(&argv(&["--approval-mode", "plan", "--policy", "p.toml"]));
        assert!(!may_write(&a));
        assert_eq!(a.settings.as_deref(), Some("p.toml"));
        let (_, err) = parse(&argv(&["--approval-mode", "acceptEdits"]));
        assert!(err.unwrap().message.starts_with("Invalid values:"));
        let (_, err) = parse(&argv(&["--skip-trust", "--max-turns", "3"]));
        assert!(
            err.unwrap()
                .message
                .starts_with("Unknown arguments: max-turns")
        );
        assert!(!called_as(&argv(&["-p", "--output-format", "stream-json"])));
    }
}
