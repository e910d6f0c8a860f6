//! Starting, carrying on, stopping and taking down the loops of steps that run at once: each
//! write point in the order a crash can cut it (record, worktree, loop, runner), each made
//! only if not made already. The record of each is the runner's: it writes it before (or
//! after) what is done here, from what these hand back.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::Utc;

use super::at_once::{AtOnce, Restarts};
use super::git;
use crate::engine::parallel::{Landed, RunNames};
use crate::layout::Layout;
use crate::m1::{M1, Store};
use crate::runner::voice::Voice;
use crate::runner::{crash, lock, start, stop};

/// What became of step `n`'s loop, asked to run on.
#[derive(Debug)]
pub(super) enum RunOn {
    /// Its runner was started (or one drives it already).
    Started,
    /// It was started [`MAX_STARTS`] times and ended each time, its step unfinished; `out` is
    /// what its runners printed.
    TooOften { out: PathBuf },
    /// Its runner ended at once, its loop as it was: why (what it printed).
    CannotStart(String),
}

impl AtOnce {
    /// The integration branch `m` records, made again from its base if it is gone; `None`
    /// when `m` records none yet.
    pub(super) fn integration_of(&self, m: &M1) -> crate::error::Result<Option<String>> {
        let Some(b) = m.parallel.branch.clone() else {
            return Ok(None);
        };
        if git::commit_of(&self.workdir, &format!("refs/heads/{b}")).is_none() {
            let base = m.parallel.base.clone().unwrap_or_default();
            git::run(&self.workdir, &["branch", &b, &base]).map_err(anyhow::Error::msg)?;
        }
        Ok(Some(b))
    }

