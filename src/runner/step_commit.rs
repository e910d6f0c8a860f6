//! A commit per DONE step, the runner's part (what is committed and when is
//! [`crate::engine::commit`]'s). Before a step's run begins, the runner notes the work tree:
//! HEAD, and each path that holds uncommitted changes then, with a hash of its content. Before
//! each attempt it notes the tree again, and as the attempt's run ends, before VERIFY runs, it
//! takes each path the run changed into git's object store as the run left it. What VERIFY or
//! a review writes after is not the agent's work: a file VERIFY leaves is never taken, and one
//! it rewrites is committed as the agent left it. Once the step is DONE, what the agent's runs
//! left is told from the person's: a path `git status` did not list as the step began is the
//! step's work and goes into the commit; one that still holds what it held is the person's and
//! stays out; one the person had changed and the step changed again is left out, and named.
//! The commit is built in an index of the loop's own (what the person staged stays staged),
//! with no hook and no signature, and the person's index is brought to it for its paths. A
//! runner that dies after the commit and before its record finds it again by its trailers
//! instead of making a second one.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use git::{agent_commits, build, changed, files_of, find, index_to, rev, short, take, top_of};

use serde::{Deserialize, Serialize};

use super::crash;
use super::step_io::StepIo;
use super::voice::Voice;
use crate::engine::commit::Made;
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

/// What the agent's runs of a step left as each ended: what the step's commit holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Work {
    /// The attempt under way, or the last one: its task id.
    pub task: String,
    /// Whether that attempt's run ended and what it changed is taken into `left`.
    pub ended: bool,
    /// Each path that held uncommitted changes as that attempt began, with a hash of its
    /// content.
    pub before: BTreeMap<String, String>,
    /// Each path an attempt of the step changed, as the last attempt that changed it left it.
    pub left: BTreeMap<String, Left>,
}

/// A path as an agent's run left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Left {
    /// A hash of its content ([`super::tree::hash`]) if `git status` listed it then; none when
    /// it held what HEAD holds (or git ignores it).
    pub hash: Option<String>,
    /// What git commits of it (`MODE BLOB`, the blob in git's object store); none when it was
    /// not there.
    pub git: Option<String>,
}

impl StepIo {
    /// Notes the work tree before an attempt of `step` (task `task_id`) starts, once per run
    /// of the step: an attempt after the first keeps the note of the first (`COMMIT:
    /// (pending)` says a run of the step is under way), so the step's earlier attempts' work
    /// stays the step's, and only notes where the attempt begins from ([`Work`]). Whether the
    /// note is there; when it cannot be taken the step is not committed, and the log says why.
    pub(super) fn note_tree_before_step(
        &self,
        voice: &Voice,
        m: &M1,
        step: u32,
        task_id: &str,
    ) -> crate::error::Result<bool> {
        let layout = Layout::dir(&self.state_dir);
        let path = layout.step_tree(&self.loop_id, step);
        let work_path = layout.step_work(&self.loop_id, step);
        if m.result(step).commit_pending && read_baseline(&path).is_some() {
            self.note_tree_before_attempt(voice, step, task_id, &work_path)?;
            return Ok(true);
        }
        let taken = top_of(&self.workdir)
            .ok_or_else(|| "the project is not a git work tree".to_owned())
            .and_then(|top| {
                let own = Own::new(&top, &self.state_dir, &self.file);
                Ok(Baseline {
                    run: task_id.to_owned(),
                    head: rev(&top, "HEAD"),
                    dirty: changed(&top, &own)?,
                })
            });
        let baseline = match taken {
            Ok(b) => b,
            Err(why) => {
                voice.say(&format!(
                    "commit: step {step} will not be committed: the work tree as it begins \
                     could not be noted ({why})"
                ));
                return Ok(false);
            }
        };
        // A state directory that cannot be written for now is waited out as for any write.
        let work = Work {
            task: task_id.to_owned(),
            ended: false,
            before: baseline.dirty.clone(),
            left: BTreeMap::new(),
        };
        write_json(&path, &baseline).map_err(|e| {
            anyhow::Error::new(e).context(format!("while writing {}", path.display()))
        })?;
        write_json(&work_path, &work).map_err(|e| {
            anyhow::Error::new(e).context(format!("while writing {}", work_path.display()))
        })?;
        Ok(true)
    }

