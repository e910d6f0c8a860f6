//! One pipeline for every kind of run (the planning call, a step's attempt, a review; see
//! [`engine::RunKind`]): the ledger is consulted, the run recorded before it starts
//! (write-ahead), its task started through the exec bridge, watched, observed when it ends,
//! concluded by the engine (VERIFY run when it asks for it), and the conclusion recorded.

use anyhow::Context;
use chrono::Utc;

use super::unwritable::supervisor_waits;
use super::{Runner, crash};
use crate::agent::{self, Invocation, Session};
use crate::bridge::{self, FireRequest, TaskReport, TaskState};
use crate::engine::{self, Conclusion, RunKind, RunOnRecord, RunSpec, SessionPlan, SpawnFacts};
use crate::exit::Status as Exit;
use crate::verify;

impl Runner {
    /// Starts run `spec`: record it first (write-ahead), then start its task.
    pub(super) fn start_run(&mut self, spec: &RunSpec) -> crate::error::Result<Option<Exit>> {
        if self.adopt_unjudged()? {
            return Ok(None);
        }
        let m = self.view();
        if spec.kind == RunKind::Attempt
            && let Some((e, edits)) = self.ledger.lost_pass(&m, spec.step)
        {
            let (task, step) = (e.task_id.clone(), spec.step);
            self.commit(&edits)?;
            self.voice.say(&format!(
                "ledger: step {step} passed as task {task}, but M1.md no longer said so (a save \
                 of an older text); its record is put back and it is not run again"
            ));
            return Ok(None);
        }
        if spec.kind == RunKind::Attempt {
            // A step of a loop that runs its steps at once goes on from what it merged so far.
            self.catch_up_with_parent(&m, spec.step);
        }
        let (session_id, resumed) = match &spec.session {
            SessionPlan::Fresh => (agent::new_session_id(), false),
            SessionPlan::Resume(id) => (id.clone(), true),
        };
        let prompt = self.prompt(spec.kind, &m, spec.step, spec.number, resumed);
        let run = RunOnRecord {
            kind: spec.kind,
            step: spec.step,
            task_id: bridge::new_task_id(),
            number: spec.number,
            session_id: Some(session_id.clone()),
        };
        // A setting the agent cannot honour stops the loop before anything is recorded.
        let inv = match self.invocation(&run, resumed, &prompt)? {
            Ok(inv) => inv,
            Err(exit) => return Ok(Some(exit)),
        };
        let task_id = run.task_id.clone();
        // A step whose work is to be committed once DONE: the tree as it begins, first.
        let commit = engine::commit::wanted(
            &m,
            &self.settings.caps(&m),
            spec.kind,
            spec.step,
            super::git::in_repo(&self.workdir),
        ) && self.note_tree_before_step(&m, spec.step, &task_id)?;
        let points = spec.kind.crash_points();
        crash::point(points.before_spawn_write);
        let t = engine::started(&SpawnFacts {
            kind: spec.kind,
            step: spec.step,
            attempt: spec.number,
            review_number: self.ledger.reviews_of(spec.step) + 1,
            task_id: &task_id,
            session_id: &session_id,
            command: &prompt,
            git_head: (spec.kind != RunKind::Review)
                .then(|| super::git::head(&self.workdir))
                .flatten(),
            new_loop_id: (m.loop_id.as_deref() != Some(self.loop_id.as_str()))
                .then_some(self.loop_id.as_str()),
            commit,
            superseded: match spec.kind {
                RunKind::Attempt => engine::gate::superseded_by_run(&m, spec.step),
                RunKind::Plan | RunKind::Review => Vec::new(),
            },
            now: Utc::now(),
        });
        self.apply(&t)?;
        crash::point(points.after_spawn_write);
        self.fire(&run, inv)?;
        if let Some(p) = points.after_fire {
            crash::point(p);
        }
        Ok(None)
    }

