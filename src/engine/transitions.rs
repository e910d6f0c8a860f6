//! The field edits that record each decision in M1.md. Each transition is one write: the
//! write-ahead record before a spawn, or the outcome after an attempt (the manual's recovery
//! chapter, `docs/13-recovery.md`).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::exit::Status as Exit;
use crate::m1::keys::{CurrentKey, PENDING, PlanKey, ResultKey, Top, clear_current};
use crate::m1::{Edit, M1, Status, StepState};
use crate::text::one_line;

/// What the runner does after writing a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Decide again.
    Continue,
    /// End the command with this status.
    Exit(Exit),
}

/// When a transition's edits go to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// At once.
    Now,
    /// With the next spawn's write-ahead record, which follows at once: one atomic write then
    /// says "step N done, step N+1 spawning", so a step costs one write, not two. A runner
    /// that dies before it loses only a decision it remakes from the task's exit record.
    WithNextSpawn,
}

/// What the runner does beyond writing M1.md once a transition is recorded. The runner adds
/// what only I/O can tell (the goal's notification text, a log tail, the time since start).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Tell the human the loop waits for them.
    Waiting { reason: String, how: String },
    /// Tell the human the loop FAILED at `step` (0: planning), with the end of its output.
    Failed { step: u32, reason: String },
    /// Tell the human a step passed (sent only where each step is to be told).
    StepDone { step: u32, summary: String },
    /// Tell the human the plan the loop starts with.
    Planned,
    /// Tell the human, once per limit, that the loop waits for the usage limit to reset.
    UsageWait {
        step: u32,
        until: DateTime<Utc>,
        reason: String,
    },
    /// Tell the human a step goes on with the fallback backend.
    Fallback {
        step: u32,
        to: crate::m1::settings::AgentKind,
        until: DateTime<Utc>,
        reason: String,
    },
    /// Tell the human the goal is reached.
    Done,
    /// Tick the step's box in the `--plan` checklist it came from.
    TickPlanFile(u32),
    /// Show gate `id` to the human (with its buttons in the chat): the loop waits for it.
    Gate { id: String },
    /// Tell the human this, as it is.
    Said(String),
}

/// A decision: the edits that record it, a line for the decision log, what follows, when it
/// is written, and what else is done once it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Transition {
    pub edits: Vec<Edit>,
    pub log: String,
    pub outcome: Outcome,
    pub write: Write,
    pub effects: Vec<Effect>,
}

impl Transition {
    /// A transition written at once, after which the loop goes on.
    pub(super) fn now(edits: Vec<Edit>, log: String) -> Self {
        Self {
            edits,
            log,
            outcome: Outcome::Continue,
            write: Write::Now,
            effects: Vec::new(),
        }
    }

    /// A transition written at once that ends the command with `status`.
    pub(super) fn exit(edits: Vec<Edit>, log: String, status: Exit) -> Self {
        Self {
            outcome: Outcome::Exit(status),
            ..Self::now(edits, log)
        }
    }

    /// The same, followed by `effect`.
    #[must_use]
    pub(super) fn then(mut self, effect: Effect) -> Self {
        self.effects.push(effect);
        self
    }

    /// The same, with `first` written before its own edits.
    #[must_use]
    pub(super) fn after(mut self, mut first: Vec<Edit>) -> Self {
        first.append(&mut self.edits);
        self.edits = first;
        self
    }
}

/// The human is told the loop waits: `reason`, and `how` to go on.
fn waiting(reason: &str, how: &str) -> Effect {
    Effect::Waiting {
        reason: reason.to_owned(),
        how: how.to_owned(),
    }
}

pub(super) fn results(step: u32, key: ResultKey, value: impl Into<String>) -> Edit {
    key.set(step, value)
}

pub(super) fn results_remove(step: u32, key: ResultKey) -> Edit {
    key.remove(step)
}

pub(super) fn current(key: CurrentKey, value: impl Into<String>) -> Edit {
    key.set(value)
}

/// A step line's new state; the planning call (step 0) has no line.
pub(super) fn step_state(step: u32, state: StepState) -> Option<Edit> {
    (step > 0).then_some(Edit::StepState(step, state))
}

/// The loop moves on to `next` (its number and text), which becomes the current step; what
/// comes next, in words. `None`: no step is left.
pub(super) fn moves_to(next: Option<(u32, &str)>, edits: &mut Vec<Edit>) -> String {
    match next {
        Some((n, text)) => {
            edits.push(PlanKey::CurrentStep.set(n.to_string()));
            format!("Step {n}: {text}")
        }
        None => "All steps done".into(),
    }
}

