//! Settings (the manual's settings reference, `docs/14-settings.md`). A new loop resolves flags,
//! environment, `loop.yaml` beside M1.md and defaults (highest first), and `loop start` writes the
//! result into M1.md's `LIMITS:`, `AGENT:` and `VERIFY:`. From then on M1.md wins: the runner reads
//! those keys again at every decision, and only a key the file leaves out falls back to
//! environment, `loop.yaml` and defaults. So a detached, resumed or revived runner runs exactly
//! what the file says, and a hand edit takes effect at the next decision.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod layer;

pub(crate) use layer::{FileSettings, Layer};

use crate::agent::AgentConfig;
use crate::engine::Caps;
use crate::error::Error;
use crate::m1::keys::{AgentKey, LimitKey, Top};
use crate::m1::settings::{AgentKind, DEFAULTS, PermissionMode, SandboxMode};
use crate::m1::{Document, Error as M1Error, Errors, KeyPath, M1};

/// Values given on the command line of `loop start` (written into the new M1.md): its flags
/// of settings, each one's help followed by where else the setting is given (from the
/// settings table, `cli::with_setting_homes`).
#[derive(Debug, Default, Clone, clap::Args)]
pub(crate) struct Overrides {
    /// A shell command that must exit 0 after every step.
    #[arg(long, value_name = "CMD")]
    pub verify: Option<String>,
    /// Failed attempts of one step before the loop fails.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub max_retries: Option<u32>,
    /// Steps a plan may have.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub max_steps: Option<u32>,
    /// Wall-clock limit of one step, with its unit: 90s, 15m, 1h30m.
    #[arg(long, value_parser = crate::m1::typed::duration, value_name = "DUR")]
    pub step_timeout: Option<Duration>,
    /// Kill a step that prints nothing for this long (with its unit: 90s, 15m).
    #[arg(long, value_parser = crate::m1::typed::duration, value_name = "DUR")]
    pub idle_timeout: Option<Duration>,
    /// Halt the loop once its steps have cost this many US dollars.
    #[arg(long, value_name = "USD", value_parser = parse_usd, allow_negative_numbers = true)]
    pub max_cost_usd: Option<f64>,
    /// Tools the agent may use without asking (replaces the defaults; repeat or comma-separate).
    #[arg(long, value_delimiter = ',', value_name = "TOOL")]
    pub allowed_tools: Option<Vec<String>>,
    /// Claude Code's permission mode for every step.
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,
    /// The model of every step (Claude Code's --model).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Agent turns one attempt may take (Claude Code's --max-turns).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub max_turns: Option<u32>,
    /// What one attempt may spend, in US dollars (Claude Code's --max-budget-usd).
    #[arg(long, value_name = "USD", value_parser = parse_usd, allow_negative_numbers = true)]
    pub max_budget_usd: Option<f64>,
    /// Review every step that passes its checks with a separate, read-only agent run before
    /// it is DONE.
    #[arg(long)]
    pub review: bool,
    /// The reviewer's model (Claude Code's --model for reviews).
    #[arg(long, value_name = "MODEL")]
    pub review_model: Option<String>,
    /// The agent CLI of every step: claude, codex or gemini.
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<AgentKind>,
    /// The reviewer's agent CLI, when not the steps' own (so Codex can review Claude's work).
    #[arg(long, value_name = "BACKEND")]
    pub review_backend: Option<AgentKind>,
    /// Continue a step on this agent CLI when its own hits a usage limit that resets later
    /// than --fallback-after. Several (repeated, or codex,gemini) are tried in order.
    #[arg(long, value_delimiter = ',', value_name = "BACKEND")]
    pub fallback: Vec<AgentKind>,
    /// Steps that may run at once, each in a git worktree of its own, merged one by one and
    /// verified after the merge (1: one at a time, in the project itself).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub parallel: Option<u32>,
    /// How far away a usage limit's reset must be to send a step to the fallback (90s, 15m).
    #[arg(long, value_parser = crate::m1::typed::duration, value_name = "DUR")]
    pub fallback_after: Option<Duration>,
    /// How every agent run and VERIFY is confined: bwrap (bubblewrap), or off
    /// (unconfined: the agent has your whole authority).
    #[arg(long, value_name = "SANDBOX")]
    pub sandbox: Option<SandboxMode>,
    /// A path a confined run may read besides its own (a toolchain such as ~/.rustup);
    /// repeatable. A relative path is taken from the current directory.
    #[arg(long, value_name = "PATH", value_parser = flag_path)]
    pub sandbox_read: Vec<String>,
    /// A path a confined run may write besides its work tree (a build cache such as
    /// ~/.cargo/registry); repeatable. A relative path is taken from the current directory.
    #[arg(long, value_name = "PATH", value_parser = flag_path)]
    pub sandbox_write: Vec<String>,
    /// A variable a confined run keeps besides its own (`JAVA_HOME`, `DATABASE_URL`), or every
    /// variable with a start (`AWS_*`); repeatable.
    #[arg(long, value_name = "NAME")]
    pub sandbox_env: Vec<String>,
    /// Run no step before a person approves the plan (`loop approve`, or a tap on Telegram):
    /// the loop waits on a PLAN gate.
    #[arg(long)]
    pub approve_plan: bool,
    /// Commit no step: by default each DONE step of a git project becomes a commit of its
    /// own work (never your uncommitted changes from before it).
    #[arg(long)]
    pub no_commit: bool,
    /// The agent program, above `LOOP_AGENT` (used by `loop demo`).
    #[arg(skip)]
    pub agent_program: Option<String>,
    /// Extra variables for the agent's environment (used by `loop demo`).
    #[arg(skip)]
    pub agent_env: Vec<(String, String)>,
}

