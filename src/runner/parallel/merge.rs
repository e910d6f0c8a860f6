//! The merge queue's turn for a step whose loop is DONE: commit what it left, merge it onto the
//! integration head in the loop's merge worktree, VERIFY the merged result, move the
//! integration branch (a compare-and-swap of the ref), record it merged. What the engine
//! makes of a conflict or a red VERIFY (back to its session, or a gate) is carried out here.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::super::Runner;
use super::git;
use crate::engine::{
    self,
    parallel::{MergeCheck, MergeFailure, MergeOutcome, WorkPlace},
};
use crate::exit::Status as Exit;
use crate::layout::Layout;
use crate::m1::{M1, StepState};

/// The step task under which VERIFY runs on step `n` merged, in loop `loop_id`: its runs are
/// `<this>.verify`, `<this>.verify-2`... Every process of a task carries its id
/// (`LOOP_TASK_ID`), and ending a task ends every process on the machine that does: the id
/// names its loop, so that ending one loop's merge VERIFY never touches another loop's.
pub(crate) fn merge_task(loop_id: &str, n: u32) -> String {
    format!("merge-{loop_id}-step-{n}")
}

/// How VERIFY on a merged result came out.
#[derive(Debug)]
enum Checked {
    /// Passed; `ran`: a VERIFY is set and ran.
    Passed { ran: bool },
    /// A stop ended it.
    Stopped,
    /// A person set the step SKIPPED by hand while it ran: it is not merged.
    Skipped,
    /// The loop ended while it ran (a stop while M1.md was invalid).
    Ended(Exit),
    /// What it said, last.
    Failed(String),
}

