//! How a judged attempt is recorded in M1.md: the RESULTS of the step, the plan, CURRENT, and
//! what the loop does next. One transition per judgement, written in one go.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::Judgement;
use super::judge::Interruption;
use super::transitions::{
    Effect, Outcome, Transition, Write, actions, current, exhausted_edits, halt_edits, moves_to,
    name, results, results_remove, stamp, step_state,
};
use crate::exit::Status as Exit;
use crate::m1::keys::{CurrentKey, PlanKey, ResultKey, Top, clear_current};
use crate::m1::{Edit, GateKind, Status, StepState};
use crate::text::one_line;

/// The facts about a finished attempt that go into RESULTS.
#[derive(Debug, Clone, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is an independent fact of the attempt or the loop, not a state machine"
)]
pub(crate) struct Facts {
    pub step: u32,
    pub attempt: u32,
    pub exit_code: Option<i32>,
    pub session_id: Option<String>,
    /// This attempt's cost and duration; added to what RESULTS already holds.
    pub cost_usd: f64,
    /// The step's tokens with this attempt's, and its session's total (a backend that
    /// counts tokens, not dollars).
    pub tokens: Option<(u64, u64)>,
    pub duration_s: f64,
    pub prior_cost_usd: f64,
    pub prior_duration_s: f64,
    /// Transient errors this step waited out before this one.
    pub transients: u32,
    /// Fresh sessions this step asked for before this attempt.
    pub restarts: u32,
    /// Attempts of this step that do not count against `Caps::max_retries` ([`super::uncounted`]).
    pub uncounted: u32,
    /// Why the next attempt, should there be one, starts a fresh session with a handoff
    /// instead of resuming this one ([`super::handoff_reason`]).
    pub handoff: Option<String>,
    /// How full the session's context was at its end, in percent of the model's window.
    pub context_pct: Option<u32>,
    /// Compactions of the step's context so far, this attempt's included.
    pub compactions: u32,
    /// Seconds the step's session had run before this attempt (0 for a fresh session).
    pub prior_session_s: f64,
    pub commit: Option<String>,
    /// Every check that applies passed (exit, result, verdict, and VERIFY when set).
    pub verified: bool,
    pub report: Option<String>,
    /// The step that comes next (after a pass), with its text.
    pub next_step: Option<(u32, String)>,
    /// Whether the human is told of every step that passes.
    pub notify_each_step: bool,
    /// A step that passes is reviewed before it is DONE (`REVIEW: on`).
    pub review: bool,
    /// The loop was started to plan only (`PLAN_ONLY: on`): once planned, it waits for
    /// `loop resume` instead of running step 1.
    pub plan_only: bool,
    /// A person approves the plan before a step runs (`APPROVE_PLAN: on`).
    pub approve_plan: bool,
    /// The git HEAD the step began from (what its review's diff starts at).
    pub base_head: Option<String>,
    /// The loop's id (what a gate's fingerprint is taken in), and the id the next gate gets.
    pub loop_id: String,
    pub next_gate: String,
    pub now: DateTime<Utc>,
}