    /// Notes the work tree before a later attempt of `step` (task `task_id`) starts, so that
    /// as its run ends what it changed is told from what was there (an earlier VERIFY's files,
    /// a review's). Without a note of the earlier runs there is nothing to add to: the step's
    /// commit then takes the tree as it is when the step is DONE.
    fn note_tree_before_attempt(
        &self,
        voice: &Voice,
        step: u32,
        task_id: &str,
        work_path: &Path,
    ) -> crate::error::Result<()> {
        let Some(mut work) = read_json::<Work>(work_path) else {
            return Ok(());
        };
        if work.task == task_id {
            return Ok(());
        }
        let now = top_of(&self.workdir)
            .ok_or_else(|| "the project is no longer a git work tree".to_owned())
            .and_then(|top| changed(&top, &Own::new(&top, &self.state_dir, &self.file)));
        match now {
            Ok(now) => {
                task_id.clone_into(&mut work.task);
                work.ended = false;
                work.before = now;
                write_json(work_path, &work).map_err(|e| {
                    anyhow::Error::new(e).context(format!("while writing {}", work_path.display()))
                })?;
            }
            Err(why) => {
                voice.say(&format!(
                    "commit: the work tree as step {step}'s attempt begins could not be noted \
                     ({why}); its commit will take the work tree as it is when the step is DONE"
                ));
                let _ = std::fs::remove_file(work_path);
            }
        }
        Ok(())
    }

    /// As the run of an attempt of `step` (task `task_id`) ends, before VERIFY runs: each path
    /// the run changed, taken into git's object store as it left it. Once per run: a runner
    /// that died after this and comes back does not take it again (VERIFY may have written
    /// since). When it cannot be taken, the log says why and the step's commit takes the work
    /// tree as it is when the step is DONE.
    pub(super) fn note_work_after_run(
        &self,
        voice: &Voice,
        step: u32,
        task_id: &str,
    ) -> crate::error::Result<()> {
        let path = Layout::dir(&self.state_dir).step_work(&self.loop_id, step);
        let Some(mut work) = read_json::<Work>(&path) else {
            return Ok(());
        };
        if work.task != task_id || work.ended {
            return Ok(());
        }
        match self.take_left(&work.before, &mut work.left) {
            Ok(()) => {
                work.ended = true;
                write_json(&path, &work).map_err(|e| {
                    anyhow::Error::new(e).context(format!("while writing {}", path.display()))
                })?;
                crash::point("after-work-noted");
            }
            Err(why) => voice.say(&format!(
                "commit: what step {step}'s run (task {task_id}) left could not be noted \
                 ({why}); its commit will take the work tree as it is when the step is DONE"
            )),
        }
        Ok(())
    }

    /// Each path that holds other than it held in `before` (each path `git status` listed,
    /// with a hash of its content), into `left` as the work tree holds it now.
    fn take_left(
        &self,
        before: &BTreeMap<String, String>,
        left: &mut BTreeMap<String, Left>,
    ) -> Result<(), String> {
        let top = top_of(&self.workdir)
            .ok_or_else(|| "the project is no longer a git work tree".to_owned())?;
        let now = changed(&top, &Own::new(&top, &self.state_dir, &self.file))?;
        let touched: Vec<&str> = now
            .keys()
            .chain(before.keys())
            .map(String::as_str)
            .filter(|p| now.get(*p) != before.get(*p))
            .filter(|p| now.get(*p).is_none_or(|h| h != NESTED))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // What `git status` lists is taken as the tree holds it; what it no longer lists holds
        // what HEAD holds.
        let (gone, there): (Vec<&str>, Vec<&str>) = touched
            .iter()
            .filter(|p| now.contains_key(**p))
            .partition(|p| now[**p] == "-");
        let index = Layout::dir(&self.state_dir).commit_index(&self.loop_id);
        let head = rev(&top, "HEAD");
        let held = take(&top, &index, head.as_deref(), &there, &gone, &touched)?;
        for p in touched {
            left.insert(
                p.to_owned(),
                Left {
                    hash: now.get(p).cloned(),
                    git: held.get(p).cloned().flatten(),
                },
            );
        }
        Ok(())
    }

