//! The runs of a loop: each kind of agent run (the planning call, a step's attempt, a review
//! of a step) goes through one pipeline — chosen by [`super::next`], recorded before it
//! starts, watched, judged, recorded — and differs only in what this module says of it: how
//! its agent is called, which prompt it gets, where a crash may stop it, and how it is judged.

use std::time::Duration;

use crate::agent::AgentConfig;
use crate::m1::M1;
use crate::m1::settings::{AgentKind, PermissionMode};

/// What an agent run is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// The planning call (step 0): it answers with the plan.
    Plan,
    /// An attempt of a step.
    Attempt,
    /// A review of a step that passed its checks: a fresh, read-only session.
    Review,
}

/// The named moments of a run where a crash can be injected (`LOOP_CRASH_AT`), by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPoints {
    pub before_spawn_write: &'static str,
    pub after_spawn_write: &'static str,
    /// After the task started, besides the bridge's own `after-fire`.
    pub after_fire: Option<&'static str>,
    pub before_record_write: &'static str,
    pub after_record_write: &'static str,
}

impl RunKind {
    /// The kind of a run of `step`: planning for step 0, else a review when `review`.
    #[must_use]
    pub fn of(step: u32, review: bool) -> Self {
        match (step, review) {
            (_, true) => RunKind::Review,
            (0, false) => RunKind::Plan,
            _ => RunKind::Attempt,
        }
    }

    /// What the live line and the log call its number: a review run, or an attempt.
    #[must_use]
    pub fn number_word(self) -> &'static str {
        match self {
            RunKind::Review => "review",
            RunKind::Plan | RunKind::Attempt => "attempt",
        }
    }

    /// How the agent is called for this kind of run, from the steps' own configuration: a
    /// step's agent as the settings say; the planning call and a reviewer, which change
    /// nothing, offered only tools that read (a reviewer also in plan mode, with the review
    /// model when one is set).
    #[must_use]
    pub fn agent_config(self, cfg: AgentConfig, m: &M1) -> AgentConfig {
        match self {
            RunKind::Attempt => cfg,
            RunKind::Plan => cfg.read_only(),
            RunKind::Review => {
                let mut cfg = cfg.read_only();
                cfg.permission_mode = Some(PermissionMode::Plan);
                if let Some(model) = &m.agent.review_model {
                    cfg.model = Some(model.clone());
                }
                cfg
            }
        }
    }

    /// Whether the run gets the loop's hooks (`--settings`): they keep a step's agent on its
    /// step; a reviewer is told its task by its prompt alone (a step's verdict lines would
    /// contradict it).
    #[must_use]
    pub fn gets_hooks(self) -> bool {
        self != RunKind::Review
    }

    /// Whether the run's session can be resumed by a later run of the same kind: a review's
    /// never is.
    #[must_use]
    pub fn resumable(self) -> bool {
        self != RunKind::Review
    }

    /// Where a crash may be injected in a run of this kind.
    #[must_use]
    pub fn crash_points(self) -> CrashPoints {
        match self {
            RunKind::Plan | RunKind::Attempt => CrashPoints {
                before_spawn_write: "before-spawn-write",
                after_spawn_write: "after-spawn-write",
                after_fire: None,
                before_record_write: "before-record-write",
                after_record_write: "after-record-write",
            },
            RunKind::Review => CrashPoints {
                before_spawn_write: "before-review-spawn-write",
                after_spawn_write: "after-review-spawn-write",
                after_fire: Some("after-review-fire"),
                before_record_write: "before-review-record-write",
                after_record_write: "after-review-record-write",
            },
        }
    }
}

/// A run to start: its kind, its step, its number (the attempt's, or the review run's), and
/// the session it runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunSpec {
    pub kind: RunKind,
    pub step: u32,
    pub number: u32,
    pub session: super::SessionPlan,
}