/// A path of `--sandbox-read` or `--sandbox-write` as M1.md keeps it: absolute or from `~/`
/// as given, a relative one taken from the current directory, as the shell it was typed in
/// means it (`..` folded away).
fn flag_path(given: &str) -> Result<String, String> {
    if given.contains(',') {
        return Err(format!(
            "`{given}` holds a comma, which separates the paths of M1.md's list: give each path \
             a flag of its own"
        ));
    }
    if given.starts_with('/') || given.starts_with("~/") || given == "~" {
        return Ok(given.to_owned());
    }
    let whole = std::path::absolute(given).map_err(|e| format!("`{given}`: {e}"))?;
    let mut folded = std::path::PathBuf::new();
    for part in whole.components() {
        match part {
            std::path::Component::ParentDir => {
                folded.pop();
            }
            std::path::Component::CurDir => {}
            other => folded.push(other),
        }
    }
    Ok(folded.display().to_string())
}

/// An amount in US dollars, at least zero.
fn parse_usd(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "expected an amount in US dollars ≥ 0, e.g. 5 or 2.50, got {s:?}"
        )),
    }
}

/// How a loop's runs are confined, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SandboxSettings {
    pub mode: SandboxMode,
    /// Paths a confined run may read, and write, besides its own (as written: `~/` is filled
    /// in when it runs).
    pub read: Vec<String>,
    pub write: Vec<String>,
    /// Variables a confined run keeps besides its own (a name, or `PREFIX_*`).
    pub env: Vec<String>,
}

impl SandboxSettings {
    /// The lists a person adds to, each with the key M1.md keeps it at.
    #[must_use]
    pub(crate) fn lists(&self) -> [(AgentKey, &[String]); 3] {
        [
            (AgentKey::SandboxRead, &self.read),
            (AgentKey::SandboxWrite, &self.write),
            (AgentKey::SandboxEnv, &self.env),
        ]
    }

    /// The person's paths a confined run is given besides its own, each with its access,
    /// `~/` filled in from `home`.
    pub(crate) fn paths(&self, home: &Path) -> Vec<(PathBuf, crate::sandbox::Access)> {
        let expand = |p: &String| match p.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None if p == "~" => home.to_path_buf(),
            None => PathBuf::from(p),
        };
        let read = self
            .read
            .iter()
            .map(|p| (expand(p), crate::sandbox::Access::Read));
        let write = (self.write.iter()).map(|p| (expand(p), crate::sandbox::Access::Write));
        read.chain(write).collect()
    }
}