    /// How the agent is called for `run`, as its kind says, in its session (`resumed` or a new
    /// one with that id); or, when the agent cannot honour a setting of the loop, the loop
    /// halted WAITING saying which (the exit).
    fn invocation(
        &mut self,
        run: &RunOnRecord,
        resumed: bool,
        prompt: &str,
    ) -> crate::error::Result<Result<Invocation, Exit>> {
        let m = self.view();
        let session_id = run.session_id.clone().unwrap_or_default();
        let session = if resumed {
            Session::Resume(session_id)
        } else {
            Session::New(session_id)
        };
        let kind = self.backend_of(&m, run.kind, run.step);
        let mut cfg = run.kind.agent_config(self.settings.agent_on(&m, kind), &m);
        cfg.confined = self.settings.sandbox(&m).mode != crate::m1::SandboxMode::Off;
        cfg.files_dir =
            Some(std::path::absolute(&self.state_dir).unwrap_or(self.state_dir.clone()));
        let backend = agent::backend_for(kind);
        let caps = self.settings.caps(&m);
        let capped = caps.max_cost_usd.is_some();
        // What is left of the loop's cap goes to the run, so the cap holds within it.
        if capped && agent::dollar_cap_refused(backend, true).is_none() {
            cfg.max_budget_usd = engine::run_budget(&m, &caps, cfg.max_budget_usd);
        }
        let called = match agent::dollar_cap_refused(backend, capped) {
            Some(refused) => Err(refused),
            None => backend.invocation(&cfg, prompt, &session),
        };
        // A loop confined by a sandbox that cannot start here never runs unconfined.
        let called = called.and_then(|inv| {
            self.sandbox_ready()
                .map(|()| inv)
                .map_err(|why| agent::Refused {
                    setting: "AGENT.SANDBOX".into(),
                    why,
                })
        });
        match called {
            Ok(inv) if run.kind.gets_hooks() => {
                let exe = std::env::current_exe().context("while finding the loop binary")?;
                Ok(Ok(match backend.hook_settings(&exe) {
                    Some(settings) => {
                        backend.with_hooks(inv, &self.agent_settings(&settings)?, &exe)
                    }
                    None => inv,
                }))
            }
            Ok(inv) => Ok(Ok(inv)),
            Err(refused) if refused.setting == "AGENT.SANDBOX" => {
                let reason = format!("the loop's sandbox cannot start here: {}", refused.why);
                let how = "install bubblewrap, or set AGENT.SANDBOX: off in M1.md (the agent then \
                           runs with your whole authority), then `loop resume`";
                self.halt(&reason, how).map(Err)
            }
            Err(refused) => {
                let reason = format!("the agent ({}) cannot honour {refused}", backend.name());
                let how = format!("change {} in M1.md, then `loop resume`", refused.setting);
                self.halt(&reason, &how).map(Err)
            }
        }
    }

