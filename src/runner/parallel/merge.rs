//! The merge queue's turn for a step whose loop is DONE: commit what it left, merge it onto the
//! integration head in the loop's merge worktree, then (after the runner's VERIFY of the merged
//! result) move the integration branch (a compare-and-swap of the ref) and note the merge
//! beside the step's loop. What the engine makes of a conflict or a red VERIFY (back to its
//! session, or a gate) is the runner's to record; sending the step back is done here.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::at_once::AtOnce;
use super::git;
use crate::engine::parallel::{MergeCheck, WorkPlace};
use crate::layout::Layout;
use crate::m1::{M1, ParallelRun};
use crate::runner::crash;
use crate::runner::voice::Voice;

/// The step task under which VERIFY runs on step `n` merged, in loop `loop_id`: its runs are
/// `<this>.verify`, `<this>.verify-2`... Every process of a task carries its id
/// (`LOOP_TASK_ID`), and ending a task ends every process on the machine that does: the id
/// names its loop, so that ending one loop's merge VERIFY never touches another loop's.
pub(crate) fn merge_task(loop_id: &str, n: u32) -> String {
    format!("merge-{loop_id}-step-{n}")
}

/// How a step's merge stands once its work is merged, or could not be.
#[derive(Debug)]
pub(super) enum Merging {
    /// The integration branch has it at `commit` (merged before a crash, or nothing to merge):
    /// it is recorded merged, not merged again.
    In { commit: String, check: MergeCheck },
    /// The merge conflicts in these files.
    Conflict(Vec<String>),
    /// Merged at `merged` in the merge worktree `wt`, onto the integration head `old`: for
    /// VERIFY, then [`AtOnce::move_integration`].
    Merged {
        merged: String,
        old: String,
        wt: PathBuf,
    },
}

impl AtOnce {
    /// The merge of step `n` (recorded as `run`) noted beside its loop, if a save of an older
    /// M1.md put back its record after it was made: its commit, and how it is checked.
    pub(super) fn merged_before(&self, run: &ParallelRun) -> Option<(String, MergeCheck)> {
        let note = Layout::merged_note(Path::new(run.loop_file.as_deref()?));
        let commit = std::fs::read_to_string(note).ok()?;
        let branch = run.branch.clone().unwrap_or_default();
        let tip = git::commit_of(&self.workdir, &format!("refs/heads/{branch}"));
        let check = if tip.is_some_and(|t| made_nothing(run, &t)) {
            MergeCheck::Nothing
        } else {
            MergeCheck::AlreadyIn
        };
        Some((commit.trim().to_owned(), check))
    }

    /// Step `n`'s work merged onto the integration branch `integration` of `m`, in the loop's
    /// merge worktree: what its agent left committed first (named as a step's commit in a loop
    /// of one step at a time is: the loop, the step, and what its own loop says it did).
    pub(super) fn merge(&self, m: &M1, n: u32, integration: &str) -> crate::error::Result<Merging> {
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let fail = anyhow::Error::msg;
        if wt.join(".git").exists() {
            let summary = child_result(run.loop_file.as_deref(), n).summary;
            let message = crate::engine::commit::message(m, n, summary.as_deref(), None);
            git::commit_all(&wt, &message).map_err(fail)?;
        }
        crash::point("parallel-after-commit");
        let old = git::commit_of(&self.workdir, &format!("refs/heads/{integration}"))
            .ok_or_else(|| anyhow::anyhow!("the integration branch {integration} is gone"))?;
        let tip = git::commit_of(&self.workdir, &format!("refs/heads/{branch}"))
            .ok_or_else(|| anyhow::anyhow!("step {n}'s branch {branch} is gone"))?;
        if made_nothing(&run, &tip) {
            return Ok(Merging::In {
                commit: old,
                check: MergeCheck::Nothing,
            });
        }
        // Merged before a crash: the integration branch has it already.
        if git::is_ancestor(&self.workdir, &tip, &old) {
            return Ok(Merging::In {
                commit: old,
                check: MergeCheck::AlreadyIn,
            });
        }
        let merge_wt = self.merge_worktree(m)?;
        let message = format!(
            "loop: merge step {n}: {}",
            crate::text::one_line(&step_text(m, n), 300)
        );
        Ok(
            match git::merge(&self.workdir, &merge_wt, &old, &branch, &message).map_err(fail)? {
                git::Merged::Conflict(files) => Merging::Conflict(files),
                git::Merged::At(sha) => {
                    crash::point("parallel-after-merge");
                    Merging::Merged {
                        merged: sha,
                        old,
                        wt: merge_wt,
                    }
                }
            },
        )
    }

    /// The merged result passed: the integration branch moves to `merged` if it is still at
    /// `old`.
    pub(super) fn move_integration(
        &self,
        integration: &str,
        merged: &str,
        old: &str,
    ) -> crate::error::Result<()> {
        crash::point("parallel-after-verify");
        git::move_branch(&self.workdir, integration, merged, old).map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// Where the merge queue merges (its parent directory made): one worktree for the loop.
    fn merge_worktree(&self, m: &M1) -> crate::error::Result<PathBuf> {
        let merge_wt = Layout::dir(&self.state_dir).merge_worktree(&self.id(m));
        let merge_wt = std::path::absolute(&merge_wt).unwrap_or(merge_wt);
        if let Some(parent) = merge_wt.parent() {
            crate::dirs::create_state_dir(parent)
                .with_context(|| format!("while creating {}", parent.display()))?;
        }
        Ok(merge_wt)
    }
}

/// Whether step `run`'s branch at `tip` has no commit beyond where the step started: its
/// agent changed nothing.
fn made_nothing(run: &ParallelRun, tip: &str) -> bool {
    run.base
        .as_deref()
        .is_some_and(|b| !b.is_empty() && b == tip)
}

/// The loops of `m`'s steps that run at once and are not merged yet, each one's M1.md as it
/// reads now, by step: what the figures of a running loop count ([`crate::engine::figures`]).
pub(crate) fn step_loops(m: &M1) -> std::collections::BTreeMap<u32, M1> {
    super::steps::unmerged(m)
        .into_iter()
        .filter_map(|(n, file)| Some((n, crate::m1::load(Path::new(&file)).ok()?.view())))
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

/// Notes beside step `n`'s loop (recorded as `run`) that it is merged at `merged`.
pub(super) fn note_merged(run: &ParallelRun, merged: &str) -> crate::error::Result<()> {
    crash::point("parallel-after-ref-move");
    if let Some(f) = run.loop_file.as_deref() {
        let p = Layout::merged_note(Path::new(f));
        std::fs::write(&p, format!("{merged}\n"))
            .with_context(|| format!("while writing {}", p.display()))?;
    }
    Ok(())
}

/// Where step `n`'s work is, for a person to finish its merge.
pub(super) fn work_place(m: &M1, n: u32) -> WorkPlace {
    let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
    let wt = run.worktree.clone().unwrap_or_default();
    WorkPlace {
        branch: run.branch.clone().unwrap_or_default(),
        mid_merge: mid_merge(Path::new(&wt)),
        worktree: wt,
    }
}

/// Step `n` goes back to its session: the integration head is merged into its worktree
/// (conflict markers left for its agent, `files`), and its loop runs the step again,
/// told `told`.
pub(super) fn send_back(
    m: &M1,
    n: u32,
    told: &str,
    files: &[String],
    voice: &Voice,
) -> crate::error::Result<()> {
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
    super::tell::tell_sent_back(&file, n, &told, voice)
}
