//! Every setting of a loop, declared once: where M1.md keeps it, its `loop.yaml` key, its flag
//! of `loop start`, its environment variable, and its default; with the one typed setting that
//! was a string everywhere, the permission mode. The defaults live here and nowhere else
//! ([`DEFAULTS`]); a test holds the command line and `loop.yaml` to this table.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::keys::{AgentKey, Key, LimitKey, Top};

/// Claude Code's permission mode of a run (`--permission-mode`). `default` became `manual` in
/// Claude Code 2.1.200 (2.1.197 knows only `default`, 2.1.330 only `manual`): both are read,
/// they mean the same, and each is passed on as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PermissionMode {
    AcceptEdits,
    Auto,
    BypassPermissions,
    /// `default`, as Claude Code before 2.1.200 names it.
    Default,
    /// `manual`, as Claude Code names `default` since 2.1.200.
    Manual,
    DontAsk,
    Plan,
}

impl PermissionMode {
    /// Every mode, as written.
    pub const ALL: &'static [PermissionMode] = &[
        PermissionMode::AcceptEdits,
        PermissionMode::Auto,
        PermissionMode::BypassPermissions,
        PermissionMode::Default,
        PermissionMode::Manual,
        PermissionMode::DontAsk,
        PermissionMode::Plan,
    ];

    /// The mode as M1.md and the CLI write it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Auto => "auto",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::Default => "default",
            PermissionMode::Manual => "manual",
            PermissionMode::DontAsk => "dontAsk",
            PermissionMode::Plan => "plan",
        }
    }

    /// Whether two modes mean the same (`default` and `manual` do).
    #[must_use]
    pub fn same_as(self, other: PermissionMode) -> bool {
        let norm = |m| match m {
            PermissionMode::Default => PermissionMode::Manual,
            m => m,
        };
        norm(self) == norm(other)
    }
}

impl FromStr for PermissionMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|m| m.as_str() == s.trim())
            .ok_or_else(|| {
                let all: Vec<&str> = Self::ALL.iter().map(|m| m.as_str()).collect();
                format!(
                    "unknown permission mode `{s}`: expected one of {}",
                    all.join(", ")
                )
            })
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for PermissionMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for PermissionMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How a loop's agent runs and VERIFY runs are confined (`AGENT.SANDBOX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// bubblewrap around the whole run (the default).
    #[default]
    Bwrap,
    /// No sandbox: a run has the person's whole authority. Only when a person says so.
    Off,
}

impl SandboxMode {
    /// Every mode, as written.
    pub const ALL: &'static [SandboxMode] = &[SandboxMode::Bwrap, SandboxMode::Off];

    /// The mode as M1.md writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Bwrap => "bwrap",
            SandboxMode::Off => "off",
        }
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| format!("unknown sandbox `{s}`: expected bwrap or off"))
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which agent CLI a run goes to (`AGENT.BACKEND`, `AGENT.REVIEW_BACKEND`, `AGENT.FALLBACK`).
/// What each one is and does lives in `agent::backend_for`; here only its name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// Claude Code (`claude -p`).
    #[default]
    Claude,
    /// The Codex CLI (`codex exec --json`).
    Codex,
    /// Gemini CLI (`gemini --output-format stream-json`).
    Gemini,
}

/// Every backend with its name in M1.md: the one list of them.
const AGENT_NAMES: &[(AgentKind, &str)] = &[
    (AgentKind::Claude, "claude"),
    (AgentKind::Codex, "codex"),
    (AgentKind::Gemini, "gemini"),
];

impl AgentKind {
    /// Every backend, as written.
    pub const ALL: &'static [AgentKind] = &[AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini];

    /// The backend as M1.md writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        AGENT_NAMES
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("", |(_, name)| name)
    }

    /// The environment variable naming this backend's program when it is not the loop's own
    /// (a reviewer or a fallback of another backend): `LOOP_AGENT_CODEX`.
    #[must_use]
    pub fn program_env(self) -> String {
        format!("LOOP_AGENT_{}", self.as_str().to_ascii_uppercase())
    }
}

