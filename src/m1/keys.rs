//! Every key of M1.md the loop reads or writes, declared once: its block, its name and the
//! kind of value it holds. The typed view reads them by these declarations, `validate` checks
//! a file against them, and the runner's edits are made from them, so no other module names
//! a key of M1.md as a string.
//!
//! Keys a person adds are kept and passed over; only the keys declared here have a meaning.

use super::edit::{Edit, KeyPath};
use super::typed;

/// The kind of value a key holds, with what `validate` expects of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Any text.
    Text,
    /// A text that is not empty (a program, a model).
    Name,
    /// A whole number ≥ 0.
    Count,
    /// A whole number ≥ 1.
    Positive,
    /// An exit code, or `(pending)`.
    Exit,
    /// `true` or `false`.
    Bool,
    /// `on` or `off` (also `true`/`false`, `yes`/`no`).
    Switch,
    /// A decimal ≥ 0 (money, seconds).
    Amount,
    /// A duration above zero with its unit: `40s`, `15m`, `1h30m`.
    Duration,
    /// Whole minutes above zero (older files' `STEP_TIMEOUT_MIN`).
    Minutes,
    /// A moment: `2026-11-22T03:00:30Z`.
    Time,
    /// One of Claude Code's permission modes.
    Mode,
    /// An agent backend: `claude`, `codex` or `gemini`.
    Backend,
    /// Backends separated by commas, tried in order (`codex, gemini`); one is a list of one.
    Backends,
    /// A sandbox: `bwrap` or `off`.
    Sandbox,
    /// Paths separated by commas, each absolute or from `~/`.
    Paths,
    /// Names of environment variables separated by commas, each a name or `PREFIX_*`.
    EnvNames,
    /// Tool rules separated by commas, or `(none)`.
    Tools,
    /// Words separated by spaces, or a JSON array of strings.
    Args,
    /// A task id (`task_20260217T053000_a1b2c3`): it names a directory.
    TaskId,
    /// A step's review: `pending`, `approved: …`, `changes (N): …`.
    Review,
    /// The loop's state: IDLE, RUNNING, WAITING, DONE or FAILED.
    Status,
    /// A gate's kind: PLAN, ASK, DENIED, FAILED or REVIEW.
    Gate,
    /// A gate's state: PENDING or DECIDED.
    GateState,
    /// A git branch name (`loop/4f2a9c1d0b3e`).
    Branch,
    /// A git commit id: 4 to 40 hex digits.
    Commit,
    /// An absolute path.
    Path,
}

/// A value that must be one of `all`'s names.
fn one_of<'a>(ok: bool, all: impl Iterator<Item = &'a str>) -> Result<(), Problem> {
    if ok {
        return Ok(());
    }
    Err(Problem::Expected(format!(
        "one of {}",
        all.collect::<Vec<_>>().join(", ")
    )))
}

/// What is wrong with a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// What was expected instead: `KEY: expected …, found …`.
    Expected(String),
    /// A whole message of its own.
    Said(String),
}

