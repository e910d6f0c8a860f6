//! Steps at once (`LIMITS.PARALLEL` above 1), in git worktrees, with one serial merge queue.
//!
//! Each running step is a loop of its own: a one-step `M1.md` under this loop's state
//! directory (`steps/step-N/M1.md`), whose `WORKDIR` is the step's worktree on its own branch,
//! made from the integration branch's head at that moment. So every promise of a loop holds
//! per step as it always did (its attempts, session, timeouts, VERIFY, review, gates, crash and
//! revival), and this loop only schedules, merges and cleans up:
//!
//! - **Ready queue.** A step starts once the steps `PLAN.AFTER` lists for it are DONE (merged)
//!   and a slot is free; a step it does not list waits for nothing. Its record
//!   (`PARALLEL.STEP_N`: worktree, branch, base, its loop) is written before the worktree and
//!   its loop exist; on every look a record is carried out again where a crash cut it short.
//! - **One serial merge queue, verified.** A step whose loop is DONE has what its agent left
//!   committed, is merged onto the integration head in the loop's own merge worktree, and
//!   `VERIFY` runs there on the merged result; the integration branch moves only when that
//!   passes, and only if it is still where the merge began (a compare-and-swap of the ref).
//! - **Conflicts and red merges** send the step back: the integration head is merged into its
//!   worktree (conflict markers and all), and its loop runs it again in the same session with
//!   what went wrong as its error. Past `MAX_RETRIES` of those, this loop waits, naming the
//!   step, the files and the branch.
//! - **Nothing deleted that holds work.** A worktree and its branch go only once `git cherry`
//!   says the integration branch has every change of it; git refuses to remove a dirty one.
//! - The project's checkout is never merged into, reset or checked out while the loop runs; at
//!   the end it is fast-forwarded if it has not moved and has no change to a tracked file, else
//!   the loop says which branch holds the result.

mod git;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use chrono::Utc;

use super::Runner;
use super::stopfile;
use crate::engine;
use crate::exit::Status as Exit;
use crate::m1::keys::{AgentKey, LimitKey, ResultKey, Top};
use crate::m1::{Document, Edit, M1, Status, StepState, Store};

/// How long the queue sleeps between looks when no event wakes it (the watched directories
/// of its steps' loops say when one changes; this is the fallback where events do not arrive).
const POLL_FALLBACK: Duration = Duration::from_secs(2);

/// The path of `PARALLEL.KEY`, or of `PARALLEL.STEP_N.KEY`.
fn at(step: Option<u32>, key: &str) -> Vec<String> {
    let mut p = vec!["PARALLEL".to_owned()];
    if let Some(n) = step {
        p.push(format!("STEP_{n}"));
    }
    p.push(key.to_owned());
    p
}

/// Whether a step is closed: DONE or SKIPPED.
fn closed(state: StepState) -> bool {
    matches!(state, StepState::Done | StepState::Skipped)
}

/// How VERIFY on a merged result came out.
#[derive(Debug)]
enum Checked {
    Passed,
    /// A stop ended it.
    Stopped,
    /// What it said, last.
    Failed(String),
}

/// What a step's own loop says.
#[derive(Debug)]
enum Child {
    /// Not there yet (a crash between the record and its creation).
    Missing,
    /// Its runner drives it.
    Driven,
    Status(Box<M1>),
}

impl Runner {
    /// Whether this loop runs its steps at once: `LIMITS.PARALLEL` above 1, a plan to run, and
    /// a git repository to make worktrees in.
    /// Steps already running at once are carried on whatever `PARALLEL` says now (a step is
    /// never started a second time in the project itself).
    pub(super) fn runs_parallel(&self, m: &M1) -> bool {
        (self.settings.parallel(m) > 1 || !m.parallel.runs.is_empty())
            && !m.plan.steps.is_empty()
            && m.status == Status::Running
            && m.current.task_id.is_none()
    }