    /// Starts the task of `run`, whose record is written, as `inv` calls its agent.
    fn fire(&mut self, run: &RunOnRecord, inv: Invocation) -> crate::error::Result<()> {
        // What the call reads besides its prompt (a backend's policy), there before it starts.
        inv.write_files()
            .context("while writing the files of the agent's call")?;
        let m = self.view();
        let caps = self.settings.caps(&m);
        let session_id = run.session_id.clone().unwrap_or_default();
        let task_id = run.task_id.as_str();
        let file = std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone());
        let mut env = inv.env_set;
        env.push(("LOOP_STEP".into(), run.step.to_string()));
        env.push(("LOOP_ATTEMPT".into(), run.number.to_string()));
        env.push(("LOOP_TASK_ID".into(), task_id.to_string()));
        env.push(("LOOP_FILE".into(), file.display().to_string()));
        env.push(("LOOP_ID".into(), self.loop_id.clone()));
        if run.kind == RunKind::Review {
            env.push(("LOOP_REVIEW".into(), "1".into()));
        }
        env.push(("LOOP_SESSION_ID".into(), session_id.clone()));
        env.extend(self.traceparent(task_id));
        env.extend(self.settings.agent_env.iter().cloned());
        let program = inv.program.clone();
        let mut command = vec![inv.program];
        command.extend(inv.args);
        let req = FireRequest {
            command,
            timeout: Some(caps.step_timeout),
            idle_timeout: caps.idle_timeout,
            idle_exempt_marker: Some(
                agent::backend_for(self.backend_of(&m, run.kind, run.step))
                    .answered_marker()
                    .into(),
            ),
            cwd: Some(self.workdir.clone()),
            stdin: None,
            input: Some(inv.input),
            env,
            env_remove: inv.env_remove,
            env_keep: None,
            confined: false,
            hand_back: false,
            // Should this runner die while the run goes on, its end brings the runner back.
            on_exit: Self::revive_command(&file, task_id),
            on_exit_unless_held: Some(super::lock::path_for(&file)),
        }
        // Every agent run (planning, attempt, review) starts here: the agent needs none of
        // the loop's own credentials.
        .without_loop_credentials();
        let confined = super::confine::RunOf::Agent {
            writes: run.kind == RunKind::Attempt,
            backend: self.backend_of(&m, run.kind, run.step),
            program: &program,
        };
        let req = self
            .confine(req, confined, &bridge::task_dir(&self.state_dir, task_id))
            .map_err(|why| anyhow::anyhow!("the loop's sandbox cannot start: {why}"))?;
        if run.kind == RunKind::Review {
            self.note_tree_before_review(task_id)?;
        }
        // Noted in the ledger before it exists: no runner's death leaves a task it lacks. A
        // task started again (its start never happened) is noted once.
        if self.ledger.entry(task_id).is_none() {
            self.ledger.started(
                task_id,
                (run.step, run.number),
                &session_id,
                run.kind == RunKind::Review,
            )?;
        }
        crash::point("before-fire");
        let log = bridge::task_dir(&self.state_dir, task_id).join(bridge::SUPERVISOR_LOG);
        let mut told = std::time::Duration::ZERO;
        bridge::fire_published(
            &self.state_dir,
            task_id,
            &req,
            &mut || crash::point("after-publish"),
            &mut |waited| {
                // A supervisor that waits for room for its command's output (a full disk):
                // said at once, then every half minute.
                if told.is_zero() || waited >= told + std::time::Duration::from_secs(30) {
                    told = waited;
                    supervisor_waits(&self.voice, task_id, waited, &log);
                }
            },
        )
        .map_err(|e| e.context(format!("while starting task {task_id}")))?;
        crash::point("after-fire");
        Ok(())
    }

    /// What the supervisor of task `task_id` runs when it ends with nobody driving the loop.
    fn revive_command(file: &std::path::Path, task_id: &str) -> Vec<String> {
        std::env::current_exe()
            .ok()
            .filter(|_| super::revive::by_steps())
            .map(|exe| {
                vec![
                    exe.display().to_string(),
                    "--file".into(),
                    file.display().to_string(),
                    "__revive".into(),
                    "--by".into(),
                    format!("the supervisor of task {task_id}"),
                ]
            })
            .unwrap_or_default()
    }

    /// A run is on record: re-adopt it if it runs, conclude it if it ended, start it if the
    /// start never happened, count an attempt if it was lost.
    pub(super) fn await_run(&mut self, run: &RunOnRecord) -> crate::error::Result<Option<Exit>> {
        let task_id = run.task_id.as_str();
        if let Some(j) = self.ledger.judged(task_id).cloned() {
            // Judged before (M1.md was saved from a text older than that record, or the
            // runner died between the two writes): the same record again, not a new judgement.
            // The text is older than every judgement after it too (a review of the step, the
            // next steps): those go back as well, in order, or they would be made again.
            let (edits, ids) = self.ledger.record_since(task_id);
            self.commit(&edits)?;
            // loop.log is the record of every decision: one whose runner died before it was
            // logged is logged now, as the decision it was.
            let logged = std::fs::read_to_string(crate::layout::Layout::dir(&self.state_dir).log())
                .unwrap_or_default();
            for id in std::iter::once(task_id).chain(ids.iter().map(String::as_str)) {
                if let Some(line) = self.ledger.judged(id).and_then(|j| j.log.clone())
                    && !line.is_empty()
                    && !logged.contains(&line.chars().take(60).collect::<String>())
                {
                    self.voice.say(&format!(
                        "{line} (from the task ledger: the runner that decided it died before \
                         it was logged)"
                    ));
                }
            }
            let also = if ids.is_empty() {
                String::new()
            } else {
                format!(
                    ", with those of the tasks judged after it ({})",
                    ids.join(", ")
                )
            };
            self.voice.say(&format!(
                "ledger: task {task_id} was judged already ({}); its record is put back{also}; \
                 nothing is judged or run again",
                j.verdict
            ));
            return Ok(None);
        }
        if bridge::take_back_unstarted(&self.state_dir, task_id)
            .map_err(|e| e.context(format!("while looking at task {task_id}")))?
        {
            self.voice.say(&format!(
                "resume: task {task_id} was published but never handed to a supervisor (its \
                 runner died first): its agent never ran, so no attempt is counted"
            ));
        }
        if !bridge::exists(&self.state_dir, task_id) {
            self.start_recorded(run)?;
        }
        let dir = bridge::task_dir(&self.state_dir, task_id);
        self.watch.set_task_dir(Some(&dir));
        let watched = self.watch_task(run);
        self.watch.set_task_dir(None);
        self.voice.live().end();
        match watched? {
            Ok(report) => self.conclude(run, &report),
            Err(stop) => self.stop_now(&stop).map(Some),
        }
    }

    /// Starts a run whose start was recorded (write-ahead) but never happened: a runner died
    /// between the record and the start.
    fn start_recorded(&mut self, run: &RunOnRecord) -> crate::error::Result<()> {
        let m = self.view();
        let mut run = run.clone();
        let session_id = run
            .session_id
            .get_or_insert_with(agent::new_session_id)
            .clone();
        let resumed = run.kind.resumable() && engine::resumes(&m, run.step, Some(&session_id));
        self.voice.say(&format!(
            "resume: {}task {} was recorded but never started; starting it now",
            if run.kind == RunKind::Review {
                "review "
            } else {
                ""
            },
            run.task_id
        ));
        let prompt = self.prompt(run.kind, &m, run.step, run.number, resumed);
        match self.invocation(&run, resumed, &prompt)? {
            Ok(inv) => self.fire(&run, inv),
            // Halted WAITING: the loop stops at its next decision.
            Err(_) => Ok(()),
        }
    }

    /// Concludes a run whose task ended and records the conclusion: observe what it left
    /// (I/O), ask the engine (running VERIFY when it asks for it), carry the transition out.
    fn conclude(
        &mut self,
        run: &RunOnRecord,
        report: &TaskReport,
    ) -> crate::error::Result<Option<Exit>> {
        self.clean_up_after(&run.task_id, report)?;
        self.take_hooks_log(&run.task_id, run.step);
        let mut m = self.view();
        // What the agent left is its step's work: noted before VERIFY can write anything.
        if run.kind == RunKind::Attempt && m.result(run.step).commit_pending {
            self.note_work_after_run(run.step, &run.task_id)?;
        }
        let caps = self.settings.caps(&m);
        let mut observed = self.observe(run, report, &m);
        let allowed = self.settings.agent_for(&m).allowed_tools;
        let verify_cmd = self.settings.verify(&m);
        let cx = engine::Context {
            caps: &caps,
            allowed_tools: &allowed,
            verify: verify_cmd.as_deref(),
            notify_each_step: self.settings.notify_each_step,
        };
        let mut verified = None;
        let (t, verdict, restart) = loop {
            match engine::conclude(run, &m, &observed, verified.as_ref(), &cx) {
                Conclusion::Recorded {
                    transition,
                    verdict,
                    restart,
                } => break (transition, verdict, restart),
                Conclusion::Verify => {
                    let cmd = verify_cmd.clone().unwrap_or_default();
                    match self.verify(run, &cmd, caps.step_timeout)? {
                        verify::Outcome::Stopped => {
                            let stop = self.stop_cause();
                            return self.stop_now(&stop).map(Some);
                        }
                        outcome => verified = Some(outcome),
                    }
                    // VERIFY may commit what the agent left (`git add … && git commit`).
                    observed.git_head = super::git::head(&self.workdir);
                    // It may have run for minutes, and a person may have edited M1.md
                    // meanwhile (set the step SKIPPED): the run is concluded on the file as it
                    // is now, not as it was before VERIFY.
                    if let Some(exit) = self.refresh()? {
                        return Ok(Some(exit));
                    }
                    m = self.view();
                }
            }
        };
        self.record_judged(&run.task_id, verdict, &t.edits, &t.log)?;
        let points = run.kind.crash_points();
        crash::point(points.before_record_write);
        let exit = self.apply(&t)?;
        crash::point(points.after_record_write);
        if restart {
            // Recorded (held for the next spawn's write), the fresh session not begun.
            crash::point("after-restart");
        }
        Ok(exit)
    }

    /// Runs the VERIFY command of a step whose attempt reported done.
    fn verify(
        &mut self,
        run: &RunOnRecord,
        cmd: &str,
        timeout: std::time::Duration,
    ) -> crate::error::Result<verify::Outcome> {
        crash::point("before-verify");
        self.voice
            .say(&format!("verify: step {}: running `{cmd}`", run.step));
        let state_dir = self.state_dir.clone();
        let env = [
            ("LOOP_STEP".to_string(), run.step.to_string()),
            ("LOOP_ATTEMPT".to_string(), run.number.to_string()),
        ];
        let workdir = self.workdir.clone();
        let how = verify::Run {
            command: cmd,
            cwd: &workdir,
            env: &env,
            state_dir: &state_dir,
            step_task: &run.task_id,
            timeout,
        };
        let started = Utc::now();
        let outcome = self.verify_confined(&how, &workdir);
        self.trace_verify(run, started, &outcome);
        outcome
    }

    /// What the loop's hooks in task `task_id` handed back (into its hand-back directory, the
    /// one place of the loop's a confined run may write), into the loop's log. Whatever runs in
    /// the run can write that file too, so it is read as the run's word: without following a
    /// link, and only lines the loop's hooks write are taken, each remade by the runner from
    /// what it checked (a run's line can never read as the loop's own).
    fn take_hooks_log(&self, task_id: &str, step: u32) {
        let layout = crate::layout::Layout::dir(&self.state_dir);
        let task = layout.task(task_id);
        let rel = std::path::Path::new(crate::bridge::HAND_BACK_DIR).join("hooks.log");
        let text = match crate::named_file::read_beneath(&task, &rel, 1 << 20) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(crate::named_file::ReadError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                return;
            }
            Err(e) => {
                self.voice.say(&format!(
                    "hooks: task {task_id}'s hooks.log was not read ({e}): a run wrote it, and \
                     the loop takes no link or special file from a run"
                ));
                return;
            }
        };
        let mut refused = 0;
        for line in text.lines() {
            match compaction_trigger(line) {
                Some(trigger) => self.voice.say(&format!(
                    "compaction: step {step}'s session (task {task_id}) starts compacting its \
                     context ({trigger})"
                )),
                None => refused += 1,
            }
        }
        if refused > 0 {
            self.voice.say(&format!(
                "hooks: task {task_id} handed back {refused} line(s) that the loop's hooks do not \
                 write; not taken"
            ));
        }
        let _ = std::fs::remove_file(task.join(rel));
    }

    /// Ends what is left of a task before it is judged: a LOST task's processes (its
    /// supervisor and guardian died), and processes that left its group, which are named.
    fn clean_up_after(&mut self, task_id: &str, report: &TaskReport) -> crate::error::Result<()> {
        if report.state == TaskState::Lost {
            // Ended, and confirmed dead, before any retry can start beside them.
            let after = bridge::kill(&self.state_dir, task_id, super::KILL_GRACE).map_err(|e| {
                e.context(format!("while ending what is left of lost task {task_id}"))
            })?;
            self.voice.say(&format!(
                "lost: task {task_id} lost its supervisor; its processes were ended ({})",
                after.line()
            ));
        }
        if !report.killed_outside_group.is_empty() {
            self.voice.say(&format!(
                "cleanup: task {task_id} left processes outside its process group; ended: {}",
                bridge::describe(&report.killed_outside_group)
            ));
        }
        Ok(())
    }

    /// What was started cannot be unstarted: before a start, a task of this loop that no
    /// judgement covers (an attempt or a review run that M1.md lost track of) is taken back
    /// on record, never started a second time (see [`engine::ledger`]). Whether there was one.
    fn adopt_unjudged(&mut self) -> crate::error::Result<bool> {
        let Some(e) = self.ledger.unjudged().cloned() else {
            return Ok(false);
        };
        self.apply(&engine::adopted(&super::watching::on_record(&e)))?;
        Ok(true)
    }
}

/// The trigger of a line the loop's `PreCompact` hook hands back (`<time> compacting
/// TRIGGER`, a few lower-case letters); `None` for any other line.
fn compaction_trigger(line: &str) -> Option<&str> {
    let (_, said) = line.split_once(' ')?;
    let trigger = said
        .strip_prefix(crate::layout::HOOK_COMPACTING)?
        .strip_prefix(' ')?;
    (!trigger.is_empty() && trigger.len() <= 16 && trigger.bytes().all(|b| b.is_ascii_lowercase()))
        .then_some(trigger)
}
