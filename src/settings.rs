//! Settings, highest first: flags, environment, `loop.yaml` beside M1.md, `LIMITS:` in M1.md,
//! defaults (DESIGN §2). Resolved again at every decision, so hand edits of LIMITS apply.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::agent::AgentConfig;
use crate::engine::Caps;
use crate::exit::Exit;
use crate::m1::M1;

/// What an ordinary coding step needs without a denial: read, edit and write files, search,
/// and run the usual build, test and version-control tools. `acceptEdits` lets edits through;
/// Bash commands must be listed. `--dangerously-skip-permissions` is refused as root, so it is
/// never a default.
pub const DEFAULT_ALLOWED_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "Glob",
    "Grep",
    "LS",
    "TodoWrite",
    "NotebookEdit",
    "Bash(git:*)",
    "Bash(cargo:*)",
    "Bash(npm:*)",
    "Bash(npx:*)",
    "Bash(pnpm:*)",
    "Bash(yarn:*)",
    "Bash(node:*)",
    "Bash(make:*)",
    "Bash(go:*)",
    "Bash(python:*)",
    "Bash(python3:*)",
    "Bash(pytest:*)",
    "Bash(uv:*)",
    "Bash(pip:*)",
    "Bash(ls:*)",
    "Bash(cat:*)",
    "Bash(head:*)",
    "Bash(tail:*)",
    "Bash(grep:*)",
    "Bash(rg:*)",
    "Bash(find:*)",
    "Bash(wc:*)",
    "Bash(diff:*)",
    "Bash(mkdir:*)",
    "Bash(touch:*)",
    "Bash(cp:*)",
    "Bash(mv:*)",
    "Bash(sed:*)",
    "Bash(echo:*)",
];

/// The default permission mode of a step.
pub const DEFAULT_PERMISSION_MODE: &str = "acceptEdits";

/// `loop.yaml`: every field optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    #[serde(default)]
    pub agent: AgentFile,
    #[serde(default)]
    pub limits: LimitsFile,
    pub verify: Option<String>,
    pub notify_each_step: Option<bool>,
    pub transient_retries: Option<u32>,
}

/// The `agent:` section of `loop.yaml`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    pub program: Option<String>,
    pub permission_mode: Option<String>,
    pub allowed_tools: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub model: Option<String>,
    #[serde(default)]
    pub extra_args: Vec<String>,
}

/// The `limits:` section of `loop.yaml` (durations as `90s`, `5m`, `1h`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    pub max_retries: Option<u32>,
    pub max_steps: Option<u32>,
    pub step_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub max_cost_usd: Option<f64>,
}

/// Values given on the command line.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub max_retries: Option<u32>,
    pub max_steps: Option<u32>,
    pub step_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub verify: Option<String>,
    pub allowed_tools: Option<Vec<String>>,
    pub permission_mode: Option<String>,
    /// The agent program, above `LOOP_AGENT` (used by `loop demo`).
    pub agent_program: Option<String>,
    /// Extra variables for the agent's environment (used by `loop demo`).
    pub agent_env: Vec<(String, String)>,
}

/// Settings resolved for one loop.
#[derive(Debug, Clone)]
pub struct Settings {
    pub file: FileSettings,
    pub overrides: Overrides,
    pub agent: AgentConfig,
    pub notify_each_step: bool,
    /// Extra variables for the agent's environment.
    pub agent_env: Vec<(String, String)>,
    step_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
}

/// A duration as the whole minutes M1.md's `LIMITS:` keeps (rounded up).
fn minutes(d: Duration) -> u64 {
    d.as_secs().div_ceil(60)
}

/// `loop.yaml` beside M1.md.
#[must_use]
pub fn yaml_path(state_dir: &Path) -> PathBuf {
    state_dir.join("loop.yaml")
}

fn dur(field: &str, path: &Path, v: Option<&String>) -> anyhow::Result<Option<Duration>> {
    v.map(|s| {
        crate::duration::parse(s)
            .map_err(|e| Exit::bad_input(format!("{}: limits.{field}: {e}", path.display())).into())
    })
    .transpose()
}

