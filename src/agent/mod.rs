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
mod verdict;

pub(crate) use backend::{Backend, Follow};
pub(crate) use claude::ClaudeCode;

pub(crate) use claude::invocation::PERMIT_TOOL;
pub(crate) use claude::stream::last_activity;

pub use claude::classify::{BugKind, Class, ExitInfo, classify};
pub use claude::invocation::{
    AgentConfig, Invocation, READ_ONLY_TOOLS, Session, invocation, new_session_id,
};
pub use claude::stream::{DeferredCall, StreamReader, StreamSummary, read_stream_file};
pub use verdict::{Verdict, parse_plan, verdict, without_verdict};

/// The backend a loop's runs go to. Claude Code for now; the loop's `AGENT.BACKEND` will choose.
#[must_use]
pub(crate) fn backend() -> &'static dyn Backend {
    &ClaudeCode
}

/// What marks the CLI's final `result` event in stream-json output (its keys come in no fixed
/// order, and inside a string the quotes would be escaped): once a step's stdout holds it, the
/// agent has answered, and the runner lifts the idle timeout.
pub(crate) const RESULT_MARKER: &str = r#""type":"result""#;
