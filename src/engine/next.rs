//! What the loop does next, read off M1.md alone (the resume rules live here).

use chrono::{DateTime, Utc};

use super::Caps;
use super::order::{closed, open_step};
use super::run::{RunKind, RunOnRecord, RunSpec};
use crate::m1::{M1, Status, StepState};

/// How the next attempt of a step talks to Claude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionPlan {
    /// A new session (`--session-id`, with an id the runner picks and records first).
    Fresh,
    /// Continue the step's session (`--resume ID`).
    Resume(String),
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// STATUS is DONE or FAILED: nothing to do; exit with it.
    Finished(Status),
    /// STATUS is WAITING (set by the runner or by hand) or IDLE: exit 3 and say why.
    Paused(String),
    /// Every step is DONE or SKIPPED: write DONE.
    Complete,
    /// A run is on record in CURRENT: ask the bridge what became of its task.
    Await(RunOnRecord),
    /// A backoff or a usage limit is being waited out.
    WaitUntil {
        until: DateTime<Utc>,
        reason: String,
    },
    /// Start a run: the planning call (no steps yet), an attempt of a step, or a review of a
    /// step that passed its checks (a fresh, read-only session).
    Run(RunSpec),
    /// A step reached `Caps::max_retries` (or was set FAILED by hand): the loop fails.
    Exhausted { step: u32, reason: String },
    /// The runner cannot go on without a human: write WAITING with this reason.
    Halt { reason: String, how: String },
    /// `APPROVE_PLAN: on` and the plan as it stands is not approved: wait on its gate.
    Gate(super::gate::PlanGate),
    /// The loop spent its `MAX_COST_USD` before `step` could run (or go on): wait on a COST
    /// gate, where a person raises the cap or stops.
    OverBudget { step: u32, reason: String },
    /// A DONE step's work is still to be committed (or its mark to be dropped): before
    /// anything else runs, so the next step starts from a clean tree.
    Commit(super::commit::Due),
    /// `step` passed its checks and waits for its review (or waits on its REVIEW gate), but
    /// `REVIEW` is off now (a person set it so, as the halt or the gate says): the step is
    /// taken as done as it stands, with no run.
    Unreviewed { step: u32 },
}

impl Next {
    /// Whether a decision held for the next spawn's write ([`super::Write::WithNextSpawn`])
    /// must be written before this one is carried out: no write follows at once (the runner
    /// ends, waits, or watches a task).
    #[must_use]
    pub(crate) fn writes_held_first(&self) -> bool {
        matches!(
            self,
            Next::Finished(_) | Next::Paused(_) | Next::Await { .. } | Next::WaitUntil { .. }
        )
    }
}

fn session_for(m: &M1, step: u32) -> SessionPlan {
    m.results
        .get(&step)
        .and_then(|r| r.session_id.clone())
        .filter(|s| !s.is_empty())
        .map_or(SessionPlan::Fresh, SessionPlan::Resume)
}

fn attempts_of(m: &M1, step: u32) -> u32 {
    m.results.get(&step).and_then(|r| r.attempts).unwrap_or(0)
}

/// Total tokens recorded in RESULTS (steps run on a backend that counts tokens, not dollars).
#[must_use]
pub(crate) fn tokens(m: &M1) -> u64 {
    super::figures::totals(m, &std::collections::BTreeMap::new()).tokens
}

/// What the loop spent, as a person reads it ([`crate::text::spent`]): `$0.42`, the tokens of
/// steps run on a backend that reports no dollars (`2,100 tokens`), or both.
#[must_use]
pub(crate) fn spent_words(m: &M1) -> String {
    crate::text::spent(spent(m), tokens(m))
}

/// What one run may spend, for an agent that can be told (Claude Code's `--max-budget-usd`):
/// what is left of the loop's `MAX_COST_USD`, within the attempt's own cap (`per_run`,
/// `AGENT.MAX_BUDGET_USD`). So the loop's cap holds within a run, not only between runs.
#[must_use]
pub(crate) fn run_budget(m: &M1, caps: &Caps, per_run: Option<f64>) -> Option<f64> {
    // To a hundredth of a cent, rounded down (what the agent is told, never more than is
    // left), and never nothing: a run starts only while something is left.
    let left = caps.max_cost_usd.map(|max| {
        let cents = ((max - spent(m)).max(0.0) * 10_000.0 + 1e-6).floor();
        cents.max(1.0) / 10_000.0
    });
    match (per_run, left) {
        (Some(a), Some(l)) => Some(a.min(l)),
        (a, l) => a.or(l),
    }
}

