//! A commit per DONE step, the runner's part (what is committed and when is
//! [`crate::engine::commit`]'s). Before a step's run begins, the runner notes the work tree:
//! HEAD, and each path that holds uncommitted changes then, with a hash of its content. Once
//! the step is DONE, `git status` is read again: a path it did not list before is the step's
//! work and goes into the commit; one that still holds what it held is the person's and stays
//! out; one the person had changed and the step changed again is left out, and named. The
//! commit is git's own commit of only those paths (`git commit --only`: what the person staged
//! stays staged), with no hook and no signature. A runner that dies after the commit and
//! before its record finds it again by its trailers instead of making a second one.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use git::{Change, agent_commits, changed, files_of, find, make, rev, short, top_of, update_index};

use serde::{Deserialize, Serialize};

use super::{Runner, crash};
use crate::engine::commit::{Due, Made};
use crate::exit::Status as Exit;
use crate::layout::Layout;
use crate::m1::M1;

/// The work tree as a step's run began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Baseline {
    /// The attempt that began the run: the id its commit carries (`Loop-Run`).
    pub run: String,
    /// HEAD then (its full id); none on an unborn branch.
    pub head: Option<String>,
    /// Each path, from the work tree's top, that held uncommitted changes then, with a hash
    /// of its content ([`super::tree::hash`]: `-` deleted, `dir` a directory).
    pub dirty: BTreeMap<String, String>,
}

/// How long a step's commit waits for a git of someone else's to let go of the index.
const INDEX_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl Runner {
    /// Notes the work tree before an attempt of `step` (task `task_id`) starts, once per run
    /// of the step: an attempt after the first keeps the note of the first (`COMMIT:
    /// (pending)` says a run of the step is under way), so the step's earlier attempts' work
    /// stays the step's. Whether the note is there; when it cannot be taken the step is not
    /// committed, and the log says why.
    pub(super) fn note_tree_before_step(
        &self,
        m: &M1,
        step: u32,
        task_id: &str,
    ) -> crate::error::Result<bool> {
        let path = Layout::dir(&self.state_dir).step_tree(&self.loop_id, step);
        if m.result(step).commit_pending && read_baseline(&path).is_some() {
            return Ok(true);
        }
        let taken = top_of(&self.workdir)
            .ok_or_else(|| "the project is not a git work tree".to_owned())
            .and_then(|top| {
                let own = Own::new(&top, &self.state_dir, &self.file);
                Ok(Baseline {
                    run: task_id.to_owned(),
                    head: rev(&top, "HEAD"),
                    dirty: changed(&top, &own)?
                        .into_iter()
                        .map(|(p, c)| (p, c.hash))
                        .collect(),
                })
            });
        let baseline = match taken {
            Ok(b) => b,
            Err(why) => {
                self.say(&format!(
                    "commit: step {step} will not be committed: the work tree as it begins \
                     could not be noted ({why})"
                ));
                return Ok(false);
            }
        };
        // A state directory that cannot be written for now is waited out as for any write.
        write_baseline(&path, &baseline).map_err(|e| {
            anyhow::Error::new(e).context(format!("while writing {}", path.display()))
        })?;
        Ok(true)
    }

    /// A DONE step owed its commit: made (or found made before a crash) and recorded, or
    /// its mark dropped.
    pub(super) fn settle_commit(&mut self, due: &Due) -> crate::error::Result<Option<Exit>> {
        let t = match due {
            Due::Drop { step, why } => crate::engine::commit::dropped(*step, why),
            Due::Commit(step) => {
                let m = self.view();
                let made = self.commit_step(&m, *step);
                crate::engine::commit::recorded(*step, &made)
            }
        };
        self.apply(&t)
    }

    /// Commits DONE step `step`'s work, as [`Baseline`] tells it from the person's.
    fn commit_step(&self, m: &M1, step: u32) -> Made {
        let fail = |why: String| Made {
            failed: Some(why),
            ..Made::default()
        };
        let Some(top) = top_of(&self.workdir) else {
            return fail("the project is no longer a git work tree".into());
        };
        // A git killed in mid-write leaves its lock, and every later commit would fail on it.
        match crate::git::clear_stale_index_lock(&top, INDEX_LOCK_PATIENCE) {
            Ok(Some(what)) => self.say(&format!("commit: {what}")),
            Ok(None) => {}
            Err(why) => return fail(why),
        }
        let path = Layout::dir(&self.state_dir).step_tree(&self.loop_id, step);
        let Some(before) = read_baseline(&path) else {
            return fail(format!(
                "there is no note of the work tree as step {step} began ({}), so its work \
                 cannot be told from yours",
                path.display()
            ));
        };
        // HEAD moved since the step began: the agent committed, or this step's commit was
        // made before a runner died, which is found, not made again.
        let moved = rev(&top, "HEAD") != before.head;
        if moved && let Some(c) = find(&top, &self.loop_id, step, &before.run) {
            let files = files_of(&top, &c);
            self.sync_index(&top, &files);
            return Made {
                commit: Some(short(&c)),
                found: true,
                files: files.len(),
                agent_commits: agent_commits(&top, before.head.as_deref(), Some(&c)),
                ..Made::default()
            };
        }
        let own = Own::new(&top, &self.state_dir, &self.file);
        let now = match changed(&top, &own) {
            Ok(now) => now,
            Err(why) => return fail(why),
        };
        let hashes = now
            .iter()
            .map(|(p, c)| (p.clone(), c.hash.clone()))
            .collect();
        let who = crate::engine::commit::attribute(&before.dirty, &hashes);
        let mut made = Made {
            agent_commits: if moved {
                agent_commits(&top, before.head.as_deref(), None)
            } else {
                Vec::new()
            },
            left_out: who.left_out,
            gone: who.gone,
            ..Made::default()
        };
        // A file the agent added to git's index and then deleted was never work: nothing of it
        // is in HEAD, the index or the tree to commit.
        let paths: Vec<&Change> = who
            .step
            .iter()
            .filter_map(|p| now.get(p))
            .filter(|c| !c.added_then_deleted())
            .collect();
        if paths.is_empty() {
            return made;
        }
        let message = crate::engine::commit::message(m, step, None, Some(&before.run));
        match make(&top, &paths, &message) {
            Ok(Some(c)) => {
                crash::point("after-step-commit");
                made.commit = Some(short(&c));
                made.files = paths.len();
            }
            Ok(None) => {}
            Err(why) => made.failed = Some(why),
        }
        made
    }

    /// The person's index, for `paths` a commit holds that a runner made before it died,
    /// brought to that commit (git's own commit does it, but a power cut may cut it short): so
    /// `git status` shows them clean. What the person staged elsewhere stays staged.
    fn sync_index(&self, top: &Path, paths: &[String]) {
        if paths.is_empty() {
            return;
        }
        if let Err(why) = update_index(top, paths) {
            self.say(&format!(
                "commit: git's index could not be brought up to the commit ({why}): `git \
                 status` may show the step's files as changed until `git reset -q`"
            ));
        }
    }
}

