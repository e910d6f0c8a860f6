//! What a loop needs from an agent CLI, behind one interface: build the command of a run from
//! the loop's intent (refusing, never widening, a setting the CLI cannot honour), read its
//! output into the loop's terms (session, progress, usage, rate limit, final answer), tell how
//! a run ended, find a session's transcript, say what environment a run gets, and how `loop
//! doctor` checks it. Every type the backends share lives beside this trait (the call in
//! `call`, the output in `output`, the outcome in `outcome`); a backend is one folder of
//! `agent/` that implements it, named once in the list of backends (`agent::backend_for`).

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::outcome::{Unanswered, classify_with};
use super::output::{Dialect, Follow};
use super::{AgentConfig, Class, ExitInfo, Invocation, Session, StreamSummary};

/// A setting of the loop the backend cannot honour: the run is not started, and the person is
/// told which setting and why (a backend never drops or widens one silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The setting, as M1.md names it (`AGENT.ALLOWED_TOOLS`).
    pub setting: String,
    pub why: String,
}

/// What a backend that takes no list of tools, no turn cap and no budget on its command line
/// says of each, in its own words: [`Refused::unsupported`] refuses the first one set.
pub(crate) struct NoFlagFor {
    pub allowed_tools: &'static str,
    pub max_turns: &'static str,
    pub max_budget_usd: &'static str,
}

impl Refused {
    /// The first of `AGENT.ALLOWED_TOOLS` (on a run the loop gives no tools of its own),
    /// `AGENT.MAX_TURNS` and `AGENT.MAX_BUDGET_USD` that `cfg` sets, refused with `why`'s words
    /// for it: never dropped, never widened.
    pub(crate) fn unsupported(cfg: &super::AgentConfig, why: &NoFlagFor) -> Option<Self> {
        let no = |setting: &str, why: &str| {
            Some(Self {
                setting: setting.to_owned(),
                why: why.to_owned(),
            })
        };
        if cfg.tools.is_none() && !cfg.allowed_tools.is_empty() {
            return no("AGENT.ALLOWED_TOOLS", why.allowed_tools);
        }
        if cfg.max_turns.is_some() {
            return no("AGENT.MAX_TURNS", why.max_turns);
        }
        if cfg.max_budget_usd.is_some() {
            return no("AGENT.MAX_BUDGET_USD", why.max_budget_usd);
        }
        None
    }
}

/// Checks that `backend`, called with `cfg` (a configuration it honours) plus one of the
/// settings [`Refused::unsupported`] covers, refuses that setting by its name.
#[cfg(test)]
pub(crate) fn assert_refuses_by_name(backend: &dyn Backend, cfg: &super::AgentConfig) {
    use super::{AgentConfig, Session};
    let refused = |c: AgentConfig| {
        backend
            .invocation(&c, "", &Session::New(String::new()))
            .unwrap_err()
            .setting
    };
    let tools = AgentConfig {
        allowed_tools: vec!["Bash(git:*)".into()],
        ..cfg.clone()
    };
    assert_eq!(refused(tools), "AGENT.ALLOWED_TOOLS");
    let turns = AgentConfig {
        max_turns: Some(3),
        ..cfg.clone()
    };
    assert_eq!(refused(turns), "AGENT.MAX_TURNS");
    let budget = AgentConfig {
        max_budget_usd: Some(1.0),
        ..cfg.clone()
    };
    assert_eq!(refused(budget), "AGENT.MAX_BUDGET_USD");
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

/// The option of a CLI whose value says what a run may do (Claude Code's permission mode,
/// Codex's sandbox), for `loop doctor` to check against the values the CLI's help lists.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModeOption {
    /// What `loop doctor` calls its values (`permission modes`).
    pub what: &'static str,
    /// The option's names, the long one last (`-s`, `--sandbox`).
    pub flags: &'static [&'static str],
}

/// One thing `loop doctor`'s contract run must find in a backend's answer, with the words for
/// either outcome.
#[derive(Debug, Clone)]
pub(crate) struct ContractCheck {
    pub holds: bool,
    pub held: &'static str,
    pub missing: &'static str,
}

/// A mode of a CLI that needs more of a confined run than its ordinary one (Claude Code on
/// Bedrock): granted only while the mode is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mode {
    /// What it is called (`Bedrock`).
    pub name: &'static str,
    /// The variables it reads (a trailing `*`: every name with that start).
    pub env: &'static [&'static str],
    /// The files its variables name (credentials), read-only.
    pub files: Vec<std::path::PathBuf>,
}