/// A run M1.md has on record (CURRENT): what the runner re-adopts, judges or starts. One today;
/// the state can name several, for steps that run side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunOnRecord {
    pub kind: RunKind,
    pub step: u32,
    pub task_id: String,
    /// The attempt's number, or the review run's.
    pub number: u32,
    pub session_id: Option<String>,
}

/// The runs M1.md has on record.
#[must_use]
pub(crate) fn runs_on_record(m: &M1) -> Vec<RunOnRecord> {
    let Some(task_id) = m.current.task_id.clone().filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    let step = m.plan.current_step;
    vec![RunOnRecord {
        kind: RunKind::of(step, m.current.review),
        step,
        task_id,
        number: m.current.attempt.unwrap_or(1),
        session_id: m.current.session_id.clone(),
    }]
}

/// The backend a run of `kind` of `step` goes to, for a loop whose own is `own`: a review's
/// `AGENT.REVIEW_BACKEND`, a step's own `BACKEND` in its results (where a usage limit sent it
/// to the fallback), else the loop's. Read from M1.md each time, so the run on record is read
/// and classified by the CLI that ran it, after a crash too.
#[must_use]
pub(crate) fn backend_of(m: &M1, own: AgentKind, kind: RunKind, step: u32) -> AgentKind {
    match kind {
        RunKind::Review => m.agent.review_backend.unwrap_or(own),
        RunKind::Plan | RunKind::Attempt => {
            m.results.get(&step).and_then(|r| r.backend).unwrap_or(own)
        }
    }
}

/// Whether a run of `step` in `session` continues the step's recorded session (`--resume`)
/// rather than starting a fresh one.
#[must_use]
pub(crate) fn resumes(m: &M1, step: u32, session: Option<&str>) -> bool {
    session.is_some() && m.results.get(&step).and_then(|r| r.session_id.as_deref()) == session
}

/// How long the step's session had run before the run on record (seconds; 0 when the run
/// began a fresh one), and with the run's own `elapsed` time.
#[must_use]
pub(crate) fn session_time(m: &M1, step: u32, elapsed: Duration) -> (f64, Duration) {
    let resumed = resumes(m, step, m.current.session_id.as_deref());
    let before = m.result(step).session_s.filter(|_| resumed).unwrap_or(0.0);
    let total = Duration::try_from_secs_f64(before + elapsed.as_secs_f64()).unwrap_or_default();
    (before, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::Document;

    #[test]
    fn a_run_is_planning_for_step_0_and_a_review_when_current_says_so() {
        assert_eq!(RunKind::of(0, false), RunKind::Plan);
        assert_eq!(RunKind::of(3, false), RunKind::Attempt);
        assert_eq!(RunKind::of(3, true), RunKind::Review);
        let m = Document::parse(
            "STATUS: RUNNING\nGOAL: g\nPLAN:\n  CURRENT_STEP: 2\n  STEPS:\n    1: [DONE] a\n    2: [RUNNING] b\nCURRENT:\n  TASK_ID: task_1\n  ATTEMPT: 2\n  REVIEW: true\n",
        )
        .unwrap()
        .view();
        let runs = runs_on_record(&m);
        assert_eq!(runs.len(), 1);
        assert_eq!(
            (runs[0].kind, runs[0].step, runs[0].number),
            (RunKind::Review, 2, 2)
        );
    }

    #[test]
    fn only_attempts_change_files_and_only_reviews_go_without_hooks() {
        let m = M1::default();
        let cfg = AgentConfig::default();
        assert_eq!(RunKind::Attempt.agent_config(cfg.clone(), &m).tools, None);
        assert!(RunKind::Plan.agent_config(cfg.clone(), &m).tools.is_some());
        let review = RunKind::Review.agent_config(cfg, &m);
        assert_eq!(review.permission_mode, Some(PermissionMode::Plan));
        assert!(!RunKind::Review.gets_hooks() && RunKind::Plan.gets_hooks());
    }
}
