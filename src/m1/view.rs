//! The typed view of M1.md: what the runner and `loop status` read. Built from a validated
//! document, so every typed field here has already been checked by `validate`.

use super::keys::Key;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use super::document::Document;
use super::keys::{
    AgentKey, CurrentKey, GithubKey, LimitKey, PENDING, ParallelKey, PlanKey, ResultKey, Review,
    RunKey, Top, switch_on,
};
use super::settings::{AgentKind, DEFAULTS, PermissionMode};
use super::steps;
use super::typed;

/// The loop's state, as in `STATUS:`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    #[default]
    Idle,
    Running,
    Waiting,
    Done,
    Failed,
}

/// A step's state, as in `N: [STATE] text`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum StepState {
    #[default]
    Pending,
    Running,
    Done,
    Failed,
    Skipped,
}

upper_enum!(
    Status,
    "STATUS",
    Idle = "IDLE",
    Running = "RUNNING",
    Waiting = "WAITING",
    Done = "DONE",
    Failed = "FAILED"
);
upper_enum!(
    StepState,
    "step state",
    Pending = "PENDING",
    Running = "RUNNING",
    Done = "DONE",
    Failed = "FAILED",
    Skipped = "SKIPPED"
);

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Step {
    pub n: u32,
    pub state: StepState,
    pub text: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Plan {
    /// `TOTAL_STEPS`, or the number of steps when the file leaves it out.
    pub total_steps: u32,
    /// 0 while planning / not started.
    pub current_step: u32,
    pub steps: Vec<Step>,
    /// `PLAN.AFTER`: the steps each step waits for (it starts only once they are DONE or
    /// SKIPPED); empty when the plan has no such block.
    pub after: BTreeMap<u32, Vec<u32>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Current {
    pub task_id: Option<String>,
    pub cc_pid: Option<u32>,
    pub spawn_time: Option<String>,
    pub command: Option<String>,
    pub session_id: Option<String>,
    pub attempt: Option<u32>,
    /// The project's git HEAD when the run began.
    pub git_head: Option<String>,
    /// The end of a backoff or a usage-limit wait, and why.
    pub wait_until: Option<chrono::DateTime<chrono::Utc>>,
    pub wait_reason: Option<String>,
    /// The run on record is a review of its step.
    pub review: bool,
    /// Every other scalar key of CURRENT (a person's own), by name.
    pub(super) extra: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepResult {
    /// `None` when absent or `(pending)`.
    pub exit: Option<i32>,
    /// The step's commit; `None` when absent or `(pending)`.
    pub commit: Option<String>,
    /// `COMMIT: (pending)`: the step's work is to be committed once it is DONE.
    pub commit_pending: bool,
    /// The commits the agent made itself during the step (`AGENT_COMMITS`), as written.
    pub agent_commits: Option<String>,
    /// What of the step's work its commit left out, and why (`UNCOMMITTED`).
    pub uncommitted: Option<String>,
    pub summary: Option<String>,
    pub verified: Option<bool>,
    pub attempts: Option<u32>,
    pub cost_usd: Option<f64>,
    pub duration_s: Option<f64>,
    pub session_id: Option<String>,
    pub error: Option<String>,
    pub report: Option<String>,
    /// Transient errors waited out.
    pub transient: u32,
    /// Why the last run was cut off (an API error waited out).
    pub interrupted: Option<String>,
    /// The question of a `STEP_BLOCKED`.
    pub blocked: Option<String>,
    /// Fresh sessions the agent asked for.
    pub restarts: u32,
    /// Why the next run starts a fresh session with a handoff.
    pub handoff: Option<String>,
    pub context_pct: Option<u32>,
    pub session_s: Option<f64>,
    pub compactions: u32,
    pub review: Option<Review>,
    pub retakes: u32,
    pub review_runs: u32,
    pub review_task: Option<String>,
    pub base_head: Option<String>,
    /// The attempts before a person's `loop retry`, which no longer count.
    pub retried: u32,
    /// The backend this step's runs go to since a usage limit sent it to the fallback.
    pub backend: Option<AgentKind>,
    /// Tokens the step's runs used (a backend that reports tokens, not dollars).
    pub tokens: Option<u64>,
    /// Tokens of the step's session so far (the session's own count is cumulative).
    pub session_tokens: Option<u64>,
    /// Every other scalar key of the block (a person's own), by name.
    pub(super) extra: BTreeMap<String, String>,
}

/// The safety limits as M1.md states them: `None` where the file leaves a limit out (the
/// runner then takes `loop.yaml`'s, else the default). Shown by `loop status --json` with the
/// documented defaults filled in and durations as M1.md writes them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    pub max_retries: Option<u32>,
    pub max_steps: Option<u32>,
    /// [`LimitKey::StepTimeout`] (exact), or [`LimitKey::StepTimeoutMin`] of an older file.
    pub step_timeout: Option<Duration>,
    /// `IDLE_TIMEOUT` (exact), or `IDLE_TIMEOUT_MIN` of an older file.
    pub idle_timeout: Option<Duration>,
    pub max_cost_usd: Option<f64>,
    /// Fresh sessions a step may ask for with `STEP_RESTART` (default 3).
    pub max_restarts: Option<u32>,
    /// Percent of the model's context window past which a retry starts a fresh session with
    /// a handoff instead of resuming (default 70).
    pub context_threshold: Option<u32>,
    /// Time in one session past which a retry starts a fresh one with a handoff.
    pub max_session: Option<Duration>,
    /// Reviews that may ask a step for changes before a human decides (default 3).
    pub max_retakes: Option<u32>,
    /// A usage limit resetting later than this sends a step to `AGENT.FALLBACK`.
    pub fallback_after: Option<Duration>,
    /// Steps that may run at once (`PARALLEL`, default 1).
    pub parallel: Option<u32>,
}

impl Serialize for Limits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let exact = crate::duration::exact;
        let mut st = s.serialize_struct("Limits", 5)?;
        st.serialize_field(
            "max_retries",
            &self.max_retries.unwrap_or(DEFAULTS.max_retries),
        )?;
        st.serialize_field("max_steps", &self.max_steps.unwrap_or(DEFAULTS.max_steps))?;
        st.serialize_field(
            "step_timeout",
            &exact(self.step_timeout.unwrap_or(DEFAULTS.step_timeout)),
        )?;
        st.serialize_field("idle_timeout", &self.idle_timeout.map(exact))?;
        st.serialize_field("max_cost_usd", &self.max_cost_usd)?;
        // The session limits only where the file sets them.
        if let Some(n) = self.max_restarts {
            st.serialize_field("max_restarts", &n)?;
        }
        if let Some(p) = self.context_threshold {
            st.serialize_field("context_threshold", &p)?;
        }
        if let Some(d) = self.max_session {
            st.serialize_field("max_session", &exact(d))?;
        }
        if let Some(d) = self.fallback_after {
            st.serialize_field("fallback_after", &exact(d))?;
        }
        if let Some(n) = self.parallel {
            st.serialize_field("parallel", &n)?;
        }
        st.end()
    }
}

