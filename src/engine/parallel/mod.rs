//! Steps at once (`LIMITS.PARALLEL` above 1): the one scheduler for every run in flight, as
//! pure rules over M1.md and what the runner saw of each step's own loop.
//!
//! Each running step is a loop of its own (its `M1.md` in the state directory, its worktree
//! on a branch of its own), bound to this loop by `PARENT_ID` and `PARENT_STEP`. The rules
//! here say, for the loop the person started: which step starts, which is merged, which is
//! carried on, which decision of a step is shown here or carried there, when the loop fails,
//! waits or is complete. The runner only does what they say: git, spawning and watching.
//! Readiness is [`super::order::ready`], the rule a loop running one step at a time follows
//! too.

mod inherit;
mod record;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub(crate) use inherit::{StepLoop, step_loop};
pub(crate) use record::{
    Landed, MergeCheck, MergeFailure, MergeOutcome, RunNames, WorkPlace, carried, dropped, failed,
    finished, merge_failed, merged, mirrored, recorded, retried_there, sent_back_by_a_person,
    settled, waiting,
};

use super::Caps;
use super::next::{over_max_cost, over_max_steps, spent};
use super::order::ready;
use super::{Next, RunKind};
use crate::m1::{Gate, GateKind, M1, ParallelRun, Status, StepState};

/// What the runner saw of step `n`'s own loop (`PARALLEL.STEP_N.LOOP`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seen {
    /// Its loop is not there yet: a crash cut its start short.
    Unmade,
    /// The loop at its path belongs to another loop, or another step (why).
    Foreign(String),
    /// Its runner drives it.
    Driven,
    /// Nobody drives it, and it would run: its runner died, or has not started yet.
    Undriven,
    /// It waits on one of its gates: a decision a person makes, here.
    Decision(Box<Gate>),
    /// It waits for something else a person must do (what its `NEXT_ACTION` says).
    Halted(String),
    /// Its step is DONE: its work is to be merged.
    Done,
    /// Its step was SKIPPED there (a decision taken in that loop).
    Skipped,
    /// It FAILED without a gate to decide (a person chose stop): why.
    Failed(String),
}

/// What the runner saw of one step running at once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observed {
    pub seen: Seen,
    /// What its loop spent so far (counted against `MAX_COST_USD` while it runs).
    pub spent: f64,
    /// Its loop's gates that were decided there: id, choice, by whom.
    pub decided: Vec<(String, String, String)>,
}

impl Observed {
    #[must_use]
    pub(crate) fn new(seen: Seen) -> Self {
        Self {
            seen,
            spent: 0.0,
            decided: Vec::new(),
        }
    }
}

/// What the runner does next for a loop whose steps run at once. The runner carries out the
/// first move and asks again: each is decided on what is true after the one before.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Move {
    /// Start step `n`: its record (if it has none), then its worktree, its loop, its runner,
    /// each made only if not made already.
    Start(u32),
    /// The loop at step `n`'s path is not its own: set it aside, never adopted.
    SetAside(u32),
    /// Step `n`'s loop runs on: its runner is started (its stop mark goes first).
    Drive(u32),
    /// Step `n`'s loop is DONE: merge its work, verify the merged result.
    Merge(u32),
    /// A person chose `retry` on step `step`'s MERGE gate `gate`: it goes back to its session
    /// with the integration branch merged in, and a fresh budget of merges.
    SendBack { step: u32, gate: String },
    /// Step `n` is merged: its worktree and branch go where the result holds their work, then
    /// its record.
    CleanUp(u32),
    /// Step `n` is SKIPPED (there, here by a decision, or by hand): it stops if it runs, its
    /// work is kept on its branch if it has any, its worktree and record go.
    Drop(u32),
    /// Step `n`'s loop waits on its gate `gate`: shown here, as a gate of this loop.
    Mirror { step: u32, gate: Box<Gate> },
    /// A decision taken here on gate `gate` goes to the gate `step_gate` of step `n`'s loop.
    Carry {
        step: u32,
        gate: String,
        step_gate: String,
        choice: String,
        by: String,
    },
    /// The gate `gate` here stands for a gate step `step`'s loop decided itself: it is
    /// closed with that decision.
    Settled {
        step: u32,
        gate: String,
        choice: String,
        by: String,
    },
    /// A person's retry of step `n` here (`loop retry`) after its loop FAILED: that loop gets
    /// a fresh budget and runs on.
    RetryThere(u32),
    /// Step `n`'s loop FAILED: this loop fails at it, the other steps stop with it.
    Fail { step: u32, reason: String },
    /// Every step is DONE or SKIPPED and none is in flight: the end (the project gets the
    /// result, the loop's branches and worktrees go), then DONE.
    Finish,
    /// Nothing can go on without a person, and no step is in flight.
    Halt { reason: String, how: String },
    /// The loop's spending reached `MAX_COST_USD` before step `step` could start, and no step
    /// is in flight: it waits on a COST gate (raise the cap, or stop), as a loop of one step
    /// at a time does.
    OverBudget { step: u32, reason: String },
    /// Every step in flight waits for a person: the loop waits (its runner ends).
    Wait,
}