impl FromStr for AgentKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        AGENT_NAMES
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(s.trim()))
            .map(|(k, _)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = AGENT_NAMES.iter().map(|(_, n)| *n).collect();
                let (last, rest) = names.split_last().unwrap_or((&"", &[]));
                format!(
                    "unknown backend `{s}`: expected {} or {last}",
                    rest.join(", ")
                )
            })
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for AgentKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for AgentKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a loop runs with where nothing says otherwise: the one table of defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    pub permission_mode: PermissionMode,
    pub allowed_tools: &'static [&'static str],
    pub max_retries: u32,
    pub max_steps: u32,
    pub step_timeout: Duration,
    pub transient_retries: u32,
    pub max_restarts: u32,
    pub context_threshold: u32,
    pub max_retakes: u32,
    /// With `AGENT.FALLBACK`, a usage limit resetting later than this moves the step on.
    pub fallback_after: Duration,
    /// Steps at once: one, in the project directory itself.
    pub parallel: u32,
}

/// The defaults.
pub(crate) const DEFAULTS: Defaults = Defaults {
    permission_mode: PermissionMode::AcceptEdits,
    allowed_tools: DEFAULT_ALLOWED_TOOLS,
    max_retries: 3,
    max_steps: 10,
    step_timeout: Duration::from_secs(60 * 60),
    transient_retries: 8,
    max_restarts: 3,
    context_threshold: 70,
    max_retakes: 3,
    fallback_after: Duration::from_secs(15 * 60),
    parallel: 1,
};

/// What an ordinary coding step needs without a denial: read, edit and write files, search,
/// and run the usual build, test and version-control tools. `acceptEdits` lets edits through;
/// Bash commands must be listed. `--dangerously-skip-permissions` is refused as root, so it is
/// never a default.
pub(crate) const DEFAULT_ALLOWED_TOOLS: &[&str] = &[
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

/// Where M1.md keeps a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kept {
    Limit(LimitKey),
    Agent(AgentKey),
    Top(Top),
    /// Not in M1.md: it changes how the runner reports and waits, not what runs.
    Runner(RunnerKey),
}

/// A setting of the runner that M1.md does not keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunnerKey {
    /// `notify_each_step`: a message after every step.
    NotifyEachStep,
    /// `transient_retries`: API errors waited out in a row on one step.
    TransientRetries,
}

/// Whether a step's own loop (parallel steps) takes a setting from the loop it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inherit {
    /// Written into the step's loop as this loop runs with it: what its file says, else what
    /// the environment, its `loop.yaml` or the defaults resolve it to. Never left to the step's
    /// loop to resolve: its template's defaults and its own state directory (no `loop.yaml`)
    /// would decide otherwise.
    Kept,
    /// Not inherited, and why.
    Not(&'static str),
}

/// One setting, in every place a person can give it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setting {
    /// Where M1.md keeps it (and so its kind of value: [`super::keys`]).
    pub m1: Kept,
    /// Its key in `loop.yaml`, as a dotted path.
    pub yaml: Option<&'static str>,
    /// Its flag of `loop start`.
    pub flag: Option<&'static str>,
    /// The environment variable that gives it, below the flag and above `loop.yaml`.
    pub env: Option<Variable>,
    /// A list that adds up: every place that names it adds to it (the sandbox's paths and
    /// variables), where otherwise the highest place that gives a value wins.
    pub adds_up: bool,
    /// Whether a step's own loop takes it from the loop it belongs to.
    pub inherit: Inherit,
}

impl Kept {
    /// The key's place in M1.md as a person finds it (`LIMITS.MAX_RETRIES`, `VERIFY`); none for
    /// a setting M1.md does not keep.
    #[must_use]
    pub(crate) fn path(self) -> Option<String> {
        let (block, name) = match self {
            Kept::Limit(k) => (LimitKey::BLOCK, k.name()),
            Kept::Agent(k) => (AgentKey::BLOCK, k.name()),
            Kept::Top(k) => (Top::BLOCK, k.name()),
            Kept::Runner(_) => return None,
        };
        Some(
            block
                .iter()
                .chain([&name])
                .copied()
                .collect::<Vec<_>>()
                .join("."),
        )
    }
}

