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
//!
//! Each task is also noted in the ledger's index ([`index`], one file per loop) before its
//! directory is published, so opening a loop reads its own tasks, however many other tasks
//! the state directory holds.

mod index;

use std::path::{Path, PathBuf};

use crate::engine::LedgerVerdict as Verdict;
pub(super) use crate::engine::ledger::{Entry, Judged};
use crate::m1::{Edit, M1};
use std::os::unix::fs::OpenOptionsExt as _;

use anyhow::Context;

/// The file a judged task gets.
pub(super) const JUDGED_FILE: &str = "judged.json";

/// The file a pass gets when a person's `loop retry` ran its step again: it no longer says
/// the step is done.
pub(super) const RETRIED_FILE: &str = "retried.json";

/// The loop (its `LOOP_ID`) whose run the task directory `dir` is, from its spec; `None` for
/// a task of no loop (a `loop fire` from a shell, a VERIFY run) or one that cannot be read.
#[must_use]
pub(crate) fn loop_of_task(dir: &Path) -> Option<String> {
    index::from_spec(dir).map(|(loop_id, _)| loop_id)
}

/// This loop's tasks, oldest first.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    tasks_dir: PathBuf,
    loop_id: String,
    entries: Vec<Entry>,
}

/// The tasks loop `loop_id` started in `state_dir`, oldest first, each with how it was judged:
/// what a report of the loop reads (its index made whole first, as a runner's open does).
#[must_use]
pub(crate) fn tasks_of(state_dir: &Path, loop_id: &str) -> Vec<Entry> {
    Ledger::load(state_dir, loop_id).entries
}

