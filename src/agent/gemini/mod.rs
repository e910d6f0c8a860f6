//! Gemini CLI (`gemini --output-format stream-json`, `@google/gemini-cli`): how a run is
//! called from the loop's intent, what it refuses, and where its transcript is. Its events
//! are read in [`stream`]; its end is classified in [`classify`].
//!
//! Facts this rests on (0.61.0, captures in `tests/fixtures/gemini/`): with standard input
//! not a terminal and no `-p`, the CLI runs headless and takes its whole standard input as the
//! prompt; `--session-id UUID` starts a session of the loop's id and `-r UUID` resumes it
//! (both refused with exit 42 when the id is unknown, or already taken); the approval mode
//! (`--approval-mode default|auto_edit|yolo|plan`) is silently lowered to `default` in a
//! folder the CLI does not trust, so every run passes `--skip-trust` and loses
//! `GEMINI_RESTRICTED_MODE`, which would override it; `plan` writes only into the CLI's own
//! plans directory, yet a user's or a project's policy could allow more, so a run that must
//! only read also gets the loop's policy ([`READ_ONLY_POLICY`], user tier, denying every tool
//! but those that read). There are no hooks, no per-tool allow list, no turn or dollar cap on
//! the command line.

pub(super) mod classify;
pub(super) mod stream;

use std::path::{Path, PathBuf};

use super::backend::{
    About, Backend, ContractCheck, ModeOption, NoFlagFor, OwnRules, OwnState, Refused, Steers,
};
use super::output::Dialect;
use super::{AgentConfig, Invocation, Session, StreamSummary};
use crate::m1::settings::PermissionMode;

/// What in `~/.gemini` would run or steer a later session of the person's, made as nothing
/// when missing: settings (hooks, MCP servers, tools, the sandbox), the variables it loads
/// (`.env`), the folders it trusts (a trusted project's own settings and hooks load),
/// instructions, custom commands, extensions, policies, subagents, skills and hooks. An
/// empty `{}` JSON file, an empty text file and an empty directory are read as none.
const STEERS: Steers = Steers {
    files: &[
        ("settings.json", "{}"),
        (".env", ""),
        ("trustedFolders.json", "{}"),
        ("GEMINI.md", ""),
    ],
    dirs: &[
        "commands",
        "extensions",
        "policies",
        "agents",
        "skills",
        "hooks",
    ],
};

/// Gemini CLI.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gemini;

/// What marks the end of a run in `stream-json` output: once a run's stdout holds it, the
/// agent has answered.
const RESULT: &str = r#""type":"result""#;

/// The policy of a run that must only read (a review, a plan, `PERMISSION_MODE: plan`):
/// every tool denied but those that read, at the user tier (`--policy`), above what the CLI's
/// defaults, a project's policies and an extension allow.
pub(crate) const READ_ONLY_POLICY: &str = r#"# Written by m1loop for the runs of Gemini CLI that must only read (reviews, plans).
[[rule]]
toolName = "*"
decision = "deny"
priority = 900
denyMessage = "This run may only read the project."

[[rule]]
toolName = ["read_file", "read_many_files", "list_directory", "glob", "grep_search"]
decision = "allow"
priority = 950
"#;

/// The file name of [`READ_ONLY_POLICY`] in the loop's state directory.
pub(crate) const READ_ONLY_POLICY_FILE: &str = "gemini-read-only.toml";

/// Gemini's approval mode for the loop's permission intent, and whether the run must only read.
/// Edits (`acceptEdits`, `auto`, no mode) are `auto_edit`, which approves the file tools and
/// nothing else (a shell command is refused in a headless run); `bypassPermissions` is `yolo`;
/// `plan` reads only; a mode that asks before every change (`default`, `manual`, `dontAsk`)
/// cannot ask in a headless run, so it is `default`, where nothing that writes is approved.
fn approval(cfg: &AgentConfig) -> (&'static str, bool) {
    if cfg.tools.is_some() {
        // The loop's read-only call (a review, a plan): reading only, whatever the mode says.
        return ("plan", true);
    }
    match cfg.permission_mode {
        Some(PermissionMode::BypassPermissions) => ("yolo", false),
        Some(PermissionMode::AcceptEdits | PermissionMode::Auto) | None => ("auto_edit", false),
        Some(PermissionMode::Plan) => ("plan", true),
        Some(PermissionMode::Default | PermissionMode::Manual | PermissionMode::DontAsk) => {
            ("default", false)
        }
    }
}