/// What every judged attempt records: its exit, session, cost, time and report.
fn common(f: &Facts) -> Vec<Edit> {
    let s = f.step;
    let mut edits = Vec::new();
    // No exit code (killed by a signal, lost, never ran): the key goes; ERROR says why.
    edits.push(match f.exit_code {
        Some(c) => results(s, ResultKey::Exit, c.to_string()),
        None => results_remove(s, ResultKey::Exit),
    });
    if let Some(sid) = &f.session_id {
        edits.push(results(s, ResultKey::SessionId, sid.clone()));
    }
    edits.push(results(
        s,
        ResultKey::CostUsd,
        format!("{:.4}", f.prior_cost_usd + f.cost_usd),
    ));
    if let Some((step, session)) = f.tokens {
        edits.push(results(s, ResultKey::Tokens, step.to_string()));
        edits.push(results(s, ResultKey::SessionTokens, session.to_string()));
    }
    edits.push(results(
        s,
        ResultKey::DurationS,
        format!("{:.1}", f.prior_duration_s + f.duration_s),
    ));
    if let Some(r) = &f.report {
        edits.push(results(s, ResultKey::Report, r.clone()));
    }
    if let Some(pct) = f.context_pct {
        edits.push(results(s, ResultKey::ContextPct, pct.to_string()));
    }
    if f.compactions > 0 {
        edits.push(results(
            s,
            ResultKey::Compactions,
            f.compactions.to_string(),
        ));
    }
    edits.push(results(
        s,
        ResultKey::SessionS,
        format!("{:.1}", f.prior_session_s + f.duration_s),
    ));
    // An interruption or a handoff is about the attempt before this one; a wait, a restart
    // or a retry in a fresh session below says it again.
    edits.push(results_remove(s, ResultKey::Interrupted));
    edits.push(results_remove(s, ResultKey::Handoff));
    edits
}

/// Records a judged attempt. A pass or a retry goes on at once with a spawn, so it is held for
/// that spawn's write-ahead record ([`Write::WithNextSpawn`]); everything else is written now.
#[must_use]
pub(crate) fn record(j: &Judgement, f: &Facts) -> Transition {
    let mut edits = common(f);
    let (log, outcome, write) = match j {
        Judgement::Interrupted(i) => {
            return interrupted(i, f.step, &name(f.step), f.transients, f.now).after(edits);
        }
        Judgement::Pass { summary } => passed(f, summary, &mut edits),
        Judgement::Planned { steps, after } => planned(f, (steps, after), &mut edits),
        // The runner runs VERIFY and judges again before recording; nothing to write yet.
        Judgement::NeedsVerify => {
            edits.clear();
            let log = format!(
                "verify: {} attempt {} reported done",
                name(f.step),
                f.attempt
            );
            (log, Outcome::Continue, Write::Now)
        }
        Judgement::Retry { reason } => retry(f, reason, &mut edits),
        Judgement::Restart { reason } => restart(f, reason, &mut edits),
        Judgement::Exhausted { reason, no_retry } => failed(f, reason, *no_retry, &mut edits),
        Judgement::Blocked { question } => blocked(f, question, None, &mut edits),
        Judgement::Asked {
            tool_use,
            question,
            options,
        } => blocked(f, question, Some((tool_use, options)), &mut edits),
        Judgement::Denied { tools, how } => denied(f, tools, how, &mut edits),
        Judgement::FreshSession { reason } => session(f, reason, true, &mut edits),
        Judgement::Fallback { to, until, reason } => fallback(f, (*to, *until), reason, &mut edits),
        Judgement::ResumeSession { reason } => session(f, reason, false, &mut edits),
    };
    Transition {
        edits,
        log,
        outcome,
        write,
        effects: effects(j, f),
    }
}

/// Records an attempt whose step a person closed by hand while it ran (`state`: SKIPPED or
/// DONE): what every attempt records, and the person's state stands. Nothing of the judgement
/// is acted on (no retry, no gate, no VERIFY); a step left DONE this way is done by hand
/// ([`super::by_hand::done_by_hand`]), its work the person's to commit.
#[must_use]
pub(crate) fn closed_by_hand(j: &Judgement, state: StepState, f: &Facts) -> Transition {
    let (s, who) = (f.step, name(f.step));
    let state = state.as_str();
    let mut edits = common(f);
    edits.push(results(s, ResultKey::Attempts, f.attempt.to_string()));
    edits.push(results_remove(s, ResultKey::Verified));
    let said = match j {
        Judgement::Pass { summary } => format!("it passed: {summary}"),
        Judgement::NeedsVerify => "it reported done (VERIFY does not run for it)".to_owned(),
        Judgement::Retry { reason } | Judgement::Exhausted { reason, .. } => {
            edits.push(results(s, ResultKey::Error, one_line(reason, 300)));
            format!("it failed: {reason}")
        }
        other => format!("its run's verdict: {}", super::LedgerVerdict::from(other)),
    };
    edits.push(clear_current());
    let next = moves_to(
        f.next_step.as_ref().map(|(n, t)| (*n, t.as_str())),
        &mut edits,
    );
    edits.extend(actions(
        &format!(
            "{who} attempt {} ended; it stays {state}, as set by hand",
            f.attempt
        ),
        &next,
    ));
    let log = format!(
        "by hand: {who} attempt {} ended ({said}); the step stays {state}, as set by hand while \
         it ran",
        f.attempt
    );
    Transition {
        edits,
        log,
        outcome: Outcome::Continue,
        write: Write::Now,
        effects: Vec::new(),
    }
}