impl Kind {
    /// Whether `v` reads as this kind.
    ///
    /// # Errors
    /// What is wrong with it.
    pub(crate) fn check(self, v: &str) -> Result<(), Problem> {
        let expected = |what: String| Err(Problem::Expected(what));
        let ok = |fine: bool, what: &str| {
            if fine {
                Ok(())
            } else {
                Err(Problem::Expected(what.to_owned()))
            }
        };
        match self {
            Kind::Text | Kind::Review => Ok(()),
            Kind::Name => ok(!v.trim().is_empty(), "a value"),
            Kind::Count => ok(v.parse::<u64>().is_ok(), "a whole number"),
            Kind::Positive => ok(v.parse::<u64>().is_ok_and(|n| n >= 1), "a whole number ≥ 1"),
            Kind::Exit => ok(
                v == PENDING || v.parse::<i32>().is_ok(),
                "an exit code or `(pending)`",
            ),
            Kind::Bool => ok(v == "true" || v == "false", "`true` or `false`"),
            Kind::Switch => ok(
                matches!(v.trim(), "on" | "off" | "true" | "false" | "yes" | "no"),
                "`on` or `off`",
            ),
            Kind::Amount => ok(
                v.parse::<f64>().is_ok_and(|x| x.is_finite() && x >= 0.0),
                "a number ≥ 0",
            ),
            // A number alone was read as seconds once; its unit is asked for, not guessed.
            Kind::Duration if is_bare_number(v) => expected(format!(
                "a duration with its unit, such as `{0}s` or `{0}m`",
                v.trim()
            )),
            Kind::Duration => typed::duration(v).map(drop).or_else(|_| {
                expected(format!(
                    "a duration above zero and at most a year ({}), such as `40s`, `15m` or \
                     `1h30m`",
                    crate::duration::exact(crate::duration::MAX)
                ))
            }),
            Kind::Minutes => typed::minutes(v).map(drop).or_else(|_| {
                expected(format!(
                    "a whole number of minutes from 1 to {} (a year)",
                    crate::duration::MAX.as_secs() / 60
                ))
            }),
            Kind::Time => typed::time(v).map(drop).or_else(|_| {
                expected(format!(
                    "a time such as `{}` (RFC 3339, as the runner writes it)",
                    typed::TIME_EXAMPLE
                ))
            }),
            Kind::Mode => one_of(
                v.parse::<super::settings::PermissionMode>().is_ok(),
                super::settings::PermissionMode::ALL
                    .iter()
                    .map(|m| m.as_str()),
            ),
            Kind::Sandbox | Kind::Paths | Kind::EnvNames | Kind::Backend | Kind::Backends => {
                self.agent_word(v)
            }
            Kind::Tools => typed::tools(v).map(drop).or_else(|_| {
                expected(format!(
                    "tool names separated by commas, e.g. `Read,Grep,Bash(git:*)`, or `{}`",
                    typed::NONE
                ))
            }),
            Kind::Args => typed::args(v).map(drop).or_else(|e| {
                expected(format!(
                    "words separated by spaces, or a JSON array of strings ({e})"
                ))
            }),
            Kind::TaskId => {
                crate::layout::validate_task_id(v).map_err(|e| Problem::Said(e.to_string()))
            }
            Kind::Status => v
                .parse::<super::view::Status>()
                .map(drop)
                .map_err(Problem::Said),
            Kind::Gate | Kind::GateState => self.gate_word(v),
            Kind::Branch | Kind::Commit | Kind::Path => self.git_word(v),
        }
    }
}

impl Kind {
    /// A backend, a sandbox, or paths of a confined run.
    fn agent_word(self, v: &str) -> Result<(), Problem> {
        match self {
            Kind::Sandbox => one_of(
                v.parse::<super::settings::SandboxMode>().is_ok(),
                super::settings::SandboxMode::ALL.iter().map(|k| k.as_str()),
            ),
            Kind::Paths => typed::paths(v).map(drop).map_err(Problem::Said),
            Kind::EnvNames => typed::env_names(v).map(drop).map_err(Problem::Said),
            Kind::Backends => typed::backends(v).map(drop).map_err(Problem::Said),
            _ => one_of(
                v.parse::<super::settings::AgentKind>().is_ok(),
                super::settings::AgentKind::ALL.iter().map(|k| k.as_str()),
            ),
        }
    }

    /// A gate's KIND or STATE.
    fn gate_word(self, v: &str) -> Result<(), Problem> {
        let read = if self == Kind::Gate {
            v.parse::<super::gates::GateKind>().map(drop)
        } else {
            v.parse::<super::gates::GateState>().map(drop)
        };
        read.map_err(Problem::Said)
    }
}

impl Kind {
    /// A branch, a commit id or a path of a parallel step's record.
    fn git_word(self, v: &str) -> Result<(), Problem> {
        let (fine, what) = match self {
            Kind::Branch => (
                branch_name(v),
                "a git branch name (no spaces, `..`, `~`, `^`, `:`, `?`, `*`, `[` or `\\`, \
                 not starting with `-` or `/`)",
            ),
            Kind::Commit => (
                (4..=40).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()),
                "a git commit id (4 to 40 hex digits)",
            ),
            _ => (std::path::Path::new(v).is_absolute(), "an absolute path"),
        };
        if fine {
            Ok(())
        } else {
            Err(Problem::Expected(what.to_owned()))
        }
    }
}