/// The `AGENT:` block: how each step's agent is called. `None` where the file leaves a key
/// out (the runner then takes `loop.yaml`, `LOOP_AGENT`, or the default).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgentKeys {
    pub program: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub allowed_tools: Option<Vec<String>>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub extra_args: Option<Vec<String>>,
    /// The reviewer's model (`REVIEW_MODEL`), when not the steps' own.
    pub review_model: Option<String>,
    /// The agent CLI of the steps (`BACKEND`; absent: `claude`).
    pub backend: Option<AgentKind>,
    /// The reviewer's agent CLI (`REVIEW_BACKEND`), when not the steps' own.
    pub review_backend: Option<AgentKind>,
    /// Where a step goes when its agent's usage limit resets too late (`FALLBACK`): the
    /// backends to try, in order; empty when none is set.
    pub fallback: Vec<AgentKind>,
    /// How runs are confined (`SANDBOX`).
    pub sandbox: Option<super::settings::SandboxMode>,
    /// Paths a confined run may read (`SANDBOX_READ`) and write (`SANDBOX_WRITE`).
    pub sandbox_read: Option<Vec<String>>,
    pub sandbox_write: Option<Vec<String>>,
    /// Variables a confined run keeps besides its own (`SANDBOX_ENV`).
    pub sandbox_env: Option<Vec<String>>,
}

