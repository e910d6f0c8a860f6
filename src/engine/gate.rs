//! Gates: the decisions the loop waits for (`GATES:` in M1.md), as pure rules. When a gate
//! opens, when the plan needs approving again, what a decision writes and whether it is
//! refused: the runner and the shell verbs only carry these out.
//!
//! A decision applies to the text it was shown for: each gate records a fingerprint of what
//! the person saw (the plan, the question), and a decision that comes with another fingerprint
//! is refused and the gate shown again.

use chrono::{DateTime, Utc};

use super::transitions::{
    Effect, Transition, actions, moves_to, name, results, results_remove, step_state,
};
use crate::agent::tool_of;
use crate::exit::Status as Exit;
use crate::m1::gates::{self, fingerprint};
use crate::m1::keys::{AgentKey, LimitKey, ResultKey, Review};
use crate::m1::{Edit, Gate, GateKind, GateOption, M1, Status, StepState, typed};
use crate::text::one_line;

/// What the next decision of a loop with `APPROVE_PLAN: on` is about its plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PlanGate {
    /// Ask for approval with a new gate.
    Open(Gate),
    /// The plan changed since its pending gate was shown: show it again under the same id.
    Reshow { id: String, shown: String },
    /// Its gate is shown and still pending: keep waiting.
    Pending { id: String },
}

/// The fingerprint of the plan as a person reads it: its steps' numbers and texts (not their
/// states), in this loop.
#[must_use]
pub(crate) fn plan_shown(m: &M1) -> String {
    use std::fmt::Write as _;
    let mut text = m.loop_id.clone().unwrap_or_default();
    for s in &m.plan.steps {
        let _ = write!(text, "\n{}: {}", s.n, s.text);
    }
    fingerprint(&text)
}

/// The fingerprint of a step's question, in this loop.
#[must_use]
pub(crate) fn question_shown(m: &M1, step: u32, question: &str) -> String {
    question_shown_in(m.loop_id.as_deref().unwrap_or_default(), step, question)
}

/// [`question_shown`] in the loop `loop_id`.
#[must_use]
pub(crate) fn question_shown_in(loop_id: &str, step: u32, question: &str) -> String {
    fingerprint(&format!("{loop_id}\n{step}\n{question}"))
}

/// What a gate's decision must come with: the fingerprint of what it asks about now (the
/// plan as it stands; a question as it was asked).
#[must_use]
pub(crate) fn current_shown(m: &M1, g: &Gate) -> String {
    match g.kind {
        GateKind::Plan => plan_shown(m),
        GateKind::Ask
        | GateKind::Denied
        | GateKind::Failed
        | GateKind::Review
        | GateKind::Merge
        | GateKind::Cost => g.shown.clone(),
    }
}

/// Whether the plan still needs a person's approval before a step runs, and what to do about
/// it; `None` when it does not (not asked for, approved as it stands, or a step has begun).
#[must_use]
pub(crate) fn plan_gate(m: &M1) -> Option<PlanGate> {
    if !m.approve_plan || m.plan.steps.is_empty() || begun(m) {
        return None;
    }
    let shown = plan_shown(m);
    let plans = || m.gates.iter().filter(|g| g.kind == GateKind::Plan);
    if plans().any(|g| {
        !g.is_pending()
            && g.shown == shown
            && g.choice.as_deref() == Some(GateOption::Approve.as_str())
    }) {
        return None;
    }
    Some(match plans().find(|g| g.is_pending()) {
        Some(g) if g.shown == shown => PlanGate::Pending { id: g.id.clone() },
        Some(g) => PlanGate::Reshow {
            id: g.id.clone(),
            shown,
        },
        None => PlanGate::Open(Gate {
            options: options_of(GateKind::Plan),
            ..Gate::opening(gates::next_id(&m.gates), GateKind::Plan, 0, shown)
        }),
    })
}

/// A step has begun: it ran, or has results.
fn begun(m: &M1) -> bool {
    m.plan.steps.iter().any(|s| s.state != StepState::Pending) || m.results.keys().any(|n| *n > 0)
}