/// Whether `v` may name a git branch (git's `check-ref-format` rules that a hand edit can
/// break): what git would refuse is refused at its line, not by git in the middle of a step.
fn branch_name(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with(['-', '/'])
        && !v.ends_with(['/', '.'])
        && !std::path::Path::new(v)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("lock"))
        && !v.contains("..")
        && !v.contains("//")
        && !v.contains("@{")
        && !v
            .chars()
            .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
}

/// A number with no unit after it.
fn is_bare_number(v: &str) -> bool {
    let v = v.trim();
    !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())
}

/// A value not known yet: a step's `EXIT` while it runs, its `COMMIT` until it is made.
pub(crate) const PENDING: &str = "(pending)";

/// Whether a `Switch` value says on.
#[must_use]
pub(crate) fn switch_on(v: &str) -> bool {
    matches!(v.trim(), "on" | "true" | "yes")
}

/// What every block's keys have: the table they are declared in says each.
pub(crate) trait Key: Copy + 'static {
    /// Every key of the block.
    const ALL: &'static [Self];
    /// The block the keys are in (empty: the top of the file).
    const BLOCK: &'static [&'static str];
    /// What its value must be.
    fn kind(self) -> Kind;
}

/// A block's keys, each declared once: its variant, its name in M1.md and its kind of value.
macro_rules! keys {
    ($(#[$m:meta])* $name:ident in [$($block:literal),*] {
        $($(#[$vm:meta])* $v:ident = $key:literal: $kind:ident,)+
    }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)+
        }

        impl $name {
            /// The key as M1.md writes it.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self { $($name::$v => $key,)+ }
            }
        }

        impl Key for $name {
            const ALL: &'static [$name] = &[$($name::$v),+];
            const BLOCK: &'static [&'static str] = &[$($block),*];

            fn kind(self) -> Kind {
                match self { $($name::$v => Kind::$kind,)+ }
            }
        }
    };
}

keys! {
    /// The keys at the top of the file.
    Top in [] {
        Status = "STATUS": Status,
        Goal = "GOAL": Text,
        Constraints = "CONSTRAINTS": Text,
        LastAction = "LAST_ACTION": Text,
        NextAction = "NEXT_ACTION": Text,
        Verify = "VERIFY": Text,
        /// Every step that passes is reviewed (`REVIEW: on`).
        Review = "REVIEW": Switch,
        /// Each DONE step of a git project is committed (`COMMIT_STEPS: on`, the default).
        CommitSteps = "COMMIT_STEPS": Switch,
        /// The project directory the agent works in.
        Workdir = "WORKDIR": Text,
        /// The loop's identity, which its tasks carry.
        LoopId = "LOOP_ID": Text,
        StartedAt = "STARTED_AT": Time,
        /// The `--plan` checklist the steps came from, whose boxes DONE steps tick.
        PlanFile = "PLAN_FILE": Text,
        /// Started with `--plan-only`: once planned, the loop waits IDLE.
        PlanOnly = "PLAN_ONLY": Switch,
        /// Started with `--approve-plan`: no step runs before a person approves the plan.
        ApprovePlan = "APPROVE_PLAN": Switch,
        /// The loop that runs this one as one of its parallel steps (its M1.md).
        Parent = "PARENT": Text,
        /// That loop's `LOOP_ID`: a step's loop belongs to that loop alone.
        ParentId = "PARENT_ID": Text,
        /// The step of that loop this loop runs.
        ParentStep = "PARENT_STEP": Positive,
        /// The variables the loop was started with that its runs use (its agent's key and
        /// settings, `SANDBOX_ENV`, `OTEL_*`), by name: a runner carries the loop on only where
        /// they are set (the shell, the chat bot, the daemon alike).
        Env = "ENV": EnvNames,
    }
}

