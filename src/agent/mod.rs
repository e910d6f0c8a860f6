//! The agents a loop drives, behind one interface (`Backend`, in `backend`): how a run is
//! called, how its output is read into the loop's terms, and how its end is classified.
//!
//! What every backend shares lives beside the trait: the call (`call`: the loop's intent, the
//! session, the command), the output (`output`: the summary and its reader), the outcome
//! (`outcome`: the classes of a run's end and the rules they share), the verdict lines that
//! end a step's answer (`verdict`) and the reading of a reset minute (`reset_minute`). Each
//! backend is one folder that implements the trait: Claude Code (`claude/`), Codex
//! (`codex/`), Gemini CLI (`gemini/`). Adding one is a folder, a line in [`backend_for`], and its dialect in the
//! simulated agent.
//!
//! Everything here is pure or reads files only; spawning, timeouts and kills belong to the
//! exec bridge, decisions to the engine. The simulated agent that `loop demo` and the tests
//! run instead of the real CLI is its own crate, `claude-sim`.

mod backend;
mod call;
mod claude;
mod codex;
mod gemini;
mod outcome;
mod output;
mod reset_minute;
mod verdict;

use std::path::Path;

use crate::m1::settings::AgentKind;

pub(crate) use backend::{Backend, Missing, OwnState};
pub(crate) use backend::{Refused, dollar_cap_refused};
pub(crate) use claude::ClaudeCode;
pub(crate) use output::Follow;

pub(crate) use claude::invocation::PERMIT_TOOL;
pub(crate) use claude::permission::tool_of;

pub use call::{AgentConfig, Invocation, READ_ONLY_TOOLS, Session, new_session_id};
pub use outcome::{BugKind, Class, ExitInfo};
pub use output::{DeferredCall, StreamReader, StreamSummary};
pub use verdict::{Verdict, parse_plan, parse_plan_after, verdict, without_verdict};

/// Claude Code's own: the command of a call, and the class of its end (the loop's first
/// backend, whose tests call them directly).
pub use claude::classify::classify;
pub use claude::invocation::invocation;

/// The backend of `kind`: the one list of backends.
#[must_use]
pub(crate) fn backend_for(kind: AgentKind) -> &'static dyn Backend {
    match kind {
        AgentKind::Claude => &ClaudeCode,
        AgentKind::Codex => &codex::Codex,
        AgentKind::Gemini => &gemini::Gemini,
    }
}

/// Every backend, in the order `loop doctor` and `loop status` try them.
pub(crate) fn backends() -> impl Iterator<Item = &'static dyn Backend> {
    AgentKind::ALL.iter().map(|k| backend_for(*k))
}

/// A run's whole output, read as `kind` writes it.
///
/// # Errors
/// When it cannot be read.
pub fn read_output(kind: AgentKind, path: &Path) -> std::io::Result<StreamSummary> {
    backend_for(kind).read_output(path)
}

/// A whole Claude Code stream-json file, read (e.g. a finished task's stdout).
///
/// # Errors
/// Only when the file cannot be read; its content never makes this fail.
pub fn read_stream_file(path: &Path) -> std::io::Result<StreamSummary> {
    read_output(AgentKind::Claude, path)
}

/// A run's output (`stdout`, and its `stderr` where the backend says more there) followed
/// as it grows, read as `kind` writes it.
#[must_use]
pub(crate) fn follow(kind: AgentKind, stdout: &Path, stderr: &Path) -> Box<dyn Follow> {
    backend_for(kind).follow(stdout, stderr)
}

/// What the agent of a run of `kind` did last, from the end of its output.
#[must_use]
pub(crate) fn last_activity(kind: AgentKind, path: &Path) -> Option<String> {
    backend_for(kind).last_activity(path)
}
