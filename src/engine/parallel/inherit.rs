//! What a step's own loop takes from the loop it belongs to, in one list: every setting of
//! `LIMITS:` and `AGENT:` is either inherited (written into the step's loop as this loop has
//! it) or named here with why it is not. A new key must be put on one side or the other: the
//! matches are exhaustive, so it does not compile until it is.

use crate::m1::keys::{AgentKey, LimitKey, PlanKey, Top};
use crate::m1::{Edit, KeyPath, M1, StepState};

/// Whether a step's loop takes a setting from the loop it belongs to.
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

/// A `LIMITS:` key's inheritance.
#[must_use]
pub(crate) const fn limit_inheritance(k: LimitKey) -> Inherit {
    match k {
        LimitKey::MaxRetries
        | LimitKey::StepTimeout
        | LimitKey::IdleTimeout
        | LimitKey::StepTimeoutMin
        | LimitKey::IdleTimeoutMin
        | LimitKey::MaxRestarts
        | LimitKey::ContextThreshold
        | LimitKey::MaxSession
        | LimitKey::MaxRetakes
        | LimitKey::FallbackAfter => Inherit::Kept,
        LimitKey::MaxCostUsd => Inherit::Not(
            "this loop holds the budget over all its steps, the running ones' spending counted",
        ),
        LimitKey::MaxSteps => Inherit::Not(
            "a step's loop holds this loop's whole plan (the other steps DONE or SKIPPED): its \
             cap is at least the plan's length",
        ),
        LimitKey::Parallel => Inherit::Not("a step's loop runs its one step, in its worktree"),
    }
}

/// An `AGENT:` key's inheritance: every one is inherited, so each step's agent runs as this
/// loop's would.
#[must_use]
pub(crate) const fn agent_inheritance(k: AgentKey) -> Inherit {
    match k {
        AgentKey::Program
        | AgentKey::PermissionMode
        | AgentKey::AllowedTools
        | AgentKey::Model
        | AgentKey::MaxTurns
        | AgentKey::MaxBudgetUsd
        | AgentKey::ExtraArgs
        | AgentKey::ReviewModel
        | AgentKey::Backend
        | AgentKey::ReviewBackend
        | AgentKey::Fallback
        | AgentKey::Sandbox
        | AgentKey::SandboxRead
        | AgentKey::SandboxWrite
        | AgentKey::SandboxEnv => Inherit::Kept,
    }
}

/// A key at the top of M1.md that is a setting: inherited, or not and why. `None`: not a
/// setting (the loop's own record: its status, plan, actions, identity).
#[must_use]
pub(crate) const fn top_inheritance(k: Top) -> Option<Inherit> {
    Some(match k {
        Top::Goal | Top::Constraints | Top::Verify | Top::Review | Top::Env => Inherit::Kept,
        Top::ApprovePlan => Inherit::Not("the plan was approved in this loop, before it ran"),
        Top::PlanOnly => Inherit::Not("a step's loop runs its step"),
        Top::PlanFile => Inherit::Not("this loop ticks the boxes of its checklist"),
        Top::CommitSteps => Inherit::Not("this loop's merge queue commits each step's work"),
        Top::Status
        | Top::LastAction
        | Top::NextAction
        | Top::Workdir
        | Top::LoopId
        | Top::StartedAt
        | Top::Parent
        | Top::ParentId
        | Top::ParentStep => return None,
    })
}

/// Where step `n`'s loop runs and whom it belongs to.
#[derive(Debug, Clone)]
pub(crate) struct StepLoop<'a> {
    pub step: u32,
    /// Its worktree: the loop's `WORKDIR`.
    pub worktree: &'a str,
    /// This loop's `M1.md` (absolute), its `LOOP_ID`, and the new loop's own id.
    pub parent_file: &'a str,
    pub parent_id: &'a str,
    pub loop_id: &'a str,
    pub started_at: &'a str,
    /// This loop's `MAX_STEPS` in force.
    pub max_steps: u32,
}

/// The edits that make step `s.step`'s own loop from the template: this loop's plan with that
/// step to run (the steps merged already DONE, the others SKIPPED: not its work), bound to
/// this loop, with every inherited setting as this loop runs with it (`runs_with`: a key's
/// text as this loop resolves it). A `LIMITS:` or `AGENT:` key this loop runs without (no
/// model, no idle timeout) is taken out of the template, so no default stands in for it.
#[must_use]
pub(crate) fn step_loop(
    m: &M1,
    s: &StepLoop<'_>,
    runs_with: &dyn Fn(&KeyPath) -> Option<String>,
) -> Vec<Edit> {
    let n = s.step;
    let mut edits = vec![
        Edit::SetSteps(
            m.plan
                .steps
                .iter()
                .map(|step| {
                    let state = match step.state {
                        _ if step.n == n => StepState::Pending,
                        StepState::Done => StepState::Done,
                        _ => StepState::Skipped,
                    };
                    (state, step.text.clone())
                })
                .collect(),
        ),
        PlanKey::CurrentStep.set(n.to_string()),
        Top::NextAction.set(format!("Start step {n}")),
        Top::Workdir.set(s.worktree),
        Top::Parent.set(s.parent_file),
        Top::ParentId.set(s.parent_id),
        Top::ParentStep.set(n.to_string()),
        Top::LoopId.set(s.loop_id),
        Top::StartedAt.set(s.started_at),
        LimitKey::MaxSteps.set(
            s.max_steps
                .max(u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX))
                .to_string(),
        ),
        LimitKey::Parallel.set("1"),
    ];
    for k in Top::ALL {
        if top_inheritance(*k) == Some(Inherit::Kept)
            && let Some(v) = runs_with(&k.path())
        {
            edits.push(Edit::Set(k.path(), v));
        }
    }
    let setting = |path: KeyPath| match runs_with(&path) {
        Some(v) => Edit::Set(path, v),
        None => Edit::Remove(path),
    };
    for k in LimitKey::ALL {
        if limit_inheritance(*k) == Inherit::Kept {
            edits.push(setting(k.path()));
        }
    }
    for k in AgentKey::ALL {
        if agent_inheritance(*k) == Inherit::Kept {
            edits.push(setting(k.path()));
        }
    }
    edits
}

use crate::m1::keys::Key as _;