/// What a backend keeps of its own under the person's home, split by what a confined run may
/// do with it. A run writes where the CLI must (its sessions, transcripts, history, the
/// credentials it refreshes), and nothing there that the person's next session of the CLI
/// would run or follow: an agent that wrote a `SessionStart` hook into Claude Code's settings
/// had it run as the person at their next `claude`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OwnState {
    /// Writable: each path with whether it is a directory (made when missing, so that what
    /// the CLI writes into it lasts beyond the run).
    pub writes: Vec<(PathBuf, bool)>,
    /// Read-only to the run, over what it writes: settings, hooks, commands, agents, skills,
    /// MCP servers, instructions. Each with what it is made as when missing, where the run
    /// could otherwise create it.
    pub steers: Vec<(PathBuf, Missing)>,
}

/// What in a CLI's own directory would run or steer a later session of the person's, by
/// name in that directory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steers {
    /// Files, each with the text the CLI reads as none (made so when missing).
    pub files: &'static [(&'static str, &'static str)],
    /// Directories (made empty when missing).
    pub dirs: &'static [&'static str],
}

impl OwnState {
    /// A CLI's own directory `dir`, writable, and below it read-only what `steers` names.
    pub(crate) fn of(dir: PathBuf, steers: &Steers) -> OwnState {
        let files = steers
            .files
            .iter()
            .map(|(name, empty)| (*name, Missing::File(empty)));
        let dirs = steers.dirs.iter().map(|name| (*name, Missing::Dir));
        OwnState {
            steers: files
                .chain(dirs)
                .map(|(name, missing)| (dir.join(name), missing))
                .collect(),
            writes: vec![(dir, true)],
        }
    }
}

/// What a read-only path of a backend's own state is made as when it is missing and lies in
/// a directory the run writes (else the run could create it, as bad as writing it): what the
/// CLI reads as nothing there at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// An empty directory (of commands, hooks, agents: none).
    Dir,
    /// A file holding this text (`{}` for a JSON settings file, nothing for instructions or
    /// a TOML file).
    File(&'static str),
}

/// What a backend is called and how a person gets it: the words each backend gives, and
/// nothing it does.
#[derive(Debug)]
pub(crate) struct About {
    /// Its name in M1.md and `loop doctor` (`claude`).
    pub name: &'static str,
    /// Whose models it calls, as traces name it (`gen_ai.provider.name`: `anthropic`).
    pub provider: &'static str,
    /// The program it runs when the loop names none.
    pub default_program: &'static str,
    /// How a person gets it: `install Claude Code (`npm install -g …`)`.
    pub install: &'static str,
    /// What a person does when it is refused for its credentials.
    pub login: &'static str,
    /// The arguments whose output is this version's help for every flag the loop passes
    /// (`loop doctor` reads them all).
    pub help_args: &'static [&'static [&'static str]],
    /// The option whose value says what a run may do.
    pub mode_option: ModeOption,
}

/// What only one CLI says of a run that did not answer cleanly ([`classify_with`]'s own), from
/// its exit, its stderr and the rest of the run; `now` places a reset time the CLI gives
/// without a date or in a zone.
pub(crate) type OwnRules = fn(&ExitInfo, &str, &Unanswered<'_>, DateTime<Utc>) -> Option<Class>;

/// An agent CLI, as a loop drives it.
pub(crate) trait Backend: std::fmt::Debug + Sync {
    /// Its names and a person's words for it.
    fn about(&self) -> &'static About;

    /// Its name in M1.md and `loop doctor` (`claude`).
    fn name(&self) -> &'static str {
        self.about().name
    }

    /// Whose models it calls, as traces name it (`gen_ai.provider.name`: `anthropic`).
    fn provider(&self) -> &'static str {
        self.about().provider
    }

