//! `loop hook …`: the Claude Code hooks that keep an agent inside its loop, even after its
//! context was compacted or its session resumed.
//!
//! - `session-start` prints, as the hook's `additionalContext`, the loop's goal, constraints,
//!   plan with what earlier steps reported, the step at hand and how to end it; a person's
//!   session (no `LOOP_STEP`) gets the loop's state only.
//! - `pre-compact` notes that a step's context starts compacting (the runner counts those that
//!   happened, from the stream, in `RESULTS.STEP_N.COMPACTIONS`).
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
        && layout.task(&task).is_dir()
    {
        let step = std::env::var("LOOP_STEP").unwrap_or_default();
        let _ = crate::decision_log::append(
            layout.state_dir(),
            &format!(
                "compaction: step {step}'s session (task {task}) starts compacting its context ({trigger})"
            ),
        );
    }
    Status::Ok
}