/// What a gate is about, in a line.
#[must_use]
pub(crate) fn about(m: &M1, g: &Gate) -> String {
    match (&g.question, g.step) {
        (Some(q), s) if g.kind != GateKind::Ask => format!("step {s}: {q}"),
        (Some(q), s) => format!("step {s} asks: {q}"),
        (None, 0) => format!("the plan of {} step(s)", m.plan.steps.len()),
        (None, s) => format!("step {s}"),
    }
}

/// How to decide a gate from the shell, for `NEXT_ACTION` and the messages. The chat's way
/// ([`chat_way`]) is added by whoever knows a chat is set up: M1.md is read where none is.
#[must_use]
pub(crate) fn how(g: &Gate) -> String {
    how_to(g.kind, &g.id, &g.options)
}

/// How to decide a gate in the chat, where one is set up: `tap an option on Telegram`.
#[must_use]
pub(crate) fn chat_way(g: &Gate) -> &'static str {
    match g.kind {
        GateKind::Plan => "tap Approve on Telegram",
        GateKind::Ask if g.options.is_empty() => "reply to the question on Telegram",
        GateKind::Ask
        | GateKind::Denied
        | GateKind::Failed
        | GateKind::Review
        | GateKind::Merge
        | GateKind::Cost => "tap an option on Telegram",
    }
}

/// How to decide gate `id` of `kind`, which offers `options`, from the shell.
fn how_to(kind: GateKind, id: &str, options: &[String]) -> String {
    match kind {
        GateKind::Plan => format!(
            "approve the plan with `loop approve {id}` (or reject it with `loop reject {id}`)"
        ),
        GateKind::Ask if options.is_empty() => format!(
            "answer with `loop answer {id} TEXT`; the step resumes in its own session with the \
             answer"
        ),
        GateKind::Ask => format!(
            "answer with `loop answer {id} OPTION` ({})",
            options.join(", ")
        ),
        GateKind::Cost => format!(
            "decide with `loop answer {id} {}` (raise: as much again), or `loop answer {id} \
             AMOUNT` for a cap of AMOUNT US dollars",
            options.join("|")
        ),
        GateKind::Denied | GateKind::Failed | GateKind::Review | GateKind::Merge => {
            format!("decide with `loop answer {id} {}`", options.join("|"))
        }
    }
}

/// The gate `g` (new, or shown again) recorded: the loop WAITS for it, and the person is told.
#[must_use]
pub(crate) fn opened(m: &M1, open: &PlanGate) -> Transition {
    let (mut edits, id, log) = match open {
        PlanGate::Open(g) => (
            g.open_edits(),
            g.id.clone(),
            format!(
                "gate: {} opened: approve the plan of {} step(s)",
                g.id,
                m.plan.steps.len()
            ),
        ),
        PlanGate::Reshow { id, shown } => (
            vec![crate::m1::keys::GateKey::Shown.set(id, shown.clone())],
            id.clone(),
            format!("gate: {id} shown again: the plan changed since it was shown"),
        ),
        PlanGate::Pending { id } => (
            Vec::new(),
            id.clone(),
            format!("gate: {id} still waits for a decision"),
        ),
    };
    edits.push(Edit::Status(Status::Waiting));
    edits.extend(actions(
        &format!("Waiting for the plan's approval (gate {id})"),
        &format!("Decide gate {id}: {}", how_to(GateKind::Plan, &id, &[])),
    ));
    let t = Transition::exit(edits, log, Exit::Waiting);
    match open {
        PlanGate::Pending { .. } => t,
        _ => t.then(Effect::Gate { id }),
    }
}

