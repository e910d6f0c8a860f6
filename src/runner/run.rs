//! One pipeline for every kind of run (the planning call, a step's attempt, a review; see
//! [`engine::RunKind`]): the ledger is consulted, the run recorded before it starts
//! (write-ahead), its task started through the exec bridge, watched, observed when it ends,
//! concluded by the engine (VERIFY run when it asks for it), and the conclusion recorded.
//! What is recorded, and when, is decided here; what only I/O can do or tell (the agent's
//! call, the task's start, what it left, VERIFY, a step's commit) is asked of
//! [`super::step_io::StepIo`].

use chrono::Utc;

use super::{Runner, crash};
use crate::agent::{self, Invocation};
use crate::bridge::{self, TaskReport};
use crate::engine::commit::Due;
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
            self.at_once
                .catch_up_with_parent(&m, spec.step, &self.voice);
        }
        let (session_id, resumed) = match &spec.session {
            SessionPlan::Fresh => (agent::new_session_id(), false),
            SessionPlan::Resume(id) => (id.clone(), true),
        };
        let run = RunOnRecord {
            kind: spec.kind,
            step: spec.step,
            task_id: bridge::new_task_id(),
            number: spec.number,
            session_id: Some(session_id.clone()),
        };
        let prompt = self
            .io
            .prompt(&self.settings, &self.voice, &m, &run, resumed);
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
        ) && self
            .io
            .note_tree_before_step(&self.voice, &m, spec.step, &task_id)?;
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
        let m = self.view();
        self.io
            .fire(&m, &self.settings, &self.voice, &mut self.ledger, &run, inv)?;
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
        match self
            .io
            .invocation(&m, &self.settings, run, resumed, prompt)?
        {
            Ok(inv) => Ok(Ok(inv)),
            Err(refused) if refused.setting == "AGENT.SANDBOX" => {
                let reason = format!("the loop's sandbox cannot start here: {}", refused.why);
                let how = "install bubblewrap, or set AGENT.SANDBOX: off in M1.md (the agent then \
                           runs with your whole authority), then `loop resume`";
                self.halt(&reason, how).map(Err)
            }
            Err(refused) => {
                let backend = agent::backend_for(self.settings.backend_of(&m, run.kind, run.step));
                let reason = format!("the agent ({}) cannot honour {refused}", backend.name());
                let how = format!("change {} in M1.md, then `loop resume`", refused.setting);
                self.halt(&reason, &how).map(Err)
            }
        }
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
        let prompt = self
            .io
            .prompt(&self.settings, &self.voice, &m, &run, resumed);
        match self.invocation(&run, resumed, &prompt)? {
            Ok(inv) => {
                let m = self.view();
                self.io
                    .fire(&m, &self.settings, &self.voice, &mut self.ledger, &run, inv)
            }
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
        self.io.clean_up_after(&self.voice, &run.task_id, report)?;
        self.io.take_hooks_log(&self.voice, &run.task_id, run.step);
        let mut m = self.view();
        // What the agent left is its step's work: noted before VERIFY can write anything.
        if run.kind == RunKind::Attempt && m.result(run.step).commit_pending {
            self.io
                .note_work_after_run(&self.voice, run.step, &run.task_id)?;
        }
        let caps = self.settings.caps(&m);
        let mut observed = self
            .io
            .observe(&self.settings, &self.voice, run, report, &m);
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
                    let sandbox = self.settings.sandbox(&m);
                    match self
                        .io
                        .verify(&sandbox, &self.voice, run, &cmd, caps.step_timeout)?
                    {
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

    /// A DONE step owed its commit: made (or found made before a crash) and recorded, or
    /// its mark dropped.
    pub(super) fn settle_commit(&mut self, due: &Due) -> crate::error::Result<Option<Exit>> {
        let t = match due {
            Due::Drop { step, why } => crate::engine::commit::dropped(*step, why),
            Due::Commit(step) => {
                let m = self.view();
                let made = self.io.commit_step(&self.voice, &m, *step);
                crate::engine::commit::recorded(*step, &made)
            }
        };
        self.apply(&t)
    }
}