impl Setting {
    /// Its default, as a person would write it; none where the default is to leave it unset
    /// (or off), and for the tool list, too long for a flag's help (the settings reference
    /// lists it).
    #[must_use]
    pub(crate) fn default(&self) -> Option<String> {
        let d = DEFAULTS;
        Some(match self.m1 {
            Kept::Limit(LimitKey::MaxRetries) => d.max_retries.to_string(),
            Kept::Limit(LimitKey::MaxSteps) => d.max_steps.to_string(),
            Kept::Limit(LimitKey::StepTimeout) => crate::duration::exact(d.step_timeout),
            Kept::Limit(LimitKey::MaxRetakes) => d.max_retakes.to_string(),
            Kept::Limit(LimitKey::MaxRestarts) => d.max_restarts.to_string(),
            Kept::Limit(LimitKey::ContextThreshold) => d.context_threshold.to_string(),
            Kept::Limit(LimitKey::Parallel) => d.parallel.to_string(),
            Kept::Agent(AgentKey::PermissionMode) => d.permission_mode.to_string(),
            Kept::Agent(AgentKey::Backend) => AgentKind::default().to_string(),
            Kept::Agent(AgentKey::Sandbox) => SandboxMode::default().to_string(),
            Kept::Limit(LimitKey::FallbackAfter) => crate::duration::exact(d.fallback_after),
            Kept::Runner(RunnerKey::TransientRetries) => d.transient_retries.to_string(),
            _ => return None,
        })
    }

    /// Where else a person gives this setting, and its default, for the help of its flag
    /// (`beside` [`Beside::Flag`]): `default 3; M1.md LIMITS.MAX_RETRIES, loop.yaml
    /// limits.max_retries`, and the environment variable if it has one; or of its environment
    /// variable ([`Beside::Env`]), with its flag in the variable's place.
    #[must_use]
    pub(crate) fn homes(&self, beside: Beside) -> String {
        let places = [
            self.m1.path().map(|p| format!("M1.md {p}")),
            match beside {
                Beside::Flag => self.env.map(|e| format!("env {}", e.name)),
                Beside::Env => self.flag.map(|f| format!("--{f}")),
            },
            self.yaml.map(|y| format!("loop.yaml {y}")),
        ];
        let homes = places.into_iter().flatten().collect::<Vec<_>>().join(", ");
        match self.default() {
            Some(d) => format!("default {d}; {homes}"),
            None => homes,
        }
    }
}

/// An environment variable that gives a setting, and what its value says, as `loop --help`
/// lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Variable {
    pub name: &'static str,
    pub means: &'static str,
}

/// The variable `name`, whose value `means` this.
const fn env(name: &'static str, means: &'static str) -> Variable {
    Variable { name, means }
}

/// Whose help [`Setting::homes`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Beside {
    Flag,
    Env,
}

/// A setting that is inherited and whose highest value wins.
const fn setting(
    m1: Kept,
    yaml: Option<&'static str>,
    flag: Option<&'static str>,
    env: Option<Variable>,
) -> Setting {
    Setting {
        m1,
        yaml,
        flag,
        env,
        adds_up: false,
        inherit: Inherit::Kept,
    }
}

impl Setting {
    /// The same setting, a list that adds up across every place that names it.
    const fn adds_up(self) -> Setting {
        Setting {
            adds_up: true,
            ..self
        }
    }

    /// The same setting, not inherited by a step's own loop, for `why`.
    const fn not_inherited(self, why: &'static str) -> Setting {
        Setting {
            inherit: Inherit::Not(why),
            ..self
        }
    }
}

/// The row of the setting M1.md keeps at `kept`; an older file's whole minutes
/// ([`LimitKey::StepTimeoutMin`]) are the row of the exact duration.
#[must_use]
pub(crate) fn row(kept: Kept) -> Option<&'static Setting> {
    let kept = match kept {
        Kept::Limit(LimitKey::StepTimeoutMin) => Kept::Limit(LimitKey::StepTimeout),
        Kept::Limit(LimitKey::IdleTimeoutMin) => Kept::Limit(LimitKey::IdleTimeout),
        k => k,
    };
    SETTINGS.iter().find(|s| s.m1 == kept)
}