keys! {
    /// The keys of a gate's `GATES.Gn` block: a decision the loop waits for.
    GateKey in ["GATES"] {
        Kind = "KIND": Gate,
        /// The step it is about (0: the plan).
        Step = "STEP": Count,
        /// A fingerprint of what the person was shown: a decision applies to that text only.
        Shown = "SHOWN": Text,
        /// What is asked (a question, a denied tool, a failure).
        Question = "QUESTION": Text,
        /// The answers offered, separated by ` | `; none: a free-text answer.
        Options = "OPTIONS": Text,
        /// The tools a DENIED gate's `allow` adds to `AGENT.ALLOWED_TOOLS`.
        Tools = "TOOLS": Tools,
        /// The agent's deferred `AskUserQuestion` call an ASK gate answers (its `tool_use` id).
        ToolUse = "TOOL_USE": Text,
        /// The gate of a parallel step's own loop that this gate stands for: a decision here
        /// is carried to that gate.
        StepGate = "STEP_GATE": Text,
        State = "STATE": GateState,
        Choice = "CHOICE": Text,
        By = "BY": Text,
        At = "AT": Time,
    }
}

keys! {
    /// The keys of `PLAN:` besides its steps.
    PlanKey in ["PLAN"] {
        TotalSteps = "TOTAL_STEPS": Count,
        CurrentStep = "CURRENT_STEP": Count,
    }
}

/// `PLAN.STEPS`, the block of the step lines.
pub(crate) const STEPS: &str = "STEPS";
/// `PLAN.AFTER`, the block of what each step waits for: `4: 2, 3`.
pub(crate) const AFTER: &str = "AFTER";

keys! {
    /// The keys of `PARALLEL:`, the block of a loop whose steps run at once.
    ParallelKey in ["PARALLEL"] {
        /// The integration branch the steps are merged into.
        Branch = "BRANCH": Branch,
        /// The project's HEAD when that branch was made.
        Base = "BASE": Commit,
    }
}

keys! {
    /// The keys of `GITHUB:`, the block of a loop started from a GitHub issue (`--issue`) or
    /// one that opens a pull request when it is DONE (`--pr`).
    GithubKey in ["GITHUB"] {
        /// The issue's number.
        Issue = "ISSUE": Positive,
        IssueUrl = "ISSUE_URL": Text,
        /// The issue's text as it was read, which every prompt shows after the goal.
        IssueBody = "ISSUE_BODY": Text,
        /// The branch the loop works on (`loop/issue-N`), pushed at DONE.
        Branch = "BRANCH": Branch,
        /// The branch the loop began on, which the pull request asks to merge into.
        Base = "BASE": Text,
        /// At DONE, the branch is pushed and a pull request opened (`on`).
        PullRequest = "PULL_REQUEST": Switch,
        /// A loop that ends FAILED comments on its issue with its report (`on`).
        Comment = "COMMENT": Switch,
        /// When pushing and opening the pull request began: a runner that finds this and no
        /// `PR` looks the pull request up before it opens one.
        Opening = "OPENING": Time,
        /// The pull request's URL, once it is open.
        Pr = "PR": Text,
        /// Why the pull request could not be opened, when it could not.
        PrError = "PR_ERROR": Text,
        /// The comment on the issue, once made (its URL).
        Commented = "COMMENTED": Text,
    }
}

keys! {
    /// The keys of a step's `PARALLEL.STEP_N` block: its record, written before its worktree
    /// and its loop exist.
    RunKey in ["PARALLEL"] {
        Worktree = "WORKTREE": Path,
        Branch = "BRANCH": Branch,
        /// The integration head the step's branch was made from.
        Base = "BASE": Commit,
        /// The step's own loop (its M1.md).
        Loop = "LOOP": Path,
        /// Merges (or VERIFY runs after a merge) that failed and sent the step back.
        MergeFails = "MERGE_FAILS": Count,
        /// Its loop was stopped with this one.
        Stopped = "STOPPED": Bool,
        /// The integration commit it was merged as.
        Merged = "MERGED": Commit,
    }
}

