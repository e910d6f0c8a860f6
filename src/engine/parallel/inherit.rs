//! What a step's own loop takes from the loop it belongs to: every setting is inherited
//! (written into the step's loop as this loop has it) or its row of the settings table
//! (`m1/settings.rs`) says why it is not; the loop's own words (goal, constraints, `ENV`) are
//! inherited too.

use crate::m1::keys::{AgentKey, LimitKey, PlanKey, Top};
pub(crate) use crate::m1::settings::Inherit;
use crate::m1::settings::{Kept, row};
use crate::m1::{Edit, KeyPath, M1, StepState};

/// A setting's inheritance, as the settings table says (`m1/settings.rs`); every `LIMITS:`
/// and `AGENT:` key has a row there, a test holds it so.
fn inheritance(kept: Kept) -> Inherit {
    row(kept).map_or(Inherit::Kept, |s| s.inherit)
}

/// A `LIMITS:` key's inheritance.
#[must_use]
pub(crate) fn limit_inheritance(k: LimitKey) -> Inherit {
    inheritance(Kept::Limit(k))
}

/// An `AGENT:` key's inheritance: the table inherits every one, so each step's agent runs as
/// this loop's would.
#[must_use]
pub(crate) fn agent_inheritance(k: AgentKey) -> Inherit {
    inheritance(Kept::Agent(k))
}

/// A key at the top of M1.md that is a setting (the table's), or the loop's own words a step
/// needs: inherited, or not and why. `None`: not a setting (the loop's own record: its
/// status, plan, actions, identity).
#[must_use]
pub(crate) fn top_inheritance(k: Top) -> Option<Inherit> {
    if let Some(s) = row(Kept::Top(k)) {
        return Some(s.inherit);
    }
    Some(match k {
        Top::Goal | Top::Constraints | Top::Env => Inherit::Kept,
        Top::PlanOnly => Inherit::Not("a step's loop runs its step"),
        Top::PlanFile => Inherit::Not("this loop ticks the boxes of its checklist"),
        _ => return None,
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