    /// A new integration branch's name and base (the project's `HEAD`), to be recorded before
    /// it is made ([`AtOnce::branch_off`]).
    pub(super) fn new_integration(&self, m: &M1) -> crate::error::Result<(String, String)> {
        let base = git::commit_of(&self.workdir, "HEAD").ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no commit to branch from: commit once, then `loop resume`",
                self.workdir.display()
            )
        })?;
        Ok((format!("loop/{}", self.id(m)), base))
    }

    /// Makes the integration branch `branch` at `base`.
    pub(super) fn branch_off(
        &self,
        branch: &str,
        base: &str,
        voice: &Voice,
    ) -> crate::error::Result<()> {
        git::run(&self.workdir, &["branch", branch, base]).map_err(anyhow::Error::msg)?;
        voice.say(&format!(
            "parallel: integration branch {branch} from {}",
            git::short(base)
        ));
        Ok(())
    }

    /// Where step `n` runs: as recorded, or, for a new start, names nothing else uses (a
    /// later start of the same step while an earlier one's worktree or branch is kept gets
    /// the next number).
    pub(super) fn names_for(
        &self,
        m: &M1,
        n: u32,
        integration: &str,
    ) -> crate::error::Result<RunNames> {
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let layout = Layout::dir(&self.state_dir);
        let id = self.id(m);
        let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        let free = |k: u32| {
            let branch = match k {
                1 => format!("{integration}-step-{n}"),
                k => format!("{integration}-step-{n}.{k}"),
            };
            let wt = layout.step_worktree(&id, n, k);
            let lf = layout.step_loop(&id, n, k);
            let taken = wt.exists()
                || lf.exists()
                || git::commit_of(&self.workdir, &format!("refs/heads/{branch}")).is_some();
            (!taken).then_some((wt, branch, lf))
        };
        let (wt, branch, lf) = (1..1000)
            .find_map(free)
            .ok_or_else(|| anyhow::anyhow!("step {n} has no free name for a worktree"))?;
        let base = match run.base {
            Some(b) => b,
            None => git::commit_of(&self.workdir, &format!("refs/heads/{integration}"))
                .ok_or_else(|| anyhow::anyhow!("the integration branch {integration} is gone"))?,
        };
        Ok(RunNames {
            worktree: run
                .worktree
                .unwrap_or_else(|| abs(wt).display().to_string()),
            branch: run.branch.unwrap_or(branch),
            base,
            loop_file: run
                .loop_file
                .unwrap_or_else(|| abs(lf).display().to_string()),
        })
    }

    /// Starts step `n`, recorded as `names`: its worktree, then its loop (written with
    /// `text`, where it is not there yet), then its runner. `Ok(Err(why))`: git cannot make the
    /// worktree the record names (a hand-written base it does not have).
    pub(super) fn start(
        &self,
        names: &RunNames,
        text: &dyn Fn(&Path) -> crate::error::Result<String>,
    ) -> crate::error::Result<Result<(), String>> {
        crash::point("parallel-after-record");
        let worktree = PathBuf::from(&names.worktree);
        if let Some(parent) = worktree.parent() {
            crate::dirs::create_state_dir(parent)
                .with_context(|| format!("while creating {}", parent.display()))?;
        }
        if let Err(why) = git::worktree(&self.workdir, &worktree, &names.branch, &names.base) {
            return Ok(Err(why));
        }
        crash::point("parallel-after-worktree");
        let loop_file = PathBuf::from(&names.loop_file);
        if !loop_file.exists() {
            let text = text(&worktree)?;
            let dir = loop_file.parent().unwrap_or(Path::new("."));
            crate::dirs::create_state_dir(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
            Store::create(&loop_file, &text)?;
        }
        crash::point("parallel-after-step-loop");
        spawn_runner(&loop_file)?;
        crash::point("parallel-after-spawn");
        Ok(Ok(()))
    }

    /// The `M1.md` of step `n`'s own loop, working in `worktree`, for the loop `m`: `runs_with`
    /// gives each inherited key's text as this loop runs with it (see
    /// [`crate::engine::parallel::step_loop`]).
    pub(super) fn step_loop_text(
        &self,
        m: &M1,
        n: u32,
        worktree: &Path,
        max_steps: u32,
        runs_with: &dyn Fn(&crate::m1::KeyPath) -> Option<String>,
    ) -> crate::error::Result<String> {
        let parent = std::path::absolute(&self.file)
            .unwrap_or_else(|_| self.file.clone())
            .display()
            .to_string();
        let spec = crate::engine::parallel::StepLoop {
            step: n,
            worktree: &worktree.display().to_string(),
            parent_file: &parent,
            parent_id: &self.id(m),
            loop_id: &start::new_loop_id(),
            started_at: &Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            max_steps,
        };
        let edits = crate::engine::parallel::step_loop(m, &spec, runs_with);
        Ok(start::new_text(&edits)?)
    }

    /// Step `n`'s loop at `file` runs on: its runner starts. A runner that ends at once, its
    /// loop as it was, could not start (what it printed says why), and it is started no more
    /// until a person's word. Each start after the first waits longer ([`backoff`]), and past
    /// [`MAX_STARTS`] it is not started: a step's loop is never started again and again.
    pub(super) fn run_on(
        &mut self,
        n: u32,
        file: &Path,
        voice: &Voice,
    ) -> crate::error::Result<RunOn> {
        let out = Layout::of(file).runner_out();
        let count = self.restarts.get(&n).map_or(0, |r| r.count) + 1;
        if count > MAX_STARTS {
            self.restarts.remove(&n);
            return Ok(RunOn::TooOften { out });
        }
        voice.say(&format!("parallel: step {n}'s loop runs on"));
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let printed_before = std::fs::metadata(&out).map_or(0, |md| md.len());
        let spawned = spawn_runner_seen(file)?;
        if let Spawned::Ended(status) = spawned
            && !status.success()
            && lock::holder(file).is_none()
            && std::fs::read_to_string(file).unwrap_or_default() == text
        {
            self.restarts.remove(&n);
            let said = printed_since(&out, printed_before);
            return Ok(RunOn::CannotStart(if said.is_empty() {
                format!("its runner exited at once ({status}) and printed nothing")
            } else {
                crate::text::one_line(&said, 400)
            }));
        }
        let due = std::time::Instant::now() + backoff(count);
        self.restarts.insert(n, Restarts { count, due });
        Ok(RunOn::Started)
    }

    /// Step `n` is merged: its worktree and branch go if the integration branch holds their
    /// work (else they are kept, and said). Its record is the runner's to remove.
    pub(super) fn clean_up(&self, m: &M1, n: u32, voice: &Voice) {
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = m.parallel.branch.clone().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let branch_there = git::commit_of(&self.workdir, &format!("refs/heads/{branch}")).is_some();
        if branch_there || wt.join(".git").exists() {
            match git::remove(&self.workdir, &wt, &branch, &integration) {
                Ok(()) => voice.say(&format!(
                    "parallel: step {n}'s worktree and {branch} removed"
                )),
                Err(why) => voice.say(&format!(
                    "parallel: step {n}'s worktree {} and {branch} are kept: {why}",
                    wt.display()
                )),
            }
        }
        crash::point("parallel-after-cleanup");
    }

    /// Step `n` is dropped (SKIPPED, or set DONE by hand before it was merged): its loop stops
    /// if it runs, what its agent left is committed on its branch, which is kept if it holds
    /// work the integration branch lacks, and its worktree goes. `true`: the branch is kept.
    pub(super) fn take_down(&self, m: &M1, n: u32, voice: &Voice) -> bool {
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        if let Some(f) = run.loop_file.as_deref()
            && lock::holder(Path::new(f)).is_some()
        {
            let _ = stop::stop(Path::new(f), false);
        }
        let integration = m.parallel.branch.clone().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        if wt.join(".git").exists() {
            let _ = git::run(&wt, &["merge", "--abort"]);
            let _ = git::commit_all(
                &wt,
                &format!("loop: step {n} (skipped): what its agent left"),
            );
        }
        let has_branch = git::commit_of(&self.workdir, &format!("refs/heads/{branch}")).is_some();
        let kept = has_branch && !git::holds(&self.workdir, &integration, &branch);
        if wt.join(".git").exists()
            && let Err(why) = git::run(
                &self.workdir,
                &["worktree", "remove", "--force", &wt.display().to_string()],
            )
        {
            voice.say(&format!(
                "parallel: step {n}'s worktree {} is kept: {why}",
                wt.display()
            ));
        }
        if has_branch && !kept {
            let _ = git::run(&self.workdir, &["branch", "-D", &branch]);
        }
        kept
    }

    /// Worktrees of the loop's steps that `m` does not name (a hand edit can make one): said,
    /// never removed.
    pub(super) fn reconcile_worktrees(&self, m: &M1, voice: &Voice) {
        let Some(integration) = m.parallel.branch.clone() else {
            return;
        };
        let known: Vec<&str> = m
            .parallel
            .runs
            .values()
            .filter_map(|r| r.branch.as_deref())
            .collect();
        let list =
            git::run(&self.workdir, &["worktree", "list", "--porcelain"]).unwrap_or_default();
        let mut path = String::new();
        for line in list.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                p.clone_into(&mut path);
            } else if let Some(b) = line.strip_prefix("branch refs/heads/")
                && b.starts_with(&format!("{integration}-step-"))
                && !known.contains(&b)
            {
                voice.say(&format!(
                    "parallel: worktree {path} on {b} is not in M1.md: kept as it is (`git \
                     worktree remove {path}` once you know it holds nothing you need)"
                ));
            }
        }
    }

    /// Every step is DONE or SKIPPED and none is in flight: the project's checkout gets the
    /// result if it is still where the integration branch began ([`AtOnce::land`]), and the
    /// merge worktree goes. Each part is done again or found done after a crash.
    pub(super) fn finish(&self, m: &M1) -> Landed {
        crash::point("parallel-before-finish");
        let landed = match (m.parallel.branch.clone(), m.parallel.base.clone()) {
            (Some(branch), Some(base)) => self.land(&branch, &base),
            _ => Landed::Nothing,
        };
        let merge = Layout::dir(&self.state_dir).merge_worktree(&self.id(m));
        if merge.exists() {
            let _ = git::run(
                &self.workdir,
                &[
                    "worktree",
                    "remove",
                    "--force",
                    &merge.display().to_string(),
                ],
            );
        }
        let _ = git::run(&self.workdir, &["worktree", "prune"]);
        crash::point("parallel-after-finish");
        landed
    }

    /// The integration branch `branch`, begun at `base`, into the project: fast-forwarded (or
    /// found so after a crash), the branch then removed; else where it is, and why.
    fn land(&self, branch: &str, base: &str) -> Landed {
        let Some(tip) = git::commit_of(&self.workdir, &format!("refs/heads/{branch}")) else {
            // Removed after a fast-forward a crash cut short of the DONE write.
            return Landed::InProject;
        };
        if tip == base {
            let _ = git::run(&self.workdir, &["branch", "-D", branch]);
            return Landed::Nothing;
        }
        let head = git::commit_of(&self.workdir, "HEAD").unwrap_or_default();
        let done = head == tip || git::fast_forward(&self.workdir, branch, base).is_ok();
        if done {
            let _ = git::run(&self.workdir, &["branch", "-D", branch]);
            return Landed::InProject;
        }
        let why = git::fast_forward(&self.workdir, branch, base)
            .err()
            .unwrap_or_default();
        Landed::OnBranch {
            branch: branch.to_owned(),
            why,
        }
    }
}