keys! {
    /// The keys of `CURRENT:`, the run on record.
    CurrentKey in ["CURRENT"] {
        TaskId = "TASK_ID": TaskId,
        CcPid = "CC_PID": Count,
        SpawnTime = "SPAWN_TIME": Text,
        Command = "COMMAND": Text,
        SessionId = "SESSION_ID": Text,
        Attempt = "ATTEMPT": Count,
        /// The project's git HEAD when the run began.
        GitHead = "GIT_HEAD": Text,
        /// The end of a backoff or a usage-limit wait.
        WaitUntil = "WAIT_UNTIL": Time,
        WaitReason = "WAIT_REASON": Text,
        /// The run on record is a review of its step (`true`).
        Review = "REVIEW": Bool,
    }
}

keys! {
    /// The keys of a step's `RESULTS.STEP_N` block.
    ResultKey in ["RESULTS"] {
        Exit = "EXIT": Exit,
        /// The step's commit; `(pending)` from its first attempt until it is made, once the
        /// step is DONE.
        Commit = "COMMIT": Text,
        Summary = "SUMMARY": Text,
        Verified = "VERIFIED": Bool,
        Attempts = "ATTEMPTS": Count,
        CostUsd = "COST_USD": Amount,
        DurationS = "DURATION_S": Amount,
        SessionId = "SESSION_ID": Text,
        Error = "ERROR": Text,
        /// The full agent report, relative to the state directory.
        Report = "REPORT": Text,
        /// Transient errors waited out.
        Transient = "TRANSIENT": Count,
        /// Why the last run was cut off (an API error waited out).
        Interrupted = "INTERRUPTED": Text,
        /// The question of a `STEP_BLOCKED`.
        Blocked = "BLOCKED": Text,
        /// Fresh sessions the agent asked for.
        Restarts = "RESTARTS": Count,
        /// Why the next run starts a fresh session with a handoff.
        Handoff = "HANDOFF": Text,
        ContextPct = "CONTEXT_PCT": Count,
        SessionS = "SESSION_S": Amount,
        Compactions = "COMPACTIONS": Count,
        Review = "REVIEW": Review,
        Retakes = "RETAKES": Count,
        ReviewRuns = "REVIEW_RUNS": Count,
        /// The last review run, when the reviews gave no verdict.
        ReviewTask = "REVIEW_TASK": TaskId,
        /// The commit the step began from (its review's diff starts there).
        BaseHead = "BASE_HEAD": Text,
        /// The attempts before a person's `loop retry`, which no longer count.
        Retried = "RETRIED": Count,
        /// The agent CLI this step's runs go to, when a usage limit sent it to the fallback.
        Backend = "BACKEND": Backend,
        /// Tokens the step's runs used (a backend that reports tokens, not dollars).
        Tokens = "TOKENS": Count,
        /// Tokens of the step's session so far: the session's own count is cumulative.
        SessionTokens = "SESSION_TOKENS": Count,
        /// The commits the agent made itself during the step, oldest first.
        AgentCommits = "AGENT_COMMITS": Text,
        /// What of the step's work its commit left out, and why.
        Uncommitted = "UNCOMMITTED": Text,
    }
}

keys! {
    /// The keys of `LIMITS:`.
    LimitKey in ["LIMITS"] {
        MaxRetries = "MAX_RETRIES": Positive,
        MaxSteps = "MAX_STEPS": Positive,
        StepTimeout = "STEP_TIMEOUT": Duration,
        IdleTimeout = "IDLE_TIMEOUT": Duration,
        /// Older files: whole minutes.
        StepTimeoutMin = "STEP_TIMEOUT_MIN": Minutes,
        IdleTimeoutMin = "IDLE_TIMEOUT_MIN": Minutes,
        MaxCostUsd = "MAX_COST_USD": Amount,
        MaxRestarts = "MAX_RESTARTS": Count,
        ContextThreshold = "CONTEXT_THRESHOLD": Positive,
        MaxSession = "MAX_SESSION": Duration,
        MaxRetakes = "MAX_RETAKES": Count,
        /// A usage limit resetting later than this sends the step to `AGENT.FALLBACK`.
        FallbackAfter = "FALLBACK_AFTER": Duration,
        /// Steps that may run at once, each in a git worktree of its own (default 1).
        Parallel = "PARALLEL": Positive,
    }
}

