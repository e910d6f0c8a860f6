//! The command line and environment that start one agent call (the manual's "How the agent
//! is called", `docs/08-backends.md`).
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

/// The tools a Claude Code call with `args` is offered, when `--tools` says (every value of
/// every `--tools`, `--tools=A,B` too, split at commas and spaces); `None` without `--tools`:
/// then it is offered every tool.
#[must_use]
pub(crate) fn offered_tools(args: &[String]) -> Option<Vec<String>> {
    let mut tools: Option<Vec<String>> = None;
    let mut add = |value: &str| {
        let named = tools.get_or_insert_with(Vec::new);
        for t in value
            .split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            if !named.iter().any(|n| n == t) {
                named.push(t.to_owned());
            }
        }
    };
    let mut i = 0;
    while i < args.len() {
        if let Some(inline) = args[i].strip_prefix("--tools=") {
            add(inline);
        } else if args[i] == "--tools" {
            add("");
            while i + 1 < args.len() && !args[i + 1].starts_with('-') {
                i += 1;
                add(&args[i]);
            }
        }
        i += 1;
    }
    tools
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
        }
    }
}

/// Which Claude session a call runs in. A step's first attempt names a new session (the
/// runner records the id in M1.md before spawning, so a crash cannot lose it); a retry
/// resumes the id of the latest result. The CLI refuses both flags at once, so a call has
/// exactly one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Session {
    /// `--session-id UUID`: start a session with this id.
    New(String),
    /// `--resume ID`: continue this session.
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
}

impl Invocation {
    /// The same call with `--settings FILE`: settings for this run only (the loop's hooks),
    /// which Claude Code merges with the user's and the project's. Placed right after
    /// `--verbose`, before any flag that takes a variable number of values.
    #[must_use]
    pub fn with_settings(mut self, file: &str) -> Self {
        let at = self
            .args
            .iter()
            .position(|a| a == "--verbose")
            .map_or(self.args.len(), |i| i + 1);
        self.args
            .splice(at..at, ["--settings".to_owned(), file.to_owned()]);
        self
    }

    /// The same call with the loop's permission host: `--mcp-config` naming `exe hook
    /// permission-host` and `--permission-prompt-tool` naming its tool. Without a permission
    /// host, `-p` offers no `AskUserQuestion` (captures `ask-user-question-not-offered*`); with
    /// one it does, and the loop's hook defers it. The host denies every prompt, as `-p`
    /// without it does. Placed right after `--verbose`: `--mcp-config` takes several values,
    /// and a flag always follows it.
    #[must_use]
    pub fn with_permission_host(mut self, exe: &std::path::Path) -> Self {
        let config = serde_json::json!({"mcpServers": {PERMISSION_HOST: {
            "type": "stdio",
            "command": exe.display().to_string(),
            "args": ["hook", "permission-host"],
        }}});
        let at = self
            .args
            .iter()
            .position(|a| a == "--verbose")
            .map_or(self.args.len(), |i| i + 1);
        self.args.splice(
            at..at,
            [
                "--mcp-config".to_owned(),
                config.to_string(),
                "--permission-prompt-tool".to_owned(),
                format!("mcp__{PERMISSION_HOST}__{PERMIT_TOOL}"),
            ],
        );
        self
    }

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

/// The name of the loop's permission host among the run's MCP servers, and its tool's.
pub(crate) const PERMISSION_HOST: &str = "loop";
pub(crate) const PERMIT_TOOL: &str = "permit";

/// Variables removed from the agent's environment: Claude Code refuses to start inside
/// another Claude Code session, and a runner started from one would otherwise pass them on.
pub(crate) const ENV_REMOVE: [&str; 2] = ["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"];

/// Set so that a startup failure (unknown session, root with bypass) still ends in a
/// `result` event on stdout instead of a bare line on stderr.
pub(crate) const ENV_STARTUP_FAILURE_RESULTS: (&str, &str) =
    ("CLAUDE_CODE_STARTUP_FAILURE_RESULTS", "1");

/// The call for `prompt` in `session`:
/// `PROGRAM -p --output-format stream-json --verbose [--allowedTools ...] [--tools A,B]
/// (--session-id ID | --resume ID) [--permission-mode X] [--max-turns N]
/// [--max-budget-usd X] [--model M] [EXTRA...]`, with `prompt` on standard input.
///
/// `--allowedTools` and `--tools` take a variable number of values, so they are placed where
/// the session flag always follows them: a value can never swallow a later argument.
#[must_use]
pub fn invocation(cfg: &AgentConfig, prompt: &str, session: &Session) -> Invocation {
    let mut args: Vec<String> = vec![
        "-p".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ];
    if !cfg.allowed_tools.is_empty() {
        args.push("--allowedTools".into());
        args.extend(cfg.allowed_tools.iter().cloned());
    }
    if let Some(tools) = &cfg.tools {
        args.extend(["--tools".into(), tools.join(",")]);
    }
    match session {
        Session::New(id) => args.extend(["--session-id".into(), id.clone()]),
        Session::Resume(id) => args.extend(["--resume".into(), id.clone()]),
    }
    if let Some(mode) = cfg.permission_mode {
        args.extend(["--permission-mode".into(), mode.as_str().into()]);
    }
    if let Some(n) = cfg.max_turns {
        args.extend(["--max-turns".into(), n.to_string()]);
    }
    if let Some(usd) = cfg.max_budget_usd {
        args.extend(["--max-budget-usd".into(), usd.to_string()]);
    }
    if let Some(model) = &cfg.model {
        args.extend(["--model".into(), model.clone()]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    Invocation {
        program: cfg.program.clone(),
        args,
        env_set: vec![(
            ENV_STARTUP_FAILURE_RESULTS.0.to_owned(),
            ENV_STARTUP_FAILURE_RESULTS.1.to_owned(),
        )],
        env_remove: ENV_REMOVE.iter().map(|s| (*s).to_owned()).collect(),
        input: prompt.to_owned(),
    }
}

/// A fresh session id (UUID v4, the form `--session-id` requires).
#[must_use]
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The per-run settings every agent call of a loop gets: the loop's hooks, run by `exe`.
#[must_use]
pub(crate) fn hook_settings(exe: &std::path::Path) -> serde_json::Value {
    let command = |what: &str| {
        format!(
            "{} hook {what}",
            crate::text::shell_word(&exe.display().to_string())
        )
    };
    serde_json::json!({"hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": command("session-start")}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": command("pre-compact")}]}],
        "PreToolUse": [{"matcher": "AskUserQuestion",
                        "hooks": [{"type": "command", "command": command("ask")}]}],
    }})
}