pub(super) fn actions(last: &str, next: &str) -> [Edit; 2] {
    [
        Top::LastAction.set(one_line(last, 300)),
        Top::NextAction.set(one_line(next, 300)),
    ]
}

pub(super) fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn name(step: u32) -> String {
    if step == 0 {
        "Planning".into()
    } else {
        format!("Step {step}")
    }
}

/// What is known when a run is about to be started.
#[derive(Debug, Clone)]
pub(crate) struct SpawnFacts<'a> {
    pub kind: super::RunKind,
    pub step: u32,
    /// The attempt's number, or the review run's (counted since the step's last retake).
    pub attempt: u32,
    /// A review's number within its step, as the report numbers it (R1, R2, …): one more
    /// than the step's reviews the ledger holds. Unused for other runs.
    pub review_number: u32,
    pub task_id: &'a str,
    pub session_id: &'a str,
    /// The prompt; its start is recorded as COMMAND.
    pub command: &'a str,
    /// The project's git HEAD before the attempt (what the step's COMMIT is compared with).
    pub git_head: Option<String>,
    /// The loop's id, when M1.md does not say it yet (a hand-written or older file).
    pub new_loop_id: Option<&'a str>,
    /// The step's work is to be committed once it is DONE ([`super::commit::wanted`]).
    pub commit: bool,
    /// Pending gates this run leaves behind: the step's questions, which a person answered by
    /// editing M1.md and resuming ([`super::gate::superseded_by_run`]).
    pub superseded: Vec<String>,
    pub now: DateTime<Utc>,
}

/// The write-ahead record of a run about to be started: from here on, a crash leaves a
/// `TASK_ID` that resume can look up (no task directory means the spawn never happened).
#[must_use]
pub(crate) fn started(f: &SpawnFacts<'_>) -> Transition {
    if f.kind == super::RunKind::Review {
        return review_started(f);
    }
    spawn(f)
}

/// The write-ahead record of a review run about to be started.
fn review_started(f: &SpawnFacts<'_>) -> Transition {
    let (step, run, task_id, session_id) = (f.step, f.attempt, f.task_id, f.session_id);
    let nth = f.review_number;
    let mut edits = vec![
        clear_current(),
        current(CurrentKey::TaskId, task_id),
        current(CurrentKey::SpawnTime, stamp(f.now)),
        current(CurrentKey::Attempt, run.to_string()),
        current(CurrentKey::SessionId, session_id),
        current(CurrentKey::Review, "true"),
        PlanKey::CurrentStep.set(step.to_string()),
        Top::LastAction.set(format!(
            "Review {nth} of step {step} spawned as task {task_id}"
        )),
        Top::NextAction.set(format!(
            "loop check {task_id} until it ends, then read the reviewer's verdict"
        )),
    ];
    // Under review the step is RUNNING, also after a wait or a halt set it back to PENDING.
    edits.extend(step_state(step, StepState::Running));
    Transition::now(
        edits,
        format!("review: step {step} review {nth} as {task_id} (session {session_id})"),
    )
}

/// [`started`] for the planning call and a step's attempt.
fn spawn(f: &SpawnFacts<'_>) -> Transition {
    let what = name(f.step);
    let (attempt, task_id) = (f.attempt, f.task_id);
    let mut edits: Vec<Edit> = step_state(f.step, StepState::Running).into_iter().collect();
    edits.push(PlanKey::CurrentStep.set(f.step.to_string()));
    edits.push(clear_current());
    edits.push(current(CurrentKey::TaskId, task_id));
    edits.push(current(CurrentKey::SpawnTime, stamp(f.now)));
    edits.push(current(CurrentKey::Attempt, attempt.to_string()));
    edits.push(current(CurrentKey::SessionId, f.session_id));
    edits.push(current(
        CurrentKey::Command,
        if f.command.trim().is_empty() {
            "(no prompt: the session resumes at its deferred question, answered)".to_owned()
        } else {
            one_line(f.command, 160)
        },
    ));
    if let Some(head) = &f.git_head {
        edits.push(current(CurrentKey::GitHead, head.clone()));
    }
    if let Some(id) = f.new_loop_id {
        edits.push(Top::LoopId.set(id));
    }
    edits.push(results(f.step, ResultKey::Exit, PENDING));
    if f.commit {
        // Cleared of what an earlier run of the step (before a `loop retry`) recorded.
        edits.push(results(f.step, ResultKey::Commit, PENDING));
        edits.push(results_remove(f.step, ResultKey::AgentCommits));
        edits.push(results_remove(f.step, ResultKey::Uncommitted));
    }
    for id in &f.superseded {
        edits.extend(crate::m1::gates::decided(
            id,
            "(answered in M1.md)",
            "loop resume",
            f.now,
        ));
    }
    edits.extend(actions(
        &format!("{what} attempt {attempt} spawned as task {task_id}"),
        &format!(
            "loop check {task_id} until it ends, then verify {}",
            what.to_lowercase()
        ),
    ));
    let log = format!(
        "spawn: {what} attempt {attempt} as {task_id} (session {})",
        f.session_id
    );
    Transition::now(edits, log)
}