/// The `PARALLEL:` block of a loop whose steps run at once (`LIMITS.PARALLEL` above 1): the
/// integration branch the steps are merged into, the commit it began from, and each running
/// step's record, written before its worktree and its loop exist.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Parallel {
    /// The integration branch (`loop/<LOOP_ID>`).
    pub branch: Option<String>,
    /// The project's HEAD when the branch was made: the project is fast-forwarded at the end
    /// only if it is still there.
    pub base: Option<String>,
    /// `STEP_N`: the running (or merging) steps.
    pub runs: BTreeMap<u32, ParallelRun>,
}

/// One step running in a worktree of its own (`PARALLEL.STEP_N`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ParallelRun {
    pub worktree: Option<String>,
    pub branch: Option<String>,
    /// The integration head the step's branch was made from.
    pub base: Option<String>,
    /// The step's own loop (its M1.md), which runs it in the worktree.
    pub loop_file: Option<String>,
    /// Merges (or a VERIFY after the merge) that failed and sent the step back.
    pub merge_fails: u32,
    /// Its loop was stopped with this one (`STOPPED: true`): `loop resume` here resumes it.
    pub stopped: bool,
    /// The integration commit it was merged as: only its worktree and branch are left to
    /// clean up.
    pub merged: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct M1 {
    pub status: Status,
    pub goal: String,
    pub constraints: Option<String>,
    pub plan: Plan,
    pub current: Current,
    pub results: BTreeMap<u32, StepResult>,
    pub last_action: Option<String>,
    pub next_action: Option<String>,
    pub limits: Limits,
    pub agent: AgentKeys,
    pub verify: Option<String>,
    /// `REVIEW: on`: every step that passes is reviewed by a separate, read-only agent run.
    pub review: bool,
    /// `COMMIT_STEPS`: whether each DONE step is committed; `None` when the file does not say
    /// (the settings decide, on by default).
    pub commit_steps: Option<bool>,
    /// The project directory the agent works in (`WORKDIR`).
    pub workdir: Option<String>,
    /// The loop's identity (`LOOP_ID`), which its tasks carry.
    pub loop_id: Option<String>,
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The `--plan` checklist the steps came from.
    pub plan_file: Option<String>,
    /// Started with `--plan-only`: once planned, the loop waits.
    pub plan_only: bool,
    /// Started with `--approve-plan`: no step runs before a person approves the plan.
    pub approve_plan: bool,
    /// The decisions the loop waits for, and those made (`GATES:`), in the file's order.
    pub gates: Vec<super::gates::Gate>,
    /// Steps running at once (`PARALLEL:`).
    pub parallel: Parallel,
    /// The loop that runs this one as one of its parallel steps (`PARENT`).
    pub parent: Option<String>,
    /// That loop's `LOOP_ID` (`PARENT_ID`): this loop belongs to that loop alone.
    pub parent_id: Option<String>,
    /// The step of that loop this loop runs (`PARENT_STEP`).
    pub parent_step: Option<u32>,
    /// The variables the loop was started with that its runs use (`ENV`), by name.
    pub env: Vec<String>,
    /// Its issue and pull request (`GITHUB:`).
    pub github: Github,
}

/// The `GITHUB:` block: the issue a loop was started from (`--issue`), the branch it works on,
/// and the pull request it opens when it is DONE (`--pr`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Github {
    pub issue: Option<u32>,
    pub issue_url: Option<String>,
    pub issue_body: Option<String>,
    pub branch: Option<String>,
    pub base: Option<String>,
    /// A pull request is opened at DONE.
    pub pull_request: bool,
    /// A FAILED loop comments on its issue.
    pub comment: bool,
    /// Pushing and opening began then (the intent, written first).
    pub opening: Option<chrono::DateTime<chrono::Utc>>,
    /// The pull request's URL, once open.
    pub pr: Option<String>,
    pub pr_error: Option<String>,
    pub commented: Option<String>,
}