/// The loops of `m`'s steps that are not merged yet: each step, and its M1.md.
pub(super) fn unmerged(m: &M1) -> Vec<(u32, String)> {
    m.parallel
        .runs
        .iter()
        .filter(|(_, r)| r.merged.is_none())
        .filter_map(|(n, r)| Some((*n, r.loop_file.clone()?)))
        .collect()
}

/// Starts of a step's loop by one runner of this loop, without a person's `loop resume`
/// between them, before it halts: its runner is meant to carry its step to the end, so each
/// start after the first is one that ended early (it died, or was killed).
pub(super) const MAX_STARTS: u32 = 5;

/// The wait before the start after the `count`-th: 250 ms, doubled each time, at most 8 s.
fn backoff(count: u32) -> std::time::Duration {
    std::time::Duration::from_millis(250 << count.saturating_sub(1).min(5))
}

/// What became of a step's runner just started.
#[derive(Debug)]
enum Spawned {
    /// It holds the loop (or one already did), or has not ended yet.
    Running,
    /// It ended before it was seen holding the loop, with this status.
    Ended(std::process::ExitStatus),
}

/// What a runner printed into `out` past its first `from` bytes: its last lines, trimmed.
fn printed_since(out: &Path, from: u64) -> String {
    use std::io::{Read as _, Seek as _};
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(out)
        && f.seek(std::io::SeekFrom::Start(from)).is_ok()
    {
        let _ = f.take(64 * 1024).read_to_string(&mut text);
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(3)..].join(" ")
}

