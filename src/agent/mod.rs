//! The agent adapter: how Claude Code is invoked, how its stream-json is read, and how an
//! outcome is classified.
//!
//! Everything here is pure or reads files only; spawning, timeouts and kills belong to the
//! exec bridge, decisions to the engine. The simulated agent that `loop demo` and the tests
//! run instead of the real CLI is its own crate, `claude-sim`.

mod classify;
mod invocation;
mod reset_time;
mod stream;
mod verdict;

pub use classify::{BugKind, Class, ExitInfo, classify};
pub use invocation::{
    AgentConfig, ENV_REMOVE, ENV_STARTUP_FAILURE_RESULTS, Invocation, READ_ONLY_TOOLS, Session,
    hook_settings, invocation, new_session_id,
};
pub use reset_time::reset_from_text;
pub use stream::{
    RateLimitInfo, ResultEvent, StreamFollower, StreamReader, StreamSummary, last_activity,
    read_stream_file,
};
pub use verdict::{Verdict, parse_plan, verdict, without_verdict};

/// What marks the CLI's final `result` event in stream-json output (its keys come in no fixed
/// order, and inside a string the quotes would be escaped): once a step's stdout holds it, the
/// agent has answered, and the runner lifts the idle timeout.
pub const RESULT_MARKER: &str = r#""type":"result""#;
