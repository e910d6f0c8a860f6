//! Starting, carrying on, stopping and taking down the loops of steps that run at once: each
//! write point in the order a crash can cut it (record, worktree, loop, runner), each made
//! only if not made already.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::Utc;

use super::super::Runner;
use super::git;
use crate::engine::{self, parallel::RunNames};
use crate::exit::Status as Exit;
use crate::layout::Layout;
use crate::m1::keys::{AgentKey, LimitKey, ParallelKey, RunKey, Top};
use crate::m1::{Document, Edit, KeyPath, M1, StepState, Store};

impl Runner {
    /// The loop's identity, as its steps' loops are bound to it.
    pub(super) fn parallel_id(&self) -> String {
        self.view()
            .loop_id
            .clone()
            .unwrap_or_else(|| self.loop_id.clone())
    }

    /// The integration branch, made (and recorded first) when the loop has none yet.
    pub(super) fn integration(&mut self) -> crate::error::Result<String> {
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
        let branch = format!("loop/{}", self.parallel_id());
        self.commit(&[
            ParallelKey::Branch.set(branch.clone()),
            ParallelKey::Base.set(base.clone()),
        ])?;
        git::run(&self.workdir, &["branch", &branch, &base]).map_err(anyhow::Error::msg)?;
        self.voice.say(&format!(
            "parallel: integration branch {branch} from {}",
            git::short(&base)
        ));
        Ok(branch)
    }

    /// Where step `n` runs: as recorded, or, for a new start, names nothing else uses (a
    /// later start of the same step while an earlier one's worktree or branch is kept gets
    /// the next number).
    fn names_for(&self, m: &M1, n: u32, integration: &str) -> crate::error::Result<RunNames> {
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let layout = Layout::dir(&self.state_dir);
        let id = self.parallel_id();
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

    /// Starts step `n`: its record first, then its worktree, then its loop, then its runner.
    /// What git cannot do with the record (a hand-written base it does not have) halts the
    /// loop, naming the record: never an error with nobody driving.
    pub(super) fn start_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let integration = self.integration()?;
        let m = self.view();
        let names = self.names_for(&m, n, &integration)?;
        if !m.parallel.runs.contains_key(&n) || m.parallel.runs[&n].loop_file.is_none() {
            self.apply(&engine::parallel::recorded(n, &names))?;
        }
        super::super::crash::point("parallel-after-record");
        let worktree = PathBuf::from(&names.worktree);
        if let Some(parent) = worktree.parent() {
            crate::dirs::create_state_dir(parent)
                .with_context(|| format!("while creating {}", parent.display()))?;
        }
        if let Err(why) = git::worktree(&self.workdir, &worktree, &names.branch, &names.base) {
            let t = engine::halt(
                0,
                &format!(
                    "step {n}'s worktree cannot be made from its record PARALLEL.STEP_{n}: {why}"
                ),
                &format!(
                    "fix or remove PARALLEL.STEP_{n} in M1.md (its WORKTREE, BRANCH and BASE), \
                     then `loop resume`"
                ),
            );
            return self.apply(&t).map(|e| e.or(Some(Exit::Waiting)));
        }
        super::super::crash::point("parallel-after-worktree");
        let loop_file = PathBuf::from(&names.loop_file);
        if !loop_file.exists() {
            let text = self.step_loop_text(&self.view(), n, &worktree)?;
            let dir = loop_file.parent().unwrap_or(Path::new("."));
            crate::dirs::create_state_dir(dir)
                .with_context(|| format!("while creating {}", dir.display()))?;
            Store::create(&loop_file, &text)?;
        }
        super::super::crash::point("parallel-after-step-loop");
        spawn_runner(&loop_file)?;
        super::super::crash::point("parallel-after-spawn");
        Ok(None)
    }

    /// The `M1.md` of step `n`'s own loop, working in `worktree` (see
    /// [`engine::parallel::step_loop`]).
    fn step_loop_text(&self, m: &M1, n: u32, worktree: &Path) -> crate::error::Result<String> {
        let parent = std::path::absolute(&self.file)
            .unwrap_or_else(|_| self.file.clone())
            .display()
            .to_string();
        let spec = engine::parallel::StepLoop {
            step: n,
            worktree: &worktree.display().to_string(),
            parent_file: &parent,
            parent_id: &self.parallel_id(),
            loop_id: &super::super::start::new_loop_id(),
            started_at: &Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            max_steps: self.settings.caps(m).max_steps,
        };
        let resolved = self.runs_with(m);
        let runs_with = |p: &crate::m1::KeyPath| match resolved.get(p) {
            Some(v) => v.clone(),
            None => self.record.doc().get_at(p),
        };
        let edits = engine::parallel::step_loop(m, &spec, &runs_with);
        let mut doc = Document::parse(super::super::start::TEMPLATE)
            .map_err(|e| anyhow::anyhow!("templates/M1.md: {e}"))?;
        for e in &edits {
            doc.apply(e);
        }
        Ok(doc.render())
    }