/// The loop spent its `MAX_COST_USD` (`reason` says how much) before step `step` could run or
/// go on: it waits on a COST gate, where a person raises the cap (by as much again, or to an
/// amount) or stops. A COST gate of the step that still waits is kept, not opened again.
#[must_use]
pub(crate) fn over_budget(m: &M1, step: u32, reason: &str) -> Transition {
    let pending = m
        .pending_gates()
        .find(|g| g.kind == GateKind::Cost && g.step == step);
    let (mut edits, id, log, shown) = if let Some(g) = pending {
        (
            Vec::new(),
            g.id.clone(),
            format!("gate: {} still waits: {reason}", g.id),
            None,
        )
    } else {
        let id = gates::next_id(&m.gates);
        let loop_id = m.loop_id.as_deref().unwrap_or_default();
        let gate = about_step(GateKind::Cost, id.clone(), loop_id, step, reason, &[]);
        (
            gate.open_edits(),
            id.clone(),
            format!("gate: {id} opened: {reason}"),
            Some(id),
        )
    };
    edits.push(Edit::Status(Status::Waiting));
    edits.extend(actions(
        &format!("{} waits: {reason} (gate {id})", name(step)),
        &format!(
            "Decide gate {id}: {}",
            how_to(GateKind::Cost, &id, &options_of(GateKind::Cost))
        ),
    ));
    let t = Transition::exit(edits, log, Exit::Waiting);
    match shown {
        Some(id) => t.then(Effect::Gate { id }),
        None => t,
    }
}

/// The answers a gate of `kind` offers; none: a free-text answer.
#[must_use]
pub(crate) fn options_of(kind: GateKind) -> Vec<String> {
    options_for(kind, &[])
}

/// The answers a gate of `kind` about the denied `tools` (rules, for a DENIED gate) offers.
/// A DENIED gate allows what was denied (`allow`, its first option), and the whole tool only
/// as an answer of its own (`allow-all`), offered when what was denied is narrower than it.
#[must_use]
fn options_for(kind: GateKind, tools: &[String]) -> Vec<String> {
    use GateOption as O;
    let narrower = tools.iter().any(|t| tool_of(t) != t.as_str());
    let options: &[GateOption] = match kind {
        GateKind::Plan => &[O::Approve, O::Reject],
        GateKind::Ask => &[],
        GateKind::Denied if narrower => &[O::Allow, O::AllowAll, O::Skip, O::Stop],
        GateKind::Denied => &[O::Allow, O::Skip, O::Stop],
        GateKind::Failed | GateKind::Merge => &[O::Retry, O::Skip, O::Stop],
        GateKind::Review => &[O::Accept, O::Retry, O::Stop],
        GateKind::Cost => &[O::Raise, O::Stop],
    };
    options.iter().map(|o| o.as_str().to_owned()).collect()
}

/// A new gate `id` of `kind` about step `step` (not the plan), which asks `question`, in the
/// loop `loop_id`; `tools`: the denied tools of a DENIED gate.
#[must_use]
pub(crate) fn about_step(
    kind: GateKind,
    id: String,
    loop_id: &str,
    step: u32,
    question: &str,
    tools: &[String],
) -> Gate {
    Gate {
        question: Some(question.to_owned()),
        options: options_for(kind, tools),
        tools: tools.to_vec(),
        ..Gate::opening(id, kind, step, question_shown_in(loop_id, step, question))
    }
}

/// The answer a person gave to the question step `step` is blocked on, if they answered it
/// through its gate.
#[must_use]
pub(crate) fn answer_to(m: &M1, step: u32, question: &str) -> Option<String> {
    question_gate(m, step, question)
        .filter(|g| !g.is_pending())
        .and_then(|g| g.choice.clone())
}

/// The latest ASK gate opened for the question step `step` is blocked on.
fn question_gate<'a>(m: &'a M1, step: u32, question: &str) -> Option<&'a Gate> {
    let shown = question_shown(m, step, question);
    m.gates
        .iter()
        .rev()
        .find(|g| g.kind == GateKind::Ask && g.step == step && g.shown == shown)
}

/// Whether the question step `step` is blocked on came as a deferred question call and a
/// person answered it on its gate: the session then resumes at that call, with no prompt.
#[must_use]
pub(crate) fn deferred_call_answered(m: &M1, step: u32, question: &str) -> bool {
    question_gate(m, step, question).is_some_and(|g| g.tool_use.is_some() && !g.is_pending())
}