/// Settings resolved for one loop.
///
/// One merge, two stacks ([`layer`]): a new loop takes its flags, the environment, `loop.yaml`
/// and the defaults (highest first) and `loop start` writes the result into M1.md; from then
/// on what M1.md says wins, and a key it leaves out falls back to the environment, `loop.yaml`
/// and the defaults (those are defaults for new loops, never above the file).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub file: FileSettings,
    pub overrides: Overrides,
    /// How a new loop's agent is called (and where M1.md's `AGENT:` leaves the backend as
    /// it is, whose tool list is then this one's).
    pub agent: AgentConfig,
    pub notify_each_step: bool,
    /// Extra variables for the agent's environment.
    pub agent_env: Vec<(String, String)>,
    /// The layers under M1.md: the environment over `loop.yaml`.
    below: Layer,
    /// A new loop's: the flags over those.
    new: Layer,
}

/// What a new loop's `AGENT.ALLOWED_TOOLS` is when nothing names the tools: the backend's
/// list of an ordinary coding step (Claude Code's); none for a backend that has no such list
/// (Codex, whose sandbox decides).
fn default_tools(backend: AgentKind) -> Vec<String> {
    crate::agent::backend_for(backend)
        .default_allowed_tools()
        .unwrap_or_default()
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}

/// What a loop runs with, as M1.md writes it: the text of each `LIMITS:` and `AGENT:` setting
/// that `agent`, `caps` and `sandbox` resolve, `None` for one it runs without (its key left
/// out). One table for both loops that are written from settings: a new loop (`loop start`)
/// and a step's own loop, which inherits the settings the table (`m1/settings.rs`) says it
/// does.
#[must_use]
pub(crate) fn as_written(
    agent: &AgentConfig,
    caps: &Caps,
    sandbox: &SandboxSettings,
) -> BTreeMap<KeyPath, Option<String>> {
    use crate::m1::typed;
    let exact = crate::duration::exact;
    let list = |v: &[String]| (!v.is_empty()).then(|| v.join(", "));
    let tools = (!agent.allowed_tools.is_empty()
        || crate::agent::backend_for(agent.backend)
            .default_allowed_tools()
            .is_some())
    .then(|| typed::format_tools(&agent.allowed_tools));
    let mut v: BTreeMap<KeyPath, Option<String>> = BTreeMap::new();
    for (k, value) in [
        (AgentKey::Program, Some(agent.program.clone())),
        (AgentKey::Backend, Some(agent.backend.as_str().to_owned())),
        (
            AgentKey::PermissionMode,
            agent.permission_mode.map(|p| p.as_str().to_owned()),
        ),
        (AgentKey::AllowedTools, tools),
        (AgentKey::Model, agent.model.clone()),
        (AgentKey::MaxTurns, agent.max_turns.map(|n| n.to_string())),
        (
            AgentKey::MaxBudgetUsd,
            agent.max_budget_usd.map(|n| n.to_string()),
        ),
        (
            AgentKey::ExtraArgs,
            (!agent.extra_args.is_empty()).then(|| typed::format_args(&agent.extra_args)),
        ),
        (AgentKey::Sandbox, Some(sandbox.mode.as_str().to_owned())),
    ] {
        v.insert(k.path(), value);
    }
    for (k, items) in sandbox.lists() {
        v.insert(k.path(), list(items));
    }
    for (k, value) in [
        (LimitKey::MaxRetries, Some(caps.max_retries.to_string())),
        (LimitKey::MaxSteps, Some(caps.max_steps.to_string())),
        (LimitKey::StepTimeout, Some(exact(caps.step_timeout))),
        (LimitKey::IdleTimeout, caps.idle_timeout.map(exact)),
        (
            LimitKey::MaxCostUsd,
            caps.max_cost_usd.map(|n| n.to_string()),
        ),
        (LimitKey::MaxRestarts, Some(caps.max_restarts.to_string())),
        (
            LimitKey::ContextThreshold,
            Some(caps.context_threshold.to_string()),
        ),
        (LimitKey::MaxSession, caps.max_session.map(exact)),
        (LimitKey::MaxRetakes, Some(caps.max_retakes.to_string())),
    ] {
        v.insert(k.path(), value);
    }
    if let Some((_, after)) = &caps.fallback {
        v.insert(LimitKey::FallbackAfter.path(), Some(exact(*after)));
    }
    v
}

