//! What the page and the API show of a loop: read from its M1.md and its files as `loop list`
//! finds and reads them ([`crate::cli::loops`]), and nothing kept beside them.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cli::loops::{self, Seen};
use crate::layout::Layout;
use crate::m1::{Gate, GateKind, M1, Status, StepState};

/// One loop, as `GET /api/loops` lists it and `GET /api/loops/ID` gives it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct LoopView {
    /// The loop's key in the API's paths: from its M1.md's path, so the same across restarts.
    pub id: String,
    /// Its M1.md, absolute.
    pub file: String,
    /// The project it works in.
    pub project: String,
    pub goal: String,
    /// STATUS, or `INVALID` when the file cannot be read (`error` says why).
    pub status: String,
    /// The pid of the runner that drives it.
    pub runner_pid: Option<u32>,
    /// The current step (0: planning), and its text.
    pub step: u32,
    pub step_text: Option<String>,
    pub steps: Vec<StepView>,
    pub steps_done: u32,
    pub cost_usd: f64,
    pub tokens: u64,
    pub started_at: Option<DateTime<Utc>>,
    /// When it last did something (its file, its log, its running task's output).
    pub last_activity: Option<DateTime<Utc>>,
    pub last_action: Option<String>,
    pub next_action: Option<String>,
    /// M1.md's `LOOP_ID`.
    pub loop_id: Option<String>,
    /// How many of its gates wait for a decision.
    pub pending_gates: usize,
    pub gates: Vec<GateView>,
    pub error: Option<String>,
}

/// A step of the plan.
#[derive(Debug, Clone, Serialize)]
pub(super) struct StepView {
    pub n: u32,
    pub state: StepState,
    pub text: String,
}

/// A gate: what it asks, its options and what each does; once decided, what, by whom, when.
#[derive(Debug, Clone, Serialize)]
pub(super) struct GateView {
    #[serde(flatten)]
    pub gate: Gate,
    /// What it is about, in one line (as `loop gates` says it).
    pub about: String,
    /// What each option does, in the order of `options`.
    pub option_help: Vec<&'static str>,
    /// It takes a free-text answer (a question, a plan).
    pub free_text: bool,
}

/// The key of the loop whose state file is `file` (absolute).
#[must_use]
pub(super) fn id_of(file: &Path) -> String {
    crate::m1::gates::fingerprint(&file.display().to_string())
}

/// This user's loops (those `loop list` finds, with `here` if it is one), newest activity
/// first. Never writes.
pub(super) fn all(here: &Path) -> Vec<LoopView> {
    let (files, _) = loops::gather(here);
    let mut views: Vec<LoopView> = files
        .iter()
        .filter_map(|f| loops::see(f, false))
        .map(|s| of(&s))
        .collect();
    views.sort_by_key(|v| std::cmp::Reverse(v.last_activity));
    views
}

/// The state files of the loops of [`all`], not read.
pub(super) fn files(here: &Path) -> Vec<PathBuf> {
    loops::gather(here).0
}

/// The state file of the loop with key `id`, among those of [`all`].
pub(super) fn find(here: &Path, id: &str) -> Option<PathBuf> {
    files(here).into_iter().find(|f| id_of(f) == id)
}

/// The loop of `file` as it stands now, `None` when it is no loop to list (gone, or a step's
/// own loop).
pub(super) fn one(file: &Path) -> Option<LoopView> {
    loops::see(file, false).map(|s| of(&s))
}

fn of(s: &Seen) -> LoopView {
    let state_dir = Layout::of(&s.file).state_dir().to_path_buf();
    let mut v = LoopView {
        id: id_of(&s.file),
        file: s.file.display().to_string(),
        project: state_dir
            .parent()
            .unwrap_or(&state_dir)
            .display()
            .to_string(),
        goal: String::new(),
        status: "INVALID".into(),
        runner_pid: s.runner,
        step: 0,
        step_text: None,
        steps: Vec::new(),
        steps_done: 0,
        cost_usd: 0.0,
        tokens: 0,
        started_at: None,
        last_activity: s.active,
        last_action: None,
        next_action: None,
        loop_id: None,
        pending_gates: 0,
        gates: Vec::new(),
        error: None,
    };
    match &s.m {
        Ok(m) => fill(&mut v, m),
        Err(why) => v.error = Some(why.clone()),
    }
    v
}

fn fill(v: &mut LoopView, m: &M1) {
    m.status.as_str().clone_into(&mut v.status);
    v.goal.clone_from(&m.goal);
    if let Some(w) = &m.workdir {
        v.project.clone_from(w);
    }
    v.steps = m
        .plan
        .steps
        .iter()
        .map(|s| StepView {
            n: s.n,
            state: s.state,
            text: s.text.clone(),
        })
        .collect();
    v.steps_done = u32::try_from(
        m.plan
            .steps
            .iter()
            .filter(|s| s.state == StepState::Done)
            .count(),
    )
    .unwrap_or(u32::MAX);
    v.step = if m.status == Status::Done {
        u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX)
    } else {
        m.plan.current_step
    };
    v.step_text = m
        .plan
        .steps
        .iter()
        .find(|s| s.n == m.plan.current_step)
        .map(|s| s.text.clone());
    // With what the loops of its steps that run at once spent so far.
    let spent = crate::engine::figures::totals(m, &crate::runner::step_loops(m));
    v.cost_usd = spent.cost_usd;
    v.tokens = spent.tokens;
    v.started_at = m.started_at;
    v.last_action.clone_from(&m.last_action);
    v.next_action.clone_from(&m.next_action);
    v.loop_id.clone_from(&m.loop_id);
    v.pending_gates = m.pending_gates().count();
    // The pending ones first, as `loop gates` lists them.
    let (pending, decided): (Vec<&Gate>, Vec<&Gate>) = m.gates.iter().partition(|g| g.is_pending());
    v.gates = pending
        .into_iter()
        .chain(decided)
        .map(|g| GateView {
            gate: g.clone(),
            about: crate::engine::gate::about(m, g),
            option_help: g
                .options
                .iter()
                .map(|o| crate::m1::gates::what_it_does(g.kind, o))
                .collect(),
            free_text: g.options.is_empty() || g.kind == GateKind::Ask,
        })
        .collect();
}

/// `value` as JSON whose text holds no `<`, `>` nor `&` (each is its `\u` escape, inside
/// strings where alone they can be): what an agent wrote cannot close a tag wherever the JSON
/// ends up.
pub(super) fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}