/// One setting as the settings reference (`docs/14-settings.md`) lists it, each place as a
/// person writes it: where M1.md keeps it (`LIMITS.MAX_RETRIES`), its flag of `loop start`
/// (`--max-retries`), its environment variable, its `loop.yaml` key, and its default. A test
/// holds the reference to these rows, so the manual cannot drift from the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub m1: Option<String>,
    pub flag: Option<String>,
    pub env: Option<&'static str>,
    pub yaml: Option<&'static str>,
    /// None where the default is to leave it unset (or off); the tool list for
    /// `AGENT.ALLOWED_TOOLS`, comma-separated.
    pub default: Option<String>,
}

/// Every setting, as [`Reference`] rows, in the order of the table.
#[must_use]
pub fn reference() -> Vec<Reference> {
    SETTINGS
        .iter()
        .map(|s| Reference {
            m1: s.m1.path(),
            flag: s.flag.map(|f| format!("--{f}")),
            env: s.env.map(|e| e.name),
            yaml: s.yaml,
            default: match s.m1 {
                Kept::Agent(AgentKey::AllowedTools) => Some(DEFAULT_ALLOWED_TOOLS.join(",")),
                _ => s.default(),
            },
        })
        .collect()
}

/// Why a setting of the runner is not a step's loop's: M1.md does not keep it.
const NOT_IN_M1: &str =
    "not kept in M1.md: it changes how a runner reports and waits, not what runs";