/// The program of `backend` when it is not the loop's own (a reviewer's, a fallback's):
/// `LOOP_AGENT_CLAUDE` / `LOOP_AGENT_CODEX`, else the backend's own name.
#[must_use]
pub(crate) fn other_program(backend: AgentKind) -> String {
    std::env::var(backend.program_env())
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| crate::agent::backend_for(backend).default_program().into())
}

/// `loop.yaml` beside M1.md.
#[must_use]
pub(crate) fn yaml_path(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).settings()
}

/// How to get the agent of `backend`, for the message that says it is missing.
#[must_use]
pub(crate) fn install_hint(backend: AgentKind) -> String {
    format!(
        "{} or set LOOP_AGENT to the agent program",
        crate::agent::backend_for(backend).install()
    )
}

/// Where `program` would be run from: a path (with a `/`) as it is, else the first executable
/// of that name on PATH.
///
/// # Errors
/// Why it cannot be run (the caller says how to get one: where the name came from decides).
pub(crate) fn find_program(program: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.trim().is_empty() {
        return Err("the agent program is empty".to_owned());
    }
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match std::fs::metadata(&p) {
            Err(e) => Err(format!("the agent program {program} cannot be used ({e})")),
            Ok(_) if !runnable(&p) => Err(format!(
                "the agent program {program} is not an executable file (`chmod +x` it?)"
            )),
            Ok(_) => Ok(p),
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| runnable(p))
        .ok_or_else(|| format!("the agent program `{program}` is not on PATH"))
}

/// The agent program M1.md names (`AGENT.PROGRAM`), when it cannot be run here: an error at
/// its line and column. The file outranks `LOOP_AGENT` and `loop.yaml`, so that line is what
/// to fix.
///
/// # Errors
/// That error, with `file`'s path.
pub(crate) fn check_program_in(doc: &Document, file: &Path) -> Result<(), Errors> {
    let at = crate::m1::keys::AgentKey::Program.path();
    let (Some(program), Some((line, column))) = (doc.get_at(&at), doc.position_at(&at)) else {
        return Ok(());
    };
    find_program(&program).map(drop).map_err(|why| {
        let msg = format!(
            "AGENT.PROGRAM: {why}; fix this line (it outranks LOOP_AGENT and loop.yaml), or \
             install Claude Code (`npm install -g @anthropic-ai/claude-code`)"
        );
        Errors::new(vec![M1Error::new(line, column, msg)]).with_path(file)
    })
}

impl Settings {
    /// Reads `loop.yaml` (if present) and the environment, under `overrides`.
    ///
    /// # Errors
    /// A malformed `loop.yaml`, as bad input naming the file and position.
    pub(crate) fn load(state_dir: &Path, overrides: Overrides) -> crate::error::Result<Self> {
        let path = yaml_path(state_dir);
        let file: FileSettings = match std::fs::read_to_string(&path) {
            Ok(text) if text.trim().is_empty() => FileSettings::default(),
            Ok(text) => serde_saphyr::from_str(&text)
                .map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileSettings::default(),
            Err(e) => {
                return Err(anyhow::Error::from(e)
                    .context(format!("while reading {}", path.display()))
                    .into());
            }
        };
        let below = Layer::env()?.over(&Layer::yaml(&file, &path)?);
        let new = Layer::flags(&overrides).over(&below);
        let agent = agent_of(&new);
        Ok(Self {
            notify_each_step: new.notify_each_step.unwrap_or(false),
            agent_env: overrides.agent_env.clone(),
            file,
            overrides,
            agent,
            below,
            new,
        })
    }