/// The answer to the deferred question call `tool_use`, once its gate is decided: what the
/// loop's `PreToolUse` hook gives the call when the session resumes.
#[must_use]
pub(crate) fn answer_to_call<'a>(m: &'a M1, tool_use: &str) -> Option<&'a Gate> {
    m.gates
        .iter()
        .find(|g| g.tool_use.as_deref() == Some(tool_use))
        .filter(|g| !g.is_pending())
}

/// The pending gates a new run of `step` leaves behind: those about that step, and about a
/// step now DONE or SKIPPED, which a person decided another way (`loop resume` after editing
/// M1.md).
#[must_use]
pub(crate) fn superseded_by_run(m: &M1, step: u32) -> Vec<String> {
    let settled = |n: u32| {
        m.plan
            .steps
            .iter()
            .any(|s| s.n == n && matches!(s.state, StepState::Done | StepState::Skipped))
    };
    m.pending_gates()
        .filter(|g| g.kind != GateKind::Plan && (g.step == step || settled(g.step)))
        .map(|g| g.id.clone())
        .collect()
}

/// A decision a person asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// The gate; `None`: the only pending one (of `step`, when it is named) this answer fits.
    pub id: Option<String>,
    pub step: Option<u32>,
    pub answer: Answer,
    /// The fingerprint of what they were shown (a chat message's button carries it); `None`
    /// from the shell, where they decide on the file as it is.
    pub shown: Option<String>,
    pub by: String,
}

/// What they decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Approve,
    Reject,
    /// A free-text answer, or the option it names.
    Text(String),
}

/// What became of a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Written: the transition to apply, and whether the loop then runs on.
    Made {
        gate: Gate,
        choice: String,
        transition: Transition,
        carries_on: bool,
    },
    /// The gate was decided before: nothing changes.
    Already(Gate),
    /// What was shown is out of date: the gate is shown again (the transition records it).
    Stale { gate: Gate, transition: Transition },
    /// The request cannot apply (no such gate, several pending, a wrong answer): why.
    Refused(String),
}

/// Decides `req` against the loop as it is now. `allowed`: the tools the agent is allowed now
/// (what a DENIED gate's `allow` adds to).
#[must_use]
pub(crate) fn decide(m: &M1, req: &Request, allowed: &[String], now: DateTime<Utc>) -> Decision {
    let g = match find(m, req) {
        Ok(g) => g.clone(),
        Err(why) => return Decision::Refused(why),
    };
    if !g.is_pending() {
        return Decision::Already(g);
    }
    let current = current_shown(m, &g);
    if let Some(shown) = &req.shown
        && current != *shown
    {
        let transition = match g.kind {
            GateKind::Plan => opened(
                m,
                &PlanGate::Reshow {
                    id: g.id.clone(),
                    shown: current,
                },
            ),
            GateKind::Ask
            | GateKind::Denied
            | GateKind::Failed
            | GateKind::Review
            | GateKind::Merge
            | GateKind::Cost => Transition::exit(
                Vec::new(),
                format!(
                    "gate: {} refused a decision on an out-of-date message",
                    g.id
                ),
                Exit::Waiting,
            ),
        };
        return Decision::Stale {
            gate: g,
            transition,
        };
    }
    let choice = match choice(m, &g, &req.answer) {
        Ok(c) => c,
        Err(why) => return Decision::Refused(why),
    };
    let mut edits = gates::decided(&g.id, &choice, &req.by, now);
    if g.kind == GateKind::Plan {
        // Approved as it stands now: a later edit of the plan asks again.
        edits.push(crate::m1::keys::GateKey::Shown.set(&g.id, current));
    }
    let outcome = outcome(m, &g, &choice, &req.by, allowed);
    let carries_on = outcome.carries_on;
    if carries_on {
        edits.push(Edit::Status(Status::Running));
    }
    edits.extend(outcome.edits);
    let mut log = format!("decide: gate {} ({}): {choice} by {}", g.id, g.kind, req.by);
    if let Some(note) = &outcome.note {
        log.push_str("; ");
        log.push_str(note);
    }
    let mut transition = Transition::now(edits, log);
    transition.effects = outcome.effects;
    Decision::Made {
        gate: g,
        choice,
        transition,
        carries_on,
    }
}

