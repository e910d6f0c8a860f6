//! What a loop needs from an agent CLI, behind one interface: build the command of a run from
//! the loop's intent (refusing, never widening, a setting the CLI cannot honour), read its
//! output into the loop's terms (session, progress, usage, rate limit, final answer), tell how
//! a run ended, find a session's transcript, and say what environment a run gets. Claude Code
//! ([`super::claude::ClaudeCode`]) is the first implementation.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{AgentConfig, Class, ExitInfo, Invocation, Session, StreamSummary};

/// A setting of the loop the backend cannot honour: the run is not started, and the person is
/// told which setting and why (a backend never drops or widens one silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The setting, as M1.md names it (`AGENT.ALLOWED_TOOLS`).
    pub setting: String,
    pub why: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting, self.why)
    }
}

/// `LIMITS.MAX_COST_USD` where `backend` reports no dollars: the cap could not be counted, so
/// it is refused, as any setting a backend cannot honour. `None` when the loop has no such cap
/// or the backend counts dollars.
#[must_use]
pub(crate) fn dollar_cap_refused(backend: &dyn Backend, capped: bool) -> Option<Refused> {
    (capped && !backend.counts_dollars()).then(|| Refused {
        setting: "LIMITS.MAX_COST_USD".into(),
        why: "it reports tokens, not dollars, so the cap cannot be counted (LIMITS.MAX_STEPS and \
              LIMITS.STEP_TIMEOUT still bound the loop)"
            .into(),
    })
}

/// A run's output read as it grows: the live line and the runner's watch read it between
/// wake-ups.
pub(crate) trait Follow {
    /// Reads what was added since the last call; whether anything was.
    fn poll(&mut self) -> bool;
    /// What the output has said so far.
    fn summary(&self) -> &StreamSummary;
}

/// An agent CLI, as a loop drives it.
pub(crate) trait Backend: std::fmt::Debug + Sync {
    /// Its name in M1.md and `loop doctor` (`claude`).
    fn name(&self) -> &'static str;

    /// The program it runs when the loop names none.
    fn default_program(&self) -> &'static str;

    /// How a person gets it: `install Claude Code (`npm install -g …`)`.
    fn install(&self) -> &'static str;

    /// What a person does when it is refused for its credentials.
    fn login(&self) -> &'static str;

    /// The command of one run: `cfg` (the loop's intent: tools, permission, model, limits),
    /// the prompt, and the session the run continues or starts.
    ///
    /// # Errors
    /// A setting of `cfg` this CLI cannot honour.
    fn invocation(
        &self,
        cfg: &AgentConfig,
        prompt: &str,
        session: &Session,
    ) -> Result<Invocation, Refused>;

    /// The same run with the loop's hooks (`settings_file`, written from
    /// [`Backend::hook_settings`]); a CLI without hooks runs as it is (its prompt carries the
    /// loop's state instead).
    /// `exe`: the loop binary, which also serves what the hooks need (a permission host).
    fn with_hooks(&self, inv: Invocation, settings_file: &str, exe: &Path) -> Invocation;

    /// The hooks' settings file's content, for a loop binary at `exe`; `None` when the CLI has
    /// no hooks.
    fn hook_settings(&self, exe: &Path) -> Option<serde_json::Value>;

    /// The whole output of a run, read.
    ///
    /// # Errors
    /// When it cannot be read.
    fn read_output(&self, path: &Path) -> std::io::Result<StreamSummary>;

    /// How a run ended: its exit, its stderr and its output.
    fn classify(
        &self,
        exit: &ExitInfo,
        stderr: &str,
        output: &StreamSummary,
        now: DateTime<Utc>,
    ) -> Class;

    /// What in a run's output says it has answered (the idle timeout is lifted then).
    fn answered_marker(&self) -> &'static str;

    /// Whether its runs report what they cost in dollars (else tokens only, and a dollar cap
    /// of the loop cannot be counted).
    fn counts_dollars(&self) -> bool {
        true
    }

    /// Where the CLI keeps the transcript of `session_id`, run in `workdir`, under `home`.
    fn transcript(&self, session_id: &str, workdir: &Path, home: &Path) -> Option<PathBuf>;

    /// What the CLI keeps of its own under `home` (its settings, credentials, sessions): a
    /// confined run of it may write there, and nowhere else in `home` but what a person adds.
    /// Each path with whether it is a directory (made when missing, so that what the CLI
    /// writes into it lasts beyond the run).
    fn own_state(&self, home: &Path) -> Vec<(PathBuf, bool)>;

    /// The variables a confined run of it keeps besides every run's (its API key, its
    /// settings): a trailing `*` keeps every name with that start.
    fn own_env(&self) -> &'static [&'static str];

    /// How a run called with `args` (the program's arguments, as the task ran them) was kept
    /// from writing the project (`had only tools that read (--tools Read,Grep,Glob)`), in words
    /// that follow "its run"; `None` when it could write. What the CLI itself enforces, not
    /// what the prompt asks.
    fn reads_only(&self, args: &[String]) -> Option<String>;
}