    /// Why the project cannot run steps at once (no git repository, or no commit to branch
    /// from), as a halt; `None` when it can.
    pub(super) fn cannot_run_parallel(&self, m: &M1) -> Option<engine::Transition> {
        // The same test as `loop start --parallel`'s.
        if super::git::head(&self.workdir).is_some() {
            return None;
        }
        let what = if git::is_repo(&self.workdir) {
            "has no commit to branch the steps from"
        } else {
            "is not a git repository"
        };
        Some(engine::halt(
            0,
            &format!(
                "LIMITS.PARALLEL {} runs steps in git worktrees, but {} {what}",
                self.settings.parallel(m),
                self.workdir.display()
            ),
            "make it one with a first commit (`git init && git commit --allow-empty -m start`), \
             or set LIMITS.PARALLEL: 1 in M1.md, then `loop resume`",
        ))
    }

    /// Drives a parallel loop until it is DONE, or waits for a person.
    ///
    /// # Errors
    /// I/O and git failures the loop cannot go on from.
    pub(super) fn drive_parallel(&mut self) -> crate::error::Result<Exit> {
        self.reconcile_worktrees();
        loop {
            if let Some(stop) = stopfile::requested(&self.state_dir) {
                return self.stop_parallel(&stop);
            }
            if let Some(exit) = self.refresh()? {
                return Ok(exit);
            }
            let m = self.view();
            if m.status != Status::Running {
                return Ok(match m.status {
                    Status::Done => Exit::Ok,
                    Status::Failed => Exit::Failed,
                    _ => Exit::Waiting,
                });
            }
            if let Some(exit) = self.look_at_steps(&m)? {
                return Ok(exit);
            }
            let m = self.view();
            if let Some(t) = self.over_caps(&m) {
                if m.parallel.runs.is_empty() {
                    return self.apply(&t).map(|e| e.unwrap_or(Exit::Waiting));
                }
            } else {
                self.start_ready(&m)?;
            }
            let m = self.view();
            let open = m.plan.steps.iter().any(|s| !closed(s.state));
            if !open && m.parallel.runs.is_empty() {
                self.watch.set_step_dirs(&[]);
                self.finish_parallel(&m)?;
                let m = self.view();
                let t = engine::complete(&m);
                self.commit(&t.edits)?;
                self.say(&t.log);
                self.carry_out(&m, &t.effects);
                return Ok(Exit::Ok);
            }
            // Woken by a change in a step's loop (its M1.md written, its runner gone), by a
            // hand edit or a stop; costs nothing meanwhile.
            let dirs: Vec<PathBuf> = m
                .parallel
                .runs
                .values()
                .filter_map(|r| {
                    Path::new(r.loop_file.as_deref()?)
                        .parent()
                        .map(Path::to_path_buf)
                })
                .filter(|d| d.is_dir())
                .collect();
            self.watch.set_step_dirs(&dirs);
            let _ = self.watch.wait(POLL_FALLBACK);
        }
    }

    /// Each recorded step: carried out where a crash cut its start short, merged once its loop
    /// is DONE, or this loop waits when its loop needs a person.
    fn look_at_steps(&mut self, m: &M1) -> crate::error::Result<Option<Exit>> {
        for (&n, run) in &m.parallel.runs {
            if run.merged.is_some() {
                self.clean_up_step(n)?;
                continue;
            }
            let file = PathBuf::from(run.loop_file.clone().unwrap_or_default());
            let child = child_of(&file);
            // Stopped with this loop, its loop is resumed with it: the mark goes once that loop
            // has moved on from its stop (its runner starts in the background, so it may not
            // have at the next look).
            let moved_on = match &child {
                Child::Driven => true,
                Child::Status(c) => c.status != Status::Waiting,
                Child::Missing => false,
            };
            if run.stopped && moved_on {
                self.commit(&[Edit::Remove(at(Some(n), "STOPPED"))])?;
            }
            match child {
                Child::Missing => self.start_step(m, n)?,
                Child::Driven => {}
                Child::Status(c) => match c.status {
                    Status::Done => {
                        if let Some(exit) = self.merge_step(n)? {
                            return Ok(Some(exit));
                        }
                    }
                    Status::Running | Status::Idle => spawn_runner(&file)?,
                    // Stopped with this loop: resumed with it.
                    Status::Waiting if run.stopped => spawn_runner(&file)?,
                    Status::Waiting | Status::Failed => {
                        let why = c.last_action.clone().unwrap_or_default();
                        let t = engine::halt(
                            n,
                            &format!(
                                "step {n} waits in its own loop ({}): {why}",
                                c.status.as_str()
                            ),
                            &format!(
                                "decide it there (`loop --file {} status`, then what its \
                                 NEXT_ACTION says), then `loop resume` here",
                                file.display()
                            ),
                        );
                        return self.apply(&t);
                    }
                },
            }
        }
        Ok(None)
    }