keys! {
    /// The keys of `AGENT:`.
    AgentKey in ["AGENT"] {
        Program = "PROGRAM": Name,
        PermissionMode = "PERMISSION_MODE": Mode,
        AllowedTools = "ALLOWED_TOOLS": Tools,
        Model = "MODEL": Name,
        MaxTurns = "MAX_TURNS": Positive,
        MaxBudgetUsd = "MAX_BUDGET_USD": Amount,
        ExtraArgs = "EXTRA_ARGS": Args,
        ReviewModel = "REVIEW_MODEL": Name,
        /// The agent CLI the steps run on (`claude` unless it says `codex` or `gemini`).
        Backend = "BACKEND": Backend,
        /// The reviewer's agent CLI, when not the steps' own.
        ReviewBackend = "REVIEW_BACKEND": Backend,
        /// The agent CLIs a step continues on, in order, when the one it runs on hits a usage
        /// limit that resets later than `LIMITS.FALLBACK_AFTER` (`codex` or `codex, gemini`).
        Fallback = "FALLBACK": Backends,
        /// How every agent run and VERIFY is confined: `bwrap` (the default) or `off`.
        Sandbox = "SANDBOX": Sandbox,
        /// Paths a confined run may read besides its own (a toolchain, a sibling project).
        SandboxRead = "SANDBOX_READ": Paths,
        /// Paths a confined run may write besides its work tree (a build cache).
        SandboxWrite = "SANDBOX_WRITE": Paths,
        /// Variables a confined run keeps besides its own (`JAVA_HOME`, `DATABASE_URL`,
        /// `AWS_*`).
        SandboxEnv = "SANDBOX_ENV": EnvNames,
    }
}

/// The key path of `STEP_n`'s block in RESULTS.
#[must_use]
pub fn result_block(step: u32) -> KeyPath {
    KeyPath::new([ResultKey::BLOCK[0].to_owned(), format!("STEP_{step}")])
}

/// The path of `key` in `block`.
fn within(block: &[&str], key: &str) -> KeyPath {
    KeyPath::new(block.iter().copied().chain([key]))
}

/// `path`, `set` and `remove` for the keys of a block that holds each key once (the top, `PLAN`,
/// `CURRENT`, `LIMITS`, `AGENT`, `PARALLEL`): the same three for each.
macro_rules! scalar_keys {
    ($($name:ident),+) => {$(
        impl $name {
            /// Where the key is.
            #[must_use]
            pub fn path(self) -> KeyPath {
                within(Self::BLOCK, self.name())
            }

            /// Sets the key.
            #[must_use]
            pub fn set(self, value: impl Into<String>) -> Edit {
                Edit::Set(self.path(), value.into())
            }

            /// Removes the key.
            #[must_use]
            pub fn remove(self) -> Edit {
                Edit::Remove(self.path())
            }
        }
    )+};
}

scalar_keys!(
    Top,
    PlanKey,
    CurrentKey,
    LimitKey,
    AgentKey,
    ParallelKey,
    GithubKey
);

/// `PLAN.AFTER`'s line for step `n`: it waits for `deps`.
#[must_use]
pub fn after(n: u32, deps: &[u32]) -> Edit {
    let list: Vec<String> = deps.iter().map(u32::to_string).collect();
    Edit::Set(
        KeyPath::new([PlanKey::BLOCK[0], AFTER, &n.to_string()]),
        list.join(", "),
    )
}

/// Removes `PLAN.AFTER` (a new plan brings its own).
#[must_use]
pub fn no_after() -> Edit {
    Edit::Remove(KeyPath::new([PlanKey::BLOCK[0], AFTER]))
}

impl GateKey {
    /// The path of this key in gate `id`'s block.
    #[must_use]
    pub fn path(self, id: &str) -> KeyPath {
        KeyPath::new([Self::BLOCK[0], id, self.name()])
    }

    #[must_use]
    pub fn set(self, id: &str, value: impl Into<String>) -> Edit {
        Edit::Set(self.path(id), value.into())
    }
}

