//! The review of a step that passed its checks (Plan D's quality control): a separate,
//! read-only agent run in a fresh session reads the step's diff and says
//! `REVIEW_APPROVE: reason` or `REVIEW_CHANGES: what must change`. Approved, the step is DONE;
//! changes go back to the step's own session as a fix, counted as a retake; past
//! `MAX_RETAKES`, a human decides.

use chrono::{DateTime, Utc};

use super::Caps;
use super::judge::{Attempt, Interruption, Judgement, cut_off};
use super::record::interrupted;
use super::transitions::{
    Effect, Outcome, Transition, Write, actions, moves_to, name, results, results_remove,
    step_state,
};
use crate::exit::Status as Exit;
use crate::m1::keys::{ResultKey, clear_current};
use crate::m1::{Edit, GateKind, M1, Status, StepState};
use crate::text::one_line;

/// Whether step `n` passed its checks and waits for its review.
#[must_use]
pub(crate) fn pending(m: &M1, n: u32) -> bool {
    m.results
        .get(&n)
        .is_some_and(|r| r.review == Some(crate::m1::keys::Review::Pending))
}

/// What a review run concluded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReviewVerdict {
    Approve(String),
    Changes(String),
    /// No verdict: the run failed or its answer did not end with one (why). The review is run
    /// again, fresh, up to `Caps::max_retries` runs.
    Missing(String),
    /// Cut off by what a step's attempt is cut off by too (an API error, the usage limit, a
    /// login or an agent that needs a human): waited out or handed over as for a step, and not
    /// a review run.
    Interrupted(Interruption),
}

/// Judges a finished review run: first what could cut it off, exactly as for a step's
/// attempt; then its answer's last non-empty line, which must be exactly `REVIEW_APPROVE: …`
/// or `REVIEW_CHANGES: …` with a text.
#[must_use]
pub(crate) fn judge_review(a: &Attempt<'_>) -> ReviewVerdict {
    if let Some(j) = cut_off(a) {
        return match j {
            Judgement::Interrupted(i) => ReviewVerdict::Interrupted(i),
            Judgement::Retry { reason }
            | Judgement::Exhausted { reason, .. }
            | Judgement::FreshSession { reason }
            | Judgement::ResumeSession { reason } => {
                ReviewVerdict::Missing(format!("the review run failed: {reason}"))
            }
            // `cut_off` gives none of these; a run that ended by itself is read below.
            other => ReviewVerdict::Missing(format!("the review run failed: {other:?}")),
        };
    }
    let last = a
        .answer
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    let said = |prefix: &str| {
        last.strip_prefix(prefix)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    if let Some(reason) = said("REVIEW_APPROVE:") {
        ReviewVerdict::Approve(reason)
    } else if let Some(what) = said("REVIEW_CHANGES:") {
        ReviewVerdict::Changes(what)
    } else {
        ReviewVerdict::Missing(
            "the review did not end with a REVIEW_APPROVE / REVIEW_CHANGES line".into(),
        )
    }
}

/// Who could have made a change found in the work tree after a review run: the runner tells
/// from what the CLI enforced on the run and what its stream shows it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The run could write nothing: how it was kept from it, in words that follow "its run"
    /// (`had only read-only tools (--tools Read,Grep,Glob)`).
    ReadOnly(String),
    /// The run could have written: why, in words that follow "the reviewer" (`called Bash:
    /// touch x`, `could write (its CLI was not kept to reading)`).
    MayWrite(String),
}

/// What a review run's changes to the work tree come to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TreeDuringReview {
    /// Nothing changed.
    Unchanged,
    /// Something changed that the reviewer could not have changed (a process beside it: a
    /// shell writing the loop's output into the project, an editor, a watcher): not the
    /// reviewer's, so it decides nothing; the line says what and why, for the log.
    NotTheReviewers(String),
    /// The reviewer could have made what changed: the review approves nothing.
    Suspect(ReviewVerdict),
}