/// What follows a recorded judgement beyond the write.
fn effects(j: &Judgement, f: &Facts) -> Vec<Effect> {
    let s = f.step;
    match j {
        Judgement::Pass { .. } if f.review && s > 0 => Vec::new(),
        Judgement::Pass { summary } => {
            let mut e = vec![Effect::TickPlanFile(s)];
            if f.notify_each_step {
                e.push(Effect::StepDone {
                    step: s,
                    summary: summary.clone(),
                });
            }
            e
        }
        // With `APPROVE_PLAN: on`, the plan's gate shows the plan.
        Judgement::Planned { .. } if f.approve_plan => Vec::new(),
        Judgement::Planned { .. } => vec![Effect::Planned],
        // The planning call has no step to retry, skip or stop at: it is told, not asked.
        Judgement::Exhausted { reason, .. } if s == 0 => vec![Effect::Failed {
            step: s,
            reason: reason.clone(),
        }],
        Judgement::Exhausted { .. }
        | Judgement::Blocked { .. }
        | Judgement::Asked { .. }
        | Judgement::Denied { .. } => {
            vec![Effect::Gate {
                id: f.next_gate.clone(),
            }]
        }
        Judgement::NeedsVerify
        | Judgement::Retry { .. }
        | Judgement::Restart { .. }
        // Its effects come with its record (`interrupted`).
        | Judgement::Interrupted(_)
        | Judgement::FreshSession { .. }
        | Judgement::ResumeSession { .. } => Vec::new(),
        Judgement::Fallback { to, until, reason } => vec![Effect::Fallback {
            step: s,
            to: *to,
            until: *until,
            reason: reason.clone(),
        }],
    }
}

type Recorded = (String, Outcome, Write);

fn passed(f: &Facts, summary: &str, edits: &mut Vec<Edit>) -> Recorded {
    let s = f.step;
    let who = name(s);
    if f.review && s > 0 {
        return passed_to_review(f, summary, edits);
    }
    edits.extend(step_state(s, StepState::Done));
    edits.push(results(s, ResultKey::Summary, one_line(summary, 300)));
    edits.push(results(s, ResultKey::Verified, f.verified.to_string()));
    edits.push(results(s, ResultKey::Attempts, f.attempt.to_string()));
    if let Some(c) = &f.commit {
        edits.push(results(s, ResultKey::Commit, c.clone()));
    }
    edits.push(results_remove(s, ResultKey::Error));
    edits.push(results_remove(s, ResultKey::Blocked));
    edits.push(clear_current());
    let next = moves_to(f.next_step.as_ref().map(|(n, t)| (*n, t.as_str())), edits);
    edits.extend(actions(&format!("{who} done: {summary}"), &next));
    let log = format!("pass: {who} attempt {}: {summary}", f.attempt);
    (log, Outcome::Continue, Write::WithNextSpawn)
}