    /// Commits DONE step `step`'s work: what its agent's runs left ([`Work`]), told from the
    /// person's by [`Baseline`].
    pub(super) fn commit_step(&self, voice: &Voice, m: &M1, step: u32) -> Made {
        let fail = |why: String| Made {
            failed: Some(why),
            ..Made::default()
        };
        let Some(top) = top_of(&self.workdir) else {
            return fail("the project is no longer a git work tree".into());
        };
        // A git killed in mid-write leaves its lock, and every later commit would fail on it.
        match crate::git::clear_stale_index_lock(&top, INDEX_LOCK_PATIENCE) {
            Ok(Some(what)) => voice.say(&format!("commit: {what}")),
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
        let head = rev(&top, "HEAD");
        let moved = head != before.head;
        if moved && let Some(c) = find(&top, &self.loop_id, step, &before.run) {
            let files = files_of(&top, &c);
            sync_index(voice, &top, &c);
            return Made {
                commit: Some(short(&c)),
                found: true,
                files: files.len(),
                agent_commits: agent_commits(&top, before.head.as_deref(), Some(&c)),
                ..Made::default()
            };
        }
        // A step a person took as it stands (REVIEW: off after a review's gate) is committed as
        // it stands, their fix by hand included.
        let as_it_stands = m.result(step).review.as_ref().is_some_and(|r| {
            *r == crate::m1::Review::Other(crate::engine::review::TAKEN_AS_IT_STANDS.to_owned())
        });
        let left = match self.work_left(voice, step, &before, as_it_stands) {
            Ok(left) => left,
            Err(why) => return fail(why),
        };
        // The paths `git status` listed as the agent's last run ended (each as it left it), and
        // those of the person's it never touched, which still are as they were.
        let mut hashes: BTreeMap<String, String> = before.dirty.clone();
        for (p, l) in &left {
            match &l.hash {
                Some(h) => hashes.insert(p.clone(), h.clone()),
                None => hashes.remove(p),
            };
        }
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
        let entries: Vec<(&str, Option<&str>)> = who
            .step
            .iter()
            .filter_map(|p| left.get(p).map(|l| (p.as_str(), l.git.as_deref())))
            .collect();
        if entries.is_empty() {
            return made;
        }
        let message = crate::engine::commit::message(m, step, None, Some(&before.run));
        let index = Layout::dir(&self.state_dir).commit_index(&self.loop_id);
        match build(&top, &index, head.as_deref(), &entries, &message) {
            Ok(Some(c)) => {
                crash::point("after-step-commit");
                sync_index(voice, &top, &c);
                made.commit = Some(short(&c));
                made.files = files_of(&top, &c).len();
            }
            Ok(None) => {}
            Err(why) => made.failed = Some(why),
        }
        let _ = std::fs::remove_file(&index);
        made
    }

    /// What the agent's runs of `step` left, as [`StepIo::note_work_after_run`] took it; else
    /// (a run's end not noted) the work tree as it is now, and the log says so.
    fn work_left(
        &self,
        voice: &Voice,
        step: u32,
        before: &Baseline,
        as_it_stands: bool,
    ) -> Result<BTreeMap<String, Left>, String> {
        let path = Layout::dir(&self.state_dir).step_work(&self.loop_id, step);
        let work = read_json::<Work>(&path);
        if let Some(w) = work.as_ref().filter(|w| w.ended && !as_it_stands) {
            return Ok(w.left.clone());
        }
        if as_it_stands {
            voice.say(&format!(
                "commit: step {step} was taken as it stands (REVIEW: off): its commit takes the \
                 work tree as it is now"
            ));
        } else {
            voice.say(&format!(
                "commit: step {step}: what its agent's last run left was not noted ({}): its \
                 commit takes the work tree as it is now, what VERIFY wrote included",
                path.display()
            ));
        }
        let (since, mut left) = match work {
            Some(w) => (w.before, w.left),
            None => (before.dirty.clone(), BTreeMap::new()),
        };
        self.take_left(&since, &mut left)?;
        Ok(left)
    }
}

/// The person's index, for the paths commit `c` changed, brought to it (for a commit
/// made before a runner died, too): so `git status` shows them clean where the tree holds
/// what was committed. What the person staged elsewhere stays staged.
fn sync_index(voice: &Voice, top: &Path, c: &str) {
    if let Err(why) = index_to(top, c) {
        voice.say(&format!(
            "commit: git's index could not be brought up to the commit ({why}): `git \
             status` may show the step's files as changed until `git reset -q`"
        ));
    }
}

/// What a directory hashes as ([`super::tree::hash`]): a repository nested in the work tree,
/// whose files are its own.
const NESTED: &str = "dir";

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
    read_json(path)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes `v` at `path` whole or not at all (a runner that dies half way leaves the old one).
fn write_json<T: Serialize>(path: &Path, v: &T) -> std::io::Result<()> {
    let text = serde_json::to_vec(v)?;
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