/// Attributes the changes to the work tree during a review of `step` (`a.txt (changed)`) by
/// what its run could write (`reach`). A change the reviewer could not make is not its: the
/// review is judged by its answer, as if nothing changed. A change it could have made is
/// never approved, whatever it answered: it would go unreviewed into the next step's commit.
/// So a human looks (the review stays pending and runs again on resume).
#[must_use]
pub(crate) fn attribute(step: u32, changes: &[String], reach: &Reach) -> TreeDuringReview {
    if changes.is_empty() {
        return TreeDuringReview::Unchanged;
    }
    let what = one_line(&changes.join(", "), 250);
    let why = match reach {
        Reach::ReadOnly(how) => {
            return TreeDuringReview::NotTheReviewers(format!(
                "changed during the review of step {step}: {what} (not by the reviewer: its run \
                 {how})"
            ));
        }
        Reach::MayWrite(why) => one_line(why, 200),
    };
    TreeDuringReview::Suspect(ReviewVerdict::Interrupted(Interruption::Halt {
        reason: format!(
            "the work tree changed while step {step} was reviewed, and the reviewer {why}, so \
             the review is not an approval: {what}"
        ),
        how: format!(
            "see what changed ({what}) with `git status` and `git diff`, keep or undo it, then \
             `loop resume`: step {step} is reviewed again"
        ),
    }))
}

/// The facts of a finished review run.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReviewFacts {
    pub step: u32,
    pub run: u32,
    /// The review run's task: a run without a verdict is recorded by it (`REVIEW_TASK`), so
    /// that a halt after the last one says where to read what the reviewer said.
    pub task_id: String,
    /// The reviewer's cost, added to the step's.
    pub cost_usd: f64,
    pub prior_cost_usd: f64,
    /// The step's tokens with the reviewer's (a backend that counts tokens).
    pub tokens: Option<u64>,
    /// Retakes the step had before this review.
    pub retakes: u32,
    /// What the step reported done, to carry into its DONE record.
    pub summary: String,
    pub next_step: Option<(u32, String)>,
    pub notify_each_step: bool,
    /// Transient errors the step (its attempts and reviews) waited out so far.
    pub transients: u32,
    /// The loop's id and the id its next gate gets (a REVIEW gate, once the retakes are spent).
    pub loop_id: String,
    pub next_gate: String,
    pub now: DateTime<Utc>,
}

/// The review of a step taken as done as it stands, unreviewed, by `REVIEW: off`: its commit
/// is the work tree as it stands then (a person's fix by hand included), not the last run's.
pub(crate) const TAKEN_AS_IT_STANDS: &str = "off: taken as done without a review (REVIEW: off)";

/// Step `s` passed its checks and waits for its review, or waits on its REVIEW gate (past its
/// retakes, maybe fixed by hand since), and `REVIEW` is off now: the step is taken as done as
/// it stands, unreviewed (no run, nothing paid), as a step that passes with `REVIEW: off` is,
/// and its REVIEW gate is accepted; its commit follows, as an approved step's does.
#[must_use]
pub(crate) fn unreviewed(m: &M1, s: u32, notify_each_step: bool, now: DateTime<Utc>) -> Transition {
    let summary = m.result(s).summary.clone().unwrap_or_default();
    let mut edits: Vec<Edit> = step_state(s, StepState::Done).into_iter().collect();
    for g in m
        .pending_gates()
        .filter(|g| g.step == s && g.kind == GateKind::Review)
    {
        edits.extend(crate::m1::gates::decided(
            &g.id,
            crate::m1::GateOption::Accept.as_str(),
            "REVIEW: off in M1.md",
            now,
        ));
    }
    edits.push(results(s, ResultKey::Review, TAKEN_AS_IT_STANDS));
    edits.push(results_remove(s, ResultKey::ReviewRuns));
    edits.push(results_remove(s, ResultKey::ReviewTask));
    edits.push(results_remove(s, ResultKey::Error));
    edits.push(clear_current());
    let after = super::order::open_step(m, s).map(|n| (n.n, n.text.clone()));
    let next = moves_to(after.as_ref().map(|(n, t)| (*n, t.as_str())), &mut edits);
    edits.extend(actions(
        &format!("{} done, not reviewed (REVIEW is off): {summary}", name(s)),
        &next,
    ));
    let mut t = Transition {
        write: Write::WithNextSpawn,
        outcome: Outcome::Continue,
        ..Transition::now(
            edits,
            format!("review: step {s} taken as done without a review (REVIEW is off): {summary}"),
        )
    };
    t.effects.push(Effect::TickPlanFile(s));
    if notify_each_step {
        t.effects.push(Effect::StepDone { step: s, summary });
    }
    t
}