impl M1 {
    /// Step `n`'s results, or an empty record when it has none yet.
    #[must_use]
    pub fn result(&self, n: u32) -> std::borrow::Cow<'_, StepResult> {
        self.results.get(&n).map_or_else(
            || std::borrow::Cow::Owned(StepResult::default()),
            std::borrow::Cow::Borrowed,
        )
    }

    /// The gate named `id` (`G3`, or `g3`).
    #[must_use]
    pub fn gate(&self, id: &str) -> Option<&super::gates::Gate> {
        self.gates
            .iter()
            .find(|g| g.id.eq_ignore_ascii_case(id.trim()))
    }

    /// The gates still waiting for a decision.
    pub fn pending_gates(&self) -> impl Iterator<Item = &super::gates::Gate> {
        self.gates.iter().filter(|g| g.is_pending())
    }

    pub(crate) fn from_document(doc: &Document) -> M1 {
        let top = |k: Top| doc.get(&[k.name()]);
        let plan = |k: PlanKey| doc.get(&["PLAN", k.name()]);
        let limit = |k: LimitKey| doc.get(&["LIMITS", k.name()]);
        let agent = |k: AgentKey| doc.get(&["AGENT", k.name()]);
        let steps = steps::list(doc);
        M1 {
            status: parsed(top(Top::Status)).unwrap_or_default(),
            goal: top(Top::Goal).unwrap_or_default(),
            constraints: top(Top::Constraints).filter(|c| c.trim() != typed::NONE),
            plan: Plan {
                total_steps: parsed(plan(PlanKey::TotalSteps))
                    .unwrap_or(u32::try_from(steps.len()).unwrap_or(u32::MAX)),
                current_step: parsed(plan(PlanKey::CurrentStep)).unwrap_or(0),
                steps,
                after: steps::after(doc),
            },
            current: current(doc),
            results: results(doc),
            last_action: top(Top::LastAction),
            next_action: top(Top::NextAction),
            limits: Limits {
                max_retries: parsed(limit(LimitKey::MaxRetries)),
                max_steps: parsed(limit(LimitKey::MaxSteps)),
                step_timeout: timeout(doc, LimitKey::StepTimeout, LimitKey::StepTimeoutMin),
                idle_timeout: timeout(doc, LimitKey::IdleTimeout, LimitKey::IdleTimeoutMin),
                max_cost_usd: parsed(limit(LimitKey::MaxCostUsd)),
                max_restarts: parsed(limit(LimitKey::MaxRestarts)),
                context_threshold: parsed(limit(LimitKey::ContextThreshold)),
                max_session: limit(LimitKey::MaxSession).and_then(|v| typed::duration(&v).ok()),
                max_retakes: parsed(limit(LimitKey::MaxRetakes)),
                fallback_after: limit(LimitKey::FallbackAfter)
                    .and_then(|v| typed::duration(&v).ok()),
                parallel: parsed(limit(LimitKey::Parallel)),
            },
            agent: AgentKeys {
                program: agent(AgentKey::Program).filter(|p| !p.trim().is_empty()),
                permission_mode: parsed(agent(AgentKey::PermissionMode)),
                allowed_tools: agent(AgentKey::AllowedTools).and_then(|v| typed::tools(&v).ok()),
                model: agent(AgentKey::Model),
                max_turns: parsed(agent(AgentKey::MaxTurns)),
                max_budget_usd: parsed(agent(AgentKey::MaxBudgetUsd)),
                extra_args: agent(AgentKey::ExtraArgs).and_then(|v| typed::args(&v).ok()),
                review_model: agent(AgentKey::ReviewModel),
                backend: parsed(agent(AgentKey::Backend)),
                review_backend: parsed(agent(AgentKey::ReviewBackend)),
                fallback: agent(AgentKey::Fallback)
                    .and_then(|v| typed::backends(&v).ok())
                    .unwrap_or_default(),
                sandbox: parsed(agent(AgentKey::Sandbox)),
                sandbox_read: agent(AgentKey::SandboxRead).and_then(|v| typed::paths(&v).ok()),
                sandbox_write: agent(AgentKey::SandboxWrite).and_then(|v| typed::paths(&v).ok()),
                sandbox_env: agent(AgentKey::SandboxEnv).and_then(|v| typed::env_names(&v).ok()),
            },
            verify: top(Top::Verify),
            review: top(Top::Review).is_some_and(|v| switch_on(&v)),
            commit_steps: top(Top::CommitSteps).map(|v| switch_on(&v)),
            workdir: top(Top::Workdir).filter(|w| !w.trim().is_empty()),
            loop_id: top(Top::LoopId).filter(|s| !s.is_empty()),
            started_at: top(Top::StartedAt).and_then(|v| typed::time(&v).ok()),
            plan_file: top(Top::PlanFile),
            plan_only: top(Top::PlanOnly).is_some_and(|v| switch_on(&v)),
            approve_plan: top(Top::ApprovePlan).is_some_and(|v| switch_on(&v)),
            gates: super::gates::list(doc),
            parallel: parallel(doc),
            parent: top(Top::Parent).filter(|p| !p.trim().is_empty()),
            parent_id: top(Top::ParentId).filter(|p| !p.trim().is_empty()),
            parent_step: parsed(top(Top::ParentStep)),
            env: top(Top::Env)
                .and_then(|v| typed::env_names(&v).ok())
                .unwrap_or_default(),
            github: github(doc),
        }
    }
}