    /// What this loop runs with, resolved as its own runs are (M1.md, else the environment,
    /// `loop.yaml`, the defaults): each `LIMITS:` and `AGENT:` setting a step's loop inherits
    /// and that is resolved beyond the file, with `None` for one it runs without. A step's
    /// loop is written with these, never with its template's defaults: it has no `loop.yaml`
    /// of its own, and a default `PROGRAM: claude` in place of the agent `LOOP_AGENT` names
    /// could not start.
    fn runs_with(&self, m: &M1) -> BTreeMap<KeyPath, Option<String>> {
        use crate::m1::typed;
        let exact = crate::duration::exact;
        let agent = self.settings.agent_for(m);
        let caps = self.settings.caps(m);
        let sandbox = self.settings.sandbox(m);
        let list = |v: &[String]| (!v.is_empty()).then(|| v.join(", "));
        let tools = (!agent.allowed_tools.is_empty()
            || crate::agent::backend_for(agent.backend)
                .default_allowed_tools()
                .is_some())
        .then(|| typed::format_tools(&agent.allowed_tools));
        let mut v: BTreeMap<KeyPath, Option<String>> = BTreeMap::new();
        for (k, value) in [
            (AgentKey::Program, Some(agent.program.clone())),
            (AgentKey::Backend, Some(agent.backend.as_str().to_owned())),
            (
                AgentKey::PermissionMode,
                agent.permission_mode.map(|p| p.as_str().to_owned()),
            ),
            (AgentKey::AllowedTools, tools),
            (AgentKey::Model, agent.model.clone()),
            (AgentKey::MaxTurns, agent.max_turns.map(|n| n.to_string())),
            (
                AgentKey::MaxBudgetUsd,
                agent.max_budget_usd.map(|n| n.to_string()),
            ),
            (
                AgentKey::ExtraArgs,
                (!agent.extra_args.is_empty()).then(|| typed::format_args(&agent.extra_args)),
            ),
            (AgentKey::Sandbox, Some(sandbox.mode.as_str().to_owned())),
        ] {
            v.insert(k.path(), value);
        }
        for (k, items) in sandbox.lists() {
            v.insert(k.path(), list(items));
        }
        for (k, value) in [
            (LimitKey::MaxRetries, Some(caps.max_retries.to_string())),
            (LimitKey::StepTimeout, Some(exact(caps.step_timeout))),
            (LimitKey::IdleTimeout, caps.idle_timeout.map(exact)),
            // Written as the exact durations above.
            (LimitKey::StepTimeoutMin, None),
            (LimitKey::IdleTimeoutMin, None),
            (LimitKey::MaxRestarts, Some(caps.max_restarts.to_string())),
            (
                LimitKey::ContextThreshold,
                Some(caps.context_threshold.to_string()),
            ),
            (LimitKey::MaxSession, caps.max_session.map(exact)),
            (LimitKey::MaxRetakes, Some(caps.max_retakes.to_string())),
        ] {
            v.insert(k.path(), value);
        }
        if let Some((_, after)) = caps.fallback {
            v.insert(LimitKey::FallbackAfter.path(), Some(exact(after)));
        }
        if let Some(verify) = self.settings.verify(m) {
            v.insert(Top::Verify.path(), Some(verify));
        }
        v
    }

    /// The loop at step `n`'s path is not its own: set aside (renamed, never removed), so the
    /// step starts a loop of its own there.
    pub(super) fn set_aside(&mut self, n: u32) -> crate::error::Result<()> {
        let m = self.view();
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
        self.voice.say(&format!(
            "parallel: the loop at step {n}'s path ({}) is not this loop's; set aside as {}, \
             and step {n} starts a loop of its own",
            dir.display(),
            aside.display()
        ));
        Ok(())
    }