/// A pass under `REVIEW: on`: recorded, and the step waits for its review (still RUNNING).
fn passed_to_review(f: &Facts, summary: &str, edits: &mut Vec<Edit>) -> Recorded {
    let s = f.step;
    edits.push(results(s, ResultKey::Summary, one_line(summary, 300)));
    edits.push(results(s, ResultKey::Verified, f.verified.to_string()));
    edits.push(results(s, ResultKey::Attempts, f.attempt.to_string()));
    if let Some(c) = &f.commit {
        edits.push(results(s, ResultKey::Commit, c.clone()));
    }
    if let Some(base) = &f.base_head {
        edits.push(results(s, ResultKey::BaseHead, base.clone()));
    }
    edits.push(results(s, ResultKey::Review, "pending"));
    edits.push(results_remove(s, ResultKey::ReviewRuns));
    edits.push(results_remove(s, ResultKey::Error));
    edits.push(clear_current());
    edits.extend(actions(
        &format!("Step {s} passed its checks: {summary}"),
        &format!("Review step {s} in a fresh, read-only session"),
    ));
    let log = format!(
        "pass: Step {s} attempt {}: {summary}; its review follows",
        f.attempt
    );
    (log, Outcome::Continue, Write::WithNextSpawn)
}

/// The planning call's plan becomes the steps, all PENDING, and step 1 is next.
fn planned(
    f: &Facts,
    (steps, after): (&[String], &std::collections::BTreeMap<u32, Vec<u32>>),
    edits: &mut Vec<Edit>,
) -> Recorded {
    let summary = format!("planned {} steps", steps.len());
    edits.push(results(0, ResultKey::Summary, summary.clone()));
    edits.push(results(0, ResultKey::Verified, f.verified.to_string()));
    edits.push(results(0, ResultKey::Attempts, f.attempt.to_string()));
    edits.push(results_remove(0, ResultKey::Error));
    edits.push(clear_current());
    edits.push(Edit::SetSteps(
        steps
            .iter()
            .map(|s| (StepState::Pending, s.clone()))
            .collect(),
    ));
    edits.push(crate::m1::keys::no_after());
    for (n, deps) in after {
        edits.push(crate::m1::keys::after(*n, deps));
    }
    edits.push(PlanKey::CurrentStep.set("1"));
    let log = format!("pass: Planning attempt {}: {summary}", f.attempt);
    if f.plan_only {
        // Planned, and nothing more: the person reads (and may edit) the plan first.
        edits.push(Top::PlanOnly.remove());
        edits.push(Edit::Status(Status::Idle));
        edits.extend(actions(
            &format!("Planning done: {summary} (--plan-only)"),
            "Read the plan in M1.md (edit it if you like), then `loop resume` runs it",
        ));
        return (log, Outcome::Exit(Exit::Ok), Write::Now);
    }
    let first = steps
        .first()
        .map_or_else(String::new, |t| format!("Step 1: {t}"));
    edits.extend(actions(&format!("Planning done: {summary}"), &first));
    (log, Outcome::Continue, Write::WithNextSpawn)
}

fn retry(f: &Facts, reason: &str, edits: &mut Vec<Edit>) -> Recorded {
    let (s, who) = (f.step, name(f.step));
    edits.push(results(s, ResultKey::Attempts, f.attempt.to_string()));
    edits.push(results(s, ResultKey::Error, one_line(reason, 300)));
    // Whatever an earlier attempt passed, this one did not (a retake a review asked for).
    edits.push(results(s, ResultKey::Verified, "false"));
    edits.push(clear_current());
    edits.extend(step_state(s, StepState::Pending));
    let how = match &f.handoff {
        Some(why) => {
            fresh_session(s, why, edits);
            "in a fresh session with a handoff"
        }
        None => "with a fix prompt",
    };
    edits.extend(actions(
        &format!("{who} attempt {} failed: {reason}", f.attempt),
        &format!(
            "Retry {} (attempt {}) {how}",
            who.to_lowercase(),
            f.attempt + 1
        ),
    ));
    let log = format!("retry: {who} attempt {}: {reason}", f.attempt);
    (log, Outcome::Continue, Write::WithNextSpawn)
}