    /// What keeps new steps from starting: more steps than `MAX_STEPS`, or `MAX_COST_USD` spent
    /// (the merged steps' cost and what the running ones spent so far). The steps running go
    /// on; once none runs, the loop halts with it.
    fn over_caps(&self, m: &M1) -> Option<engine::Transition> {
        let caps = self.settings.caps(m);
        let (reason, how) = engine::over_max_steps(m, &caps).or_else(|| {
            // The running steps' loops are read only where a cap on dollars asks for them.
            caps.max_cost_usd?;
            let running: f64 = m
                .parallel
                .runs
                .values()
                .filter(|r| r.merged.is_none())
                .filter_map(|r| r.loop_file.as_deref())
                .filter_map(|f| crate::m1::load(Path::new(f)).ok())
                .map(|d| engine::spent(&d.view()))
                .sum();
            engine::over_max_cost(engine::spent(m) + running, &caps)
        })?;
        Some(engine::halt(0, &reason, &how))
    }

    /// Worktrees of the loop's steps that M1.md does not name (a crash between a worktree and
    /// its record cannot make one, but a hand edit can): said, never removed.
    fn reconcile_worktrees(&self) {
        let m = self.view();
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
                self.say(&format!(
                    "parallel: worktree {path} on {b} is not in M1.md: kept as it is (`git \
                     worktree remove {path}` once you know it holds nothing you need)"
                ));
            }
        }
    }

    /// This loop runs one step of a parallel loop (`PARENT`) and its runner is about to end: the
    /// parallel loop, should its runner have died meanwhile, comes back to merge this step
    /// (as a step's supervisor revives a runner that died while it ran).
    pub(super) fn revive_parent(&self) {
        let Some(parent) = self.view().parent else {
            return;
        };
        if !super::revive::by_steps() {
            return;
        }
        let by = format!("the loop of one of its steps ({})", self.file.display());
        if let Err(e) = super::revive::revive(Path::new(&parent), &by) {
            self.say(&format!(
                "revive: the parallel loop {parent} could not be revived: {e}"
            ));
        }
    }

    /// Starts every step that is ready, as slots allow.
    fn start_ready(&mut self, m: &M1) -> crate::error::Result<()> {
        let slots = usize::try_from(self.settings.parallel(m)).unwrap_or(1);
        let mut running = m.parallel.runs.len();
        let done = |n: u32| m.plan.steps.iter().any(|s| s.n == n && closed(s.state));
        for s in &m.plan.steps {
            if running >= slots {
                break;
            }
            let ready = s.state == StepState::Pending
                && !m.parallel.runs.contains_key(&s.n)
                && m.plan
                    .after
                    .get(&s.n)
                    .is_none_or(|deps| deps.iter().all(|d| done(*d)));
            if ready {
                self.start_step(m, s.n)?;
                running += 1;
            }
        }
        Ok(())
    }

    /// The integration branch, made (and recorded first) when the loop has none yet.
    fn integration(&mut self) -> crate::error::Result<String> {
        let m = self.view();
        if let Some(b) = m.parallel.branch.clone() {
            if git::commit_of(&self.workdir, &format!("refs/heads/{b}")).is_none() {
                let base = m.parallel.base.clone().unwrap_or_default();
                git::run(&self.workdir, &["branch", &b, &base]).map_err(anyhow::Error::msg)?;
            }
            return Ok(b);
        }
        let base = git::commit_of(&self.workdir, "HEAD").ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no commit to branch from: commit once, then `loop resume`",
                self.workdir.display()
            )
        })?;
        let branch = format!("loop/{}", self.loop_id);
        self.commit(&[
            Edit::Set(at(None, "BRANCH"), branch.clone()),
            Edit::Set(at(None, "BASE"), base.clone()),
        ])?;
        git::run(&self.workdir, &["branch", &branch, &base]).map_err(anyhow::Error::msg)?;
        self.say(&format!(
            "parallel: integration branch {branch} from {}",
            git::short(&base)
        ));
        Ok(branch)
    }

    /// Starts step `n`: its record first, then its worktree, then its loop (each step done
    /// only if not done already).
    fn start_step(&mut self, m: &M1, n: u32) -> crate::error::Result<()> {
        let integration = self.integration()?;
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let root = self.state_dir.join("parallel");
        let worktree = run
            .worktree
            .map_or_else(|| root.join(format!("step-{n}")), PathBuf::from);
        let worktree = std::path::absolute(&worktree).unwrap_or(worktree);
        let branch = run
            .branch
            .unwrap_or_else(|| format!("{integration}-step-{n}"));
        let loop_file = run.loop_file.map_or_else(
            || root.join(format!("step-{n}.loop")).join("M1.md"),
            PathBuf::from,
        );
        let loop_file = std::path::absolute(&loop_file).unwrap_or(loop_file);
        let base = match run.base {
            Some(b) => b,
            None => git::commit_of(&self.workdir, &format!("refs/heads/{integration}"))
                .ok_or_else(|| anyhow::anyhow!("the integration branch {integration} is gone"))?,
        };
        self.commit(&[
            Edit::StepState(n, StepState::Running),
            Edit::Set(at(Some(n), "WORKTREE"), worktree.display().to_string()),
            Edit::Set(at(Some(n), "BRANCH"), branch.clone()),
            Edit::Set(at(Some(n), "BASE"), base.clone()),
            Edit::Set(at(Some(n), "LOOP"), loop_file.display().to_string()),
        ])?;
        super::crash::point("parallel-after-record");
        crate::dirs::create_state_dir(&root)
            .with_context(|| format!("while creating {}", root.display()))?;
        git::worktree(&self.workdir, &worktree, &branch, &base).map_err(anyhow::Error::msg)?;
        super::crash::point("parallel-after-worktree");
        if !loop_file.exists() {
            let text = self.step_loop_text(&self.view(), n, &worktree)?;
            let dir = loop_file.parent().unwrap_or(Path::new("."));
            crate::dirs::create_state_dir(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
            Store::create(&loop_file, &text)?;
        }
        super::crash::point("parallel-after-step-loop");
        spawn_runner(&loop_file)?;
        super::crash::point("parallel-after-spawn");
        self.say(&format!(
            "parallel: step {n} runs in {} on {branch} from {}",
            worktree.display(),
            git::short(&base)
        ));
        Ok(())
    }

    /// The `M1.md` of step `n`'s own loop: this loop's goal, constraints and settings, its plan
    /// with step `n` to run (the steps merged already DONE, the others SKIPPED: not its work),
    /// working in `worktree`.
    fn step_loop_text(&self, m: &M1, n: u32, worktree: &Path) -> crate::error::Result<String> {
        let agent = self.settings.agent_for(m);
        let caps = self.settings.caps(m);
        let exact = crate::duration::exact;
        let mut edits = vec![
            Top::Goal.set(m.goal.clone()),
            Edit::SetSteps(
                m.plan
                    .steps
                    .iter()
                    .map(|s| {
                        let state = match s.state {
                            _ if s.n == n => StepState::Pending,
                            StepState::Done => StepState::Done,
                            _ => StepState::Skipped,
                        };
                        (state, s.text.clone())
                    })
                    .collect(),
            ),
            crate::m1::keys::PlanKey::CurrentStep.set(n.to_string()),
            Top::NextAction.set(format!("Start step {n}")),
            Top::Workdir.set(worktree.display().to_string()),
            Top::Parent.set(
                std::path::absolute(&self.file)
                    .unwrap_or_else(|_| self.file.clone())
                    .display()
                    .to_string(),
            ),
            Top::LoopId.set(super::new_loop_id()),
            Top::StartedAt.set(Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            LimitKey::MaxRetries.set(caps.max_retries.to_string()),
            // Its plan is this one's (the other steps DONE or SKIPPED), whatever its length.
            LimitKey::MaxSteps.set(
                caps.max_steps
                    .max(u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX))
                    .to_string(),
            ),
            LimitKey::StepTimeout.set(exact(caps.step_timeout)),
            AgentKey::Program.set(agent.program.clone()),
            AgentKey::Backend.set(agent.backend.as_str()),
        ];
        if let Some(c) = &m.constraints {
            edits.push(Top::Constraints.set(c.clone()));
        }
        if let Some(v) = self.settings.verify(m) {
            edits.push(Top::Verify.set(v));
        }
        if m.review {
            edits.push(Top::Review.set("on"));
        }
        if let Some(idle) = caps.idle_timeout {
            edits.push(LimitKey::IdleTimeout.set(exact(idle)));
        }
        if let Some(mode) = agent.permission_mode {
            edits.push(AgentKey::PermissionMode.set(mode.as_str()));
        }
        edits.push(if agent.allowed_tools.is_empty() {
            AgentKey::AllowedTools.remove()
        } else {
            AgentKey::AllowedTools.set(crate::m1::typed::format_tools(&agent.allowed_tools))
        });
        edits.extend(optional_agent_keys(m, &agent));
        let mut doc = Document::parse(super::start::TEMPLATE)
            .map_err(|e| anyhow::anyhow!("templates/M1.md: {e}"))?;
        for e in &edits {
            doc.apply(e);
        }
        Ok(doc.render())
    }
}

