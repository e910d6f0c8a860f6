//! Carrying out a review (see [`crate::engine::review`]): the reviewer's call, its prompt
//! with the step's diff, and reading its verdict.

use anyhow::Context;
use chrono::Utc;

use super::step::Run;
use super::{Runner, crash};
use crate::agent::{self, AgentConfig};
use crate::bridge::TaskReport;
use crate::engine::{self, Attempt, ReviewFacts};
use crate::exit::Status as Exit;
use crate::m1::M1;

/// The diff a reviewer reads at most, in bytes; longer ones are cut with a note.
const DIFF_CAP: usize = 60_000;

/// The reviewer's call: the steps' agent, offered only tools that read (it gets the diff in
/// its prompt, so it needs no `git`), in plan mode, with the review model when one is set.
#[must_use]
pub fn reviewer(cfg: AgentConfig, m: &M1) -> AgentConfig {
    let mut cfg = cfg.read_only();
    cfg.permission_mode = Some("plan".into());
    if let Some(model) = &m.agent.review_model {
        cfg.model = Some(model.clone());
    }
    cfg
}

/// Whether the task on record is a review (its CURRENT says so).
#[must_use]
pub fn is_review(m: &M1) -> bool {
    m.current.review
}

impl Runner {
    /// The prompt of a review of `step`, from M1.md, the step's last task and git.
    pub(super) fn review_prompt(&self, m: &M1, step: u32) -> String {
        let r = m.results.get(&step);
        let summary = r.and_then(|r| r.summary.clone()).unwrap_or_default();
        let verify = match self.settings.verify(m) {
            None => "(no VERIFY command is set)".to_owned(),
            Some(cmd) => {
                let out = r
                    .and_then(|r| r.report.as_deref())
                    .and_then(|p| {
                        std::path::Path::new(p)
                            .parent()
                            .map(|d| d.join("verify.log"))
                    })
                    .map(|p| crate::verify::tail(&self.state_dir.join(p), 40))
                    .unwrap_or_default();
                format!("`{cmd}` passed; its output ended:\n{out}")
            }
        };
        let base = r.and_then(|r| r.base_head.as_deref());
        let diff = super::git::review_diff(&self.workdir, base, &self.state_dir, DIFF_CAP)
            .unwrap_or_else(|| "(the project is not a git repository: read the files)".into());
        super::prompt::review(m, step, &summary, &verify, &diff)
    }

    /// Starts review `run` of `step`: recorded first (write-ahead), then fired.
    pub(super) fn spawn_review(
        &mut self,
        step: u32,
        run: u32,
    ) -> crate::error::Result<Option<Exit>> {
        if self.adopt_unjudged()? {
            return Ok(None);
        }
        let m = self.view();
        let prompt = self.review_prompt(&m, step);
        let task_id = crate::bridge::new_task_id();
        let session = agent::new_session_id();
        crash::point("before-review-spawn-write");
        let t = engine::review_spawn(step, run, &task_id, &session, Utc::now());
        self.apply(&t)?;
        crash::point("after-review-spawn-write");
        self.fire_as(step, run, (&task_id, &session), false, &prompt, true)?;
        crash::point("after-review-fire");
        Ok(None)
    }

    /// Notes the work tree as review task `task_id` will find it (nothing outside git).
    pub(super) fn note_tree_before_review(&self, task_id: &str) -> crate::error::Result<()> {
        let Some(tree) = super::tree::snapshot(&self.workdir, &self.state_dir) else {
            return Ok(());
        };
        let path = crate::layout::Layout::dir(&self.state_dir).review_tree(task_id);
        let text = serde_json::to_vec(&tree).context("while encoding the work tree")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("while writing {}", path.display()))?;
        Ok(())
    }

    /// What changed in the work tree since review task `task_id` started; nothing when the
    /// tree was not noted (outside git).
    fn tree_changes_in_review(&self, task_id: &str) -> Vec<String> {
        let path = crate::layout::Layout::dir(&self.state_dir).review_tree(task_id);
        let before = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<super::tree::Snapshot>(&b).ok());
        let after = super::tree::snapshot(&self.workdir, &self.state_dir);
        match (before, after) {
            (Some(before), Some(after)) => super::tree::changes(&before, &after),
            _ => Vec::new(),
        }
    }

    /// Reads a finished review's verdict and records it.
    pub(super) fn evaluate_review(
        &mut self,
        step: u32,
        task_id: &str,
        report: &TaskReport,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let caps = self.settings.caps(&m);
        self.clean_up_after(task_id, report)?;
        // A review's session is never resumed: its context does not matter.
        let run = Run::read(report, None);
        let run_n = m.current.attempt.unwrap_or(1);
        let transients = m.result(step).transient;
        let now = Utc::now();
        let changed = self.tree_changes_in_review(task_id);
        let verdict = engine::review::tree_changed(step, &changed).unwrap_or_else(|| {
            engine::judge_review(&Attempt {
                step,
                attempt: run_n,
                end: run.end.clone(),
                class: run.class.clone(),
                answer: &run.answer,
                denials: &[],
                background_stopped: &[],
                verify_configured: false,
                verify: None,
                transients,
                restarts: 0,
                uncounted: 0,
                // Every review run is a fresh session.
                resumed: false,
                allowed_tools: &[],
                caps: &caps,
                now,
            })
        });
        let r = m.results.get(&step);
        let facts = ReviewFacts {
            step,
            run: run_n,
            task_id: task_id.to_owned(),
            cost_usd: run.cost_usd,
            prior_cost_usd: r.and_then(|r| r.cost_usd).unwrap_or(0.0),
            retakes: m.result(step).retakes,
            summary: r.and_then(|r| r.summary.clone()).unwrap_or_default(),
            next_step: engine::open_step(&m, step).map(|s| (s.n, s.text.clone())),
            notify_each_step: self.settings.notify_each_step,
            transients,
            now,
        };
        let t = engine::record_review(&verdict, &facts, &caps);
        self.record_judged(task_id, engine::LedgerVerdict::Review, &t.edits)?;
        crash::point("before-review-record-write");
        let exit = self.apply(&t)?;
        crash::point("after-review-record-write");
        Ok(exit)
    }
}