/// The step goes on in a fresh session whose first prompt carries `why` and the handoff:
/// the session's id goes, HANDOFF says why.
fn fresh_session(s: u32, why: &str, edits: &mut Vec<Edit>) {
    edits.retain(|e| !e.sets(&ResultKey::SessionId.path(s)));
    edits.push(results_remove(s, ResultKey::SessionId));
    edits.push(results(s, ResultKey::Handoff, one_line(why, 300)));
}

/// The agent asked for a fresh session (`STEP_RESTART`): counted in RESTARTS, not as an
/// attempt; the next one starts a fresh session from its handoff note.
fn restart(f: &Facts, reason: &str, edits: &mut Vec<Edit>) -> Recorded {
    let (s, who) = (f.step, name(f.step));
    let n = f.restarts + 1;
    edits.push(results(s, ResultKey::Restarts, n.to_string()));
    edits.push(clear_current());
    edits.extend(step_state(s, StepState::Pending));
    fresh_session(
        s,
        &format!("the agent asked for a fresh session: {reason}"),
        edits,
    );
    edits.extend(actions(
        &format!("{who} asked for a fresh session ({reason})"),
        &format!(
            "Run {} again in a fresh session from its handoff",
            who.to_lowercase()
        ),
    ));
    let log = format!(
        "restart: {who} attempt {} (restart {n}): {reason}",
        f.attempt
    );
    (log, Outcome::Continue, Write::WithNextSpawn)
}

/// The last failed attempt `Caps::max_retries` allows, or one `no_retry` can pass: the step and the
/// loop fail.
fn failed(f: &Facts, reason: &str, no_retry: bool, edits: &mut Vec<Edit>) -> Recorded {
    let s = f.step;
    edits.push(results(s, ResultKey::Attempts, f.attempt.to_string()));
    edits.push(results(s, ResultKey::Error, one_line(reason, 300)));
    edits.push(results(s, ResultKey::Verified, "false"));
    let n = super::failures(f.attempt, f.uncounted);
    // One no retry can pass spent no count of attempts: none is said.
    let why = if no_retry {
        reason.to_owned()
    } else {
        format!("failed attempt {n} of {n} allowed: {reason}")
    };
    edits.extend(exhausted_edits(s, &why));
    let mut log = format!("fail: {} attempt {}: {reason}", name(s), f.attempt);
    if s > 0 {
        // A person decides whether it runs again, is skipped, or the loop ends here.
        let gate = super::gate::about_step(
            GateKind::Failed,
            f.next_gate.clone(),
            &f.loop_id,
            s,
            &one_line(&why, 300),
            &[],
        );
        edits.extend(gate.open_edits());
        edits.extend(actions(
            &format!("{} failed (gate {}): {why}", name(s), gate.id),
            &format!(
                "A human decides (gate {id}): `loop retry` (or `loop answer {id} retry`) gives \
                 step {s} a fresh budget of attempts; `loop answer {id} skip|stop`",
                id = gate.id
            ),
        ));
        let _ = write!(log, "; gate {} asks what now", gate.id);
    }
    (log, Outcome::Exit(Exit::Failed), Write::Now)
}

/// The permission settings denied the agent tools: the step waits on a DENIED gate (allow
/// them and run it again, skip it, or stop), or for the hand edit `how` says and `loop resume`.
fn denied(f: &Facts, tools: &[String], how: &str, edits: &mut Vec<Edit>) -> Recorded {
    let s = f.step;
    let reason = format!("the agent was denied these tools: {}", tools.join(", "));
    let gate = super::gate::about_step(
        GateKind::Denied,
        f.next_gate.clone(),
        &f.loop_id,
        s,
        &reason,
        tools,
    );
    let id = &gate.id;
    edits.extend(halt_edits(
        s,
        &format!("{reason} (gate {id})"),
        &format!("Gate {id}: `loop answer {id} allow|skip|stop`; or by hand: {how}"),
    ));
    edits.extend(gate.open_edits());
    let log = format!("halt: {}: {reason} (gate {id})", name(s));
    (log, Outcome::Exit(Exit::Waiting), Write::Now)
}

