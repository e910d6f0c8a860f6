//! The Codex CLI (`codex exec --json`): how a run is called from the loop's intent, what it
//! refuses, and where its transcript is. Its events are read in [`stream`]; its end is
//! classified in [`classify`].
//!
//! Facts this rests on (0.169.0, captures in `tests/fixtures/codex/`): the thread id is in
//! the first event only; `exec resume <id>` takes fewer flags than `exec` and does not keep
//! the first run's sandbox, so every flag goes before `resume` and the sandbox is given again;
//! `exec` reads standard input while it is open, so the prompt comes as a file there (`-`);
//! `--full-auto` is gone; there are no hooks, no per-tool allow list, no turn or dollar cap.

pub(super) mod classify;
pub(super) mod stream;

use std::path::{Path, PathBuf};

use super::backend::{
    About, Backend, ContractCheck, ModeOption, NoFlagFor, OwnRules, OwnState, Refused, Steers,
};
use super::output::Dialect;
use super::{AgentConfig, Invocation, Session, StreamSummary};
use crate::m1::settings::PermissionMode;

/// What in `CODEX_HOME` would run or steer a later session of the person's, made as nothing
/// when missing: its configuration (MCP servers, `notify`, profiles, the shell's environment),
/// hooks, instructions (`AGENTS.override.md` wins over `AGENTS.md`), saved prompts, the rules
/// that approve commands, skills and subagents. An empty TOML file, an empty instructions
/// file (0.169 goes on to `AGENTS.md` past an empty override), an empty `{}` hooks file and
/// an empty directory are read as none.
const STEERS: Steers = Steers {
    files: &[
        ("config.toml", ""),
        ("hooks.json", "{}"),
        ("AGENTS.md", ""),
        ("AGENTS.override.md", ""),
    ],
    dirs: &["hooks", "prompts", "rules", "skills", "agents"],
};

/// The Codex CLI.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Codex;

/// What marks the end of a turn in `--json` output: once a run's stdout holds it, the agent
/// has answered.
const TURN_COMPLETED: &str = r#""type":"turn.completed""#;

/// Codex's sandbox for the loop's permission intent. Only Claude Code's `plan` and modes that
/// pre-approve nothing map to reading only; edits (`acceptEdits`, `auto`) to writing the
/// project; `bypassPermissions` to no sandbox at all. A mode that asks before every change
/// (`default`, `manual`, `dontAsk`) cannot ask in a headless run: nothing is approved, so it is
/// read-only, never wider.
///
/// Inside the loop's own sandbox, which already keeps a review's or a plan's work tree
/// read-only and an attempt's writable, Codex's is not nested: Codex starts its own
/// bubblewrap for every command, and with a system `bwrap` older than 0.9 (Debian 12's 0.8)
/// Codex 0.169 cannot start its helper there (`bwrap: execvp codex-linux-sandbox`), so every
/// command the agent runs fails, confined or not. A read-only intent on an attempt keeps its
/// `read-only`: the loop's sandbox gives an attempt a writable tree.
fn sandbox(cfg: &AgentConfig) -> &'static [&'static str] {
    const OURS: &[&str] = &["--dangerously-bypass-approvals-and-sandbox"];
    if cfg.tools.is_some() {
        if cfg.confined {
            return OURS;
        }
        // The loop's read-only call (a review): reading only, whatever the mode says.
        return &["-s", "read-only"];
    }
    match cfg.permission_mode {
        Some(PermissionMode::BypassPermissions) => OURS,
        Some(PermissionMode::AcceptEdits | PermissionMode::Auto) | None if cfg.confined => OURS,
        Some(PermissionMode::AcceptEdits | PermissionMode::Auto) | None => {
            &["-s", "workspace-write"]
        }
        Some(
            PermissionMode::Plan
            | PermissionMode::Default
            | PermissionMode::Manual
            | PermissionMode::DontAsk,
        ) => &["-s", "read-only"],
    }
}

/// The settings Codex has no equivalent of: refused, never dropped.
fn refused(cfg: &AgentConfig) -> Option<Refused> {
    Refused::unsupported(
        cfg,
        &NoFlagFor {
            allowed_tools: "Codex has no list of allowed tools: its sandbox decides what a run \
             may do (AGENT.PERMISSION_MODE: plan reads only, acceptEdits writes the project, \
             bypassPermissions has no sandbox); remove the line",
            max_turns: "Codex has no cap on turns; remove the line (LIMITS.STEP_TIMEOUT bounds a \
             run)",
            max_budget_usd: "Codex reports tokens, not dollars, and has no budget cap; remove the \
             line",
        },
    )
}