impl Runner {
    /// Merges step `n`, whose loop is DONE, once: a merge noted beside its loop (a save of an
    /// older M1.md put its record back) is recorded again, not made again.
    pub(super) fn merge_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = self.integration()?;
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let text = step_text(&m, n);
        let note = run
            .loop_file
            .as_deref()
            .map(|f| Layout::merged_note(Path::new(f)));
        // A branch with no commit beyond where the step started: its agent changed nothing.
        let base = run.base.clone().unwrap_or_default();
        let made_nothing = |tip: &str| !base.is_empty() && tip == base;
        if let Some(commit) = note.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            let tip = git::commit_of(&self.workdir, &format!("refs/heads/{branch}"));
            let check = if tip.as_deref().is_some_and(made_nothing) {
                MergeCheck::Nothing
            } else {
                MergeCheck::AlreadyIn
            };
            return self.record_merged(n, commit.trim(), check).map(|()| None);
        }
        let fail = anyhow::Error::msg;
        if wt.join(".git").exists() {
            // Named as a step's commit in a loop of one step at a time is: the loop, the
            // step, and what its own loop says it did.
            let summary = child_result(run.loop_file.as_deref(), n).summary;
            let message = engine::commit::message(&m, n, summary.as_deref(), None);
            git::commit_all(&wt, &message).map_err(fail)?;
        }
        super::super::crash::point("parallel-after-commit");
        let old = git::commit_of(&self.workdir, &format!("refs/heads/{integration}"))
            .ok_or_else(|| anyhow::anyhow!("the integration branch {integration} is gone"))?;
        let tip = git::commit_of(&self.workdir, &format!("refs/heads/{branch}"))
            .ok_or_else(|| anyhow::anyhow!("step {n}'s branch {branch} is gone"))?;
        // Merged before a crash: the integration branch has it already.
        let (merged, check) = if made_nothing(&tip) {
            (old.clone(), MergeCheck::Nothing)
        } else if git::is_ancestor(&self.workdir, &tip, &old) {
            (old.clone(), MergeCheck::AlreadyIn)
        } else {
            let merge_wt = self.merge_worktree()?;
            let message = format!(
                "loop: merge step {n}: {}",
                crate::text::one_line(&text, 300)
            );
            match git::merge(&self.workdir, &merge_wt, &old, &branch, &message).map_err(fail)? {
                git::Merged::Conflict(files) => {
                    return self.merge_failed(n, &MergeOutcome::Conflict(files));
                }
                git::Merged::At(sha) => {
                    super::super::crash::point("parallel-after-merge");
                    let ran = match self.verify_merged(&m, n, &merge_wt)? {
                        Checked::Passed { ran } => ran,
                        // The queue's next look sees the stop, or drops the step; the branch
                        // has not moved.
                        Checked::Stopped | Checked::Skipped => return Ok(None),
                        Checked::Ended(exit) => return Ok(Some(exit)),
                        Checked::Failed(failure) => {
                            return self.merge_failed(n, &MergeOutcome::Red(failure));
                        }
                    };
                    super::super::crash::point("parallel-after-verify");
                    git::move_branch(&self.workdir, &integration, &sha, &old).map_err(fail)?;
                    (
                        sha,
                        if ran {
                            MergeCheck::Verified
                        } else {
                            MergeCheck::NoVerify
                        },
                    )
                }
            }
        };
        super::super::crash::point("parallel-after-ref-move");
        if let Some(p) = &note {
            std::fs::write(p, format!("{merged}\n"))
                .with_context(|| format!("while writing {}", p.display()))?;
        }
        self.record_merged(n, &merged, check)?;
        super::super::crash::point("parallel-after-merged-write");
        Ok(None)
    }

    /// Where the merge queue merges (its parent directory made): one worktree for the loop.
    fn merge_worktree(&self) -> crate::error::Result<PathBuf> {
        let id = self
            .view()
            .loop_id
            .clone()
            .unwrap_or_else(|| self.loop_id.clone());
        let merge_wt = Layout::dir(&self.state_dir).merge_worktree(&id);
        let merge_wt = std::path::absolute(&merge_wt).unwrap_or(merge_wt);
        if let Some(parent) = merge_wt.parent() {
            crate::dirs::create_state_dir(parent)
                .with_context(|| format!("while creating {}", parent.display()))?;
        }
        Ok(merge_wt)
    }

    /// Step `n` is merged at `commit`: DONE, with what its own loop recorded.
    fn record_merged(
        &mut self,
        n: u32,
        commit: &str,
        check: MergeCheck,
    ) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let child = child_result(run.loop_file.as_deref(), n);
        let t = engine::parallel::merged(&m, n, commit, check, &child, run.loop_file.as_deref());
        self.apply(&t)?;
        if self.settings.notify_each_step {
            let summary = child.summary.clone().unwrap_or_else(|| "done".into());
            self.carry_out(&m, &[engine::Effect::StepDone { step: n, summary }]);
        }
        Ok(())
    }

    /// VERIFY on step `n` merged, in the merge worktree `wt` (passed, not run, when none is
    /// set). It runs as a step's VERIFY does ([`crate::verify::run`]): a task of the exec
    /// bridge, ended with its whole group at the step timeout or a stop.
    fn verify_merged(&mut self, m: &M1, n: u32, wt: &Path) -> crate::error::Result<Checked> {
        use crate::verify::Outcome;
        let Some(cmd) = self.settings.verify(m) else {
            return Ok(Checked::Passed { ran: false });
        };
        let state_dir = self.state_dir.clone();
        let how = crate::verify::Run {
            command: &cmd,
            cwd: wt,
            env: &[("LOOP_STEP".to_owned(), n.to_string())],
            state_dir: &state_dir,
            step_task: &merge_task(&self.parallel_id(), n),
            timeout: self.settings.caps(m).step_timeout,
        };
        let sandbox = self.settings.sandbox(m);
        let outcome = self.io.verify_confined(&sandbox, &how, wt)?;
        // It may have run for minutes: what a person did meanwhile comes first.
        if let Some(exit) = self.refresh()? {
            return Ok(Checked::Ended(exit));
        }
        if engine::by_hand::closed_while_running(&self.view(), n) == Some(StepState::Skipped) {
            self.voice.say(&format!(
                "merge: step {n} was set SKIPPED by hand while VERIFY ran on its merged result: \
                 it is not merged"
            ));
            return Ok(Checked::Skipped);
        }
        let tail = |t: &str| crate::text::one_line(t.trim(), 300);
        Ok(match outcome {
            Outcome::Passed => Checked::Passed { ran: true },
            Outcome::Stopped => Checked::Stopped,
            Outcome::Refused { code, said, .. } => Checked::Failed(format!(
                "`{cmd}` exited {}: {said}",
                code.map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
            )),
            Outcome::Failed { code, tail: t } => Checked::Failed(format!(
                "`{cmd}` exited {}: {}",
                code.map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
                tail(&t)
            )),
            Outcome::TimedOut { tail: t } => Checked::Failed(format!(
                "`{cmd}` ran past STEP_TIMEOUT and was ended: {}",
                tail(&t)
            )),
        })
    }

    /// Step `n`'s merge failed: back to its session, or a gate (the engine's choice).
    fn merge_failed(
        &mut self,
        n: u32,
        outcome: &MergeOutcome,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let wt = run.worktree.clone().unwrap_or_default();
        let place = WorkPlace {
            branch: run.branch.clone().unwrap_or_default(),
            mid_merge: mid_merge(Path::new(&wt)),
            worktree: wt,
        };
        let caps = self.settings.caps(&m);
        match engine::parallel::merge_failed(&m, n, outcome, &caps, &place) {
            MergeFailure::Gate(t) => self.apply(&t),
            MergeFailure::SendBack { transition, told } => {
                self.apply(&transition)?;
                let files = match outcome {
                    MergeOutcome::Conflict(f) => f.clone(),
                    MergeOutcome::Red(_) => Vec::new(),
                };
                self.send_back(n, &told, &files)
            }
        }
    }

    /// A person chose `retry` on step `n`'s MERGE gate `gate`: back to its session.
    pub(super) fn send_back_by_a_person(
        &mut self,
        n: u32,
        gate: &str,
    ) -> crate::error::Result<Option<Exit>> {
        let (t, told) = engine::parallel::sent_back_by_a_person(n, gate);
        self.apply(&t)?;
        self.send_back(n, &told, &[])
    }

    /// Step `n` goes back to its session: the integration head is merged into its worktree
    /// (conflict markers left for its agent, `files`), and its loop runs the step again,
    /// told `told`.
    fn send_back(
        &mut self,
        n: u32,
        told: &str,
        files: &[String],
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let integration = m.parallel.branch.clone().unwrap_or_default();
        // The step goes on from the integration head: a clean merge is committed, a conflict
        // stays in the files for the agent to resolve.
        let clean =
            git::run_as_author(&wt, &["merge", "--no-ff", "--no-edit", "-q", &integration]).is_ok();
        let told = if !files.is_empty() && clean {
            told.replace(
                "with conflict markers in",
                "(it merged cleanly this time) after conflicts in",
            )
        } else {
            told.to_owned()
        };
        let file = PathBuf::from(run.loop_file.clone().unwrap_or_default());
        self.tell_sent_back(&file, n, &told)?;
        Ok(None)
    }
}

