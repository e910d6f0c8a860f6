//! `loop hook …`: the Claude Code hooks that keep an agent inside its loop, even after its
//! context was compacted or its session resumed.
//!
//! - `session-start` prints, as the hook's `additionalContext`, the loop's goal, constraints,
//!   plan with what earlier steps reported, the step at hand and how to end it; a person's
//!   session (no `LOOP_STEP`) gets the loop's state only.
//! - `pre-compact` notes that a step's context starts compacting (the runner counts those that
//!   happened, from the stream, in `RESULTS.STEP_N.COMPACTIONS`).
//! - `ask` is the `PreToolUse` hook of the agent's `AskUserQuestion`: it defers the call, so
//!   the run ends and the loop asks the person on a gate with no process alive; once the gate
//!   is decided, the session resumes with no prompt and the hook allows the call with the
//!   person's answer, which the agent reads as the tool's result.
//! - `permission-host` is the stdio MCP server named by `--permission-prompt-tool`: without
//!   one, `claude -p` offers no `AskUserQuestion` at all. It denies whatever it is asked, as a
//!   headless run without it does (the denial still lands in `permission_denials`).
//! - `install` / `uninstall` add (remove) the `SessionStart` hook in the project's
//!   `.claude/settings.local.json`, for people working in the project interactively.
//!
//! A hook must never stand in the agent's way: whatever goes wrong (no loop, M1.md mid-write
//! or invalid), it prints nothing and exits 0.

use std::io::{IsTerminal, Read};
use std::path::Path;

use serde_json::{Value, json};

use crate::exit::Status;
use crate::layout::Layout;
use crate::m1::{M1, Status as LoopStatus};

/// The hook input Claude Code gives on stdin (`source`, `trigger`, …); empty when run by hand.
fn input() -> Value {
    let mut text = String::new();
    if !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().read_to_string(&mut text);
    }
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn read_loop(file: &Path) -> Option<M1> {
    crate::m1::load(file).ok().map(|d| d.view())
}

/// `loop hook session-start`: the loop's state as the session's added context.
#[must_use]
pub(crate) fn session_start(file: &Path) -> Status {
    let _ = input();
    if let Some(text) = context(file) {
        let out = json!({"hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": text,
        }});
        crate::outln!("{out}");
    }
    Status::Ok
}

/// The text `session-start` adds, for a loop that is RUNNING or WAITING.
#[must_use]
pub(crate) fn context(file: &Path) -> Option<String> {
    // A reviewer (which may still load the project's hooks) is told its task by its prompt.
    if std::env::var_os("LOOP_REVIEW").is_some() {
        return None;
    }
    let m = read_loop(file)?;
    if !matches!(m.status, LoopStatus::Running | LoopStatus::Waiting) {
        return None;
    }
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    // A step's own agent knows its step from its environment (the runner sets LOOP_STEP for
    // every call); a session without it is a person's, which gets the loop's state and none of
    // the agent's orders.
    let Some(step) = std::env::var("LOOP_STEP")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
    else {
        return Some(crate::engine::prompt::person_context(
            &m,
            &abs.display().to_string(),
        ));
    };
    let handoff = Layout::of(&abs).handoff(step);
    Some(crate::engine::prompt::session_context(
        &m,
        step,
        &abs.display().to_string(),
        &handoff.display().to_string(),
    ))
}

/// `loop hook pre-compact`: notes in the log that the step's session starts compacting (what
/// happened is counted from the stream: some compactions fail).
#[must_use]
pub(crate) fn pre_compact(file: &Path) -> Status {
    let trigger = input()
        .get("trigger")
        .and_then(Value::as_str)
        .unwrap_or("auto")
        .to_owned();
    let layout = Layout::of(file);
    if let Ok(task) = std::env::var(crate::bridge::TASK_ID_ENV)
        && crate::layout::validate_task_id(&task).is_ok()
        && layout.task_hand_back(&task).is_dir()
    {
        // Into the run's own task directory, the one place of the loop's a confined run may
        // write: the runner words it into the loop's log when it judges the run.
        let _ = crate::decision_log::append_to(
            &layout.task_hooks_log(&task),
            &format!("{} {trigger}", crate::layout::HOOK_COMPACTING),
        );
    }
    Status::Ok
}

/// `loop hook ask`: the `PreToolUse` hook of `AskUserQuestion` in a step's run.
#[must_use]
pub(crate) fn ask(file: &Path) -> Status {
    let call = input();
    // Not a loop's run: say nothing, and the CLI does as it would.
    if std::env::var_os("LOOP_STEP").is_none() {
        return Status::Ok;
    }
    let questions = call
        .pointer("/tool_input/questions")
        .cloned()
        .unwrap_or(Value::Null);
    let answered = call
        .get("tool_use_id")
        .and_then(Value::as_str)
        .and_then(|id| {
            let m = read_loop(file)?;
            crate::engine::gate::answer_to_call(&m, id).and_then(|g| g.choice.clone())
        });
    let mut decision = match answered {
        Some(choice) => {
            // Closed by a hand edit and `loop resume`: the answer is in M1.md, not here.
            let answer = if choice.starts_with('(') {
                "The person answered by editing the loop's M1.md: read its CONSTRAINTS and the \
                 prompt"
                    .to_owned()
            } else {
                choice
            };
            let answers: serde_json::Map<String, Value> = questions
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q.get("question").and_then(Value::as_str))
                .map(|q| (q.to_owned(), Value::String(answer.clone())))
                .collect();
            json!({
                "permissionDecision": "allow",
                "updatedInput": {"questions": questions, "answers": answers},
            })
        }
        None => json!({
            "permissionDecision": "defer",
            "permissionDecisionReason": "the loop asks the person; the step resumes with the answer",
        }),
    };
    decision["hookEventName"] = json!("PreToolUse");
    crate::outln!("{}", json!({ "hookSpecificOutput": decision }));
    Status::Ok
}

/// `loop hook permission-host`: a stdio MCP server (one JSON-RPC message per line) with one
/// tool that denies every permission prompt, saying how a loop allows a tool.
#[must_use]
pub(crate) fn permission_host() -> Status {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(reply) = host_reply(&request) else {
            continue;
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    Status::Ok
}

/// The answer to one MCP request; `None` for a notification.
fn host_reply(request: &Value) -> Option<Value> {
    let id = request.get("id").filter(|id| !id.is_null())?.clone();
    let result = match request.get("method").and_then(Value::as_str) {
        Some("initialize") => json!({
            "protocolVersion": request
                .pointer("/params/protocolVersion")
                .cloned()
                .unwrap_or_else(|| json!("2024-11-05")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "loop", "version": env!("CARGO_PKG_VERSION")},
        }),
        Some("tools/list") => json!({"tools": [{
            "name": crate::agent::PERMIT_TOOL,
            "description": "Answers the permission prompts of a loop's step: denied, as in any headless run",
            "inputSchema": {
                "type": "object",
                "properties": {"tool_name": {"type": "string"}, "input": {"type": "object"}},
                "required": ["tool_name", "input"],
            },
        }]}),
        Some("tools/call") => {
            let tool = request
                .pointer("/params/arguments/tool_name")
                .and_then(Value::as_str)
                .unwrap_or("this tool");
            let verdict = json!({
                "behavior": "deny",
                "message": format!(
                    "{tool} needs a permission a loop's step cannot ask for: the loop allows it \
                     through AGENT.ALLOWED_TOOLS in M1.md"
                ),
            });
            json!({"content": [{"type": "text", "text": verdict.to_string()}]})
        }
        _ => json!({}),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}