/// The agent's pid (the seed's `CC_PID`), for a step that runs long enough for a person to look.
#[must_use]
pub(crate) fn pid_recorded(pid: u32) -> Transition {
    Transition::now(
        vec![current(CurrentKey::CcPid, pid.to_string())],
        format!("pid: the agent runs as pid {pid}"),
    )
}

/// The session the run's agent named itself (Codex names its thread in its first event, the
/// loop cannot choose it): CURRENT says the id a resume will take while the run goes on.
#[must_use]
pub(crate) fn session_named(id: &str) -> Transition {
    Transition::now(
        vec![current(CurrentKey::SessionId, id)],
        format!("session: the agent named its session {id}"),
    )
}

/// A task the ledger knows was started, as M1.md's running one.
#[derive(Debug, Clone)]
pub(crate) struct OnRecord<'a> {
    pub step: u32,
    pub task_id: &'a str,
    /// From the ledger, when it knows them.
    pub attempt: Option<u32>,
    pub session_id: Option<&'a str>,
    /// The task is a run of the step's review.
    pub review: bool,
}

impl OnRecord<'_> {
    fn edits(&self) -> Vec<Edit> {
        let mut edits = vec![
            current(CurrentKey::TaskId, self.task_id),
            PlanKey::CurrentStep.set(self.step.to_string()),
        ];
        edits.extend(step_state(self.step, StepState::Running));
        if let Some(a) = self.attempt {
            edits.push(current(CurrentKey::Attempt, a.to_string()));
        }
        if let Some(sid) = self.session_id {
            edits.push(current(CurrentKey::SessionId, sid));
        }
        if self.review {
            edits.push(current(CurrentKey::Review, "true"));
        }
        edits
    }

    /// "step 2 attempt 1", or "step 2 review 1".
    fn what(&self) -> String {
        let kind = if self.review { "review" } else { "attempt" };
        format!("step {} {kind} {}", self.step, self.attempt.unwrap_or(1))
    }
}

/// A save made from a text read before the runner recorded a running task dropped it from
/// CURRENT: it goes back, or a later decision would start a second agent for the same step.
/// `None` while `m` still has it on record, or the loop is not running.
#[must_use]
pub(crate) fn kept_on_record(m: &M1, t: &OnRecord<'_>) -> Option<Transition> {
    if m.current.task_id.as_deref() == Some(t.task_id) || m.status != Status::Running {
        return None;
    }
    Some(dropped_from_record(t))
}

fn dropped_from_record(t: &OnRecord<'_>) -> Transition {
    Transition::now(
        t.edits(),
        format!(
            "record: a save dropped task {} from CURRENT while it runs; recorded it again",
            t.task_id
        ),
    )
}

/// A task of this loop that M1.md lost track of (a save of an older text) is taken back on
/// record instead of another being started.
#[must_use]
pub(crate) fn adopted(t: &OnRecord<'_>) -> Transition {
    let mut edits = vec![clear_current()];
    edits.extend(t.edits());
    edits.push(Top::LastAction.set(format!(
        "Task {} ({}) taken back on record from the task ledger",
        t.task_id,
        t.what()
    )));
    let log = format!(
        "ledger: task {} ({}) was started but M1.md no longer named it (a save of an older \
         text); taken back on record instead of starting another",
        t.task_id,
        t.what()
    );
    Transition::now(edits, log)
}