/// A question: the step waits on a gate for its answer (or for a hand edit and `loop resume`).
/// `tool`: the deferred question call it came as, and the answers it offers.
fn blocked(
    f: &Facts,
    question: &str,
    tool: Option<(&String, &Vec<String>)>,
    edits: &mut Vec<Edit>,
) -> Recorded {
    let s = f.step;
    let who = name(s);
    let question = one_line(question, 300);
    let mut gate = super::gate::about_step(
        GateKind::Ask,
        f.next_gate.clone(),
        &f.loop_id,
        s,
        &question,
        &[],
    );
    if let Some((tool_use, options)) = tool {
        gate.tool_use = Some(tool_use.clone());
        gate.options.clone_from(options);
    }
    edits.extend(step_state(s, StepState::Pending));
    edits.push(results(s, ResultKey::Blocked, question.clone()));
    edits.push(clear_current());
    edits.extend(gate.open_edits());
    edits.push(Edit::Status(Status::Waiting));
    let id = &gate.id;
    edits.extend(actions(
        &format!("{who} is blocked and asks (gate {id}): {question}"),
        &format!(
            "Answer with `loop answer {id} TEXT`, or edit M1.md (e.g. CONSTRAINTS) and `loop \
             resume`. Question: {question}"
        ),
    ));
    let log = format!("blocked: {who} asks (gate {id}): {question}");
    (log, Outcome::Exit(Exit::Waiting), Write::Now)
}

/// The session cannot be used as planned: run again in a fresh one, or resuming the one that
/// exists; the attempt does not count.
fn session(f: &Facts, reason: &str, fresh: bool, edits: &mut Vec<Edit>) -> Recorded {
    let (s, who) = (f.step, name(f.step));
    edits.retain(|e| !e.sets(&ResultKey::SessionId.path(s)));
    if fresh {
        // The new session starts from the runner's handoff, not from the step's first prompt.
        fresh_session(s, reason, edits);
    } else if let Some(sid) = &f.session_id {
        edits.push(results(s, ResultKey::SessionId, sid.clone()));
    }
    edits.extend(step_state(s, StepState::Pending));
    edits.push(clear_current());
    let how = if fresh {
        "in a fresh session"
    } else {
        "resuming its session"
    };
    edits.extend(actions(
        &format!("{who}: {reason}"),
        &format!("Run it again {how}"),
    ));
    (
        format!("session: {who}: {reason}; again {how}"),
        Outcome::Continue,
        Write::Now,
    )
}

/// A usage limit that resets too late for the step to wait: it goes on with the backend `to`
/// (recorded in its results, so every later run of the step, after a crash too, goes there),
/// in a fresh session from the runner's handoff. Not a failed attempt.
fn fallback(
    f: &Facts,
    (to, until): (crate::m1::settings::AgentKind, DateTime<Utc>),
    reason: &str,
    edits: &mut Vec<Edit>,
) -> Recorded {
    let (s, who) = (f.step, name(f.step));
    edits.retain(|e| !e.sets(&ResultKey::SessionId.path(s)));
    let why = format!(
        "the usage limit resets only at {} ({reason}): continued on {to}",
        stamp(until)
    );
    fresh_session(s, &why, edits);
    edits.push(results(s, ResultKey::Backend, to.as_str()));
    edits.push(results_remove(s, ResultKey::SessionTokens));
    edits.extend(step_state(s, StepState::Pending));
    edits.push(clear_current());
    edits.extend(actions(
        &format!("{who} hit the usage limit until {}: {reason}", stamp(until)),
        &format!("Run it on {to} in a fresh session, from the handoff"),
    ));
    (
        format!(
            "fallback: {who}: the usage limit resets at {} ({reason}); it goes on with {to} in \
             a fresh session",
            stamp(until)
        ),
        Outcome::Continue,
        Write::Now,
    )
}

