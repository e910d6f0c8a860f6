//! The task directories as an append-only ledger of what this loop started and how each
//! start was judged (the rules that read it are [`crate::engine::ledger`]'s).
//!
//! M1.md is the loop's state, but a person may save an old text of it at any moment. What
//! was started cannot be unstarted, so the runner keeps its own record beside each task:
//! the spec `fire` wrote says which loop, step and attempt a task is (`LOOP_ID`, `LOOP_STEP`,
//! `LOOP_ATTEMPT`, `LOOP_SESSION_ID` in its environment, and `LOOP_REVIEW` for a run of a
//! step's review, whose number is its `LOOP_ATTEMPT`), `judged.json`, written before the
//! judgement goes into M1.md, says how the runner judged it and which edits recorded that,
//! and `retried.json` beside a pass says a person ran its step again with `loop retry`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::engine::LedgerVerdict as Verdict;
pub use crate::engine::ledger::{Entry, Judged};
use crate::m1::{Edit, M1};

/// The file a judged task gets.
pub const JUDGED_FILE: &str = "judged.json";

/// The file a pass gets when a person's `loop retry` ran its step again: it no longer says
/// the step is done.
pub const RETRIED_FILE: &str = "retried.json";

/// This loop's tasks, oldest first.
#[derive(Debug, Default)]
pub struct Ledger {
    tasks_dir: PathBuf,
    entries: Vec<Entry>,
}

fn env_of<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[derive(Deserialize)]
struct SpecFields {
    #[serde(default)]
    env: Vec<(String, String)>,
    #[serde(default)]
    created_at: String,
}

impl Ledger {
    /// Reads the ledger of loop `loop_id` from `state_dir/tasks`. Tasks of other loops (an
    /// archived one, a plain `loop fire`) are not this loop's.
    #[must_use]
    pub fn load(state_dir: &Path, loop_id: &str) -> Self {
        let tasks_dir = crate::layout::Layout::dir(state_dir).tasks();
        let mut found: Vec<(String, Entry)> = Vec::new();
        if let Ok(dir) = std::fs::read_dir(&tasks_dir) {
            for e in dir.flatten() {
                let id = e.file_name().to_string_lossy().into_owned();
                if id.starts_with('.') {
                    continue;
                }
                let Some(spec) = std::fs::read(e.path().join(crate::bridge::SPEC_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<SpecFields>(&b).ok())
                else {
                    continue;
                };
                if env_of(&spec.env, "LOOP_ID") != Some(loop_id) {
                    continue;
                }
                let num = |k| env_of(&spec.env, k).and_then(|v| v.parse().ok());
                let (Some(step), Some(attempt)) = (num("LOOP_STEP"), num("LOOP_ATTEMPT")) else {
                    continue;
                };
                let judged = std::fs::read(e.path().join(JUDGED_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                found.push((
                    spec.created_at,
                    Entry {
                        session_id: env_of(&spec.env, "LOOP_SESSION_ID").map(String::from),
                        review: env_of(&spec.env, "LOOP_REVIEW") == Some("1"),
                        retried: e.path().join(RETRIED_FILE).exists(),
                        task_id: id,
                        step,
                        attempt,
                        judged,
                    },
                ));
            }
        }
        found.sort_by(|a, b| (&a.0, &a.1.task_id).cmp(&(&b.0, &b.1.task_id)));
        Self {
            tasks_dir,
            entries: found.into_iter().map(|(_, e)| e).collect(),
        }
    }

    /// Notes a task this runner just started: an attempt of a step, or a run of its review.
    pub fn started(
        &mut self,
        task_id: &str,
        (step, attempt): (u32, u32),
        session_id: &str,
        review: bool,
    ) {
        self.entries.push(Entry {
            task_id: task_id.into(),
            step,
            attempt,
            session_id: Some(session_id.into()),
            review,
            judged: None,
            retried: false,
        });
    }

    /// Marks the passes of `step` as undone by a person's `loop retry`, before M1.md says the
    /// step runs again: from then on, no text is taken to have lost them.
    ///
    /// # Errors
    /// When a mark cannot be written.
    pub fn mark_retried(&mut self, step: u32, when: &str) -> crate::error::Result<()> {
        for e in &mut self.entries {
            let pass = e
                .judged
                .as_ref()
                .is_some_and(|j| j.verdict == Verdict::Pass);
            if e.step == step && !e.review && pass && !e.retried {
                let path = self.tasks_dir.join(&e.task_id).join(RETRIED_FILE);
                let json = serde_json::json!({ "retried_at": when }).to_string();
                std::fs::write(&path, json)
                    .with_context(|| format!("while writing {}", path.display()))?;
                e.retried = true;
            }
        }
        Ok(())
    }

    /// Records, before M1.md says so, how a task was judged. Written whole or not at all
    /// (temporary file, rename), without an fsync: the M1.md write that follows is the
    /// durable record, and a judgement a power cut took is made again from the exit record.
    ///
    /// # Errors
    /// When `judged.json` cannot be written.
    pub fn judge(&mut self, task_id: &str, judged: Judged) -> crate::error::Result<()> {
        let path = self.tasks_dir.join(task_id).join(JUDGED_FILE);
        let json = serde_json::to_vec_pretty(&judged).context("while encoding judged.json")?;
        let tmp = path.with_file_name(format!(".{JUDGED_FILE}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, &json)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("while writing {}", path.display()))?;
        if let Some(e) = self.entries.iter_mut().find(|e| e.task_id == task_id) {
            e.judged = Some(judged);
        }
        Ok(())
    }

    /// Task `task_id`, if it is this loop's.
    #[must_use]
    pub fn entry(&self, task_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.task_id == task_id)
    }

    /// How task `task_id` was judged, if it is this loop's and was.
    #[must_use]
    pub fn judged(&self, task_id: &str) -> Option<&Judged> {
        self.entry(task_id)?.judged.as_ref()
    }

    /// See [`crate::engine::ledger::record_since`].
    #[must_use]
    pub fn record_since(&self, task_id: &str) -> (Vec<Edit>, Vec<String>) {
        crate::engine::ledger::record_since(&self.entries, task_id)
    }

    /// See [`crate::engine::ledger::unjudged`].
    #[must_use]
    pub fn unjudged(&self) -> Option<&Entry> {
        crate::engine::ledger::unjudged(&self.entries)
    }

    /// See [`crate::engine::ledger::lost_pass`].
    #[must_use]
    pub fn lost_pass(&self, m: &M1, step: u32) -> Option<(&Entry, Vec<Edit>)> {
        crate::engine::ledger::lost_pass(&self.entries, m, step)
    }
}