/// What every review run records, whatever it said: its cost and tokens added to the step's,
/// CURRENT cleared, and no interruption left on record (it is about the run before this one;
/// a wait says it again).
fn spent(f: &ReviewFacts) -> Vec<Edit> {
    let s = f.step;
    let mut edits = vec![
        results(
            s,
            ResultKey::CostUsd,
            format!("{:.4}", f.prior_cost_usd + f.cost_usd),
        ),
        clear_current(),
        results_remove(s, ResultKey::Interrupted),
    ];
    if let Some(t) = f.tokens {
        edits.push(results(s, ResultKey::Tokens, t.to_string()));
    }
    edits
}

/// Records a review's verdict.
#[must_use]
pub(crate) fn record_review(v: &ReviewVerdict, f: &ReviewFacts, caps: &Caps) -> Transition {
    let s = f.step;
    let mut edits = spent(f);
    match v {
        ReviewVerdict::Interrupted(cut) => {
            let who = format!("the review of step {s}");
            let t = interrupted(cut, s, &who, f.transients, f.now).after(edits);
            Transition {
                log: format!("review: {}", t.log),
                ..t
            }
        }
        ReviewVerdict::Approve(reason) => approved(f, reason, edits),
        ReviewVerdict::Changes(what) if f.retakes >= caps.max_retakes => {
            retakes_spent(f, what, caps, edits)
        }
        ReviewVerdict::Changes(what) => changes(f, what, edits),
        ReviewVerdict::Missing(why) => {
            edits.push(results(s, ResultKey::ReviewRuns, f.run.to_string()));
            edits.push(results(s, ResultKey::ReviewTask, f.task_id.clone()));
            edits.extend(actions(
                &format!(
                    "Review {} of step {s} (task {}) gave no verdict: {why}",
                    f.run, f.task_id
                ),
                &format!("Review step {s} again in a fresh session"),
            ));
            Transition::now(edits, format!("review: step {s} run {}: {why}", f.run))
        }
    }
}

/// Records a review whose step a person closed by hand while it ran (`state`: SKIPPED or
/// DONE): its cost, and the person's state stands; its verdict is not acted on (no retake,
/// no gate) and the review is no longer pending. A step left DONE keeps what its attempt
/// passed (`VERIFIED`), and is committed as a passed step is.
#[must_use]
pub(crate) fn closed_by_hand(v: &ReviewVerdict, state: StepState, f: &ReviewFacts) -> Transition {
    let s = f.step;
    let state = state.as_str();
    let mut edits = spent(f);
    edits.push(results_remove(s, ResultKey::Review));
    let said = match v {
        ReviewVerdict::Approve(why) => format!("it approved: {}", one_line(why, 200)),
        ReviewVerdict::Changes(what) => format!("it asked for changes: {}", one_line(what, 200)),
        ReviewVerdict::Missing(why) => format!("no verdict: {}", one_line(why, 200)),
        ReviewVerdict::Interrupted(_) => "it was cut off".to_owned(),
    };
    let next = moves_to(
        f.next_step.as_ref().map(|(n, t)| (*n, t.as_str())),
        &mut edits,
    );
    edits.extend(actions(
        &format!(
            "Review {} of step {s} ended; the step stays {state}, as set by hand",
            f.run
        ),
        &next,
    ));
    Transition::now(
        edits,
        format!(
            "by hand: the review of step {s} (run {}) ended ({said}); the step stays {state}, as \
             set by hand while it ran",
            f.run
        ),
    )
}