/// The record of a run `who` ("Step 2", "the review of step 2") that something not of its
/// doing cut off: a wait until `WAIT_UNTIL`, after which step `s` carries on by itself, or
/// WAITING for a human. Neither is a failed attempt. `transients`: the step's count so far.
#[must_use]
pub(super) fn interrupted(
    i: &Interruption,
    s: u32,
    who: &str,
    transients: u32,
    now: DateTime<Utc>,
) -> Transition {
    match i {
        Interruption::Backoff { delay, reason } => {
            let until = now + chrono::Duration::from_std(*delay).unwrap_or_default();
            let mut edits = wait_edits(s, until, reason, transients + 1);
            edits.extend(actions(
                &format!("{who} hit a transient error: {reason}"),
                &format!(
                    "Wait until {} ({}s backoff), then run it again",
                    stamp(until),
                    delay.as_secs()
                ),
            ));
            Transition::now(
                edits,
                format!("backoff {}s: {who}: {reason}", delay.as_secs()),
            )
        }
        Interruption::UsageWait {
            until,
            guess,
            reason,
        } => {
            let mut edits = wait_edits(s, *until, reason, transients);
            let (next, said) = match guess {
                None => (
                    format!(
                        "Wait until the limit resets at {}, then carry on by itself",
                        stamp(*until)
                    ),
                    reason.clone(),
                ),
                Some(g) => (
                    format!(
                        "Wait until {} ({g}), then carry on by itself; if the limit resets \
                         sooner, `loop stop` then `loop resume` tries at once",
                        stamp(*until)
                    ),
                    format!("{reason}; {g}"),
                ),
            };
            edits.extend(actions(
                &format!("{who} hit the usage limit: {reason}"),
                &next,
            ));
            let log = match guess {
                None => format!("usage limit: {who} waits until {}", stamp(*until)),
                Some(g) => format!("usage limit: {who} waits until {} ({g})", stamp(*until)),
            };
            Transition::now(edits, log).then(Effect::UsageWait {
                step: s,
                until: *until,
                reason: said,
            })
        }
        Interruption::OverBudget { reason } => {
            // Not a failed attempt: INTERRUPTED tells the run that goes on what cut it off,
            // and the loop's next decision is the COST gate.
            let mut edits: Vec<Edit> = step_state(s, StepState::Pending).into_iter().collect();
            edits.push(results(s, ResultKey::Interrupted, one_line(reason, 300)));
            edits.push(clear_current());
            edits.extend(actions(
                &format!("{who} was cut off: {reason}"),
                "A person raises MAX_COST_USD (or stops) on a COST gate",
            ));
            Transition::now(edits, format!("cost cap: {who}: {reason}"))
        }
        Interruption::Halt { reason, how } => {
            let mut edits = halt_edits(s, reason, how);
            edits.push(results(s, ResultKey::Error, one_line(reason, 300)));
            // A human looks before the loop goes on: the transient errors counted so far
            // (perhaps what halted it) start again from zero.
            edits.push(results_remove(s, ResultKey::Transient));
            Transition::exit(edits, format!("halt: {who}: {reason}"), Exit::Waiting).then(
                Effect::Waiting {
                    reason: reason.clone(),
                    how: how.clone(),
                },
            )
        }
    }
}

/// A wait is not a failure: the reason goes to INTERRUPTED (so the next run is told to carry
/// on, not to fix), and ERROR keeps the step's last real failure, if any.
fn wait_edits(s: u32, until: DateTime<Utc>, reason: &str, transients: u32) -> Vec<Edit> {
    let mut edits: Vec<Edit> = step_state(s, StepState::Pending).into_iter().collect();
    edits.extend([
        results(s, ResultKey::Transient, transients.to_string()),
        results(s, ResultKey::Interrupted, one_line(reason, 300)),
        clear_current(),
        current(CurrentKey::WaitUntil, stamp(until)),
        current(CurrentKey::WaitReason, one_line(reason, 200)),
    ]);
    edits
}