/// `LIMITS.<KEY>` as an exact duration, else `<KEY>_MIN` in minutes (older files).
fn timeout(doc: &Document, exact: LimitKey, minutes: LimitKey) -> Option<Duration> {
    doc.get(&["LIMITS", exact.name()])
        .and_then(|v| typed::duration(&v).ok())
        .or_else(|| {
            doc.get(&["LIMITS", minutes.name()])
                .and_then(|v| typed::minutes(&v).ok())
        })
}

/// `CURRENT:`, the run on record.
fn current(doc: &Document) -> Current {
    let get = |k: CurrentKey| doc.get(&["CURRENT", k.name()]);
    Current {
        task_id: get(CurrentKey::TaskId),
        cc_pid: parsed(get(CurrentKey::CcPid)),
        spawn_time: get(CurrentKey::SpawnTime),
        command: get(CurrentKey::Command),
        session_id: get(CurrentKey::SessionId),
        attempt: parsed(get(CurrentKey::Attempt)),
        git_head: get(CurrentKey::GitHead),
        wait_until: get(CurrentKey::WaitUntil).and_then(|v| typed::time(&v).ok()),
        wait_reason: get(CurrentKey::WaitReason),
        review: get(CurrentKey::Review).is_some_and(|v| v.trim() == "true"),
        extra: extra(
            doc,
            doc.find(&["CURRENT"]),
            &names(CurrentKey::ALL, CurrentKey::name),
        ),
    }
}

/// `RESULTS.STEP_N` blocks by step number; other keys under RESULTS are not results.
fn results(doc: &Document) -> BTreeMap<u32, StepResult> {
    let mut out = BTreeMap::new();
    let Some(block) = doc.find(&["RESULTS"]) else {
        return out;
    };
    let known = names(ResultKey::ALL, ResultKey::name);
    for i in doc.children(Some(block)) {
        let Some(n) = result_step(&doc.key_at(i).key) else {
            continue;
        };
        // A record with nothing in it records nothing.
        if doc.children(Some(i)).next().is_none() {
            continue;
        }
        let field = |k: ResultKey| {
            doc.child(Some(i), k.name())
                .and_then(|j| doc.key_at(j).value.as_ref().map(|v| v.text.clone()))
        };
        let count = |k: ResultKey| parsed(field(k)).unwrap_or(0);
        out.insert(
            n,
            StepResult {
                exit: parsed(field(ResultKey::Exit)),
                commit: field(ResultKey::Commit).filter(|c| c.trim() != PENDING),
                commit_pending: field(ResultKey::Commit).is_some_and(|c| c.trim() == PENDING),
                agent_commits: field(ResultKey::AgentCommits),
                uncommitted: field(ResultKey::Uncommitted),
                summary: field(ResultKey::Summary),
                verified: parsed(field(ResultKey::Verified)),
                attempts: parsed(field(ResultKey::Attempts)),
                cost_usd: parsed(field(ResultKey::CostUsd)),
                duration_s: parsed(field(ResultKey::DurationS)),
                session_id: field(ResultKey::SessionId),
                error: field(ResultKey::Error),
                report: field(ResultKey::Report),
                transient: count(ResultKey::Transient),
                interrupted: field(ResultKey::Interrupted),
                blocked: field(ResultKey::Blocked),
                restarts: count(ResultKey::Restarts),
                handoff: field(ResultKey::Handoff),
                context_pct: parsed(field(ResultKey::ContextPct)),
                session_s: parsed(field(ResultKey::SessionS)),
                compactions: count(ResultKey::Compactions),
                review: field(ResultKey::Review).map(|v| Review::parse(&v)),
                retakes: count(ResultKey::Retakes),
                review_runs: count(ResultKey::ReviewRuns),
                review_task: field(ResultKey::ReviewTask),
                base_head: field(ResultKey::BaseHead),
                retried: count(ResultKey::Retried),
                backend: parsed(field(ResultKey::Backend)),
                tokens: parsed(field(ResultKey::Tokens)),
                session_tokens: parsed(field(ResultKey::SessionTokens)),
                extra: extra(doc, Some(i), &known),
            },
        );
    }
    out
}