/// What a decision does besides recording it.
struct Outcome {
    edits: Vec<Edit>,
    carries_on: bool,
    effects: Vec<Effect>,
    /// What it changed that the decision log says too (what a DENIED gate allowed).
    note: Option<String>,
}

impl Outcome {
    fn runs(edits: Vec<Edit>) -> Self {
        Self {
            edits,
            carries_on: true,
            effects: Vec::new(),
            note: None,
        }
    }
}

/// What choosing `choice` on gate `g` changes in the loop. `allowed`: the tools the agent is
/// allowed now (M1.md's `AGENT.ALLOWED_TOOLS`, or the default it stands for).
fn outcome(m: &M1, g: &Gate, choice: &str, who: &str, allowed: &[String]) -> Outcome {
    let (id, s) = (&g.id, g.step);
    let said = |last: String, next: String| actions(&last, &next).to_vec();
    if g.step_gate.is_some() {
        // A parallel step's decision: the step's own loop carries it out, this loop only
        // records it (its runner takes it there) and runs on.
        return Outcome::runs(said(
            format!("Step {s}: {choice} (gate {id}, by {who})"),
            format!("Step {s}'s own loop carries out `{choice}`"),
        ));
    }
    if g.kind == GateKind::Cost
        && let Some(cap) = amount(choice)
    {
        return capped(m, g, who, cap);
    }
    let Some(option) = crate::m1::gates::option_of(g.kind, choice) else {
        return Outcome::runs(said(
            format!("{} answered (gate {id}, by {who}): {choice}", name(s)),
            format!("{} resumes with the answer", name(s)),
        ));
    };
    match option {
        GateOption::Reject => Outcome {
            edits: said(
                format!("Plan rejected (gate {id}, by {who})"),
                "Edit PLAN.STEPS in M1.md, then `loop resume` asks for approval again".into(),
            ),
            carries_on: false,
            effects: Vec::new(),
            note: None,
        },
        GateOption::Approve => Outcome::runs(said(
            format!("Plan approved (gate {id}, by {who})"),
            m.plan
                .steps
                .first()
                .map_or_else(String::new, |s| format!("Step {}: {}", s.n, s.text)),
        )),
        GateOption::Retry => {
            let mut edits = super::retried(m, s).edits;
            // Said by the retry's own actions, but who decided is what the log wants.
            edits.extend(said(
                format!("{} runs again (gate {id}, by {who})", name(s)),
                format!("Run {}", name(s).to_lowercase()),
            ));
            Outcome::runs(edits)
        }
        GateOption::Allow => allow(g, who, allowed, false),
        GateOption::AllowAll => allow(g, who, allowed, true),
        GateOption::Accept => accept(m, g, who),
        // As much again as the cap: what was spent, and the cap once more.
        GateOption::Raise => {
            let spent = super::spent(m);
            capped(m, g, who, spent + m.limits.max_cost_usd.unwrap_or(spent))
        }
        GateOption::Skip => {
            let mut edits: Vec<Edit> = step_state(s, StepState::Skipped).into_iter().collect();
            let next = moved_on(m, s, &mut edits);
            edits.extend(said(
                format!("{} skipped (gate {id}, by {who})", name(s)),
                next,
            ));
            Outcome::runs(edits)
        }
        GateOption::Stop => stop(g, who),
    }
}

/// STOP: the loop ends FAILED at the gate's step; `loop retry` takes it up again.
fn stop(g: &Gate, who: &str) -> Outcome {
    let (id, s) = (&g.id, g.step);
    let mut edits: Vec<Edit> = step_state(s, StepState::Failed).into_iter().collect();
    edits.push(Edit::Status(Status::Failed));
    edits.extend(actions(
        &format!(
            "Stopped at {} (gate {id}, by {who})",
            name(s).to_lowercase()
        ),
        &format!("Nothing runs; `loop retry {s}` takes the step up again"),
    ));
    Outcome {
        edits,
        carries_on: false,
        effects: Vec::new(),
        note: None,
    }
}

