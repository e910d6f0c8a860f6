//! What every backend's call is made of: the loop's intent for a run ([`AgentConfig`]), the
//! session it runs in ([`Session`]), and the ready-to-spawn command a backend builds from them
//! ([`Invocation`]).
//!
//! Pure: nothing here spawns. The runner hands an [`Invocation`] to the exec bridge, which
//! owns standard input (the prompt, as a file in the task directory: never an open pipe), the
//! working directory and the `LOOP_*` variables.

use serde::{Deserialize, Serialize};

use crate::m1::settings::{AgentKind, PermissionMode};

/// How the agent is called, from settings (`loop.yaml`, flags, `LOOP_AGENT`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct AgentConfig {
    /// The agent CLI the program is (`AGENT.BACKEND`).
    pub backend: AgentKind,
    /// The agent program; `claude` unless `LOOP_AGENT` or settings say otherwise.
    pub program: String,
    /// `--permission-mode X` (e.g. `acceptEdits`, `bypassPermissions`).
    pub permission_mode: Option<PermissionMode>,
    /// `--allowedTools A B ...`: one flag followed by every tool rule.
    pub allowed_tools: Vec<String>,
    /// `--tools A,B`: the only tools the agent is offered (names, not rules), when set.
    pub tools: Option<Vec<String>>,
    /// `--max-turns N`.
    pub max_turns: Option<u32>,
    /// `--max-budget-usd X`.
    pub max_budget_usd: Option<f64>,
    /// `--model M`.
    pub model: Option<String>,
    /// Appended verbatim after everything else.
    pub extra_args: Vec<String>,
    /// The loop's sandbox confines the run (`AGENT.SANDBOX: bwrap`): the work tree is
    /// writable only for a step's attempt, so a backend's own sandbox that says the same need
    /// not be nested inside it.
    #[serde(skip)]
    pub confined: bool,
    /// Where a backend may keep a file the call reads (Gemini CLI's read-only policy): the
    /// loop's state directory. The call names the file in [`Invocation::files`]; whoever
    /// spawns it writes it first.
    #[serde(skip)]
    pub files_dir: Option<std::path::PathBuf>,
}

/// The tools that only read: what a call that must not change the project is offered.
pub const READ_ONLY_TOOLS: [&str; 3] = ["Read", "Grep", "Glob"];

impl AgentConfig {
    /// The same call, offered only [`READ_ONLY_TOOLS`]. `--permission-mode plan` does not stop
    /// a Bash call that a user's allow rule covers (a project's `.claude/settings.local.json`
    /// with `Bash(touch:*)`), and `--allowedTools` only pre-approves; `--tools` removes every
    /// other tool, and no allow rule (project, user, `--settings`, `--allowedTools`) gives one
    /// back: a call is then answered `No such tool available` (real CLI 2.1.197 and 2.1.330,
    /// captures `reviewer-*`). It takes names only: a rule such as `Bash(git diff:*)` leaves
    /// no tool at all (captures `tools-pattern-is-no-tool*`).
    #[must_use]
    pub fn read_only(mut self) -> Self {
        let tools: Vec<String> = READ_ONLY_TOOLS.iter().map(|t| (*t).to_owned()).collect();
        self.allowed_tools.clone_from(&tools);
        self.tools = Some(tools);
        self
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            backend: AgentKind::Claude,
            program: "claude".to_owned(),
            permission_mode: None,
            allowed_tools: Vec::new(),
            tools: None,
            max_turns: None,
            max_budget_usd: None,
            model: None,
            extra_args: Vec::new(),
            confined: false,
            files_dir: None,
        }
    }
}

/// Which session of the agent a call runs in. A step's first attempt names a new session (the
/// runner records the id in M1.md before spawning, so a crash cannot lose it); a retry
/// resumes the id of the latest result (a backend that names its sessions itself, as Codex,
/// ignores the new id and reports its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Session {
    /// Start a session with this id (Claude Code's `--session-id UUID`).
    New(String),
    /// Continue this session (Claude Code's `--resume ID`).
    Resume(String),
}

impl Session {
    /// The session id, whichever flag carries it.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Self::New(id) | Self::Resume(id) => id,
        }
    }
}

/// A ready-to-spawn agent call: program, arguments, the environment changes on top of the
/// runner's own environment, and the prompt for its standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    /// The prompt, whole, for standard input: the CLI reads its prompt from there when `-p`
    /// has none. In an argument it would be capped at 128 KiB (Linux's `MAX_ARG_STRLEN`: a
    /// longer goal could not start), shown to every user in `ps`, and read as an option when
    /// it starts with `-`.
    pub input: String,
    /// Files the call reads, with their content: written by whoever spawns it, before it
    /// starts (a file already so is left alone).
    pub files: Vec<(std::path::PathBuf, String)>,
}

impl Invocation {
    /// Writes [`Invocation::files`] where they differ from what is there.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write_files(&self) -> std::io::Result<()> {
        for (path, text) in &self.files {
            if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let temp = path.with_extension(format!("tmp.{}", std::process::id()));
                std::fs::write(&temp, text)?;
                std::fs::rename(&temp, path)?;
            }
        }
        Ok(())
    }
}

impl Invocation {
    /// A `Command` with program, arguments and environment changes applied; stdio (the
    /// prompt in [`Invocation::input`] included), working directory and the `LOOP_*`
    /// variables are left to the caller.
    #[must_use]
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args);
        for key in &self.env_remove {
            cmd.env_remove(key);
        }
        for (key, value) in &self.env_set {
            cmd.env(key, value);
        }
        cmd
    }
}

/// A fresh session id (UUID v4, the form `--session-id` requires).
#[must_use]
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
