//! The hooks of a call's `--settings` that the simulation runs: `SessionStart` as a session
//! starts or resumes, those of a compaction, and a question's `PreToolUse`.

use serde_json::{Value, json};

/// A compaction, as the real CLI does it (captures `compact-manual`,
/// `compact-failed-not-enough-messages-2.1.197`): `PreCompact` hooks first; then, when it
/// succeeds, `SessionStart` hooks with source `compact`, and the stream's `compact_boundary`;
/// when it fails (`error`), neither, and the stream says `compact_result` `failed`. Each hook
/// gets its input on stdin; what it printed is noted. The events for the stream, in order.
pub(crate) fn compact(settings: Option<&str>, session_id: &str, error: Option<&str>) -> Vec<Value> {
    let status = |extra: Value| {
        let mut v = json!({"type": "system", "subtype": "status", "session_id": session_id,
                           "uuid": uuid::Uuid::new_v4().to_string()});
        if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(extra.clone());
        }
        v
    };
    let mut events = vec![status(json!({"status": "compacting"}))];
    run_hooks(settings, session_id, "PreCompact", ("trigger", "auto"));
    if let Some(why) = error {
        events.push(status(
            json!({"status": null, "compact_result": "failed", "compact_error": why}),
        ));
        return events;
    }
    run_hooks(settings, session_id, "SessionStart", ("source", "compact"));
    events.push(status(json!({"status": null, "compact_result": "success"})));
    events.push(json!({"type": "system", "subtype": "compact_boundary",
        "session_id": session_id, "uuid": uuid::Uuid::new_v4().to_string(),
        "compact_metadata": {"trigger": "auto", "pre_tokens": 150_000, "post_tokens": 3_000}}));
    events
}

/// A session starting (`source` `startup`) or resumed (`resume`), as the real CLI does it
/// (capture `compact-manual`): each `SessionStart` hook of `settings` whose matcher takes
/// `source` runs before `system/init`, announced in the stream by `hook_started` and
/// `hook_response` events. The events, in order.
pub(crate) fn session_start(settings: Option<&str>, session_id: &str, source: &str) -> Vec<Value> {
    let Some(settings) = read_settings(settings) else {
        return Vec::new();
    };
    let input = json!({"session_id": session_id, "hook_event_name": "SessionStart",
                       "source": source});
    let mut events = Vec::new();
    for command in commands(&settings, "SessionStart", source) {
        let id = uuid::Uuid::new_v4().to_string();
        let name = format!("SessionStart:{source}");
        let base = json!({"type": "system", "hook_id": id, "hook_name": name,
                          "hook_event": "SessionStart", "session_id": session_id});
        let mut started = base.clone();
        started["subtype"] = json!("hook_started");
        started["uuid"] = json!(uuid::Uuid::new_v4().to_string());
        events.push(started);
        let out = run_hook(&command, &input);
        note_hook(
            &json!({"hook": "SessionStart", "source": source, "command": command,
                          "stdout": out}),
        );
        let mut response = base;
        response["subtype"] = json!("hook_response");
        response["output"] = json!(out);
        response["stdout"] = json!(out);
        response["stderr"] = json!("");
        response["exit_code"] = json!(0);
        response["outcome"] = json!("success");
        response["uuid"] = json!(uuid::Uuid::new_v4().to_string());
        events.push(response);
    }
    events
}

/// The settings of a call: the file `settings` names, or `settings` itself as JSON.
fn read_settings(settings: Option<&str>) -> Option<Value> {
    let settings = settings?;
    let text = std::fs::read_to_string(settings).unwrap_or_else(|_| settings.to_owned());
    serde_json::from_str::<Value>(&text).ok()
}

/// The commands of `settings`' `event` hooks whose matcher takes `what` (none, `*`, or `what`
/// itself, or one of `a|b`).
fn commands(settings: &Value, event: &str, what: &str) -> Vec<String> {
    settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["matcher"]
                .as_str()
                .is_none_or(|m| m.is_empty() || m == "*" || m.split('|').any(|w| w == what))
        })
        .flat_map(|m| m["hooks"].as_array().into_iter().flatten())
        .filter_map(|h| h["command"].as_str().map(str::to_owned))
        .collect()
}

/// Runs the `event` hooks of `settings` (a file or inline JSON) whose matcher takes what
/// `extra` says (a compaction's `trigger`, a session's `source`), noting what each printed.
fn run_hooks(settings: Option<&str>, session_id: &str, event: &str, extra: (&str, &str)) {
    let Some(settings) = read_settings(settings) else {
        return;
    };
    let input = json!({"session_id": session_id, "hook_event_name": event, extra.0: extra.1});
    for command in commands(&settings, event, extra.1) {
        let out = run_hook(&command, &input);
        note_hook(&json!({"hook": event, extra.0: extra.1, "command": command, "stdout": out}));
    }
}

/// Runs the `PreToolUse` hooks of `settings` whose matcher names `tool` for its call
/// `tool_use_id` with `input`, noting what each printed; the decision of the last that gave one
/// (its `hookSpecificOutput`), if any.
pub(crate) fn pre_tool_use(
    settings: Option<&str>,
    session_id: &str,
    tool: &str,
    tool_use_id: &str,
    input: &Value,
) -> Option<Value> {
    let settings = settings?;
    let text = std::fs::read_to_string(settings).unwrap_or_else(|_| settings.to_owned());
    let settings = serde_json::from_str::<Value>(&text).ok()?;
    let call = json!({"session_id": session_id, "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": input, "tool_use_id": tool_use_id});
    let commands: Vec<String> = settings["hooks"]["PreToolUse"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["matcher"].as_str().is_none_or(|m| m == tool || m == "*"))
        .flat_map(|m| m["hooks"].as_array().into_iter().flatten())
        .filter_map(|h| h["command"].as_str().map(str::to_owned))
        .collect();
    let mut decision = None;
    for command in commands {
        let out = run_hook(&command, &call);
        note_hook(&json!({"hook": "PreToolUse", "command": command, "stdout": out}));
        if let Ok(v) = serde_json::from_str::<Value>(out.trim())
            && v["hookSpecificOutput"].is_object()
        {
            decision = Some(v["hookSpecificOutput"].clone());
        }
    }
    decision
}

fn run_hook(command: &str, input: &Value) -> String {
    use std::io::Write as _;
    let Ok(mut child) = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    else {
        return String::new();
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.to_string().as_bytes());
    }
    child
        .wait_with_output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn note_hook(line: &Value) {
    use std::io::Write as _;
    let Some(log) = std::env::var_os("CLAUDE_SIM_LOG") else {
        return;
    };
    let mut path = std::path::PathBuf::from(log).into_os_string();
    path.push(".hooks.jsonl");
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
}