/// ALLOW on a DENIED gate: what was denied (the narrowest rules for the refused calls) joins
/// the allowed tools, and the step runs again; ALLOW-ALL (`whole`): each denied tool as a whole
/// (`Bash`, every command), which a person chooses as an answer of its own.
fn allow(g: &Gate, who: &str, allowed: &[String], whole: bool) -> Outcome {
    let (id, s) = (&g.id, g.step);
    let mut added: Vec<String> = Vec::new();
    for t in &g.tools {
        let rule = if whole { tool_of(t) } else { t.as_str() };
        if !added.iter().any(|a| a == rule) {
            added.push(rule.to_owned());
        }
    }
    let mut tools = allowed.to_vec();
    tools.extend(added.iter().filter(|t| !allowed.contains(t)).cloned());
    let mut edits = vec![AgentKey::AllowedTools.set(typed::format_tools(&tools))];
    edits.extend(step_state(s, StepState::Pending));
    let what = if whole {
        format!("may now use all of {}", added.join(", "))
    } else {
        format!("may now run {}", added.join(", "))
    };
    edits.extend(actions(
        &format!("{} {what} (gate {id}, by {who})", name(s)),
        &format!("Run {} again", name(s).to_lowercase()),
    ));
    Outcome {
        note: Some(format!("{} {what}", name(s).to_lowercase())),
        ..Outcome::runs(edits)
    }
}

/// An amount of US dollars as a person writes it: `5`, `2.50`, `$5`.
fn amount(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t.strip_prefix('$').unwrap_or(t).trim();
    t.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
}

/// A COST gate decided: `MAX_COST_USD` becomes `cap`, and the loop runs on.
fn capped(m: &M1, g: &Gate, who: &str, cap: f64) -> Outcome {
    let (id, s) = (&g.id, g.step);
    // Cents, rounded down, so the new cap never allows more than the person gave.
    let cap = (cap * 100.0 + 1e-6).floor() / 100.0;
    let was = m
        .limits
        .max_cost_usd
        .map_or_else(|| "none".to_owned(), |c| format!("${c:.2}"));
    let mut edits = vec![LimitKey::MaxCostUsd.set(cap.to_string())];
    edits.extend(actions(
        &format!("MAX_COST_USD raised from {was} to ${cap:.2} (gate {id}, by {who})"),
        &format!("Run {}", name(s).to_lowercase()),
    ));
    Outcome {
        note: Some(format!("MAX_COST_USD {was} → ${cap:.2}")),
        ..Outcome::runs(edits)
    }
}

/// ACCEPT on a REVIEW gate: the step is DONE as it is, over the review's last words.
fn accept(m: &M1, g: &Gate, who: &str) -> Outcome {
    let (id, s) = (&g.id, g.step);
    let mut edits: Vec<Edit> = step_state(s, StepState::Done).into_iter().collect();
    let over = match m.results.get(&s).and_then(|r| r.review.clone()) {
        Some(Review::Changes(n, what)) => format!(" over the review's changes ({n}): {what}"),
        _ => String::new(),
    };
    edits.push(results(
        s,
        ResultKey::Review,
        one_line(&format!("accepted by {who} (gate {id}){over}"), 300),
    ));
    edits.push(results_remove(s, ResultKey::Error));
    let next = moved_on(m, s, &mut edits);
    edits.extend(actions(
        &format!("{} accepted as it is (gate {id}, by {who})", name(s)),
        &next,
    ));
    Outcome {
        edits,
        carries_on: true,
        effects: vec![Effect::TickPlanFile(s)],
        note: None,
    }
}