/// The runner's record cannot go into the file as a person left it (a valid edit took away
/// what it is about): say so (STATUS WAITING and the reason, nothing else) and wait for them.
#[must_use]
pub(crate) fn unrecordable(errors: &str) -> Transition {
    let what = one_line(errors, 240);
    let reason =
        format!("M1.md was edited so that the runner's record would make it invalid ({what})");
    let how = "fix M1.md (the plan, CURRENT_STEP, the step lines), then `loop resume`";
    let edits = vec![
        Edit::Status(Status::Waiting),
        Top::LastAction.set(one_line(&format!("Waiting: {reason}"), 300)),
        Top::NextAction.set(how),
    ];
    Transition::exit(edits, format!("halt: {reason}"), Exit::Waiting).then(waiting(&reason, how))
}

pub(super) fn halt_edits(step: u32, reason: &str, how: &str) -> Vec<Edit> {
    let mut edits: Vec<Edit> = step_state(step, StepState::Pending).into_iter().collect();
    edits.push(clear_current());
    edits.push(Edit::Status(Status::Waiting));
    edits.extend(actions(&format!("Waiting: {reason}"), how));
    edits
}

/// WAITING because the runner cannot decide (a cap, a refused plan, the agent missing).
#[must_use]
pub(crate) fn halt(step: u32, reason: &str, how: &str) -> Transition {
    Transition::exit(
        halt_edits(step, reason, how),
        format!("halt: {reason}"),
        Exit::Waiting,
    )
    .then(waiting(reason, how))
}

/// Who asked a loop to stop: each says what happened and how to go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A stop file: the machine-wide one (`loop stop --all`, `LOOP_STOP_FILE`) or a `STOP`
    /// beside M1.md put there by hand; it stays until someone removes it.
    File(String),
    /// `loop stop`, for this loop only; it clears its own stop once the runner is gone.
    Command,
    /// Ctrl-C on the runner in the foreground.
    Interrupt,
}

impl Stop {
    /// What stopped the loop, for a sentence: "stopped by …".
    #[must_use]
    pub(crate) fn by(&self) -> String {
        match self {
            Stop::File(p) => p.clone(),
            Stop::Command => "`loop stop`".into(),
            Stop::Interrupt => "Ctrl-C".into(),
        }
    }

    /// How to go on after it.
    #[must_use]
    pub(crate) fn how(&self) -> String {
        match self {
            Stop::File(p) => format!("Remove {p}, then `loop resume`"),
            Stop::Command | Stop::Interrupt => "`loop resume` carries on".into(),
        }
    }
}

/// The loop was stopped (a stop file, `loop stop`, Ctrl-C): the step's processes are dead,
/// the attempt is not counted, and the loop waits. The step goes back to PENDING, unless a
/// person closed it by hand (`kept`: SKIPPED or DONE), which stands.
#[must_use]
pub(crate) fn stopped(
    step: u32,
    kept: Option<StepState>,
    stop: &Stop,
    task_id: Option<&str>,
) -> Transition {
    let mut edits: Vec<Edit> = match kept {
        Some(_) => Vec::new(),
        None => step_state(step, StepState::Pending).into_iter().collect(),
    };
    // The killed attempt has no exit to report (its spawn wrote `(pending)`).
    if task_id.is_some() {
        edits.push(results_remove(step, ResultKey::Exit));
    }
    edits.push(clear_current());
    edits.push(Edit::Status(Status::Waiting));
    let killed = task_id.map_or_else(String::new, |t| format!("; task {t} killed"));
    let again = match kept {
        _ if step == 0 => "planning runs again on resume".to_string(),
        Some(state) => format!("step {step} stays {}, as set by hand", state.as_str()),
        None => format!("step {step} back to PENDING"),
    };
    let (by, how) = (stop.by(), stop.how());
    edits.extend(actions(
        &format!("Stopped by {by}{killed}; {again}, attempt not counted"),
        &how,
    ));
    Transition::exit(edits, format!("stop: {by}{killed}; {again}"), Exit::Waiting)
        .then(waiting(&format!("stopped by {by}"), &how))
}

/// A stop of a loop whose `steps` run at once, each in a loop of its own that the stop ends
/// too: WAITING, and `loop resume` carries them all on.
#[must_use]
pub(crate) fn stopped_parallel(steps: &[u32], stop: &Stop) -> Transition {
    let mut edits = vec![Edit::Status(Status::Waiting)];
    let (by, how) = (stop.by(), stop.how());
    let list: Vec<String> = steps.iter().map(u32::to_string).collect();
    let which = match list.len() {
        0 => "no step was running".to_owned(),
        1 => format!("step {} was stopped with it", list[0]),
        _ => format!("steps {} were stopped with it", list.join(", ")),
    };
    edits.extend(actions(&format!("Stopped by {by}; {which}"), &how));
    Transition::exit(edits, format!("stop: {by}; {which}"), Exit::Waiting)
        .then(waiting(&format!("stopped by {by}"), &how))
}