    /// What the loop of `m` runs with: its M1.md over the environment and `loop.yaml`. A tool
    /// list below the file is for the backend a new loop would have: a file that names another
    /// backend and no list gets that backend's own.
    #[must_use]
    pub(crate) fn running(&self, m: &M1) -> Layer {
        let top = Layer::m1(m);
        let other_backend =
            top.allowed_tools.is_none() && top.backend.is_some_and(|b| b != self.agent.backend);
        let mut v = top.over(&self.below);
        if other_backend {
            v.allowed_tools = None;
        }
        v
    }

    /// How this loop's agent is called: M1.md's `AGENT:` keys, each one it leaves out from
    /// `LOOP_AGENT`, `loop.yaml` or the defaults. Read at every spawn, so a hand edit of the
    /// block applies to the next attempt.
    #[must_use]
    pub(crate) fn agent_for(&self, m: &M1) -> AgentConfig {
        agent_of(&self.running(m))
    }

    /// How a run on `backend` is called. The loop's own backend (`AGENT.BACKEND`) runs as
    /// [`Settings::agent_for`] says. Another (a reviewer's `AGENT.REVIEW_BACKEND`, a step's
    /// `AGENT.FALLBACK`) takes its program from `LOOP_AGENT_CLAUDE` / `LOOP_AGENT_CODEX`, else
    /// its own name, and of `AGENT:` only what means the same to every backend: the
    /// permission mode, and the tool list where the loop has one. The model, turns and budget
    /// are the loop's own backend's.
    #[must_use]
    pub(crate) fn agent_on(&self, m: &M1, backend: AgentKind) -> AgentConfig {
        other_of(self.agent_for(m), backend)
    }

    /// The backend a run of `kind` of `step` goes to: a review's `AGENT.REVIEW_BACKEND`, a
    /// step's own `BACKEND` in its results (where a usage limit sent it to the fallback), else
    /// the loop's `AGENT.BACKEND`. Read from M1.md each time, so the run on record is read and
    /// classified by the CLI that ran it, after a crash too.
    #[must_use]
    pub(crate) fn backend_of(&self, m: &M1, kind: crate::engine::RunKind, step: u32) -> AgentKind {
        crate::engine::backend_of(m, self.agent_for(m).backend, kind, step)
    }

    /// How a run on `backend` of a new loop is called, as [`Settings::agent_on`] says.
    #[must_use]
    pub(crate) fn agent_on_new(&self, backend: AgentKind) -> AgentConfig {
        other_of(self.agent.clone(), backend)
    }

    /// How this loop's runs are confined: its mode and the paths and variables a run is
    /// given, which add up across M1.md, the environment and `loop.yaml`. Read at every run.
    #[must_use]
    pub(crate) fn sandbox(&self, m: &M1) -> SandboxSettings {
        sandbox_of(&self.running(m))
    }

    /// The sandbox a new loop is written with.
    #[must_use]
    pub(crate) fn sandbox_for_new(&self) -> SandboxSettings {
        sandbox_of(&self.new)
    }

    /// Steps that may run at once.
    #[must_use]
    pub(crate) fn parallel(&self, m: &M1) -> u32 {
        self.running(m).parallel.unwrap_or(DEFAULTS.parallel)
    }

    /// `LIMITS.PARALLEL` of a new loop, when above 1.
    #[must_use]
    pub(crate) fn parallel_for_new(&self) -> Option<u32> {
        self.new.parallel.filter(|n| *n > 1)
    }

    /// Whether a new loop's backend and steps at once, where they are the defaults (which
    /// M1.md leaves out), must be written all the same: the environment or `loop.yaml` names
    /// others, which a loop whose M1.md leaves them out would run with.
    #[must_use]
    pub(crate) fn pinned_for_new(&self) -> (bool, bool) {
        let backend = self.below.backend.is_some_and(|b| b != self.agent.backend);
        let parallel =
            (self.new.parallel).is_some_and(|n| self.below.parallel.is_some_and(|b| b != n));
        (backend, parallel)
    }