impl Settings {
    /// Reads `loop.yaml` (if present) and the environment, under `overrides`.
    ///
    /// # Errors
    /// A malformed `loop.yaml`, as bad input naming the file and position.
    pub fn load(state_dir: &Path, overrides: Overrides) -> anyhow::Result<Self> {
        let path = yaml_path(state_dir);
        let file: FileSettings = match std::fs::read_to_string(&path) {
            Ok(text) if text.trim().is_empty() => FileSettings::default(),
            Ok(text) => serde_saphyr::from_str(&text)
                .map_err(|e| Exit::bad_input(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileSettings::default(),
            Err(e) => return Err(e).with_context(|| format!("while reading {}", path.display())),
        };
        let step_timeout = dur("step_timeout", &path, file.limits.step_timeout.as_ref())?;
        let idle_timeout = dur("idle_timeout", &path, file.limits.idle_timeout.as_ref())?;
        let a = &file.agent;
        let program = overrides
            .agent_program
            .clone()
            .or_else(|| std::env::var("LOOP_AGENT").ok().filter(|s| !s.is_empty()))
            .or_else(|| a.program.clone())
            .unwrap_or_else(|| "claude".into());
        let agent = AgentConfig {
            program,
            permission_mode: overrides
                .permission_mode
                .clone()
                .or_else(|| a.permission_mode.clone())
                .or_else(|| Some(DEFAULT_PERMISSION_MODE.into())),
            allowed_tools: overrides
                .allowed_tools
                .clone()
                .or_else(|| a.allowed_tools.clone())
                .unwrap_or_else(|| {
                    DEFAULT_ALLOWED_TOOLS
                        .iter()
                        .map(|s| (*s).to_string())
                        .collect()
                }),
            max_turns: a.max_turns,
            max_budget_usd: a.max_budget_usd,
            model: a.model.clone(),
            extra_args: a.extra_args.clone(),
        };
        Ok(Self {
            notify_each_step: file.notify_each_step.unwrap_or(false),
            agent_env: overrides.agent_env.clone(),
            file,
            overrides,
            agent,
            step_timeout,
            idle_timeout,
        })
    }

    /// The caps in force, given M1.md's current `LIMITS:`.
    #[must_use]
    ///
    /// `loop start` writes its flags' values into `LIMITS:`; a flag stands only while M1.md
    /// still holds that value, so a person's edit of the line during the run takes effect.
    pub fn caps(&self, m: &M1) -> Caps {
        let l = &m.limits;
        let o = Overrides {
            max_retries: self.overrides.max_retries.filter(|v| *v == l.max_retries),
            max_steps: self.overrides.max_steps.filter(|v| *v == l.max_steps),
            step_timeout: self
                .overrides
                .step_timeout
                .filter(|d| minutes(*d) == l.step_timeout_min),
            idle_timeout: self
                .overrides
                .idle_timeout
                .filter(|d| Some(minutes(*d)) == l.idle_timeout_min),
            ..Overrides::default()
        };
        self.resolve(&o, m)
    }

    /// The caps a new M1.md is written with: flags, environment, `loop.yaml`, defaults.
    #[must_use]
    pub fn caps_for_new(&self) -> Caps {
        self.resolve(&self.overrides, &M1::default())
    }

    fn resolve(&self, o: &Overrides, m: &M1) -> Caps {
        let l = &m.limits;
        let f = &self.file.limits;
        Caps {
            max_retries: o.max_retries.or(f.max_retries).unwrap_or(l.max_retries),
            max_steps: o.max_steps.or(f.max_steps).unwrap_or(l.max_steps),
            max_cost_usd: f.max_cost_usd.or(l.max_cost_usd),
            transient_cap: self.file.transient_retries.unwrap_or(8),
            step_timeout: o
                .step_timeout
                .or(self.step_timeout)
                .unwrap_or(Duration::from_secs(l.step_timeout_min.saturating_mul(60))),
            idle_timeout: o.idle_timeout.or(self.idle_timeout).or_else(|| {
                l.idle_timeout_min
                    .map(|m| Duration::from_secs(m.saturating_mul(60)))
            }),
        }
    }

    /// The VERIFY command in force.
    #[must_use]
    /// As with the caps, the `--verify` flag stands only while M1.md's `VERIFY:` still says it.
    pub fn verify(&self, m: &M1) -> Option<String> {
        self.overrides
            .verify
            .clone()
            .filter(|v| m.verify.as_ref() == Some(v))
            .or_else(|| self.file.verify.clone())
            .or_else(|| m.verify.clone())
            .filter(|v| !v.trim().is_empty())
    }

    /// The VERIFY command a new M1.md is written with.
    #[must_use]
    pub fn verify_for_new(&self) -> Option<String> {
        self.overrides
            .verify
            .clone()
            .or_else(|| self.file.verify.clone())
            .filter(|v| !v.trim().is_empty())
    }
}
