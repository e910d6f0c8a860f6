//! The loop's decisions as pure functions over M1.md's typed view: what to do next, how to
//! judge a finished attempt, and which field edits record the outcome. No clock and no I/O:
//! `now` and every observation are passed in, so each rule is a unit test of a few lines.

pub(crate) mod by_hand;
pub(crate) mod commit;
mod conclude;
pub(crate) mod figures;
pub(crate) mod gate;
mod judge;
pub(crate) mod ledger;
mod next;
mod order;
pub(crate) mod parallel;
pub(crate) mod prompt;
mod record;
mod retry;
pub(crate) mod review;
pub(crate) mod revival;
mod run;
mod transitions;

pub(crate) use conclude::{Conclusion, Context, Observed, conclude};
pub(crate) use judge::{Judgement, LedgerVerdict, TaskEnd, failures, judge};
pub(crate) use next::{Next, SessionPlan, next};
pub(crate) use next::{run_budget, spent, spent_words, uncounted, wait_until};
pub(crate) use order::open_step;
pub(crate) use retry::{retried, retried_by, retry_target};
pub use run::RunKind;
pub(crate) use run::{RunOnRecord, RunSpec, backend_of, resumes, runs_on_record};
pub(crate) use transitions::{
    Effect, OnRecord, Outcome, SpawnFacts, Stop, Transition, Write, adopted, complete, exhausted,
    halt, kept_on_record, pid_recorded, session_named, started, stopped, stopped_parallel,
    uncommitted, unrecordable,
};

use std::time::Duration;

/// The caps in force for one decision: settings resolved over M1.md's `LIMITS:`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Caps {
    /// Failed attempts of one step before it is FAILED.
    pub max_retries: u32,
    /// Steps a plan may have.
    pub max_steps: u32,
    /// Total agent cost after which no further step starts.
    pub max_cost_usd: Option<f64>,
    /// Transient errors (rate limit, overload, 5xx, network) one step may wait out.
    pub transient_cap: u32,
    /// Wall-clock limit of one step.
    pub step_timeout: Duration,
    /// No-output limit of one step.
    pub idle_timeout: Option<Duration>,
    /// Fresh sessions one step may ask for with `STEP_RESTART`.
    pub max_restarts: u32,
    /// Percent of the model's context window past which a retry starts a fresh session.
    pub context_threshold: u32,
    /// Time in one session past which a retry starts a fresh session.
    pub max_session: Option<Duration>,
    /// Every step that passes is reviewed before it is DONE.
    pub review: bool,
    /// Each DONE step of a git project is committed (`COMMIT_STEPS`).
    pub commit_steps: bool,
    /// Reviews that may ask one step for changes; past them, a human decides.
    pub max_retakes: u32,
    /// `AGENT.FALLBACK` and `LIMITS.FALLBACK_AFTER`: a step whose agent's usage limit resets
    /// later than that goes on with the next backend of the chain instead of waiting.
    pub fallback: Option<(Vec<crate::m1::settings::AgentKind>, Duration)>,
}

impl Default for Caps {
    fn default() -> Self {
        let d = crate::m1::settings::DEFAULTS;
        Self {
            max_retries: d.max_retries,
            max_steps: d.max_steps,
            max_cost_usd: None,
            transient_cap: d.transient_retries,
            step_timeout: d.step_timeout,
            idle_timeout: None,
            max_restarts: d.max_restarts,
            context_threshold: d.context_threshold,
            max_session: None,
            review: false,
            commit_steps: true,
            max_retakes: d.max_retakes,
            fallback: None,
        }
    }
}

/// Backoff before the `n`th transient retry (1-based): 2 s doubling, at most 60 s.
#[must_use]
pub(crate) fn backoff(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(6);
    Duration::from_secs((2u64 << exp).min(60))
}

/// Why the next attempt of a step must start a fresh session with a handoff rather than resume
/// its session: the session's context passed [`Caps::context_threshold`] percent of the model's
/// window, or it ran longer than [`Caps::max_session`]. `None`: resume it.
#[must_use]
pub(crate) fn handoff_reason(
    caps: &Caps,
    context_pct: Option<u32>,
    in_session: Duration,
) -> Option<String> {
    if let Some(pct) = context_pct
        && pct >= caps.context_threshold
    {
        return Some(format!(
            "the session's context reached {pct}% of the model's window (CONTEXT_THRESHOLD {}%)",
            caps.context_threshold
        ));
    }
    caps.max_session
        .filter(|max| in_session >= *max)
        .map(|max| {
            format!(
                "the session ran {} (MAX_SESSION {})",
                crate::duration::human(in_session),
                crate::duration::human(max)
            )
        })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn backoff_doubles_from_two_seconds_to_a_minute() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 32, 60, 60, 60]);
    }
}

#[cfg(test)]
mod tests;