/// Every setting of a loop. Resolved for a new loop from its flag, environment variable,
/// `loop.yaml` key and default (highest first), and written into M1.md, which wins from then
/// on.
pub(crate) const SETTINGS: &[Setting] = &[
    setting(
        Kept::Limit(LimitKey::MaxRetries),
        Some("limits.max_retries"),
        Some("max-retries"),
        None,
    ),
    setting(
        Kept::Limit(LimitKey::MaxSteps),
        Some("limits.max_steps"),
        Some("max-steps"),
        None,
    )
    .not_inherited(
        "a step's loop holds this loop's whole plan (the other steps DONE or SKIPPED): its \
         cap is at least the plan's length",
    ),
    setting(
        Kept::Limit(LimitKey::StepTimeout),
        Some("limits.step_timeout"),
        Some("step-timeout"),
        None,
    ),
    setting(
        Kept::Limit(LimitKey::IdleTimeout),
        Some("limits.idle_timeout"),
        Some("idle-timeout"),
        None,
    ),
    setting(
        Kept::Limit(LimitKey::MaxCostUsd),
        Some("limits.max_cost_usd"),
        Some("max-cost-usd"),
        None,
    )
    .not_inherited(
        "this loop holds the budget over all its steps, the running ones' spending counted",
    ),
    setting(
        Kept::Limit(LimitKey::MaxRetakes),
        Some("review.max_retakes"),
        None,
        None,
    ),
    setting(Kept::Limit(LimitKey::MaxRestarts), None, None, None),
    setting(Kept::Limit(LimitKey::ContextThreshold), None, None, None),
    setting(Kept::Limit(LimitKey::MaxSession), None, None, None),
    setting(
        Kept::Limit(LimitKey::Parallel),
        Some("limits.parallel"),
        Some("parallel"),
        None,
    )
    .not_inherited("a step's loop runs its one step, in its worktree"),
    setting(
        Kept::Limit(LimitKey::FallbackAfter),
        Some("limits.fallback_after"),
        Some("fallback-after"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::Backend),
        Some("agent.backend"),
        Some("backend"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::ReviewBackend),
        Some("review.backend"),
        Some("review-backend"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::Fallback),
        Some("agent.fallback"),
        Some("fallback"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::Program),
        Some("agent.program"),
        None,
        Some(env("LOOP_AGENT", "the agent program (default claude)")),
    ),
    setting(
        Kept::Agent(AgentKey::PermissionMode),
        Some("agent.permission_mode"),
        Some("permission-mode"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::AllowedTools),
        Some("agent.allowed_tools"),
        Some("allowed-tools"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::Model),
        Some("agent.model"),
        Some("model"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::MaxTurns),
        Some("agent.max_turns"),
        Some("max-turns"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::MaxBudgetUsd),
        Some("agent.max_budget_usd"),
        Some("max-budget-usd"),
        None,
    ),
    setting(
        Kept::Agent(AgentKey::ExtraArgs),
        Some("agent.extra_args"),
        None,
        None,
    ),
    setting(
        Kept::Agent(AgentKey::Sandbox),
        Some("agent.sandbox"),
        Some("sandbox"),
        Some(env(
            "LOOP_SANDBOX",
            "how a new loop's agent runs are confined: bwrap or off",
        )),
    ),
    setting(
        Kept::Agent(AgentKey::SandboxRead),
        Some("agent.sandbox_read"),
        Some("sandbox-read"),
        Some(env(
            "LOOP_SANDBOX_READ",
            "paths a new loop's confined runs may read besides their own",
        )),
    )
    .adds_up(),
    setting(
        Kept::Agent(AgentKey::SandboxWrite),
        Some("agent.sandbox_write"),
        Some("sandbox-write"),
        Some(env(
            "LOOP_SANDBOX_WRITE",
            "paths a new loop's confined runs may write besides their work tree",
        )),
    )
    .adds_up(),
    setting(
        Kept::Agent(AgentKey::SandboxEnv),
        Some("agent.sandbox_env"),
        Some("sandbox-env"),
        Some(env(
            "LOOP_SANDBOX_ENV",
            "variables a new loop's confined runs keep (NAME, PREFIX_*)",
        )),
    )
    .adds_up(),
    setting(
        Kept::Agent(AgentKey::ReviewModel),
        Some("review.model"),
        Some("review-model"),
        None,
    ),
    setting(Kept::Top(Top::Verify), Some("verify"), Some("verify"), None),
    setting(Kept::Top(Top::Review), Some("review"), Some("review"), None),
    setting(
        Kept::Top(Top::CommitSteps),
        Some("commit"),
        Some("no-commit"),
        Some(env(
            "LOOP_COMMIT",
            "off: a new loop commits no step (on: each DONE step of a git project becomes a \
             commit of its own work)",
        )),
    )
    .not_inherited("this loop's merge queue commits each step's work"),
    setting(
        Kept::Top(Top::ApprovePlan),
        Some("approve_plan"),
        Some("approve-plan"),
        None,
    )
    .not_inherited("the plan was approved in this loop, before it ran"),
    setting(
        Kept::Runner(RunnerKey::NotifyEachStep),
        Some("notify_each_step"),
        None,
        None,
    )
    .not_inherited(NOT_IN_M1),
    setting(
        Kept::Runner(RunnerKey::TransientRetries),
        Some("transient_retries"),
        None,
        None,
    )
    .not_inherited(NOT_IN_M1),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_names_of_the_manual_mode_are_read_and_mean_the_same() {
        let old: PermissionMode = "default".parse().unwrap();
        let new: PermissionMode = "manual".parse().unwrap();
        assert!(old.same_as(new));
        assert_eq!(old.to_string(), "default");
        assert!(!PermissionMode::Plan.same_as(PermissionMode::AcceptEdits));
        let err = "everything".parse::<PermissionMode>().unwrap_err();
        assert!(
            err.contains("acceptEdits") && err.contains("manual"),
            "{err}"
        );
    }

    #[test]
    fn every_limit_and_agent_key_of_m1_is_a_setting_once() {
        for k in LimitKey::ALL {
            let n = SETTINGS.iter().filter(|s| s.m1 == Kept::Limit(*k)).count();
            // Older files' whole minutes are the same settings as the exact durations.
            let want = usize::from(!matches!(
                k,
                LimitKey::StepTimeoutMin | LimitKey::IdleTimeoutMin
            ));
            assert_eq!(n, want, "{k:?}");
        }
        for k in AgentKey::ALL {
            let n = SETTINGS.iter().filter(|s| s.m1 == Kept::Agent(*k)).count();
            assert_eq!(n, 1, "{k:?}");
        }
    }
}