/// The `AGENT:` keys a step's loop takes from this one where it sets them.
fn optional_agent_keys(m: &M1, agent: &crate::agent::AgentConfig) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (key, value) in [
        (AgentKey::Model, agent.model.clone()),
        (AgentKey::MaxTurns, agent.max_turns.map(|t| t.to_string())),
        (
            AgentKey::MaxBudgetUsd,
            agent.max_budget_usd.map(|u| u.to_string()),
        ),
        (AgentKey::ReviewModel, m.agent.review_model.clone()),
        (
            AgentKey::ReviewBackend,
            m.agent.review_backend.map(|b| b.as_str().into()),
        ),
        (
            AgentKey::Fallback,
            m.agent.fallback.map(|b| b.as_str().into()),
        ),
    ] {
        if let Some(v) = value {
            edits.push(key.set(v));
        }
    }
    edits
}

impl Runner {
    /// The merge queue's turn for step `n`, whose loop is DONE: commit what it left, merge it
    /// onto the integration head, VERIFY the result, move the integration branch, record the
    /// step DONE, and clean up what the integration branch now holds. A conflict or a red
    /// VERIFY sends the step back; past `MAX_RETRIES` of those, the loop waits.
    fn merge_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = self.integration()?;
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let text = m
            .plan
            .steps
            .iter()
            .find(|s| s.n == n)
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let fail = anyhow::Error::msg;
        // Merged before (a save of an older M1.md put the step's record back): recorded again
        // from the step loop's own note of it, nothing merged twice.
        let note = merged_note(run.loop_file.as_deref());
        if let Some(commit) = note.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            self.record_merged(n, commit.trim())?;
            self.clean_up_step(n)?;
            return Ok(None);
        }
        if wt.join(".git").exists() {
            git::commit_all(&wt, &format!("loop: step {n}: {text}")).map_err(fail)?;
        }
        super::crash::point("parallel-after-commit");
        let old = git::commit_of(&self.workdir, &format!("refs/heads/{integration}"))
            .ok_or_else(|| anyhow::anyhow!("the integration branch {integration} is gone"))?;
        let tip = git::commit_of(&self.workdir, &format!("refs/heads/{branch}"))
            .ok_or_else(|| anyhow::anyhow!("step {n}'s branch {branch} is gone"))?;
        // Merged before a crash: the integration branch has it already.
        let merged = if git::is_ancestor(&self.workdir, &tip, &old) {
            old.clone()
        } else {
            let merge_wt = self.state_dir.join("parallel").join("merge");
            let merge_wt = std::path::absolute(&merge_wt).unwrap_or(merge_wt);
            let message = format!("loop: merge step {n}: {text}");
            match git::merge(&self.workdir, &merge_wt, &old, &branch, &message).map_err(fail)? {
                git::Merged::Conflict(files) => {
                    let why = format!(
                        "merging step {n} into {integration} conflicted in {}",
                        files.join(", ")
                    );
                    return self.send_back(n, &why, &files);
                }
                git::Merged::At(sha) => {
                    super::crash::point("parallel-after-merge");
                    match self.verify_merged(&m, n, &merge_wt)? {
                        Checked::Passed => {}
                        // The queue's next look sees the stop; the branch has not moved.
                        Checked::Stopped => return Ok(None),
                        Checked::Failed(failure) => {
                            let why = format!(
                                "VERIFY failed on step {n} merged with {integration}: {failure}"
                            );
                            return self.send_back(n, &why, &[]);
                        }
                    }
                    super::crash::point("parallel-after-verify");
                    git::move_branch(&self.workdir, &integration, &sha, &old).map_err(fail)?;
                    sha
                }
            }
        };
        super::crash::point("parallel-after-ref-move");
        if let Some(p) = &note {
            std::fs::write(p, format!("{merged}\n"))
                .with_context(|| format!("while writing {}", p.display()))?;
        }
        self.record_merged(n, &merged)?;
        super::crash::point("parallel-after-merged-write");
        self.clean_up_step(n)?;
        Ok(None)
    }

    /// Step `n` is merged: its worktree and branch go if the integration branch holds their
    /// work (else they are kept, and said), then its record.
    fn clean_up_step(&mut self, n: u32) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = m.parallel.branch.clone().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let branch_there = git::commit_of(&self.workdir, &format!("refs/heads/{branch}")).is_some();
        if branch_there || wt.join(".git").exists() {
            match git::remove(&self.workdir, &wt, &branch, &integration) {
                Ok(()) => self.say(&format!(
                    "parallel: step {n}'s worktree and {branch} removed"
                )),
                Err(why) => self.say(&format!(
                    "parallel: step {n}'s worktree {} and {branch} are kept: {why}",
                    wt.display()
                )),
            }
        }
        super::crash::point("parallel-after-cleanup");
        self.commit(&[Edit::Remove(vec!["PARALLEL".into(), format!("STEP_{n}")])])
    }

    /// VERIFY on step `n` merged, in the merge worktree `wt` (passed when none is set). It
    /// runs as a step's VERIFY does ([`crate::verify::run`]): a task of the exec bridge, ended
    /// with its whole group at `STEP_TIMEOUT` or a stop.
    fn verify_merged(&self, m: &M1, n: u32, wt: &Path) -> crate::error::Result<Checked> {
        use crate::verify::Outcome;
        let Some(cmd) = self.settings.verify(m) else {
            return Ok(Checked::Passed);
        };
        let state_dir = self.state_dir.clone();
        let outcome = crate::verify::run(
            &cmd,
            wt,
            &[("LOOP_STEP".to_owned(), n.to_string())],
            &self.state_dir,
            &format!("merge-step-{n}"),
            self.settings.caps(m).step_timeout,
            &mut || stopfile::requested(&state_dir).is_some(),
        )?;
        let tail = |t: &str| crate::text::one_line(t.trim(), 300);
        Ok(match outcome {
            Outcome::Passed => Checked::Passed,
            Outcome::Stopped => Checked::Stopped,
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

    /// Step `n` is merged at `commit`: DONE, with what its own loop recorded.
    fn record_merged(&mut self, n: u32, commit: &str) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let child = run
            .loop_file
            .as_deref()
            .and_then(|f| crate::m1::load(Path::new(f)).ok())
            .map(|d| d.view());
        let r = child
            .as_ref()
            .and_then(|c| c.results.get(&n).cloned())
            .unwrap_or_default();
        let mut edits = vec![
            Edit::StepState(n, StepState::Done),
            ResultKey::Commit.set(n, git::short(commit)),
            ResultKey::Verified.set(n, "true"),
            ResultKey::Exit.set(n, r.exit.unwrap_or(0).to_string()),
            ResultKey::Attempts.set(n, r.attempts.unwrap_or(1).to_string()),
            ResultKey::Summary.set(n, r.summary.clone().unwrap_or_else(|| "done".into())),
            ResultKey::CostUsd.set(n, format!("{:.4}", r.cost_usd.unwrap_or(0.0))),
            Edit::Set(at(Some(n), "MERGED"), commit.to_owned()),
        ];
        if let Some(sid) = &r.session_id {
            edits.push(ResultKey::SessionId.set(n, sid.clone()));
        }
        if let Some(review) = &r.review {
            edits.push(ResultKey::Review.set(n, review.to_string()));
        }
        if let Some(t) = r.tokens {
            edits.push(ResultKey::Tokens.set(n, t.to_string()));
        }
        if let Some(f) = &run.loop_file {
            edits.push(ResultKey::Report.set(n, f.clone()));
        }
        edits.push(Top::LastAction.set(format!(
            "Step {n} merged as {} and verified",
            git::short(commit)
        )));
        edits.push(
            Top::NextAction.set("Merge the next step that is done, start those that are ready"),
        );
        self.commit(&edits)?;
        self.say(&format!(
            "merge: step {n} merged into the integration branch as {}, VERIFY passed",
            git::short(commit)
        ));
        if self.settings.notify_each_step {
            let summary = r.summary.clone().unwrap_or_else(|| "done".into());
            self.carry_out(&m, &[engine::Effect::StepDone { step: n, summary }]);
        }
        Ok(())
    }

    /// A merge that conflicted (`files`) or failed VERIFY sends step `n` back: the integration
    /// head is merged into its worktree (conflict markers left for the agent), and its loop
    /// runs it again in the same session, told `why`. Past `MAX_RETRIES`, this loop waits.
    fn send_back(
        &mut self,
        n: u32,
        why: &str,
        files: &[String],
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let fails = run.merge_fails + 1;
        let branch = run.branch.clone().unwrap_or_default();
        let max = self.settings.caps(&m).max_retries;
        self.commit(&[Edit::Set(at(Some(n), "MERGE_FAILS"), fails.to_string())])?;
        self.say(&format!("merge: {why} ({fails} of MAX_RETRIES {max})"));
        if fails >= max {
            let t = engine::halt(
                n,
                &format!("{why}; {fails} merges of step {n} failed"),
                &format!(
                    "merge {branch} into {} by hand (or fix step {n}'s work in {}), then \
                     `loop resume`",
                    m.parallel.branch.clone().unwrap_or_default(),
                    run.worktree.clone().unwrap_or_default()
                ),
            );
            return self.apply(&t);
        }
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let integration = m.parallel.branch.clone().unwrap_or_default();
        // The step goes on from the integration head: a clean merge is committed, a conflict
        // stays in the files for the agent to resolve.
        let merged =
            git::run_as_author(&wt, &["merge", "--no-ff", "--no-edit", "-q", &integration]);
        let told = if files.is_empty() {
            format!("{why}. The integration branch is merged into your worktree now: fix it.")
        } else if merged.is_err() {
            format!(
                "{why}. The integration branch is merged into your worktree with conflict \
                 markers in {}: resolve them keeping the work of both sides, and commit.",
                files.join(", ")
            )
        } else {
            format!("{why}. The integration branch is merged into your worktree now.")
        };
        let file = PathBuf::from(run.loop_file.clone().unwrap_or_default());
        let (mut store, _) =
            Store::open(&file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        store
            .commit(&[
                Edit::Status(Status::Running),
                Edit::StepState(n, StepState::Pending),
                ResultKey::Error.set(n, crate::text::one_line(&told, 600)),
                Top::NextAction.set(format!("Run step {n} again: {why}")),
            ])
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        spawn_runner(&file)?;
        Ok(None)
    }

    /// Every step is merged: the project's checkout gets the result if it is still where the
    /// integration branch began, else the loop says where the result is.
    fn finish_parallel(&mut self, m: &M1) -> crate::error::Result<()> {
        let (Some(branch), Some(base)) = (m.parallel.branch.clone(), m.parallel.base.clone())
        else {
            return Ok(());
        };
        match git::fast_forward(&self.workdir, &branch, &base) {
            Ok(()) => {
                let _ = git::run(&self.workdir, &["branch", "-d", &branch]);
                self.commit(&[Edit::Remove(vec!["PARALLEL".into()])])?;
                self.say(&format!(
                    "parallel: the project is fast-forwarded to {branch}'s result"
                ));
            }
            Err(why) => self.say(&format!(
                "parallel: the result is on branch {branch}; the project was left as it is ({why})"
            )),
        }
        let merge = self.state_dir.join("parallel").join("merge");
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
        Ok(())
    }

    /// A stop: every step's loop is stopped, then this one.
    fn stop_parallel(&mut self, stop: &engine::Stop) -> crate::error::Result<Exit> {
        let m = self.view();
        let marks: Vec<Edit> = m
            .parallel
            .runs
            .keys()
            .map(|n| Edit::Set(at(Some(*n), "STOPPED"), "true".into()))
            .collect();
        self.commit(&marks)?;
        for run in m.parallel.runs.values() {
            if let Some(f) = &run.loop_file
                && Path::new(f).exists()
            {
                let _ = super::stop::stop(Path::new(f), false);
            }
        }
        let steps: Vec<u32> = m.parallel.runs.keys().copied().collect();
        let t = engine::stopped_parallel(&steps, stop);
        self.apply(&t).map(|e| e.unwrap_or(Exit::Waiting))
    }
}

/// Where a step's loop notes the integration commit its step was merged as (beside its
/// M1.md): what makes a merge happen once, whatever text of M1.md is saved over the record.
fn merged_note(loop_file: Option<&str>) -> Option<PathBuf> {
    Some(Path::new(loop_file?).parent()?.join("merged"))
}

/// The loop of a step, as it stands.
fn child_of(file: &Path) -> Child {
    if file.as_os_str().is_empty() || !file.exists() {
        return Child::Missing;
    }
    let Ok(doc) = crate::m1::load(file) else {
        return Child::Driven;
    };
    let m = doc.view();
    // DONE is the last thing a step's runner writes: its step can be merged while the runner
    // exits (the release of its lock makes no file event to wake on).
    if m.status != Status::Done && super::lock::holder(file).is_some() {
        return Child::Driven;
    }
    Child::Status(Box::new(m))
}

/// Starts a runner of the step's loop at `file` in the background, unless one drives it.
fn spawn_runner(file: &Path) -> crate::error::Result<()> {
    if super::lock::holder(file).is_some() {
        return Ok(());
    }
    // This loop tells the person; its steps' loops do not each (they know they have a parent),
    // but keep the Telegram settings for this loop's runner, should one of them revive it.
    super::start::background_runner(file)?
        .spawn()
        .context("while starting a step's runner")?;
    Ok(())
}