/// `GITHUB:`.
fn github(doc: &Document) -> Github {
    let get = |k: GithubKey| {
        doc.get(&[GithubKey::BLOCK[0], k.name()])
            .filter(|v| !v.trim().is_empty())
    };
    Github {
        issue: parsed(get(GithubKey::Issue)),
        issue_url: get(GithubKey::IssueUrl),
        issue_body: get(GithubKey::IssueBody),
        branch: get(GithubKey::Branch),
        base: get(GithubKey::Base),
        pull_request: get(GithubKey::PullRequest).is_some_and(|v| switch_on(&v)),
        comment: get(GithubKey::Comment).is_some_and(|v| switch_on(&v)),
        opening: get(GithubKey::Opening).and_then(|v| typed::time(&v).ok()),
        pr: get(GithubKey::Pr),
        pr_error: get(GithubKey::PrError),
        commented: get(GithubKey::Commented),
    }
}

/// `PARALLEL:`.
fn parallel(doc: &Document) -> Parallel {
    let Some(block) = doc.find(ParallelKey::BLOCK) else {
        return Parallel::default();
    };
    let get = |i: Option<usize>, k: &str| {
        doc.child(i, k)
            .and_then(|j| doc.key_at(j).value.as_ref().map(|v| v.text.clone()))
    };
    let mut runs = BTreeMap::new();
    for i in doc.children(Some(block)) {
        let Some(n) = result_step(&doc.key_at(i).key) else {
            continue;
        };
        runs.insert(
            n,
            ParallelRun {
                worktree: get(Some(i), RunKey::Worktree.name()),
                branch: get(Some(i), RunKey::Branch.name()),
                base: get(Some(i), RunKey::Base.name()),
                loop_file: get(Some(i), RunKey::Loop.name()),
                merge_fails: get(Some(i), RunKey::MergeFails.name())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                stopped: get(Some(i), RunKey::Stopped.name()).is_some_and(|v| v.trim() == "true"),
                merged: get(Some(i), RunKey::Merged.name()),
            },
        );
    }
    Parallel {
        branch: get(Some(block), ParallelKey::Branch.name()),
        base: get(Some(block), ParallelKey::Base.name()),
        runs,
    }
}

fn names<K: Copy>(all: &[K], name: fn(K) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|k| name(*k)).collect()
}

/// The scalar children of `block` whose keys the typed fields do not cover.
fn extra(doc: &Document, block: Option<usize>, known: &[&str]) -> BTreeMap<String, String> {
    let Some(block) = block else {
        return BTreeMap::new();
    };
    doc.children(Some(block))
        .filter_map(|j| {
            let k = doc.key_at(j);
            let v = k.value.as_ref()?;
            (!known.contains(&k.key.as_str())).then(|| (k.key.clone(), v.text.clone()))
        })
        .collect()
}

fn parsed<T: FromStr>(v: Option<String>) -> Option<T> {
    v.and_then(|v| v.parse().ok())
}

/// `STEP_12` → 12.
pub(crate) fn result_step(key: &str) -> Option<u32> {
    key.strip_prefix("STEP_")?.parse().ok()
}
