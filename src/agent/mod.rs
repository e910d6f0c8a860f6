//! The agents a loop drives, behind one interface (`Backend`): how a run is called, how its
//! output is read into the loop's terms, and how its end is classified. Claude Code
//! (`ClaudeCode`, `claude/`) is the first backend; the verdict lines that end a step's answer
//! (`verdict`) are the loop's own, whatever the agent.
//!
//! Everything here is pure or reads files only; spawning, timeouts and kills belong to the
//! exec bridge, decisions to the engine. The simulated agent that `loop demo` and the tests
//! run instead of the real CLI is its own crate, `claude-sim`.

mod backend;
mod claude;
mod codex;
mod reset_minute;
mod verdict;

pub(crate) use backend::{Backend, Follow};
pub(crate) use backend::{Refused, dollar_cap_refused};
pub(crate) use claude::ClaudeCode;
pub(crate) use codex::Codex;

pub(crate) use claude::invocation::PERMIT_TOOL;
pub(crate) use claude::permission::tool_of;
pub(crate) use claude::stream::last_activity;

pub use claude::classify::{BugKind, Class, ExitInfo, classify};
pub use claude::invocation::{
    AgentConfig, Invocation, READ_ONLY_TOOLS, Session, invocation, new_session_id,
};
pub use claude::stream::{DeferredCall, StreamReader, StreamSummary, read_stream_file};
pub use verdict::{Verdict, parse_plan, parse_plan_after, verdict, without_verdict};

/// A run's whole output, whichever backend wrote it: the one stream reader reads Claude
/// Code's stream-json and Codex's `--json` events alike.
///
/// # Errors
/// When it cannot be read.
pub(crate) fn read_output(path: &std::path::Path) -> std::io::Result<StreamSummary> {
    read_stream_file(path)
}

/// A run's output followed as it grows, whichever backend writes it.
#[must_use]
pub(crate) fn follow(path: &std::path::Path) -> Box<dyn Follow> {
    Box::new(claude::stream::StreamFollower::new(path))
}

/// Every backend, in the order `loop doctor` and `loop status` try them.
pub(crate) const BACKENDS: [crate::m1::settings::AgentKind; 2] = [
    crate::m1::settings::AgentKind::Claude,
    crate::m1::settings::AgentKind::Codex,
];

/// The backend of `kind`.
#[must_use]
pub(crate) fn backend_for(kind: crate::m1::settings::AgentKind) -> &'static dyn Backend {
    match kind {
        crate::m1::settings::AgentKind::Claude => &ClaudeCode,
        crate::m1::settings::AgentKind::Codex => &Codex,
    }
}

/// What marks the CLI's final `result` event in stream-json output (its keys come in no fixed
/// order, and inside a string the quotes would be escaped): once a step's stdout holds it, the
/// agent has answered, and the runner lifts the idle timeout.
pub(crate) const RESULT_MARKER: &str = r#""type":"result""#;