impl ParallelKey {
    /// The `PARALLEL:` block itself.
    #[must_use]
    pub fn block() -> KeyPath {
        KeyPath::new(Self::BLOCK.iter().copied())
    }
}

/// `PARALLEL.STEP_n`, step `n`'s record.
#[must_use]
pub fn run_block(step: u32) -> KeyPath {
    KeyPath::new([RunKey::BLOCK[0].to_owned(), format!("STEP_{step}")])
}

/// `path`, `set` and `remove` for the keys of a block that holds one block of them a step
/// (`RESULTS.STEP_N`, `PARALLEL.STEP_N`): the same three for each.
macro_rules! step_keys {
    ($($name:ident),+) => {$(
        impl $name {
            /// The path of this key in step `n`'s block.
            #[must_use]
            pub fn path(self, step: u32) -> KeyPath {
                within(&[Self::BLOCK[0], &format!("STEP_{step}")], self.name())
            }

            /// Sets the key of step `n`.
            #[must_use]
            pub fn set(self, step: u32, value: impl Into<String>) -> Edit {
                Edit::Set(self.path(step), value.into())
            }

            /// Removes the key of step `n`.
            #[must_use]
            pub fn remove(self, step: u32) -> Edit {
                Edit::Remove(self.path(step))
            }
        }
    )+};
}

step_keys!(ResultKey, RunKey);

/// Clears `CURRENT:` (the run on record is over).
#[must_use]
pub fn clear_current() -> Edit {
    Edit::Clear(KeyPath::new(CurrentKey::BLOCK.iter().copied()))
}

/// A step's review, as `RESULTS.STEP_N.REVIEW` says it (and `loop status --json` shows it:
/// the same words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Review {
    /// The step passed its checks and waits for its review.
    Pending,
    /// `approved: reason`.
    Approved(String),
    /// `changes (n): what`, the reviewer's words of its `n`-th request.
    Changes(u32, String),
    /// Anything else a person wrote there.
    Other(String),
}

impl Review {
    /// Reads the value (never fails: an unknown text is [`Review::Other`]).
    #[must_use]
    pub fn parse(v: &str) -> Self {
        let v = v.trim();
        if v == "pending" {
            return Review::Pending;
        }
        if let Some(r) = v.strip_prefix("approved:") {
            return Review::Approved(r.trim().to_owned());
        }
        if let Some(rest) = v.strip_prefix("changes (")
            && let Some((n, what)) = rest.split_once("):")
            && let Ok(n) = n.parse()
        {
            return Review::Changes(n, what.trim().to_owned());
        }
        Review::Other(v.to_owned())
    }
}

impl serde::Serialize for Review {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Review::Pending => f.write_str("pending"),
            Review::Approved(r) => write!(f, "approved: {r}"),
            Review::Changes(n, what) => write!(f, "changes ({n}): {what}"),
            Review::Other(v) => f.write_str(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_reads_back_as_it_was_written() {
        for r in [
            Review::Pending,
            Review::Approved("fine".into()),
            Review::Changes(2, "a.txt must say whole".into()),
        ] {
            assert_eq!(Review::parse(&r.to_string()), r);
        }
        assert_eq!(
            Review::parse("looked at"),
            Review::Other("looked at".into())
        );
    }

    #[test]
    fn status_json_shows_a_review_in_m1s_words_not_as_a_rust_enum() {
        let v = serde_json::to_value(Review::Approved("fine".into())).unwrap();
        assert_eq!(v, serde_json::json!("approved: fine"));
        let v = serde_json::to_value(Review::Pending).unwrap();
        assert_eq!(v, serde_json::json!("pending"));
    }

    #[test]
    fn keys_are_named_once_per_block() {
        fn unique(names: &[&str]) {
            let mut v = names.to_vec();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), names.len(), "{names:?}");
        }
        unique(&Top::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&CurrentKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&ResultKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&LimitKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&AgentKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&GateKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(
            &ParallelKey::ALL
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>(),
        );
        unique(&RunKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
        unique(&GithubKey::ALL.iter().map(|k| k.name()).collect::<Vec<_>>());
    }
}
