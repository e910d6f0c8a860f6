//! How an ended run is concluded: judged from what the runner observed of it and what M1.md
//! says, then recorded. One function for every kind of run; the runner only observes (the
//! task's report and stream, the project's git HEAD, the work tree) and runs VERIFY when asked.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::judge::{Attempt, Judgement, LedgerVerdict, TaskEnd};
use super::record::{Facts, record};
use super::review::{
    Reach, ReviewFacts, TreeDuringReview, attribute, closed_by_hand, judge_review, record_review,
};
use super::run::{RunKind, RunOnRecord, resumes, session_time};
use super::transitions::Transition;
use super::{Caps, handoff_reason, open_step, uncounted};
use crate::agent::Class;
use crate::m1::M1;
use crate::verify;

/// What the runner observed of an ended run.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub end: TaskEnd,
    /// The agent adapter's class of the outcome (`None` when there was no process to read).
    pub class: Option<Class>,
    /// The agent's final answer.
    pub answer: String,
    pub denials: Vec<String>,
    /// The tool call a hook deferred, where the run ended (an `AskUserQuestion`: a question
    /// for the person).
    pub deferred: Option<crate::agent::DeferredCall>,
    /// Background work the CLI stopped after the answer.
    pub background_stopped: Vec<String>,
    /// The session the run's stream named.
    pub session_id: Option<String>,
    /// The backend that ran it.
    pub backend: crate::m1::settings::AgentKind,
    /// What this run cost on its own.
    pub cost_usd: f64,
    /// The tokens its session had used by its end, as a backend that counts tokens reports
    /// them (the session's total, not the run's).
    pub session_tokens: Option<u64>,
    /// Tokens the run alone used, from a backend that counts them per run (Gemini CLI).
    pub run_tokens: Option<u64>,
    /// How full its context was, against the window a resume will have.
    pub context_pct: Option<u32>,
    /// Compactions of its context that happened.
    pub compactions: u32,
    pub exit_code: Option<i32>,
    pub elapsed: Duration,
    /// The project's git HEAD now.
    pub git_head: Option<String>,
    /// For a review: what changed in the work tree while it ran.
    pub tree_changes: Vec<String>,
    /// For a review: what its run could write, which tells whose those changes can be.
    pub reach: Reach,
    /// Where the run's full report is, relative to the state directory.
    pub report: String,
    pub now: DateTime<Utc>,
}

/// What the loop's settings add to M1.md for a conclusion.
#[derive(Debug, Clone)]
pub(crate) struct Context<'a> {
    pub caps: &'a Caps,
    /// The tools the agent was allowed, for the advice after a denial.
    pub allowed_tools: &'a [String],
    /// The VERIFY command in force, if any.
    pub verify: Option<&'a str>,
    /// Whether the human is told of every step that passes.
    pub notify_each_step: bool,
}

/// What concluding a run comes to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Conclusion {
    /// The run passed as far as it goes: run VERIFY, then conclude again with its outcome.
    Verify,
    /// The run's record, the ledger's verdict on it, and whether every check that applies
    /// passed.
    Recorded {
        transition: Transition,
        verdict: LedgerVerdict,
        /// The agent asked for a fresh session (`STEP_RESTART`).
        restart: bool,
    },
}

/// Concludes `run`, ended as `o` says; `verify` is VERIFY's outcome once it ran.
#[must_use]
pub(crate) fn conclude(
    run: &RunOnRecord,
    m: &M1,
    o: &Observed,
    verify: Option<&verify::Outcome>,
    cx: &Context<'_>,
) -> Conclusion {
    let verify_cmd = if run.kind == RunKind::Attempt {
        cx.verify
    } else {
        None
    };
    let attempt = attempt(run, m, o, verify, verify_cmd.is_some(), cx);
    let closed = super::by_hand::closed_while_running(m, run.step).filter(|_| run.step > 0);
    if run.kind == RunKind::Review {
        if let Some(state) = closed {
            let f = review_facts(run, m, o, cx);
            return Conclusion::Recorded {
                transition: closed_by_hand(&judge_review(&attempt), state, &f),
                verdict: LedgerVerdict::Review,
                restart: false,
            };
        }
        let (v, note) = match attribute(run.step, &o.tree_changes, &o.reach) {
            TreeDuringReview::Unchanged => (judge_review(&attempt), None),
            TreeDuringReview::NotTheReviewers(note) => (judge_review(&attempt), Some(note)),
            TreeDuringReview::Suspect(v) => (v, None),
        };
        let mut transition = record_review(&v, &review_facts(run, m, o, cx), cx.caps);
        if let Some(note) = note {
            transition.log = format!("{}; {note}", transition.log);
        }
        return Conclusion::Recorded {
            transition,
            verdict: LedgerVerdict::Review,
            restart: false,
        };
    }
    let j = super::judge(&attempt);
    if run.kind == RunKind::Attempt
        && let Some(state) = closed
    {
        return Conclusion::Recorded {
            transition: super::record::closed_by_hand(&j, state, &facts(run, m, o, cx, false)),
            verdict: LedgerVerdict::from(&j),
            restart: false,
        };
    }
    if j == Judgement::NeedsVerify {
        return Conclusion::Verify;
    }
    let verified = verify_cmd.is_none() || matches!(verify, Some(verify::Outcome::Passed));
    Conclusion::Recorded {
        transition: record(&j, &facts(run, m, o, cx, verified)),
        verdict: LedgerVerdict::from(&j),
        restart: matches!(j, Judgement::Restart { .. }),
    }
}

