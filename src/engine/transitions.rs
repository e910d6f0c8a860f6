//! The field edits that record each decision in M1.md. Each transition is one write: the
//! write-ahead record before a spawn, or the outcome after an attempt (DESIGN §5).

use chrono::{DateTime, SecondsFormat, Utc};

use super::{Judgement, one_line};
use crate::exit::Status as Exit;
use crate::m1::{Edit, M1, Status, StepState};

/// What the runner does after writing a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Decide again.
    Continue,
    /// End the command with this status.
    Exit(Exit),
}

/// A decision: the edits that record it, a line for the decision log, and what follows.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub edits: Vec<Edit>,
    pub log: String,
    pub outcome: Outcome,
}

fn results(step: u32, key: &str, value: impl Into<String>) -> Edit {
    Edit::Set(
        vec!["RESULTS".into(), format!("STEP_{step}"), key.into()],
        value.into(),
    )
}

fn results_remove(step: u32, key: &str) -> Edit {
    Edit::Remove(vec!["RESULTS".into(), format!("STEP_{step}"), key.into()])
}

fn current(key: &str, value: impl Into<String>) -> Edit {
    Edit::Set(vec!["CURRENT".into(), key.into()], value.into())
}

fn actions(last: &str, next: &str) -> [Edit; 2] {
    [
        Edit::set(&["LAST_ACTION"], one_line(last, 300)),
        Edit::set(&["NEXT_ACTION"], one_line(next, 300)),
    ]
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The write-ahead record of an attempt about to be spawned: from here on, a crash leaves a
/// TASK_ID that resume can look up (no task directory means the spawn never happened).
#[must_use]
pub fn spawn(
    step: u32,
    attempt: u32,
    task_id: &str,
    session_id: &str,
    command: &str,
    now: DateTime<Utc>,
) -> Transition {
    let what = if step == 0 {
        "Planning".to_string()
    } else {
        format!("Step {step}")
    };
    let mut edits = Vec::new();
    if step > 0 {
        edits.push(Edit::StepState(step, StepState::Running));
    }
    edits.push(Edit::set(&["PLAN", "CURRENT_STEP"], step.to_string()));
    edits.push(Edit::Clear(vec!["CURRENT".into()]));
    edits.push(current("TASK_ID", task_id));
    edits.push(current("SPAWN_TIME", stamp(now)));
    edits.push(current("ATTEMPT", attempt.to_string()));
    edits.push(current("SESSION_ID", session_id));
    edits.push(current("COMMAND", one_line(command, 160)));
    edits.push(results(step, "EXIT", "(pending)"));
    edits.extend(actions(
        &format!("{what} attempt {attempt} spawned as task {task_id}"),
        &format!(
            "loop check {task_id} until it ends, then verify {}",
            what.to_lowercase()
        ),
    ));
    Transition {
        edits,
        log: format!("spawn: {what} attempt {attempt} as {task_id} (session {session_id})"),
        outcome: Outcome::Continue,
    }
}

/// The facts about a finished attempt that go into RESULTS.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub step: u32,
    pub attempt: u32,
    pub exit_code: Option<i32>,
    pub session_id: Option<String>,
    /// This attempt's cost and duration; added to what RESULTS already holds.
    pub cost_usd: f64,
    pub duration_s: f64,
    pub prior_cost_usd: f64,
    pub prior_duration_s: f64,
    /// Transient errors this step waited out before this one.
    pub transients: u32,
    pub commit: Option<String>,
    pub verified: bool,
    pub report: Option<String>,
    /// The step that comes next (after a pass), with its text.
    pub next_step: Option<(u32, String)>,
    pub now: Option<DateTime<Utc>>,
}

fn common(f: &Facts, edits: &mut Vec<Edit>) {
    let s = f.step;
    // No exit code (killed by a signal, lost, never ran): the key goes; ERROR says why.
    edits.push(match f.exit_code {
        Some(c) => results(s, "EXIT", c.to_string()),
        None => results_remove(s, "EXIT"),
    });
    if let Some(sid) = &f.session_id {
        edits.push(results(s, "SESSION_ID", sid.clone()));
    }
    edits.push(results(
        s,
        "COST_USD",
        format!("{:.4}", f.prior_cost_usd + f.cost_usd),
    ));
    edits.push(results(
        s,
        "DURATION_S",
        format!("{:.1}", f.prior_duration_s + f.duration_s),
    ));
    if let Some(r) = &f.report {
        edits.push(results(s, "REPORT", r.clone()));
    }
    // An interruption is about the attempt before this one; a wait below says it again.
    edits.push(results_remove(s, "INTERRUPTED"));
}

fn name(step: u32) -> String {
    if step == 0 {
        "Planning".into()
    } else {
        format!("Step {step}")
    }
}