impl Ledger {
    /// Reads the ledger of loop `loop_id` from `state_dir/tasks`: the tasks its index names
    /// ([`index`]; rebuilt from the task directories when this boot has not made it whole),
    /// each with how it was judged. Tasks of other loops (an archived one, a plain
    /// `loop fire`) are not this loop's, and are not read.
    #[must_use]
    pub(super) fn load(state_dir: &Path, loop_id: &str) -> Self {
        let tasks_dir = crate::layout::Layout::dir(state_dir).tasks();
        let mut found: Vec<(String, Entry)> = index::read(&tasks_dir, loop_id)
            .into_iter()
            .filter_map(|l| {
                let dir = tasks_dir.join(&l.task);
                let judged: Option<Judged> = std::fs::read(dir.join(JUDGED_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                // A line whose directory was never published (or was removed) is no task.
                if judged.is_none() && !dir.is_dir() {
                    return None;
                }
                // Only a pass is ever marked retried.
                let retried = judged.is_some() && dir.join(RETRIED_FILE).exists();
                Some((
                    l.created_at,
                    Entry {
                        task_id: l.task,
                        step: l.step,
                        attempt: l.attempt,
                        session_id: l.session,
                        review: l.review,
                        judged,
                        retried,
                    },
                ))
            })
            .collect();
        // Stable: tasks noted in the same millisecond stay in the order they were noted.
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Self {
            tasks_dir,
            loop_id: loop_id.to_owned(),
            entries: found.into_iter().map(|(_, e)| e).collect(),
        }
    }

    /// Notes a task this runner is about to start, an attempt of a step or a run of its
    /// review, in the index first: call before the task's directory is published, so that a
    /// runner that dies in between leaves no task the ledger does not know.
    ///
    /// # Errors
    /// When the index cannot be written.
    pub(super) fn started(
        &mut self,
        task_id: &str,
        (step, attempt): (u32, u32),
        session_id: &str,
        review: bool,
    ) -> crate::error::Result<()> {
        let line = index::Line {
            task: task_id.into(),
            step,
            attempt,
            session: Some(session_id.into()),
            review,
            created_at: index::now(),
        };
        index::append(&self.tasks_dir, &self.loop_id, &line).with_context(|| {
            format!(
                "while noting task {task_id} in the ledger of loop {}",
                self.loop_id
            )
        })?;
        self.entries.push(Entry {
            task_id: task_id.into(),
            step,
            attempt,
            session_id: Some(session_id.into()),
            review,
            judged: None,
            retried: false,
        });
        Ok(())
    }

    /// How many review runs of `step` this loop started: the report numbers them R1, R2, …
    #[must_use]
    pub(super) fn reviews_of(&self, step: u32) -> u32 {
        let n = self.entries.iter().filter(|e| e.review && e.step == step);
        u32::try_from(n.count()).unwrap_or(u32::MAX)
    }

    /// Marks the passes of `step` as undone by a person's `loop retry`, before M1.md says the
    /// step runs again: from then on, no text is taken to have lost them.
    ///
    /// # Errors
    /// When a mark cannot be written.
    pub(super) fn mark_retried(&mut self, step: u32, when: &str) -> crate::error::Result<()> {
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
    pub(super) fn judge(&mut self, task_id: &str, judged: Judged) -> crate::error::Result<()> {
        let path = self.tasks_dir.join(task_id).join(JUDGED_FILE);
        let json = serde_json::to_vec_pretty(&judged).context("while encoding judged.json")?;
        let tmp = path.with_file_name(format!(".{JUDGED_FILE}.{}.tmp", std::process::id()));
        // Made new, never through a link: a file of that name left there (by a runner of the
        // same pid that died) is removed first, and whatever it was, nothing else is written.
        let _ = std::fs::remove_file(&tmp);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("while writing {}", path.display()))?;
        if let Some(e) = self.entries.iter_mut().find(|e| e.task_id == task_id) {
            e.judged = Some(judged);
        }
        Ok(())
    }

    /// Task `task_id`, if it is this loop's.
    #[must_use]
    pub(super) fn entry(&self, task_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.task_id == task_id)
    }

    /// How task `task_id` was judged, if it is this loop's and was.
    #[must_use]
    pub(super) fn judged(&self, task_id: &str) -> Option<&Judged> {
        self.entry(task_id)?.judged.as_ref()
    }

    /// See [`crate::engine::ledger::record_since`].
    #[must_use]
    pub(super) fn record_since(&self, task_id: &str) -> (Vec<Edit>, Vec<String>) {
        crate::engine::ledger::record_since(&self.entries, task_id)
    }

    /// See [`crate::engine::ledger::unjudged`].
    #[must_use]
    pub(super) fn unjudged(&self) -> Option<&Entry> {
        crate::engine::ledger::unjudged(&self.entries)
    }

    /// See [`crate::engine::ledger::lost_pass`].
    #[must_use]
    pub(super) fn lost_pass(&self, m: &M1, step: u32) -> Option<(&Entry, Vec<Edit>)> {
        crate::engine::ledger::lost_pass(&self.entries, m, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task directory as `fire` leaves it: its spec, with the loop's variables.
    fn fired(state: &Path, id: &str, loop_id: &str, step: u32, at: &str) {
        let dir = state.join("tasks").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let spec = serde_json::json!({
            "id": id,
            "env": [["LOOP_ID", loop_id], ["LOOP_STEP", step.to_string()],
                    ["LOOP_ATTEMPT", "1"], ["LOOP_SESSION_ID", "s"]],
            "created_at": at,
        });
        std::fs::write(dir.join("spec.json"), spec.to_string()).unwrap();
    }

    #[test]
    fn a_state_directory_without_an_index_keeps_its_tasks_started_and_judged() {
        let state = tempfile::tempdir().unwrap();
        fired(state.path(), "t1", "me", 1, "2026-01-01T00:00:01.000Z");
        fired(state.path(), "t2", "other", 1, "2026-01-01T00:00:02.000Z");
        fired(state.path(), "t3", "me", 2, "2026-01-01T00:00:03.000Z");
        let mut first = Ledger::load(state.path(), "me");
        first.judge("t1", Judged::new(Verdict::Pass, &[])).unwrap();
        drop(first);
        let ledger = Ledger::load(state.path(), "me");
        let ids: Vec<&str> = ledger.entries.iter().map(|e| e.task_id.as_str()).collect();
        assert_eq!(ids, ["t1", "t3"]);
        assert!(ledger.judged("t1").is_some());
        assert_eq!(ledger.unjudged().map(|e| e.step), Some(2));
    }

    #[test]
    fn a_task_noted_but_never_published_is_no_task_and_a_published_one_is_found() {
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("tasks")).unwrap();
        let mut ledger = Ledger::load(state.path(), "me");
        // Noted, then the runner died before publishing it.
        ledger.started("t1", (1, 1), "s", false).unwrap();
        assert!(Ledger::load(state.path(), "me").entries.is_empty());
        // Noted again by the next runner, and published this time.
        let mut ledger = Ledger::load(state.path(), "me");
        ledger.started("t1", (1, 1), "s", false).unwrap();
        fired(state.path(), "t1", "me", 1, "2026-01-01T00:00:01.000Z");
        let ledger = Ledger::load(state.path(), "me");
        assert_eq!(ledger.unjudged().map(|e| e.task_id.as_str()), Some("t1"));
        assert_eq!(ledger.entries.len(), 1);
    }
}