/// What the judge is given of `run`: what it did, what M1.md says of its step, the caps.
fn attempt<'a>(
    run: &RunOnRecord,
    m: &M1,
    o: &'a Observed,
    verify: Option<&'a verify::Outcome>,
    verify_configured: bool,
    cx: &Context<'a>,
) -> Attempt<'a> {
    let resumed = run.kind.resumable() && resumes(m, run.step, m.current.session_id.as_deref());
    let r = m.result(run.step);
    Attempt {
        step: run.step,
        attempt: run.number,
        end: o.end.clone(),
        class: o.class.clone(),
        answer: &o.answer,
        denials: if run.kind == RunKind::Review {
            &[]
        } else {
            &o.denials
        },
        background_stopped: if run.kind == RunKind::Review {
            &[]
        } else {
            &o.background_stopped
        },
        deferred: o.deferred.as_ref(),
        verify_configured,
        verify,
        transients: r.transient,
        restarts: if run.kind == RunKind::Review {
            0
        } else {
            r.restarts
        },
        uncounted: if run.kind == RunKind::Review {
            0
        } else {
            uncounted(m, run.step)
        },
        resumed,
        allowed_tools: if run.kind == RunKind::Review {
            &[]
        } else {
            cx.allowed_tools
        },
        caps: cx.caps,
        spent_usd: super::spent(m) + o.cost_usd,
        backend: o.backend,
        now: o.now,
    }
}

/// What goes into RESULTS for an attempt (or the planning call): this run's observations
/// added to what M1.md holds of the step.
fn facts(run: &RunOnRecord, m: &M1, o: &Observed, cx: &Context<'_>, verified: bool) -> Facts {
    let step = run.step;
    let r = m.result(step);
    let head_before = m.current.git_head.clone();
    let (prior_session_s, in_session) = session_time(m, step, o.elapsed);
    Facts {
        step,
        attempt: run.number,
        exit_code: o.exit_code,
        session_id: o
            .session_id
            .clone()
            .or_else(|| m.current.session_id.clone()),
        cost_usd: o.cost_usd,
        tokens: {
            let same = o.session_id.is_some() && o.session_id == r.session_id;
            let before = if same {
                r.session_tokens.unwrap_or(0)
            } else {
                0
            };
            match (o.session_tokens, o.run_tokens) {
                // The session's count is cumulative: this run's share is what it added since
                // the step's last run in the same session.
                (Some(total), _) => {
                    Some((r.tokens.unwrap_or(0) + total.saturating_sub(before), total))
                }
                // Counted per run: the session's total is what its runs used, this one's added.
                (None, Some(run)) => Some((r.tokens.unwrap_or(0) + run, before + run)),
                (None, None) => None,
            }
        },
        duration_s: o.elapsed.as_secs_f64(),
        prior_cost_usd: r.cost_usd.unwrap_or(0.0),
        prior_duration_s: r.duration_s.unwrap_or(0.0),
        transients: r.transient,
        restarts: r.restarts,
        uncounted: uncounted(m, step),
        handoff: handoff_reason(cx.caps, o.context_pct, in_session),
        context_pct: o.context_pct,
        compactions: r.compactions + o.compactions,
        prior_session_s,
        // A step marked to be committed gets its commit once DONE ([`super::commit`]); else
        // HEAD, when the agent moved it.
        commit: o
            .git_head
            .clone()
            .filter(|h| Some(h) != head_before.as_ref() && !r.commit_pending),
        verified,
        report: Some(o.report.clone()),
        next_step: open_step(m, step)
            .filter(|_| step > 0)
            .map(|s| (s.n, s.text.clone())),
        notify_each_step: cx.notify_each_step,
        review: cx.caps.review,
        plan_only: m.plan_only,
        approve_plan: m.approve_plan,
        base_head: r.base_head.clone().or(head_before),
        loop_id: m.loop_id.clone().unwrap_or_default(),
        next_gate: crate::m1::gates::next_id(&m.gates),
        now: o.now,
    }
}

/// What goes into RESULTS for a review run.
fn review_facts(run: &RunOnRecord, m: &M1, o: &Observed, cx: &Context<'_>) -> ReviewFacts {
    let r = m.result(run.step);
    ReviewFacts {
        step: run.step,
        run: run.number,
        task_id: run.task_id.clone(),
        cost_usd: o.cost_usd,
        prior_cost_usd: r.cost_usd.unwrap_or(0.0),
        // A review's session is its own and fresh: all its tokens are this run's.
        tokens: o
            .session_tokens
            .or(o.run_tokens)
            .map(|t| r.tokens.unwrap_or(0) + t),
        retakes: r.retakes,
        summary: r.summary.clone().unwrap_or_default(),
        next_step: open_step(m, run.step).map(|s| (s.n, s.text.clone())),
        notify_each_step: cx.notify_each_step,
        transients: r.transient,
        loop_id: m.loop_id.clone().unwrap_or_default(),
        next_gate: crate::m1::gates::next_id(&m.gates),
        now: o.now,
    }
}