impl Backend for Codex {
    fn about(&self) -> &'static About {
        &About {
            name: "codex",
            provider: "openai",
            default_program: "codex",
            install: "install the Codex CLI (`npm install -g @openai/codex`)",
            login: "log in to Codex (`codex login`) or fix the key its provider reads (OPENAI_API_KEY)",
            help_args: &[&["exec", "--help"], &["exec", "resume", "--help"]],
            mode_option: ModeOption {
                what: "sandboxes",
                flags: &["-s", "--sandbox"],
            },
        }
    }

    /// `PROGRAM exec --json --skip-git-repo-check SANDBOX [-m MODEL] [EXTRA...]
    /// [resume THREAD] -`, with the prompt on standard input. A new run's thread is named by
    /// Codex (the loop's id for it is not passed); a retry resumes the thread its first run
    /// reported.
    fn invocation(
        &self,
        cfg: &AgentConfig,
        prompt: &str,
        session: &Session,
    ) -> Result<Invocation, Refused> {
        if let Some(r) = refused(cfg) {
            return Err(r);
        }
        let mut args: Vec<String> = ["exec", "--json", "--skip-git-repo-check"]
            .into_iter()
            .chain(sandbox(cfg).iter().copied())
            .map(str::to_owned)
            .collect();
        if let Some(model) = &cfg.model {
            args.extend(["-m".into(), model.clone()]);
        }
        args.extend(cfg.extra_args.iter().cloned());
        if let Session::Resume(id) = session {
            args.extend(["resume".into(), id.clone()]);
        }
        args.push("-".into());
        Ok(Invocation {
            program: cfg.program.clone(),
            args,
            env_set: Vec::new(),
            env_remove: Vec::new(),
            input: prompt.to_owned(),
            files: Vec::new(),
        })
    }

    fn dialect(&self) -> Box<dyn Dialect> {
        Box::new(stream::CodexStream)
    }

    fn own_rules(&self) -> OwnRules {
        classify::own
    }

    fn answered_marker(&self) -> &'static str {
        TURN_COMPLETED
    }

    fn counts_dollars(&self) -> bool {
        false
    }

    /// `$CODEX_HOME` (`~/.codex` unless set) writable (its sessions, `auth.json` as it
    /// refreshes the token, history, logs, its state database), and read-only over it what
    /// the person's next session would run or follow ([`STEERS`]).
    fn own_state(&self, home: &Path) -> OwnState {
        let dir = std::env::var_os("CODEX_HOME")
            .filter(|d| !d.is_empty())
            .map_or_else(|| home.join(".codex"), PathBuf::from);
        OwnState::of(dir, &STEERS)
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["OPENAI_*", "CODEX_*", "RUST_LOG"]
    }

    /// Only in the read-only sandbox (the last `-s`/`--sandbox` says), which the OS enforces
    /// on every command Codex runs; a flag or `-c` setting that could lift it (bypass,
    /// `--full-auto`, a `sandbox…` override) counts as writing.
    fn reads_only(&self, args: &[String]) -> Option<String> {
        let mut sandbox = None;
        let mut lifted = false;
        for (i, a) in args.iter().enumerate() {
            let next = args.get(i + 1).map(String::as_str);
            match a.as_str() {
                "-s" | "--sandbox" => sandbox = next,
                "--dangerously-bypass-approvals-and-sandbox" | "--full-auto" => lifted = true,
                "-c" | "--config" => lifted |= next.is_some_and(|c| c.contains("sandbox")),
                other => {
                    if let Some(v) = other.strip_prefix("--sandbox=") {
                        sandbox = Some(v);
                    }
                    lifted |= other.starts_with("--config=") && other.contains("sandbox");
                }
            }
        }
        (sandbox == Some("read-only") && !lifted)
            .then(|| "ran in Codex's read-only sandbox".to_owned())
    }

    /// `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl` (`CODEX_HOME` is
    /// `~/.codex` unless set).
    fn transcript(&self, session_id: &str, _workdir: &Path, home: &Path) -> Option<PathBuf> {
        let root = std::env::var_os("CODEX_HOME")
            .map_or_else(|| home.join(".codex"), PathBuf::from)
            .join("sessions");
        let suffix = format!("-{session_id}.jsonl");
        let mut dirs = vec![(root, 0)];
        while let Some((dir, depth)) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).ok()?.flatten() {
                let path = entry.path();
                if depth < 3 && path.is_dir() {
                    dirs.push((path, depth + 1));
                } else if path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with(&suffix))
                {
                    return Some(path);
                }
            }
        }
        None
    }

    /// Its tokens.
    fn contract_checks(&self, s: &StreamSummary, _hook_fired: bool) -> Vec<ContractCheck> {
        vec![ContractCheck {
            holds: s.session_tokens.is_some(),
            held: "its tokens",
            missing: "no usage in turn.completed (the loop records tokens from it)",
        }]
    }

    /// A `config.toml` in `home/.codex` whose provider is the stand-in.
    fn point_at(
        &self,
        home: &Path,
        base_url: &str,
    ) -> std::io::Result<Vec<(String, Option<String>)>> {
        let codex_home = home.join(".codex");
        std::fs::create_dir_all(&codex_home)?;
        let config = format!(
            "model = \"doctor-model\"\nmodel_provider = \"doctor\"\n\n\
             [model_providers.doctor]\nname = \"doctor\"\n\
             base_url = \"{base_url}/v1\"\nwire_api = \"responses\"\n\
             supports_websockets = false\n"
        );
        std::fs::write(codex_home.join("config.toml"), config)?;
        Ok(vec![
            (
                "CODEX_HOME".to_owned(),
                Some(codex_home.display().to_string()),
            ),
            ("OPENAI_API_KEY".to_owned(), Some("dummy".to_owned())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AgentConfig {
        AgentConfig {
            backend: crate::m1::settings::AgentKind::Codex,
            program: "codex".into(),
            permission_mode: Some(PermissionMode::AcceptEdits),
            allowed_tools: Vec::new(),
            ..AgentConfig::default()
        }
    }

    #[test]
    fn a_codex_run_writes_the_project_and_a_retry_resumes_its_thread_with_the_same_sandbox() {
        let inv = Codex
            .invocation(&cfg(), "do it", &Session::New("ignored".into()))
            .unwrap();
        let first = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
        ];
        assert_eq!(inv.args, [&first[..], &["-"]].concat());
        assert_eq!(inv.input, "do it");
        let inv = Codex
            .invocation(&cfg(), "again", &Session::Resume("t-1".into()))
            .unwrap();
        assert_eq!(inv.args, [&first[..], &["resume", "t-1", "-"]].concat());
    }

    #[test]
    fn the_loops_intent_maps_to_a_sandbox_never_wider() {
        let mode = |m| {
            let c = AgentConfig {
                permission_mode: Some(m),
                ..cfg()
            };
            Codex
                .invocation(&c, "", &Session::New(String::new()))
                .unwrap()
                .args[3..]
                .to_vec()
        };
        assert_eq!(mode(PermissionMode::Plan), ["-s", "read-only", "-"]);
        assert_eq!(mode(PermissionMode::Manual), ["-s", "read-only", "-"]);
        assert_eq!(
            mode(PermissionMode::BypassPermissions),
            ["--dangerously-bypass-approvals-and-sandbox", "-"]
        );
        // A review reads only, whatever the mode.
        let review = AgentConfig {
            permission_mode: Some(PermissionMode::BypassPermissions),
            ..cfg()
        }
        .read_only();
        let args = Codex
            .invocation(&review, "", &Session::New(String::new()))
            .unwrap()
            .args;
        assert_eq!(args[3..], ["-s", "read-only", "-"]);
    }

    #[test]
    fn inside_the_loops_sandbox_codex_nests_none_of_its_own_but_a_read_only_intent() {
        let args = |c: AgentConfig| {
            Codex
                .invocation(&c, "", &Session::New(String::new()))
                .unwrap()
                .args[3..]
                .to_vec()
        };
        let confined = AgentConfig {
            confined: true,
            ..cfg()
        };
        let ours = ["--dangerously-bypass-approvals-and-sandbox", "-"];
        assert_eq!(args(confined.clone()), ours);
        assert_eq!(args(confined.clone().read_only()), ours);
        let plan = AgentConfig {
            permission_mode: Some(PermissionMode::Plan),
            ..confined
        };
        assert_eq!(args(plan), ["-s", "read-only", "-"]);
    }

    #[test]
    fn settings_codex_cannot_honour_are_refused_by_name() {
        crate::agent::backend::assert_refuses_by_name(&Codex, &cfg());
    }

    #[test]
    fn a_codex_run_reads_only_in_the_read_only_sandbox_that_nothing_lifts() {
        let args = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
        let reviewer = "exec --json --skip-git-repo-check -s read-only -";
        assert_eq!(
            Codex.reads_only(&args(reviewer)).as_deref(),
            Some("ran in Codex's read-only sandbox")
        );
        for wider in [
            "exec --json -s workspace-write -",
            "exec --json -s read-only --sandbox workspace-write -",
            "exec --json -s read-only --dangerously-bypass-approvals-and-sandbox -",
            "exec --json -s read-only -c sandbox_mode=danger-full-access -",
            "exec --json -",
        ] {
            assert_eq!(Codex.reads_only(&args(wider)), None, "{wider}");
        }
    }
}