/// Whether the scheduler of steps at once ([`schedule`]) decides for the loop `m`, whose next
/// move one step at a time would be `next`, with `slots` steps allowed at once
/// (`LIMITS.PARALLEL`). It does for a loop that runs its steps at once (`slots` above 1, or a
/// `PARALLEL:` block of steps that ran at once, carried on whatever `LIMITS.PARALLEL` says now:
/// a step is never started a second time in the project itself, and a loop that ran its steps
/// at once ends as one), with a plan to run and no run of its own on record, when what comes
/// next is an attempt of a step, the loop's end (complete, a halt, a cost cap), or a step is in
/// flight. A DONE step's commit (`Next::Commit`) comes first in either loop.
#[must_use]
pub(crate) fn decides(m: &M1, next: &Next, slots: u32) -> bool {
    let at_once = (slots > 1 || m.parallel.branch.is_some() || !m.parallel.runs.is_empty())
        && !m.plan.steps.is_empty()
        && m.status == Status::Running
        && m.current.task_id.is_none();
    let its_move = matches!(next, Next::Run(spec) if spec.kind == RunKind::Attempt)
        || matches!(
            next,
            Next::Complete | Next::Halt { .. } | Next::OverBudget { .. }
        );
    at_once && (its_move || !m.parallel.runs.is_empty())
}

/// The next moves of the loop `m`, whose recorded steps' loops were seen as `seen`, with
/// `slots` steps allowed at once under `caps`. Empty: nothing to do until something changes.
#[must_use]
pub(crate) fn schedule(
    m: &M1,
    seen: &BTreeMap<u32, Observed>,
    slots: u32,
    caps: &Caps,
) -> Vec<Move> {
    let mut moves: Vec<Move> = m
        .parallel
        .runs
        .iter()
        .filter_map(|(&n, run)| {
            let o = seen
                .get(&n)
                .cloned()
                .unwrap_or_else(|| Observed::new(Seen::Unmade));
            one_run(m, n, run, &o, caps)
        })
        .collect();
    moves.extend(settled_gates(m, seen));
    let in_flight = m.parallel.runs.len();
    let starts = starts(m, seen, slots, caps);
    if let Some(over) = starts.as_ref().err()
        && in_flight == 0
        && moves.is_empty()
    {
        return vec![(**over).clone()];
    }
    // New steps first: starting one is quick, and its agent works while the rest is done.
    let mut starts = starts.unwrap_or_default();
    if !starts.is_empty() || !moves.is_empty() {
        starts.extend(moves);
        return starts;
    }
    if in_flight == 0 {
        return vec![complete_or_stuck(m)];
    }
    let all_wait = m.parallel.runs.iter().all(|(n, run)| {
        match seen.get(n).map(|o| &o.seen) {
            Some(Seen::Decision(_)) => true,
            Some(Seen::Halted(_)) => !run.stopped,
            // Its merge waits on its MERGE gate.
            Some(Seen::Done) => run.merge_fails >= caps.max_retries,
            _ => false,
        }
    });
    if all_wait {
        vec![Move::Wait]
    } else {
        Vec::new()
    }
}

/// What step `n`, recorded as running at once, needs now.
fn one_run(m: &M1, n: u32, run: &ParallelRun, o: &Observed, caps: &Caps) -> Option<Move> {
    let state = m.plan.steps.iter().find(|s| s.n == n).map(|s| s.state);
    if run.merged.is_some() {
        return Some(Move::CleanUp(n));
    }
    // Skipped here (by hand, or a decision on its merge), gone from the plan, or set DONE by
    // hand before it was merged (a merge sets DONE and MERGED at once): the person's word, which
    // lets the step go (its work kept on its branch) and keeps its state.
    if matches!(state, None | Some(StepState::Skipped | StepState::Done)) {
        return Some(Move::Drop(n));
    }
    match &o.seen {
        Seen::Unmade => Some(Move::Start(n)),
        Seen::Foreign(_) => Some(Move::SetAside(n)),
        Seen::Driven => None,
        Seen::Undriven => Some(Move::Drive(n)),
        Seen::Halted(_) => run.stopped.then_some(Move::Drive(n)),
        Seen::Decision(g) => decision(m, n, g),
        Seen::Done if run.merge_fails >= caps.max_retries => merge_gate(m, n),
        Seen::Done => Some(Move::Merge(n)),
        Seen::Skipped => Some(Move::Drop(n)),
        Seen::Failed(reason) => match state {
            // A person's `loop retry` here after the failure.
            Some(StepState::Pending) => Some(Move::RetryThere(n)),
            Some(StepState::Failed) => None,
            _ => Some(Move::Fail {
                step: n,
                reason: reason.clone(),
            }),
        },
    }
}