    /// The program it runs when the loop names none.
    fn default_program(&self) -> &'static str {
        self.about().default_program
    }

    /// How a person gets it: `install Claude Code (`npm install -g …`)`.
    fn install(&self) -> &'static str {
        self.about().install
    }

    /// What a person does when it is refused for its credentials.
    fn login(&self) -> &'static str {
        self.about().login
    }

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
    fn with_hooks(&self, inv: Invocation, _settings_file: &str, _exe: &Path) -> Invocation {
        inv
    }

    /// The hooks' settings file's content, for a loop binary at `exe`; `None` when the CLI has
    /// no hooks.
    fn hook_settings(&self, _exe: &Path) -> Option<serde_json::Value> {
        None
    }

    /// What its output's events mean.
    fn dialect(&self) -> Box<dyn Dialect>;

    /// The whole output of a run, read.
    ///
    /// # Errors
    /// When it cannot be read.
    fn read_output(&self, path: &Path) -> std::io::Result<StreamSummary> {
        super::output::read_file(path, self.dialect())
    }

    /// A run's output followed as it grows: its `stdout`, and its `stderr` where the CLI says
    /// more there.
    fn follow(&self, stdout: &Path, stderr: &Path) -> Box<dyn Follow> {
        Box::new(super::output::Follower::new(stdout, stderr, self.dialect()))
    }

    /// What the agent did last, from the end of a run's output.
    fn last_activity(&self, path: &Path) -> Option<String> {
        super::output::last_activity(path, self.dialect())
    }

    /// Its own rules of how a run ended, asked before those every backend shares.
    fn own_rules(&self) -> OwnRules;

    /// How a run ended: its exit, its stderr and its output, by its own rules first and then
    /// by those every backend shares ([`classify_with`]).
    fn classify(
        &self,
        exit: &ExitInfo,
        stderr: &str,
        output: &StreamSummary,
        now: DateTime<Utc>,
    ) -> Class {
        classify_with(exit, stderr, output, |f| {
            self.own_rules()(exit, stderr, f, now)
        })
    }

    /// What the CLI was retrying when its run ended, from its `stderr`, for a CLI that says so
    /// there only, with nothing on stdout meanwhile: an idle end then is the outage, not the
    /// work. `None` for a CLI whose stdout shows its retries (its stream keeps the idle limit
    /// away).
    fn retrying(&self, _stderr: &str) -> Option<String> {
        None
    }

    /// What in a run's output says it has answered (the idle timeout is lifted then).
    fn answered_marker(&self) -> &'static str;

    /// Whether its runs report what they cost in dollars (else tokens only, and a dollar cap
    /// of the loop cannot be counted).
    fn counts_dollars(&self) -> bool {
        true
    }

    /// The tools a new loop allows where nothing names them (`AGENT.ALLOWED_TOOLS`); `None`
    /// when the CLI has no list of allowed tools (its own sandbox or mode decides), so that
    /// the setting does not apply to it.
    fn default_allowed_tools(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Where the CLI keeps the transcript of `session_id`, run in `workdir`, under `home`.
    fn transcript(&self, session_id: &str, workdir: &Path, home: &Path) -> Option<PathBuf>;

    /// What the CLI keeps of its own under `home`, as a confined run of it sees it: what it
    /// writes as it works, writable, and what would run or steer a later session of the
    /// person's, read-only. Nothing else of `home` is there but what a person adds.
    fn own_state(&self, home: &Path) -> OwnState;

    /// The variables a confined run of it keeps besides every run's (its API key, its
    /// settings): a trailing `*` keeps every name with that start.
    fn own_env(&self) -> &'static [&'static str];

    /// The mode the CLI runs in as the variables `var` reads say (Claude Code on Bedrock,
    /// Vertex or Foundry), and what a confined run needs for it: its variables and the files
    /// they name (credentials, read-only). `None`: its ordinary mode, which needs nothing more.
    fn mode(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<Mode> {
        let _ = var;
        None
    }

    /// How a run called with `args` (the program's arguments, as the task ran them) was kept
    /// from writing the project (`had only tools that read (--tools Read,Grep,Glob)`), in words
    /// that follow "its run"; `None` when it could write. What the CLI itself enforces, not
    /// what the prompt asks.
    fn reads_only(&self, args: &[String]) -> Option<String>;

    /// The arguments whose output is this version's help for every flag the loop passes
    /// (`loop doctor` reads them all).
    fn help_args(&self) -> &'static [&'static [&'static str]] {
        self.about().help_args
    }

    /// The option whose value says what a run may do.
    fn mode_option(&self) -> ModeOption {
        self.about().mode_option
    }

    /// What `loop doctor`'s contract run must find in its answer `s`, besides the session and
    /// the verdict every backend must give; `hook_fired`: the contract's `SessionStart` hook
    /// left its mark.
    fn contract_checks(&self, s: &StreamSummary, hook_fired: bool) -> Vec<ContractCheck>;

    /// Points a run under `home` at a loopback stand-in of its model API at `base_url`
    /// (`http://127.0.0.1:PORT`) with a dummy key: the files it reads there are written, and
    /// the variables to set (`Some`) or remove (`None`) returned.
    ///
    /// # Errors
    /// A file that cannot be written.
    fn point_at(
        &self,
        home: &Path,
        base_url: &str,
    ) -> std::io::Result<Vec<(String, Option<String>)>>;
}