/// Starts a runner of the step's loop at `file` in the background, unless one drives it, and
/// waits (briefly) until it holds the loop or has ended: so the next look sees it driven, not
/// idle. It runs with this runner's environment: a step's loop tells nobody itself (it has a
/// `PARENT`), but a runner of this loop it revives must tell the person as this one does.
pub(super) fn spawn_runner(file: &Path) -> crate::error::Result<()> {
    spawn_runner_seen(file).map(drop)
}

/// [`spawn_runner`], saying whether the runner ended before it held the loop.
fn spawn_runner_seen(file: &Path) -> crate::error::Result<Spawned> {
    if lock::holder(file).is_some() {
        return Ok(Spawned::Running);
    }
    let mut child = crate::runner::detach::background_runner(file)?
        .spawn()
        .context("while starting a step's runner")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = Spawned::Running;
    while std::time::Instant::now() < deadline {
        if lock::holder(file).is_some() {
            break;
        }
        if let Some(status) = child.try_wait().ok().flatten() {
            seen = Spawned::Ended(status);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    drop(child);
    Ok(seen)
}

/// The loop at step `n`'s path is not its own: set aside (renamed, never removed), so the
/// step starts a loop of its own there.
pub(super) fn set_aside(m: &M1, n: u32, voice: &Voice) -> crate::error::Result<()> {
    let Some(file) = m.parallel.runs.get(&n).and_then(|r| r.loop_file.clone()) else {
        return Ok(());
    };
    let dir = Path::new(&file)
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let aside = dir.with_extension(format!("set-aside-{}", Utc::now().format("%Y%m%dT%H%M%S")));
    std::fs::rename(&dir, &aside)
        .with_context(|| format!("while setting {} aside", dir.display()))?;
    voice.say(&format!(
        "parallel: the loop at step {n}'s path ({}) is not this loop's; set aside as {}, \
         and step {n} starts a loop of its own",
        dir.display(),
        aside.display()
    ));
    Ok(())
}

/// Stops the loops `running` (step, M1.md) whose runners run.
pub(super) fn stop_loops(running: &[(u32, String)]) {
    for (_, f) in running {
        let f = Path::new(f);
        if f.exists() && lock::holder(f).is_some() {
            let _ = stop::stop(f, false);
        }
    }
}