    /// The fallback chain a new loop is written with, and after how long. A backend named
    /// twice is kept once, in its first place.
    #[must_use]
    pub(crate) fn fallback_for_new(&self) -> Option<(Vec<AgentKind>, Duration)> {
        let mut to: Vec<AgentKind> = Vec::new();
        for k in self.new.fallback.iter().flatten() {
            if !to.contains(k) {
                to.push(*k);
            }
        }
        if to.is_empty() {
            return None;
        }
        Some((
            to,
            self.new.fallback_after.unwrap_or(DEFAULTS.fallback_after),
        ))
    }

    /// The backends a new loop uses, each once: its own, its reviewer's, its fallbacks'.
    #[must_use]
    pub(crate) fn backends_for_new(&self) -> Vec<AgentKind> {
        let mut used = vec![self.agent.backend];
        for b in self
            .review_for_new()
            .backend
            .into_iter()
            .chain(self.fallbacks_for_new())
        {
            if !used.contains(&b) {
                used.push(b);
            }
        }
        used
    }

    /// The backends of a new loop's fallback chain, in order; empty where none is set.
    #[must_use]
    pub(crate) fn fallbacks_for_new(&self) -> Vec<AgentKind> {
        self.fallback_for_new()
            .map(|(to, _)| to)
            .unwrap_or_default()
    }

    /// The caps in force. Read at every decision, so a hand edit applies at the next one.
    #[must_use]
    pub(crate) fn caps(&self, m: &M1) -> Caps {
        let v = self.running(m);
        Caps {
            fallback: Some(chain_of(&v))
                .filter(|chain| !chain.is_empty())
                .map(|chain| (chain, v.fallback_after.unwrap_or(DEFAULTS.fallback_after))),
            ..caps_of(&v)
        }
    }

    /// The caps a new M1.md is written with.
    #[must_use]
    pub(crate) fn caps_for_new(&self) -> Caps {
        caps_of(&self.new)
    }

    /// What a new loop runs with, as its M1.md writes it (see [`as_written`]).
    #[must_use]
    pub(crate) fn written_for_new(&self) -> BTreeMap<KeyPath, Option<String>> {
        as_written(&self.agent, &self.caps_for_new(), &self.sandbox_for_new())
    }

    /// What the loop `m` runs with, resolved as its own runs are (M1.md, else the
    /// environment, `loop.yaml`, the defaults), as M1.md writes it (see [`as_written`]), with
    /// its VERIFY: what a step's loop inherits is written with these, never with its
    /// template's defaults. It has no `loop.yaml` of its own, and a default `PROGRAM: claude`
    /// in place of the agent `LOOP_AGENT` names could not start.
    #[must_use]
    pub(crate) fn runs_with(&self, m: &M1) -> BTreeMap<KeyPath, Option<String>> {
        let mut v = as_written(&self.agent_for(m), &self.caps(m), &self.sandbox(m));
        // Written as the exact durations.
        v.insert(LimitKey::StepTimeoutMin.path(), None);
        v.insert(LimitKey::IdleTimeoutMin.path(), None);
        if let Some(verify) = self.verify(m) {
            v.insert(Top::Verify.path(), Some(verify));
        }
        v
    }

    /// The VERIFY command in force.
    #[must_use]
    pub(crate) fn verify(&self, m: &M1) -> Option<String> {
        verify_of(&self.running(m))
    }

    /// Whether a new loop reviews its steps, with which model and backend, and how many
    /// retakes.
    #[must_use]
    pub(crate) fn review_for_new(&self) -> NewReview {
        let v = &self.new;
        NewReview {
            on: v.review.unwrap_or(false),
            model: v.review_model.clone(),
            max_retakes: v.max_retakes,
            backend: v.review_backend,
        }
    }

    /// `COMMIT_STEPS` of a new loop.
    #[must_use]
    pub(crate) fn commit_for_new(&self) -> bool {
        self.new.commit.unwrap_or(true)
    }