    /// Step `n`'s loop runs on: the mark that it was stopped (or waited) with this loop goes
    /// first, then its runner starts. A runner that ends at once, its loop as it was, could not
    /// start: this loop halts saying why (what it printed), once, and starts it no more. Each
    /// start after the first waits longer ([`backoff`]), and past [`MAX_STARTS`] without a
    /// person's word this loop halts too: a step's loop is never started again and again.
    pub(super) fn drive_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let Some(run) = m.parallel.runs.get(&n) else {
            return Ok(None);
        };
        if run.stopped {
            self.commit(&[RunKey::Stopped.remove(n)])?;
            // A person's `loop resume`: the count begins again.
            self.at_once.restarts.remove(&n);
        }
        let Some(f) = run.loop_file.clone() else {
            return Ok(None);
        };
        let file = Path::new(&f);
        let out = Layout::of(file).runner_out();
        let count = self.at_once.restarts.get(&n).map_or(0, |r| r.count) + 1;
        if count > MAX_STARTS {
            self.at_once.restarts.remove(&n);
            let t = engine::halt(
                0,
                &format!(
                    "step {n}'s loop was started {MAX_STARTS} times, and its runner ended each \
                     time with the step unfinished"
                ),
                &format!(
                    "read what it printed ({}) and its log, fix what ends it, then `loop resume`",
                    out.display()
                ),
            );
            return self.apply(&t).map(|e| e.or(Some(Exit::Waiting)));
        }
        self.voice
            .say(&format!("parallel: step {n}'s loop runs on"));
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let printed_before = std::fs::metadata(&out).map_or(0, |md| md.len());
        let spawned = spawn_runner_seen(file)?;
        if let Spawned::Ended(status) = spawned
            && !status.success()
            && super::super::lock::holder(file).is_none()
            && std::fs::read_to_string(file).unwrap_or_default() == text
        {
            self.at_once.restarts.remove(&n);
            let said = printed_since(&out, printed_before);
            let why = if said.is_empty() {
                format!("its runner exited at once ({status}) and printed nothing")
            } else {
                crate::text::one_line(&said, 400)
            };
            let t = engine::halt(
                0,
                &format!("step {n}'s loop cannot start: {why}"),
                &format!(
                    "fix what it says (in {f} or this loop's environment), then `loop resume`"
                ),
            );
            return self.apply(&t).map(|e| e.or(Some(Exit::Waiting)));
        }
        let due = std::time::Instant::now() + backoff(count);
        self.at_once.restarts.insert(n, Restarts { count, due });
        Ok(None)
    }

    /// How long until step `n`'s loop may be started again; `None`: it may be now.
    pub(super) fn start_due(&self, n: u32) -> Option<std::time::Duration> {
        let r = self.at_once.restarts.get(&n)?;
        r.due.checked_duration_since(std::time::Instant::now())
    }

    /// Stops every step's loop that runs (marking each first, so that `loop resume` carries
    /// it on); the steps stopped.
    pub(super) fn stop_steps(&mut self, m: &M1) -> Vec<u32> {
        let running: Vec<(u32, String)> = m
            .parallel
            .runs
            .iter()
            .filter(|(_, r)| r.merged.is_none())
            .filter_map(|(n, r)| Some((*n, r.loop_file.clone()?)))
            .collect();
        let marks: Vec<Edit> = running
            .iter()
            .map(|(n, _)| RunKey::Stopped.set(*n, "true"))
            .collect();
        if let Err(e) = self.commit(&marks) {
            self.voice.say(&format!(
                "parallel: the stop marks could not be written: {e}"
            ));
        }
        for (_, f) in &running {
            if Path::new(f).exists() && super::super::lock::holder(Path::new(f)).is_some() {
                let _ = super::super::stop::stop(Path::new(f), false);
            }
        }
        running.into_iter().map(|(n, _)| n).collect()
    }

    /// Step `n`'s loop FAILED: this loop fails at it, and the steps that run stop with it.
    pub(super) fn fail_at(&mut self, n: u32, reason: &str) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let others: Vec<u32> = self
            .stop_steps(&m)
            .into_iter()
            .filter(|s| *s != n)
            .collect();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let child = super::merge::child_result(run.loop_file.as_deref(), n);
        let t = engine::parallel::failed(n, reason, &others, &child);
        self.apply(&t).map(|e| e.or(Some(Exit::Failed)))
    }

    /// Step `n` is merged: its worktree and branch go if the integration branch holds their
    /// work (else they are kept, and said), then its record.
    pub(super) fn clean_up_step(&mut self, n: u32) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = m.parallel.branch.clone().unwrap_or_default();
        let wt = PathBuf::from(run.worktree.clone().unwrap_or_default());
        let branch = run.branch.clone().unwrap_or_default();
        let branch_there = git::commit_of(&self.workdir, &format!("refs/heads/{branch}")).is_some();
        if branch_there || wt.join(".git").exists() {
            match git::remove(&self.workdir, &wt, &branch, &integration) {
                Ok(()) => self.voice.say(&format!(
                    "parallel: step {n}'s worktree and {branch} removed"
                )),
                Err(why) => self.voice.say(&format!(
                    "parallel: step {n}'s worktree {} and {branch} are kept: {why}",
                    wt.display()
                )),
            }
        }
        super::super::crash::point("parallel-after-cleanup");
        self.commit(&[Edit::Remove(crate::m1::keys::run_block(n))])
    }

    /// Step `n` is SKIPPED (there, by a decision here, or by hand), or was set DONE by hand
    /// before it was merged, which it stays: its loop stops if it runs,
    /// what its agent left is committed on its branch, which is kept if it holds work the
    /// integration branch lacks; its worktree and its record go.
    pub(super) fn drop_step(&mut self, n: u32) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        if let Some(f) = run.loop_file.as_deref()
            && super::super::lock::holder(Path::new(f)).is_some()
        {
            let _ = super::super::stop::stop(Path::new(f), false);
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
            self.voice.say(&format!(
                "parallel: step {n}'s worktree {} is kept: {why}",
                wt.display()
            ));
        }
        if has_branch && !kept {
            let _ = git::run(&self.workdir, &["branch", "-D", &branch]);
        }
        let done_by_hand = engine::by_hand::closed_while_running(&m, n) == Some(StepState::Done);
        let child = super::merge::child_result(run.loop_file.as_deref(), n);
        let t = engine::parallel::dropped(n, done_by_hand, kept.then_some(branch.as_str()), &child);
        self.apply(&t).map(drop)
    }

    /// Worktrees of the loop's steps that M1.md does not name (a hand edit can make one): said,
    /// never removed.
    pub(super) fn reconcile_worktrees(&self) {
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
                self.voice.say(&format!(
                    "parallel: worktree {path} on {b} is not in M1.md: kept as it is (`git \
                     worktree remove {path}` once you know it holds nothing you need)"
                ));
            }
        }
    }

    /// Every step is DONE or SKIPPED and none is in flight: the project's checkout gets the
    /// result if it is still where the integration branch began (else the loop says which
    /// branch holds it), the merge worktree and the integration branch go, then DONE. Each
    /// part is done again or found done after a crash.
    pub(super) fn finish_parallel(&mut self) -> crate::error::Result<Exit> {
        super::super::crash::point("parallel-before-finish");
        let m = self.view();
        let landed = match (m.parallel.branch.clone(), m.parallel.base.clone()) {
            (Some(branch), Some(base)) => self.land(&branch, &base),
            _ => engine::parallel::Landed::Nothing,
        };
        let merge = Layout::dir(&self.state_dir).merge_worktree(&self.parallel_id());
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
        super::super::crash::point("parallel-after-finish");
        self.watch.set_step_dirs(&[]);
        let m = self.view();
        let t = engine::parallel::finished(&m, &landed);
        self.tell_done(&t.edits);
        self.commit(&t.edits)?;
        self.voice.say(&t.log);
        self.carry_out(&m, &t.effects);
        Ok(Exit::Ok)
    }

    /// The integration branch `branch`, begun at `base`, into the project: fast-forwarded (or
    /// found so after a crash), the branch then removed; else where it is, and why.
    fn land(&self, branch: &str, base: &str) -> engine::parallel::Landed {
        use engine::parallel::Landed;
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

/// Starts of a step's loop by one runner of this loop, without a person's `loop resume`
/// between them, before it halts: its runner is meant to carry its step to the end, so each
/// start after the first is one that ended early (it died, or was killed).
const MAX_STARTS: u32 = 5;

/// A step's loop this runner started: how often, and when the next start may be.
#[derive(Debug, Clone)]
pub(crate) struct Restarts {
    count: u32,
    due: std::time::Instant,
}

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
    if super::super::lock::holder(file).is_some() {
        return Ok(Spawned::Running);
    }
    let mut child = super::super::start::background_runner(file)?
        .spawn()
        .context("while starting a step's runner")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = Spawned::Running;
    while std::time::Instant::now() < deadline {
        if super::super::lock::holder(file).is_some() {
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