/// Records a judged attempt. `Pass` of step 0 (planning) is recorded by the runner together
/// with the plan, through [`record`] plus its own `SetSteps` edit.
#[must_use]
pub fn record(j: &Judgement, f: &Facts) -> Transition {
    let s = f.step;
    let who = name(s);
    let mut edits = Vec::new();
    common(f, &mut edits);
    let now = f.now.unwrap_or_else(Utc::now);
    let (log, outcome) = match j {
        Judgement::Pass { summary } => {
            if s > 0 {
                edits.push(Edit::StepState(s, StepState::Done));
            }
            edits.push(results(s, "SUMMARY", one_line(summary, 300)));
            edits.push(results(s, "VERIFIED", f.verified.to_string()));
            edits.push(results(s, "ATTEMPTS", f.attempt.to_string()));
            if let Some(c) = &f.commit {
                edits.push(results(s, "COMMIT", c.clone()));
            }
            edits.push(results_remove(s, "ERROR"));
            edits.push(results_remove(s, "BLOCKED"));
            edits.push(Edit::Clear(vec!["CURRENT".into()]));
            let next = match &f.next_step {
                Some((n, text)) => {
                    edits.push(Edit::set(&["PLAN", "CURRENT_STEP"], n.to_string()));
                    format!("Step {n}: {text}")
                }
                None => "All steps done".into(),
            };
            edits.extend(actions(&format!("{who} done: {summary}"), &next));
            (
                format!("pass: {who} attempt {}: {summary}", f.attempt),
                Outcome::Continue,
            )
        }
        // The runner runs VERIFY and judges again before recording; nothing to write yet.
        Judgement::NeedsVerify => {
            edits.clear();
            (
                format!("verify: {who} attempt {} reported done", f.attempt),
                Outcome::Continue,
            )
        }
        Judgement::Retry { reason } | Judgement::Exhausted { reason } => {
            let last = matches!(j, Judgement::Exhausted { .. });
            edits.push(results(s, "ATTEMPTS", f.attempt.to_string()));
            edits.push(results(s, "ERROR", one_line(reason, 300)));
            edits.push(Edit::Clear(vec!["CURRENT".into()]));
            if last {
                let why = format!("attempt {} of {}: {reason}", f.attempt, f.attempt);
                edits.extend(exhausted(s, &why).edits);
                (
                    format!("fail: {who} attempt {}: {reason}", f.attempt),
                    Outcome::Exit(Exit::Failed),
                )
            } else {
                if s > 0 {
                    edits.push(Edit::StepState(s, StepState::Pending));
                }
                edits.extend(actions(
                    &format!("{who} attempt {} failed: {reason}", f.attempt),
                    &format!(
                        "Retry {} (attempt {}) with a fix prompt",
                        who.to_lowercase(),
                        f.attempt + 1
                    ),
                ));
                (
                    format!("retry: {who} attempt {}: {reason}", f.attempt),
                    Outcome::Continue,
                )
            }
        }
        Judgement::Backoff { delay, reason } => {
            let until = now + chrono::Duration::from_std(*delay).unwrap_or_default();
            wait_edits(&mut edits, s, until, reason, f.transients + 1);
            edits.extend(actions(
                &format!("{who} hit a transient error: {reason}"),
                &format!(
                    "Wait until {} ({}s backoff), then run it again",
                    stamp(until),
                    delay.as_secs()
                ),
            ));
            (
                format!("backoff {}s: {who}: {reason}", delay.as_secs()),
                Outcome::Continue,
            )
        }
        Judgement::UsageWait { until, reason } => {
            wait_edits(&mut edits, s, *until, reason, f.transients);
            edits.extend(actions(
                &format!("{who} hit the usage limit: {reason}"),
                &format!(
                    "Wait until the limit resets at {}, then carry on by itself",
                    stamp(*until)
                ),
            ));
            (
                format!("usage limit: {who} waits until {}", stamp(*until)),
                Outcome::Continue,
            )
        }
        Judgement::Blocked { question } => {
            if s > 0 {
                edits.push(Edit::StepState(s, StepState::Pending));
            }
            edits.push(results(s, "BLOCKED", one_line(question, 300)));
            edits.push(Edit::Clear(vec!["CURRENT".into()]));
            edits.push(Edit::Status(Status::Waiting));
            edits.extend(actions(
                &format!("{who} is blocked and asks: {question}"),
                &format!(
                    "Answer in M1.md (e.g. in CONSTRAINTS), then `loop resume`. Question: {question}"
                ),
            ));
            (
                format!("blocked: {who}: {question}"),
                Outcome::Exit(Exit::Waiting),
            )
        }
        Judgement::Halt { reason, how } => {
            let t = halt_edits(s, reason, how);
            edits.extend(t);
            edits.push(results(s, "ERROR", one_line(reason, 300)));
            // A human looks before the loop goes on: the transient errors counted so far
            // (perhaps what halted it) start again from zero.
            edits.push(results_remove(s, "TRANSIENT"));
            (
                format!("halt: {who}: {reason}"),
                Outcome::Exit(Exit::Waiting),
            )
        }
        Judgement::FreshSession { reason } | Judgement::ResumeSession { reason } => {
            let fresh = matches!(j, Judgement::FreshSession { .. });
            edits.retain(
                |e| !matches!(e, Edit::Set(p, _) if p.last().is_some_and(|k| k == "SESSION_ID")),
            );
            if fresh {
                edits.push(results_remove(s, "SESSION_ID"));
            } else if let Some(sid) = &f.session_id {
                edits.push(results(s, "SESSION_ID", sid.clone()));
            }
            if s > 0 {
                edits.push(Edit::StepState(s, StepState::Pending));
            }
            edits.push(Edit::Clear(vec!["CURRENT".into()]));
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
            )
        }
    };
    Transition {
        edits,
        log,
        outcome,
    }
}