    /// Whether a new loop waits for a person to approve its plan.
    #[must_use]
    pub(crate) fn approve_plan_for_new(&self) -> bool {
        self.new.approve_plan.unwrap_or(false)
    }

    /// The VERIFY command a new M1.md is written with.
    #[must_use]
    pub(crate) fn verify_for_new(&self) -> Option<String> {
        verify_of(&self.new)
    }
}

/// A run on `backend` where the loop's own agent is `own` (see [`Settings::agent_on`]).
fn other_of(own: AgentConfig, backend: AgentKind) -> AgentConfig {
    if own.backend == backend {
        return own;
    }
    let program = other_program(backend);
    let allowed_tools = match crate::agent::backend_for(backend).default_allowed_tools() {
        None => Vec::new(),
        Some(_) if own.allowed_tools.is_empty() => default_tools(backend),
        Some(_) => own.allowed_tools,
    };
    AgentConfig {
        backend,
        program,
        permission_mode: own.permission_mode,
        allowed_tools,
        ..AgentConfig::default()
    }
}

/// How the agent is called with the settings `v`, the defaults filled in: a program from the
/// backend's own variable (`LOOP_AGENT_GEMINI`, as a reviewer's or a fallback's program on it
/// is found), else its own name; the backend's tool list.
fn agent_of(v: &Layer) -> AgentConfig {
    let backend = v.backend.unwrap_or_default();
    let program = v.program.clone().unwrap_or_else(|| {
        std::env::var(backend.program_env())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| crate::agent::backend_for(backend).default_program().into())
    });
    AgentConfig {
        backend,
        program,
        permission_mode: v.permission_mode.or(Some(DEFAULTS.permission_mode)),
        allowed_tools: (v.allowed_tools.clone()).unwrap_or_else(|| default_tools(backend)),
        tools: None,
        max_turns: v.max_turns,
        max_budget_usd: v.max_budget_usd,
        model: v.model.clone(),
        extra_args: v.extra_args.clone().unwrap_or_default(),
        confined: false,
        files_dir: None,
    }
}

/// The fallback chain of the settings `v`: the backend they run on left out.
fn chain_of(v: &Layer) -> Vec<AgentKind> {
    let own = v.backend.unwrap_or_default();
    (v.fallback.iter().flatten().copied())
        .filter(|k| *k != own)
        .collect()
}

/// How runs are confined with the settings `v`: bubblewrap unless a layer says otherwise.
fn sandbox_of(v: &Layer) -> SandboxSettings {
    SandboxSettings {
        mode: v.sandbox.unwrap_or_default(),
        read: v.sandbox_read.clone().unwrap_or_default(),
        write: v.sandbox_write.clone().unwrap_or_default(),
        env: v.sandbox_env.clone().unwrap_or_default(),
    }
}

/// The caps of the settings `v`, the defaults filled in (no fallback: [`Settings::caps`]).
fn caps_of(v: &Layer) -> Caps {
    let d = DEFAULTS;
    Caps {
        max_retries: v.max_retries.unwrap_or(d.max_retries),
        max_steps: v.max_steps.unwrap_or(d.max_steps),
        max_cost_usd: v.max_cost_usd,
        transient_cap: v.transient_retries.unwrap_or(d.transient_retries),
        step_timeout: v.step_timeout.unwrap_or(d.step_timeout),
        idle_timeout: v.idle_timeout,
        max_restarts: v.max_restarts.unwrap_or(d.max_restarts),
        context_threshold: v.context_threshold.unwrap_or(d.context_threshold),
        max_session: v.max_session,
        review: v.review.unwrap_or(false),
        commit_steps: v.commit.unwrap_or(true),
        max_retakes: v.max_retakes.unwrap_or(d.max_retakes),
        fallback: None,
    }
}

/// The VERIFY command of the settings `v`; a blank one is none.
fn verify_of(v: &Layer) -> Option<String> {
    v.verify.clone().filter(|c| !c.trim().is_empty())
}