/// The loops of `m`'s steps that run at once and are not merged yet, each one's M1.md as it
/// reads now, by step: what the figures of a running loop count ([`crate::engine::figures`]).
pub(crate) fn step_loops(m: &M1) -> std::collections::BTreeMap<u32, M1> {
    m.parallel
        .runs
        .iter()
        .filter(|(_, r)| r.merged.is_none())
        .filter_map(|(n, r)| {
            let file = r.loop_file.as_deref()?;
            Some((*n, crate::m1::load(Path::new(file)).ok()?.view()))
        })
        .collect()
}

/// What step `n`'s own loop (its M1.md at `loop_file`) recorded of it.
pub(super) fn child_result(loop_file: Option<&str>, n: u32) -> crate::m1::StepResult {
    loop_file
        .and_then(|f| crate::m1::load(Path::new(f)).ok())
        .map(|d| d.view().result(n).into_owned())
        .unwrap_or_default()
}

/// The text of step `n`.
fn step_text(m: &M1, n: u32) -> String {
    m.plan
        .steps
        .iter()
        .find(|s| s.n == n)
        .map(|s| s.text.clone())
        .unwrap_or_default()
}

/// Whether a merge is in progress in worktree `wt` (`MERGE_HEAD` in its git directory).
fn mid_merge(wt: &Path) -> bool {
    git::run(wt, &["rev-parse", "-q", "--verify", "MERGE_HEAD"]).is_ok()
}