/// The loop moves on past step `s`: the next open step (after it, else before it) becomes
/// current. What comes next, in words.
fn moved_on(m: &M1, s: u32, edits: &mut Vec<Edit>) -> String {
    let next = super::open_step(m, s).or_else(|| super::open_step(m, 0).filter(|o| o.n != s));
    moves_to(next.map(|o| (o.n, o.text.as_str())), edits)
}

/// The gate a request is about.
fn find<'a>(m: &'a M1, req: &Request) -> Result<&'a Gate, String> {
    if let Some(id) = req.id.as_deref() {
        return m.gate(id).ok_or_else(|| {
            let known: Vec<&str> = m.gates.iter().map(|g| g.id.as_str()).collect();
            if known.is_empty() {
                format!("there is no gate {id}: the loop has none")
            } else {
                format!("there is no gate {id}: the loop has {}", known.join(", "))
            }
        });
    }
    // Without an id, the one pending gate this kind of answer fits.
    let fits = |g: &&Gate| {
        req.step.is_none_or(|s| g.step == s)
            && match &req.answer {
                Answer::Approve | Answer::Reject => g.kind == GateKind::Plan,
                Answer::Text(t) => {
                    g.kind != GateKind::Plan && (g.options.is_empty() || g.option(t).is_some())
                }
            }
    };
    let pending: Vec<&Gate> = m.pending_gates().filter(fits).collect();
    match pending.as_slice() {
        [g] => Ok(g),
        // None waits: the last one decided is what a second tap or command was about.
        [] => m
            .gates
            .iter()
            .rev()
            .find(fits)
            .ok_or_else(|| match (req.step, &req.answer) {
                // `loop skip N` of a step no gate is about: said how it is skipped by hand.
                (Some(s), Answer::Text(t)) if GateOption::parse(t) == Some(GateOption::Skip) => {
                    format!(
                        "no gate waits on step {s} (`loop gates` lists them); a step no gate \
                         waits on is skipped by hand: set it `[SKIPPED]` in PLAN.STEPS of \
                         M1.md, which takes effect at the loop's next decision"
                    )
                }
                _ => "no gate waits for such a decision (`loop gates` lists them)".into(),
            }),
        many => Err(format!(
            "{} gates wait ({}): name the one you decide",
            many.len(),
            many.iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The CHOICE an answer writes, or why it does not fit the gate. A COST gate also takes an
/// amount in US dollars, the loop's new cap, above what it spent.
fn choice(m: &M1, g: &Gate, answer: &Answer) -> Result<String, String> {
    let id = &g.id;
    match (g.kind, answer) {
        (GateKind::Cost, Answer::Text(t)) if g.option(t).is_none() => {
            let Some(amount) = amount(t) else {
                return Err(format!(
                    "gate {id} offers {}, or an amount in US dollars (the loop's new cap): \
                     `{t}` is neither",
                    g.options.join(", ")
                ));
            };
            let spent = super::spent(m);
            if amount <= spent {
                return Err(format!(
                    "gate {id}: ${amount:.2} is not above what the loop spent, ${spent:.2}; \
                     give a higher cap"
                ));
            }
            Ok(amount.to_string())
        }
        (GateKind::Plan, Answer::Approve) => Ok(GateOption::Approve.as_str().into()),
        (GateKind::Plan, Answer::Reject) => Ok(GateOption::Reject.as_str().into()),
        (GateKind::Plan, Answer::Text(t)) => g
            .option(t)
            .map(str::to_owned)
            .ok_or_else(|| format!("gate {id} asks to approve or reject the plan, not `{t}`")),
        (_, Answer::Approve | Answer::Reject) => {
            Err(format!("gate {id} is a {} gate: {}", g.kind, how(g)))
        }
        (_, Answer::Text(t)) if t.trim().is_empty() => {
            Err(format!("the answer to gate {id} is empty"))
        }
        (_, Answer::Text(t)) if g.options.is_empty() => Ok(t.trim().to_owned()),
        (_, Answer::Text(t)) => g.option(t).map(str::to_owned).ok_or_else(|| {
            format!(
                "gate {id} offers {}: `{t}` is none of them",
                g.options.join(", ")
            )
        }),
    }
}