/// Total agent cost recorded in RESULTS: every run the loop paid for
/// ([`super::figures::totals`], without the loops of steps that run at once).
#[must_use]
pub(crate) fn spent(m: &M1) -> f64 {
    super::figures::totals(m, &std::collections::BTreeMap::new()).cost_usd
}

/// Decides the next action from the document alone: the status, then a task on record or a
/// wait, then planning, then the plan's caps and its first open step (pueue's restore rules
/// written as cases: each is one early return, each has its test).
#[must_use]
pub(crate) fn next(m: &M1, caps: &Caps, now: DateTime<Utc>) -> Next {
    // A DONE step's commit comes first, whatever the status, but never while a run is on
    // record: its agent works in the tree a commit would take from.
    let on_record = matches!(m.status, Status::Running | Status::Waiting)
        && !super::runs_on_record(m).is_empty();
    if !on_record && let Some(due) = super::commit::due(m, caps) {
        return Next::Commit(due);
    }
    match m.status {
        Status::Done | Status::Failed => return Next::Finished(m.status),
        // A pause by hand (`STATUS: WAITING` while a step runs) comes after the current
        // step: a run on record is finished and judged first. (Every WAITING the loop writes
        // itself has no run on record.)
        Status::Waiting if let Some(run) = super::runs_on_record(m).into_iter().next() => {
            return Next::Await(run);
        }
        Status::Waiting => {
            let why = m
                .next_action
                .clone()
                .unwrap_or_else(|| "STATUS is WAITING".into());
            return Next::Paused(why);
        }
        Status::Idle => return Next::Paused("STATUS is IDLE: run `loop resume` to start".into()),
        Status::Running => {}
    }
    // A run on record comes first: it may be running, finished, or never spawned.
    if let Some(run) = super::runs_on_record(m).into_iter().next() {
        return Next::Await(run);
    }
    if let Some(until) = wait_until(m)
        && until > now
    {
        let reason = m
            .current
            .wait_reason
            .clone()
            .unwrap_or_else(|| "waiting".into());
        return Next::WaitUntil { until, reason };
    }
    if m.plan.steps.is_empty() {
        return planning(m, caps);
    }
    if let Some(gate) = super::gate::plan_gate(m) {
        return Next::Gate(gate);
    }
    next_step(m, caps)
}

/// No steps yet: plan them, unless planning already failed `Caps::max_retries` times or the loop
/// spent its `MAX_COST_USD` (a planning call the cap cut off waits on the gate too).
fn planning(m: &M1, caps: &Caps) -> Next {
    if let Some((reason, _)) = over_max_cost(spent(m), caps) {
        return Next::OverBudget { step: 0, reason };
    }
    let attempts = attempts_of(m, 0);
    if super::judge::failures(attempts, uncounted(m, 0)) >= caps.max_retries {
        return Next::Exhausted {
            step: 0,
            reason: format!("planning failed {attempts} times"),
        };
    }
    Next::Run(RunSpec {
        kind: RunKind::Plan,
        step: 0,
        number: attempts + 1,
        session: session_for(m, 0),
    })
}