/// How a new loop reviews its steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct NewReview {
    pub on: bool,
    pub model: Option<String>,
    pub max_retakes: Option<u32>,
    pub backend: Option<AgentKind>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::keys::{Key as _, Kind};
    use crate::m1::settings::{Kept, RunnerKey, SETTINGS};
    use std::fmt::Write as _;

    /// A value of the kind a setting holds, as `loop.yaml` writes it.
    fn sample(kept: Kept) -> &'static str {
        let kind = match kept {
            Kept::Limit(k) => k.kind(),
            Kept::Agent(k) => k.kind(),
            Kept::Top(k) => k.kind(),
            Kept::Runner(RunnerKey::NotifyEachStep) => Kind::Switch,
            Kept::Runner(RunnerKey::TransientRetries) => Kind::Count,
        };
        match kind {
            Kind::Duration => "90s",
            Kind::Amount => "2.5",
            Kind::Count | Kind::Positive => "3",
            Kind::Switch => "true",
            Kind::Mode => "plan",
            Kind::Backend | Kind::Backends => "claude",
            Kind::Sandbox => "off",
            Kind::Tools | Kind::Args | Kind::EnvNames => "[a, b]",
            Kind::Paths => "[/a, /b]",
            _ => "x",
        }
    }

    /// A `loop.yaml` that gives every setting of the table a value of its kind.
    fn every_setting_in_yaml() -> String {
        let mut yaml = String::new();
        let mut sections: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
        for s in SETTINGS {
            let Some(path) = s.yaml else { continue };
            let value = sample(s.m1);
            match path.split_once('.') {
                Some((section, key)) => match sections.iter_mut().find(|(n, _)| *n == section) {
                    Some((_, keys)) => keys.push((key, value)),
                    None => sections.push((section, vec![(key, value)])),
                },
                None if path == "review" => {}
                None => {
                    let _ = writeln!(yaml, "{path}: {value}");
                }
            }
        }
        for (section, keys) in sections {
            let _ = writeln!(yaml, "{section}:");
            for (k, v) in keys {
                let _ = writeln!(yaml, "  {k}: {v}");
            }
        }
        yaml
    }

    #[test]
    fn every_loop_yaml_key_of_the_settings_table_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = every_setting_in_yaml();
        std::fs::write(dir.path().join("loop.yaml"), &yaml).unwrap();
        let s = Settings::load(dir.path(), Overrides::default())
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!(
            s.agent.permission_mode,
            Some(PermissionMode::Plan),
            "{yaml}"
        );
        assert_eq!(
            s.caps_for_new().step_timeout,
            Duration::from_secs(90),
            "{yaml}"
        );
        assert_eq!(s.sandbox_for_new().mode, SandboxMode::Off, "{yaml}");
    }

    /// A setting a new loop writes into its M1.md reads back, in a loop with no `loop.yaml` of
    /// its own (as a step's loop is), as the same text: what the loop runs with is what its
    /// steps' loops inherit.
    #[test]
    fn a_setting_written_into_a_new_loop_reads_back_as_the_same_text() {
        let parent = tempfile::tempdir().unwrap();
        let yaml = every_setting_in_yaml();
        std::fs::write(parent.path().join("loop.yaml"), &yaml).unwrap();
        let new = Settings::load(parent.path(), Overrides::default()).unwrap();
        let written = new.written_for_new();
        let edits: Vec<crate::m1::Edit> = written
            .iter()
            .map(|(k, v)| match v {
                Some(v) => crate::m1::Edit::Set(k.clone(), v.clone()),
                None => crate::m1::Edit::Remove(k.clone()),
            })
            .collect();
        let text = crate::runner::start::new_text(&edits).unwrap();
        let m = Document::parse(&text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .view();
        let step = tempfile::tempdir().unwrap();
        let runs_with = Settings::load(step.path(), Overrides::default())
            .unwrap()
            .runs_with(&m);
        for (k, v) in &written {
            assert_eq!(runs_with.get(k), Some(v), "{k:?}\n{yaml}\n{text}");
        }
    }
}