/// What of a state directory is the loop's own, seen from the work tree's top.
struct Own {
    /// The state directory, from the top (`""`: the top itself); none when outside the tree.
    dir: Option<PathBuf>,
    /// The name of the loop's state file (`M1.md`).
    m1_name: String,
}

impl Own {
    fn new(top: &Path, state_dir: &Path, m1: &Path) -> Self {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        Self {
            dir: canon(state_dir)
                .strip_prefix(canon(top))
                .ok()
                .map(Path::to_path_buf),
            m1_name: m1
                .file_name()
                .map_or_else(|| "M1.md".into(), |n| n.to_string_lossy().into_owned()),
        }
    }

    /// Whether `path` (from the top) is one of the loop's own files.
    fn holds(&self, path: &str) -> bool {
        let Some(dir) = &self.dir else {
            return false;
        };
        let Ok(rest) = Path::new(path).strip_prefix(dir) else {
            return false;
        };
        rest.components().next().is_some_and(|first| {
            Layout::is_loops_own(&self.m1_name, &first.as_os_str().to_string_lossy())
        })
    }
}

fn read_baseline(path: &Path) -> Option<Baseline> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes `b` at `path` whole or not at all (a runner that dies half way leaves the old one).
fn write_baseline(path: &Path, b: &Baseline) -> std::io::Result<()> {
    let text = serde_json::to_vec(b)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = atomic_write_file::AtomicWriteFile::open(path)?;
    f.write_all(&text)?;
    f.commit()
}

mod git;

#[cfg(test)]
mod tests;