/// The review asked for changes once more than `MAX_RETAKES` allows: a human decides.
fn retakes_spent(f: &ReviewFacts, what: &str, caps: &Caps, mut edits: Vec<Edit>) -> Transition {
    let s = f.step;
    let reason = format!(
        "the review asked step {s} for changes {} times, past MAX_RETAKES {}; last: {}",
        f.retakes + 1,
        caps.max_retakes,
        one_line(what, 200)
    );
    let gate = super::gate::about_step(
        GateKind::Review,
        f.next_gate.clone(),
        &f.loop_id,
        s,
        &reason,
        &[],
    );
    let id = &gate.id;
    let how = format!(
        "read the reviewer's words in RESULTS.STEP_{s}.REVIEW, then decide gate {id}: \
         `loop answer {id} accept` takes the step as done, `retry` runs it again with a fresh \
         budget of retakes (as `loop retry {s}`), `stop` ends the loop; or fix it by hand and \
         set REVIEW: off (or the step [SKIPPED]) in M1.md, then `loop resume`"
    );
    edits.extend(gate.open_edits());
    edits.push(results(
        s,
        ResultKey::Review,
        one_line(&format!("changes ({}): {what}", f.retakes + 1), 300),
    ));
    edits.extend(step_state(s, StepState::Pending));
    edits.push(Edit::Status(Status::Waiting));
    edits.extend(actions(&format!("Waiting: {reason}"), &how));
    Transition::exit(
        edits,
        format!("review: halt: {reason} (gate {id})"),
        Exit::Waiting,
    )
    .then(Effect::Gate { id: id.clone() })
}

/// The review asked for changes: a retake in the step's own session, not a failed attempt.
fn changes(f: &ReviewFacts, what: &str, mut edits: Vec<Edit>) -> Transition {
    let s = f.step;
    let n = f.retakes + 1;
    edits.push(results(s, ResultKey::Retakes, n.to_string()));
    edits.push(results(
        s,
        ResultKey::Review,
        one_line(&format!("changes ({n}): {what}"), 300),
    ));
    edits.push(results(
        s,
        ResultKey::Error,
        one_line(&format!("the review asked for changes: {what}"), 300),
    ));
    edits.push(results_remove(s, ResultKey::ReviewRuns));
    edits.push(results_remove(s, ResultKey::ReviewTask));
    edits.extend(step_state(s, StepState::Pending));
    edits.extend(actions(
        &format!("Step {s}: the review asked for changes ({n}): {what}"),
        &format!("Retake step {s} in its session with the reviewer's words"),
    ));
    Transition {
        write: Write::WithNextSpawn,
        ..Transition::now(edits, format!("review: step {s} changes ({n}): {what}"))
    }
}

fn approved(f: &ReviewFacts, reason: &str, mut edits: Vec<Edit>) -> Transition {
    let s = f.step;
    edits.extend(step_state(s, StepState::Done));
    edits.push(results(
        s,
        ResultKey::Review,
        one_line(&format!("approved: {reason}"), 300),
    ));
    edits.push(results_remove(s, ResultKey::ReviewRuns));
    edits.push(results_remove(s, ResultKey::ReviewTask));
    edits.push(results_remove(s, ResultKey::Error));
    let next = moves_to(
        f.next_step.as_ref().map(|(n, t)| (*n, t.as_str())),
        &mut edits,
    );
    edits.extend(actions(
        &format!("{} done and reviewed: {}", name(s), f.summary),
        &next,
    ));
    let mut t = Transition {
        write: Write::WithNextSpawn,
        outcome: Outcome::Continue,
        ..Transition::now(edits, format!("review: step {s} approved: {reason}"))
    };
    t.effects.push(Effect::TickPlanFile(s));
    if f.notify_each_step {
        t.effects.push(Effect::StepDone {
            step: s,
            summary: f.summary.clone(),
        });
    }
    t
}