/// Every step is DONE or SKIPPED: the loop is DONE. It says the goal is reached only when
/// every step is DONE; skipped steps are named. A step's own loop (of a loop that runs its
/// steps at once) says its one step is done, for the loop that merges it.
#[must_use]
pub(crate) fn complete(m: &M1) -> Transition {
    let total = m.plan.steps.len();
    let skipped: Vec<String> = m
        .plan
        .steps
        .iter()
        .filter(|s| s.state == StepState::Skipped)
        .map(|s| s.n.to_string())
        .collect();
    let (last, next, log) = if let Some(n) = m.parent_step {
        let state = m
            .plan
            .steps
            .iter()
            .find(|s| s.n == n)
            .map_or(StepState::Done, |s| s.state);
        let what = if state == StepState::Skipped {
            "skipped"
        } else {
            "done"
        };
        (
            format!("Step {n} {what}"),
            "Nothing here: the loop that runs this step takes it from here".to_owned(),
            format!(
                "done: step {n} is {}; the loop that runs it takes it from here",
                state.as_str()
            ),
        )
    } else if skipped.is_empty() {
        let all = match total {
            1 => "The only step is done".to_string(),
            n => format!("All {n} steps done"),
        };
        let log = format!(
            "done: {} DONE; the goal is reached",
            match total {
                1 => "the only step is".to_string(),
                n => format!("all {n} steps are"),
            }
        );
        (all, "Nothing: the goal is reached".to_owned(), log)
    } else {
        let which = match skipped.as_slice() {
            [one] => format!("step {one} skipped"),
            many => format!("steps {} skipped", many.join(", ")),
        };
        (
            format!(
                "DONE with {which} ({} of {total} done)",
                total - skipped.len()
            ),
            format!("Nothing runs; {which}: `loop retry N` runs a skipped step"),
            format!(
                "done: DONE with {which} ({} of {total} done)",
                total - skipped.len()
            ),
        )
    };
    // A DONE that promised commits and holds none for some steps says how many.
    let (last, log) = match uncommitted(m) {
        0 => (last, log),
        n => {
            let note = format!(
                "{n} step(s) uncommitted: their work is in the work tree, and \
                 RESULTS.STEP_N.UNCOMMITTED says why"
            );
            (format!("{last}; {note}"), format!("{log}; {note}"))
        }
    };
    let mut edits = vec![Edit::Status(Status::Done), clear_current()];
    edits.extend(actions(&last, &next));
    Transition::exit(edits, log, Exit::Ok).then(Effect::Done)
}

/// How many DONE steps of `m` were to be committed and are not at all.
#[must_use]
pub(crate) fn uncommitted(m: &M1) -> usize {
    m.plan
        .steps
        .iter()
        .filter(|s| s.state == StepState::Done)
        .filter(|s| {
            m.results
                .get(&s.n)
                .and_then(|r| r.uncommitted.as_deref())
                .is_some_and(|u| u.starts_with("all of it"))
        })
        .count()
}

/// A step that cannot be tried again (`Caps::max_retries` spent, or set FAILED by hand): the loop fails.
#[must_use]
pub(crate) fn exhausted(step: u32, reason: &str) -> Transition {
    let log = format!("fail: {}: {reason}", name(step));
    Transition::exit(exhausted_edits(step, reason), log, Exit::Failed).then(Effect::Failed {
        step,
        reason: reason.to_owned(),
    })
}

pub(super) fn exhausted_edits(step: u32, reason: &str) -> Vec<Edit> {
    let who = name(step);
    let mut edits: Vec<Edit> = step_state(step, StepState::Failed).into_iter().collect();
    edits.push(clear_current());
    edits.push(Edit::Status(Status::Failed));
    edits.extend(actions(
        &format!("{who} failed: {reason}"),
        &if step == 0 {
            "A human decides: `loop retry` plans again with a fresh budget of attempts (or write \
             the steps under PLAN by hand, set STATUS: RUNNING, then `loop resume`)"
                .to_string()
        } else {
            format!(
                "A human decides: `loop retry` gives step {step} a fresh budget of attempts (or \
                 change its text, or set it [SKIPPED] and STATUS: RUNNING, then `loop resume`)"
            )
        },
    ));
    edits
}