/// A wait is not a failure: the reason goes to INTERRUPTED (so the next run is told to carry
/// on, not to fix), and ERROR keeps the step's last real failure, if any.
fn wait_edits(edits: &mut Vec<Edit>, s: u32, until: DateTime<Utc>, reason: &str, transients: u32) {
    edits.push(results(s, "TRANSIENT", transients.to_string()));
    edits.push(results(s, "INTERRUPTED", one_line(reason, 300)));
    if s > 0 {
        edits.push(Edit::StepState(s, StepState::Pending));
    }
    edits.push(Edit::Clear(vec!["CURRENT".into()]));
    edits.push(current("WAIT_UNTIL", stamp(until)));
    edits.push(current("WAIT_REASON", one_line(reason, 200)));
}

fn halt_edits(step: u32, reason: &str, how: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    if step > 0 {
        edits.push(Edit::StepState(step, StepState::Pending));
    }
    edits.push(Edit::Clear(vec!["CURRENT".into()]));
    edits.push(Edit::Status(Status::Waiting));
    edits.extend(actions(&format!("Waiting: {reason}"), how));
    edits
}

/// WAITING because the runner cannot decide (a cap, a refused plan, the agent missing).
#[must_use]
pub fn halt(step: u32, reason: &str, how: &str) -> Transition {
    Transition {
        edits: halt_edits(step, reason, how),
        log: format!("halt: {reason}"),
        outcome: Outcome::Exit(Exit::Waiting),
    }
}

/// A stop file ended the step: its group is dead; the attempt does not count.
#[must_use]
pub fn stopped(step: u32, stop_file: &str, task_id: Option<&str>) -> Transition {
    let mut edits = Vec::new();
    if step > 0 {
        edits.push(Edit::StepState(step, StepState::Pending));
    }
    // The killed attempt has no exit to report (its spawn wrote `(pending)`).
    if task_id.is_some() {
        edits.push(results_remove(step, "EXIT"));
    }
    edits.push(Edit::Clear(vec!["CURRENT".into()]));
    edits.push(Edit::Status(Status::Waiting));
    let killed = task_id.map_or_else(String::new, |t| format!("; task {t} killed"));
    let again = if step == 0 {
        "planning runs again on resume".to_string()
    } else {
        format!("step {step} back to PENDING")
    };
    edits.extend(actions(
        &format!("Stopped by {stop_file}{killed}; {again}, attempt not counted"),
        &format!("Remove {stop_file}, then `loop resume`"),
    ));
    Transition {
        edits,
        log: format!("stop: {stop_file} seen{killed}"),
        outcome: Outcome::Exit(Exit::Waiting),
    }
}

/// Every step is DONE or SKIPPED: the loop is DONE.
#[must_use]
pub fn complete(m: &M1) -> Transition {
    let total = m.plan.steps.len();
    let skipped = m
        .plan
        .steps
        .iter()
        .filter(|s| s.state == StepState::Skipped)
        .count();
    let all = match total {
        1 => "The only step is done".to_string(),
        n => format!("All {n} steps done"),
    };
    let last = if skipped == 0 {
        all
    } else {
        format!("{all} ({} run, {skipped} skipped)", total - skipped)
    };
    let mut edits = vec![
        Edit::Status(Status::Done),
        Edit::Clear(vec!["CURRENT".into()]),
    ];
    edits.extend(actions(&last, "Nothing: the goal is reached"));
    Transition {
        edits,
        log: format!(
            "done: {} DONE or SKIPPED; the goal is reached",
            match total {
                1 => "the only step is".to_string(),
                n => format!("all {n} steps are"),
            }
        ),
        outcome: Outcome::Exit(Exit::Ok),
    }
}

/// A step that cannot be tried again (MAX_RETRIES spent, or set FAILED by hand): the loop fails.
#[must_use]
pub fn exhausted(step: u32, reason: &str) -> Transition {
    let who = name(step);
    let mut edits = Vec::new();
    if step > 0 {
        edits.push(Edit::StepState(step, StepState::Failed));
    }
    edits.push(Edit::Clear(vec!["CURRENT".into()]));
    edits.push(Edit::Status(Status::Failed));
    edits.extend(actions(
        &format!("{who} failed: {reason}"),
        &format!(
            "A human decides. To try {} again: set it back to PENDING, delete its RESULTS \
             ATTEMPTS line (or raise LIMITS.MAX_RETRIES), set STATUS: RUNNING, then `loop resume`",
            who.to_lowercase()
        ),
    ));
    Transition {
        edits,
        log: format!("fail: {who}: {reason}"),
        outcome: Outcome::Exit(Exit::Failed),
    }
}