/// The settings Gemini CLI has no flag for: refused, never dropped.
fn refused(cfg: &AgentConfig) -> Option<Refused> {
    Refused::unsupported(
        cfg,
        &NoFlagFor {
            allowed_tools: "Gemini CLI takes no list of allowed tools on its command line: its \
             approval mode decides what a run may do (AGENT.PERMISSION_MODE: acceptEdits edits \
             files, bypassPermissions runs everything, plan reads only); remove the line",
            max_turns: "Gemini CLI takes its turn cap from its settings (model.maxSessionTurns), \
             not from its command line; remove the line (LIMITS.STEP_TIMEOUT bounds a run)",
            max_budget_usd: "Gemini CLI reports tokens, not dollars, and has no budget cap; \
             remove the line",
        },
    )
}

impl Backend for Gemini {
    fn about(&self) -> &'static About {
        &About {
            name: "gemini",
            provider: "gcp.gemini",
            default_program: "gemini",
            install: "install Gemini CLI (`npm install -g @google/gemini-cli`)",
            login: "give Gemini CLI its credentials: set GEMINI_API_KEY (or \
                    GOOGLE_GENAI_USE_VERTEXAI with GOOGLE_API_KEY), or choose how it logs in \
                    (security.auth.selectedType in ~/.gemini/settings.json, or run `gemini` once)",
            help_args: &[&["--help"]],
            mode_option: ModeOption {
                what: "approval modes",
                flags: &["--approval-mode"],
            },
        }
    }

    /// `PROGRAM --output-format stream-json --skip-trust --approval-mode MODE [-m MODEL]
    /// (--session-id ID | -r ID) [--policy FILE] [EXTRA...]`, with the prompt on standard
    /// input and `GEMINI_RESTRICTED_MODE` removed.
    fn invocation(
        &self,
        cfg: &AgentConfig,
        prompt: &str,
        session: &Session,
    ) -> Result<Invocation, Refused> {
        if let Some(r) = refused(cfg) {
            return Err(r);
        }
        let (mode, read_only) = approval(cfg);
        let mut args: Vec<String> = [
            "--output-format",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            mode,
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        if let Some(model) = &cfg.model {
            args.extend(["-m".into(), model.clone()]);
        }
        match session {
            Session::New(id) if !id.is_empty() => args.extend(["--session-id".into(), id.clone()]),
            Session::New(_) => {}
            Session::Resume(id) => args.extend(["-r".into(), id.clone()]),
        }
        let mut files = Vec::new();
        if read_only {
            let Some(dir) = &cfg.files_dir else {
                return Err(Refused {
                    setting: "AGENT.BACKEND".into(),
                    why: "a Gemini run that must only read needs the loop's policy file, and \
                          this call has no directory for it"
                        .into(),
                });
            };
            let policy = dir.join(READ_ONLY_POLICY_FILE);
            args.extend(["--policy".into(), policy.display().to_string()]);
            files.push((policy, READ_ONLY_POLICY.to_owned()));
        }
        args.extend(cfg.extra_args.iter().cloned());
        Ok(Invocation {
            program: cfg.program.clone(),
            args,
            env_set: Vec::new(),
            // It would lower the approval mode to `default` whatever the flags say.
            env_remove: vec!["GEMINI_RESTRICTED_MODE".into()],
            input: prompt.to_owned(),
            files,
        })
    }

    fn dialect(&self) -> Box<dyn Dialect> {
        Box::new(stream::GeminiStream::default())
    }

    fn own_rules(&self) -> OwnRules {
        classify::own
    }

    fn answered_marker(&self) -> &'static str {
        RESULT
    }

    /// The last `Attempt N failed …` line of its stderr.
    fn retrying(&self, stderr: &str) -> Option<String> {
        classify::last_retry(stderr)
    }

    fn counts_dollars(&self) -> bool {
        false
    }

    /// `$GEMINI_CLI_HOME/.gemini` (`~/.gemini` unless set) writable (its chats and plans in
    /// `tmp/`, history, the OAuth credentials it refreshes, its ids), and read-only over it
    /// what the person's next session would run or follow ([`STEERS`]).
    fn own_state(&self, home: &Path) -> OwnState {
        let dir = gemini_dir(home);
        OwnState::of(dir, &STEERS)
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["GEMINI_*", "GOOGLE_*", "CLOUD_SHELL", "NO_BROWSER"]
    }

    /// Only in `plan` mode (the last `--approval-mode` says; no `-y`/`--yolo`) with the loop's
    /// read-only policy as the one user-tier policy and no admin policy of the call's own:
    /// `plan` alone writes only into the CLI's plans directory, and the policy keeps a user's
    /// or a project's rule from allowing more.
    fn reads_only(&self, args: &[String]) -> Option<String> {
        let mut mode = None;
        let mut policies = Vec::new();
        let mut lifted = false;
        for (i, a) in args.iter().enumerate() {
            let next = args.get(i + 1).map(String::as_str);
            match a.as_str() {
                "--approval-mode" => mode = next,
                "--policy" => policies.extend(next),
                "-y" | "--yolo" | "--admin-policy" => lifted = true,
                other => {
                    if let Some(v) = other.strip_prefix("--approval-mode=") {
                        mode = Some(v);
                    }
                    if let Some(v) = other.strip_prefix("--policy=") {
                        policies.push(v);
                    }
                    lifted |= other.starts_with("--admin-policy=") || other == "--yolo=true";
                }
            }
        }
        let ours = policies.len() == 1 && policies[0].ends_with(READ_ONLY_POLICY_FILE);
        (mode == Some("plan") && ours && !lifted)
            .then(|| "ran in Gemini's plan mode under the loop's read-only policy".to_owned())
    }

    /// `~/.gemini/tmp/<project>/chats/session-<time>-<the id's first 8>.jsonl` whose first
    /// line names the session (`GEMINI_CLI_HOME` moves `~`).
    fn transcript(&self, session_id: &str, _workdir: &Path, home: &Path) -> Option<PathBuf> {
        let short = session_id.get(..8)?;
        let suffix = format!("-{short}.jsonl");
        let projects = std::fs::read_dir(gemini_dir(home).join("tmp")).ok()?;
        for project in projects.flatten() {
            let Ok(chats) = std::fs::read_dir(project.path().join("chats")) else {
                continue;
            };
            for chat in chats.flatten() {
                let path = chat.path();
                let named = path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with(&suffix));
                if named && first_line_names(&path, session_id) {
                    return Some(path);
                }
            }
        }
        None
    }

    /// Its tokens.
    fn contract_checks(&self, s: &StreamSummary, _hook_fired: bool) -> Vec<ContractCheck> {
        vec![ContractCheck {
            holds: s.run_tokens.is_some(),
            held: "its tokens",
            missing: "no stats in the result event (the loop records tokens from them)",
        }]
    }

    /// A settings file in `home/.gemini` that chooses the API key, trusts no folder by
    /// itself and sends no usage statistics; the API at `base_url` with a dummy key.
    fn point_at(
        &self,
        home: &Path,
        base_url: &str,
    ) -> std::io::Result<Vec<(String, Option<String>)>> {
        let dir = home.join(".gemini");
        std::fs::create_dir_all(&dir)?;
        let settings = serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"},
                         "folderTrust": {"enabled": false}},
            "privacy": {"usageStatisticsEnabled": false},
        });
        std::fs::write(dir.join("settings.json"), settings.to_string())?;
        let set = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        Ok(vec![
            set("GOOGLE_GEMINI_BASE_URL", base_url),
            set("GEMINI_API_KEY", "dummy"),
            ("GEMINI_CLI_HOME".to_owned(), None),
            ("GOOGLE_GENAI_USE_VERTEXAI".to_owned(), None),
            ("GOOGLE_GENAI_USE_GCA".to_owned(), None),
            ("GOOGLE_API_KEY".to_owned(), None),
            ("GOOGLE_CLOUD_PROJECT".to_owned(), None),
        ])
    }
}

/// Where Gemini CLI keeps its own state: `.gemini` under `$GEMINI_CLI_HOME`, else `home`.
fn gemini_dir(home: &Path) -> PathBuf {
    std::env::var_os("GEMINI_CLI_HOME")
        .filter(|d| !d.is_empty())
        .map_or_else(|| home.to_path_buf(), PathBuf::from)
        .join(".gemini")
}

/// Whether the session file at `path` begins with the record of `session_id`.
fn first_line_names(path: &Path, session_id: &str) -> bool {
    use std::io::BufRead as _;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut line = String::new();
    let _ = std::io::BufReader::new(file).read_line(&mut line);
    serde_json::from_str::<serde_json::Value>(&line)
        .is_ok_and(|v| v["sessionId"].as_str() == Some(session_id))
}

#[cfg(test)]
mod tests;