/// The plan's first open step, within the caps on steps, attempts and cost.
fn next_step(m: &M1, caps: &Caps) -> Next {
    if let Some((reason, how)) = over_max_steps(m, caps) {
        return Next::Halt { reason, how };
    }
    let Some(step) = open_step(m, 0) else {
        return complete_or_stuck(m);
    };
    if step.state == StepState::Failed {
        return Next::Exhausted {
            step: step.n,
            reason: format!("step {} is FAILED", step.n),
        };
    }
    // The attempt under review passed; the others failed, but for those that do not count.
    let pending = super::review::pending(m, step.n);
    // `REVIEW:` as the file says it now: a person may have set it off while the step waited
    // for its review, or on its REVIEW gate (with a fix by hand), as the halt or gate says.
    let review_gate = m
        .pending_gates()
        .any(|g| g.step == step.n && g.kind == crate::m1::GateKind::Review);
    if (pending || review_gate) && !m.review {
        return Next::Unreviewed { step: step.n };
    }
    let attempts = attempts_of(m, step.n);
    let failed = attempts.saturating_sub(uncounted(m, step.n) + u32::from(pending));
    if failed >= caps.max_retries {
        return Next::Exhausted {
            step: step.n,
            reason: format!(
                "step {} already failed {failed} of MAX_RETRIES {} attempts",
                step.n, caps.max_retries
            ),
        };
    }
    if let Some((reason, _)) = over_max_cost(spent(m), caps) {
        return Next::OverBudget {
            step: step.n,
            reason,
        };
    }
    if pending {
        let runs = m.result(step.n).review_runs;
        if runs >= caps.max_retries {
            let last = m.results.get(&step.n).and_then(|r| r.review_task.as_ref());
            let (of_last, read) = match last {
                Some(t) => (
                    format!(" (the last: task {t})"),
                    format!(
                        "read what review task {t} said (its output is tasks/{t}/stdout beside \
                         M1.md; `loop check {t}` tells how it ended)"
                    ),
                ),
                None => (String::new(), "read the review tasks' output".to_owned()),
            };
            return Next::Halt {
                reason: format!(
                    "the review of step {} gave no REVIEW_APPROVE / REVIEW_CHANGES verdict in \
                     {runs} runs{of_last}",
                    step.n
                ),
                how: format!(
                    "{read}; then `loop retry {n}` reviews it again, or set REVIEW: off in M1.md \
                     and `loop resume` takes its passed attempt as done, unreviewed",
                    n = step.n
                ),
            };
        }
        return Next::Run(RunSpec {
            kind: RunKind::Review,
            step: step.n,
            number: runs + 1,
            session: SessionPlan::Fresh,
        });
    }
    Next::Run(RunSpec {
        kind: RunKind::Attempt,
        step: step.n,
        number: attempts + 1,
        session: session_for(m, step.n),
    })
}

/// The plan has more steps than `MAX_STEPS`: why, and how to go on.
#[must_use]
pub(crate) fn over_max_steps(m: &M1, caps: &Caps) -> Option<(String, String)> {
    let count = u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX);
    (count > caps.max_steps).then(|| {
        (
            format!(
                "the plan has {count} steps, over MAX_STEPS {}",
                caps.max_steps
            ),
            "shorten PLAN.STEPS or raise LIMITS.MAX_STEPS in M1.md, then `loop resume`".into(),
        )
    })
}

/// `spent` dollars reach `MAX_COST_USD`: why, and how to go on.
#[must_use]
pub(crate) fn over_max_cost(spent: f64, caps: &Caps) -> Option<(String, String)> {
    let max = caps.max_cost_usd?;
    (spent >= max).then(|| {
        (
            format!("spent ${spent:.2}, at or over MAX_COST_USD ${max:.2}"),
            "raise LIMITS.MAX_COST_USD in M1.md, then `loop resume`".into(),
        )
    })
}

/// No open step can start: the plan is complete, unless steps are left that `PLAN.AFTER`
/// keeps from starting (never a false DONE).
fn complete_or_stuck(m: &M1) -> Next {
    let open: Vec<String> = m
        .plan
        .steps
        .iter()
        .filter(|s| !closed(s.state))
        .map(|s| s.n.to_string())
        .collect();
    if open.is_empty() {
        return Next::Complete;
    }
    Next::Halt {
        reason: format!(
            "no step can start: step(s) {} wait for steps that never end (PLAN.AFTER)",
            open.join(", ")
        ),
        how: "fix PLAN.AFTER in M1.md, then `loop resume`".into(),
    }
}

/// Attempts of step `n` that do not count against `Caps::max_retries`: the retakes a review asked
/// for (each follows an attempt that passed its checks), and the attempts before a person's
/// `loop retry` gave the step a fresh budget (`RETRIED`).
#[must_use]
pub(crate) fn uncounted(m: &M1, n: u32) -> u32 {
    let r = m.result(n);
    r.retakes + r.retried
}

/// `CURRENT.WAIT_UNTIL`, when set and readable.
#[must_use]
pub(crate) fn wait_until(m: &M1) -> Option<DateTime<Utc>> {
    m.current.wait_until
}
