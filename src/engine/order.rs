//! The plan's order: which steps are ready to run, and which one is open next. One rule for a
//! loop that runs one step at a time and for one that runs several at once.

use crate::m1::{M1, Step, StepState};

/// Whether a step is closed: DONE or SKIPPED (what a step waiting for it needs).
#[must_use]
pub(crate) fn closed(state: StepState) -> bool {
    matches!(state, StepState::Done | StepState::Skipped)
}

/// The readiness rule, the one rule for a loop that runs one step at a time and for one that
/// runs several at once: the steps that are not closed and whose steps to wait for
/// (`PLAN.AFTER`) all are, in the plan's order; step `also_closed` counts as closed (0: none),
/// for the step a decision is about to close.
pub(crate) fn ready(m: &M1, also_closed: u32) -> impl Iterator<Item = &Step> {
    let done =
        move |n: u32| n == also_closed || m.plan.steps.iter().any(|s| s.n == n && closed(s.state));
    m.plan.steps.iter().filter(move |s| {
        s.n != also_closed
            && !closed(s.state)
            && m.plan
                .after
                .get(&s.n)
                .is_none_or(|deps| deps.iter().all(|d| done(*d)))
    })
}

/// The step that comes next once step `after` is done (0: from the start): the first ready
/// step ([`ready`]). Without `PLAN.AFTER`, the first one after `after` in the plan's order, so
/// that a plan runs from top to bottom; with it, the first in the plan's order whose steps to
/// wait for are done: a step never starts before what it needs, whatever its number.
#[must_use]
pub(crate) fn open_step(m: &M1, after: u32) -> Option<&Step> {
    let mut ready = ready(m, after);
    if m.plan.after.is_empty() {
        return ready.find(|s| s.n > after);
    }
    ready.next()
}