/// Step `n`'s loop waits on its gate `g`: shown here once, and once decided here, carried
/// there.
fn decision(m: &M1, n: u32, g: &Gate) -> Option<Move> {
    let here = m
        .gates
        .iter()
        .rev()
        .find(|h| h.step == n && h.step_gate.as_deref() == Some(g.id.as_str()));
    match here {
        None => Some(Move::Mirror {
            step: n,
            gate: Box::new(g.clone()),
        }),
        Some(h) if h.is_pending() => None,
        Some(h) => Some(Move::Carry {
            step: n,
            gate: h.id.clone(),
            step_gate: g.id.clone(),
            choice: h.choice.clone().unwrap_or_default(),
            by: h.by.clone().unwrap_or_default(),
        }),
    }
}

/// Step `n`'s merges failed `Caps::max_retries` times: its MERGE gate decides. Pending: it waits;
/// `retry`: back to its session; otherwise (none, or `Caps::max_retries` raised since): merge it
/// again.
fn merge_gate(m: &M1, n: u32) -> Option<Move> {
    let g = m
        .gates
        .iter()
        .rev()
        .find(|g| g.step == n && g.kind == GateKind::Merge);
    match g {
        Some(g) if g.is_pending() => None,
        Some(g) if g.choice.as_deref().is_some_and(record::is_retry) => Some(Move::SendBack {
            step: n,
            gate: g.id.clone(),
        }),
        _ => Some(Move::Merge(n)),
    }
}

/// Gates here that stand for a step's gate which that step's loop decided itself (a person
/// answered in its own `M1.md`): closed with that decision, so none waits for nothing.
fn settled_gates(m: &M1, seen: &BTreeMap<u32, Observed>) -> Vec<Move> {
    m.pending_gates()
        .filter_map(|g| {
            let there = g.step_gate.as_deref()?;
            let o = seen.get(&g.step)?;
            let (_, choice, by) = o.decided.iter().find(|(id, _, _)| id == there)?;
            Some(Move::Settled {
                step: g.step,
                gate: g.id.clone(),
                choice: choice.clone(),
                by: by.clone(),
            })
        })
        .collect()
}

/// The steps to start now: ready ([`ready`]), PENDING (or RUNNING with no record: one a person
/// removed, as the halt on a record git cannot use says to), not recorded, as slots allow; or,
/// when a cap keeps new steps from starting, the halt it makes once none runs.
fn starts(
    m: &M1,
    seen: &BTreeMap<u32, Observed>,
    slots: u32,
    caps: &Caps,
) -> Result<Vec<Move>, Box<Move>> {
    let running = u32::try_from(m.parallel.runs.len()).unwrap_or(u32::MAX);
    let free = slots.saturating_sub(running) as usize;
    let candidates: Vec<u32> = ready(m, 0)
        .filter(|s| {
            matches!(s.state, StepState::Pending | StepState::Running)
                && !m.parallel.runs.contains_key(&s.n)
        })
        .map(|s| s.n)
        .take(free)
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    if let Some((reason, how)) = over_max_steps(m, caps) {
        return Err(Box::new(Move::Halt { reason, how }));
    }
    let running_spent: f64 = seen.values().map(|o| o.spent).sum();
    if let Some((reason, _)) = over_max_cost(spent(m) + running_spent, caps) {
        return Err(Box::new(Move::OverBudget {
            step: candidates[0],
            reason,
        }));
    }
    Ok(candidates.into_iter().map(Move::Start).collect())
}

/// No step in flight and none to start: the end, or why nothing can go on.
fn complete_or_stuck(m: &M1) -> Move {
    let open: Vec<&crate::m1::Step> = m
        .plan
        .steps
        .iter()
        .filter(|s| !super::order::closed(s.state))
        .collect();
    if open.is_empty() {
        return Move::Finish;
    }
    if let Some(f) = open.iter().find(|s| s.state == StepState::Failed) {
        return Move::Halt {
            reason: format!("step {} is FAILED", f.n),
            how: format!("`loop retry {}` runs it again", f.n),
        };
    }
    let list: Vec<String> = open.iter().map(|s| s.n.to_string()).collect();
    Move::Halt {
        reason: format!(
            "no step can start: step(s) {} wait for steps that never end (PLAN.AFTER)",
            list.join(", ")
        ),
        how: "fix PLAN.AFTER in M1.md, then `loop resume`".into(),
    }
}
