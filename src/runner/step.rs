//! One attempt of one step: write-ahead, spawn through the exec bridge, wait, judge, record.

use anyhow::Context;
use chrono::Utc;
use std::fmt::Write as _;

use super::{POLL, Runner, crash};
use super::{prompt, stopfile};
use crate::agent::{self, ExitInfo, Session, StreamFollower};
use crate::bridge::{self, FireRequest, TaskReport, TaskState};
use crate::engine::{self, Attempt, Facts, Judgement, OnRecord, SessionPlan, SpawnFacts, TaskEnd};
use crate::exit::Status as Exit;
use crate::m1::M1;
use crate::runner::watch::Wake;
use crate::verify;

/// Task `e` of the ledger as the running one.
fn on_record(e: &super::ledger::Entry) -> OnRecord<'_> {
    OnRecord {
        step: e.step,
        task_id: &e.task_id,
        attempt: Some(e.attempt),
        session_id: e.session_id.as_deref(),
        review: e.review,
    }
}

/// What an ended task left for the judge: how it ended, and what its agent said.
pub(super) struct Run {
    pub(super) end: TaskEnd,
    pub(super) class: Option<agent::Class>,
    pub(super) answer: String,
    denials: Vec<String>,
    background_stopped: Vec<String>,
    session_id: Option<String>,
    pub(super) cost_usd: f64,
    context_pct: Option<u32>,
    /// Compactions of its context that happened (the stream's, not the `PreCompact` hook's:
    /// the hook runs before a compaction that may fail).
    compactions: u32,
    /// Why each compaction that was tried failed.
    compactions_failed: Vec<String>,
}

impl Run {
    /// Reads the task's stream-json and stderr.
    /// `resume_model`: the `--model` a resume of its session would be called with, which
    /// decides the window its context is measured against.
    pub(super) fn read(report: &TaskReport, resume_model: Option<&str>) -> Self {
        // A task still running has no end; it is judged only once it has one (LOST if none).
        let end = report.end.clone().unwrap_or(TaskEnd::Lost);
        let stream = agent::read_stream_file(&report.stdout_path).unwrap_or_default();
        let stderr =
            String::from_utf8_lossy(&std::fs::read(&report.stderr_path).unwrap_or_default())
                .into_owned();
        // A killed run's class tells whether the CLI was retrying a refused key at the time.
        let class = matches!(end, TaskEnd::Exited { .. } | TaskEnd::Killed).then(|| {
            let exit = ExitInfo {
                code: report.exit_code,
                signal: report.signal,
                killed_by_runner: end == TaskEnd::Killed,
            };
            agent::classify(&exit, &stderr, &stream, Utc::now())
        });
        let result = stream.result.as_ref();
        Self {
            end,
            class,
            answer: result.and_then(|r| r.result.clone()).unwrap_or_default(),
            denials: result
                .map(|r| r.permission_denials.clone())
                .unwrap_or_default(),
            cost_usd: stream.cost_usd.unwrap_or(0.0),
            context_pct: stream.context_pct(resume_model),
            background_stopped: stream.background_stopped.clone(),
            compactions: stream.compactions,
            compactions_failed: stream.compactions_failed,
            session_id: stream.session_id,
        }
    }
}

/// A step that has run this long gets its agent's pid recorded in CURRENT.
const PID_RECORD_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// How long the step's session had run before this attempt (seconds; 0 when the attempt
/// began a fresh one), and with it.
fn session_time(m: &M1, step: u32, elapsed: std::time::Duration) -> (f64, std::time::Duration) {
    // The session goes on only if this attempt resumed it.
    let resumed = resumes(m, step, m.current.session_id.as_deref());
    let before = m.result(step).session_s.filter(|_| resumed).unwrap_or(0.0);
    let total =
        std::time::Duration::try_from_secs_f64(before + elapsed.as_secs_f64()).unwrap_or_default();
    (before, total)
}

/// Whether an attempt in `session` continues the step's recorded session (`--resume`) rather
/// than starting a fresh one.
fn resumes(m: &M1, step: u32, session: Option<&str>) -> bool {
    session.is_some() && m.results.get(&step).and_then(|r| r.session_id.as_deref()) == session
}

impl Runner {
    /// The prompt of the next attempt of `step`, rebuilt from M1.md alone (so a spawn that a
    /// crash interrupted can be redone identically).
    fn prompt_for(&self, m: &M1, step: u32, attempt: u32, resumed: bool) -> String {
        let caps = self.settings.caps(m);
        if step == 0 {
            let mut p = prompt::plan(m, caps.max_steps);
            if let Some(err) = m.results.get(&0).and_then(|r| r.error.as_deref()) {
                let _ = writeln!(p, "\n\nYour previous answer was not usable: {err}");
            }
            return p;
        }
        let note = crate::layout::Layout::dir(&self.state_dir).handoff(step);
        let note = note.display().to_string();
        let r = m.result(step);
        if let Some(q) = &r.blocked {
            return prompt::answered(m, step, q, &note);
        }
        let error = r.error.as_deref();
        if let Some(why) = r.handoff.as_deref().filter(|_| !resumed) {
            return prompt::handoff(m, step, why, &self.handoff_note(m, step), &note);
        }
        match (r.interrupted.as_deref(), error) {
            (Some(why), _) if resumed => prompt::interrupted(m, step, why, error, &note),
            (None, Some(err)) if resumed => {
                let nth = engine::failures(attempt, engine::uncounted(m, step));
                prompt::fix(m, step, (nth, caps.max_retries), err, &note)
            }
            _ => prompt::step(m, step, &note),
        }
    }

    /// The settings file every agent call of this loop gets (its hooks), written when missing
    /// or out of date; its path.
    fn agent_settings(&self) -> crate::error::Result<String> {
        let path = crate::layout::Layout::dir(&self.state_dir).agent_settings();
        let exe = std::env::current_exe().context("while finding the loop binary")?;
        let text = serde_json::to_string_pretty(&agent::hook_settings(&exe))
            .context("while encoding the agent settings")?;
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, &text)
                .with_context(|| format!("while writing {}", path.display()))?;
        }
        let abs = std::path::absolute(&path).unwrap_or(path);
        Ok(abs.display().to_string())
    }

    /// What a fresh session of `step` is handed: the agent's own note (from `STEP_RESTART`),
    /// then what the loop knows: the last failure, the last answer, the files changed.
    fn handoff_note(&self, m: &M1, step: u32) -> String {
        let layout = crate::layout::Layout::dir(&self.state_dir);
        let mut note = String::new();
        if let Ok(own) = std::fs::read_to_string(layout.handoff(step)) {
            let _ = writeln!(
                note,
                "Your note from the previous session:\n{}\n",
                own.trim()
            );
        }
        let r = m.results.get(&step);
        if let Some(err) = r.and_then(|r| r.error.as_deref()) {
            let _ = writeln!(note, "What failed last: {err}\n");
        }
        let last = r
            .and_then(|r| r.report.as_ref())
            .and_then(|p| agent::read_stream_file(&self.state_dir.join(p)).ok())
            .and_then(|s| s.result.and_then(|r| r.result));
        if let Some(text) = last.filter(|t| !t.trim().is_empty()) {
            let _ = writeln!(
                note,
                "The previous session's last answer:\n{}\n",
                text.trim()
            );
        }
        if let Some(stat) = crate::runner::git::diff_stat(&self.workdir) {
            let _ = writeln!(
                note,
                "Files changed in the working tree (git diff --stat):\n{stat}"
            );
        }
        note
    }

    /// Starts an attempt: record it first (write-ahead), then fire.
    pub(super) fn spawn(
        &mut self,
        step: u32,
        attempt: u32,
        session: &SessionPlan,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        if self.adopt_unjudged()? {
            return Ok(None);
        }
        if let Some((e, edits)) = self.ledger.lost_pass(&m, step) {
            let task = e.task_id.clone();
            self.commit(&edits)?;
            self.say(&format!(
                "ledger: step {step} passed as task {task}, but M1.md no longer said so (a save \
                 of an older text); its record is put back and it is not run again"
            ));
            return Ok(None);
        }
        let (session_id, resumed) = match session {
            SessionPlan::Fresh => (agent::new_session_id(), false),
            SessionPlan::Resume(id) => (id.clone(), true),
        };
        let prompt = self.prompt_for(&m, step, attempt, resumed);
        let task_id = bridge::new_task_id();
        crash::point("before-spawn-write");
        let recorded_id = m.loop_id.clone();
        let t = engine::spawn(&SpawnFacts {
            step,
            attempt,
            task_id: &task_id,
            session_id: &session_id,
            command: &prompt,
            git_head: crate::runner::git::head(&self.workdir),
            new_loop_id: (recorded_id.as_deref() != Some(self.loop_id.as_str()))
                .then_some(self.loop_id.as_str()),
            now: Utc::now(),
        });
        self.apply(&t)?;
        crash::point("after-spawn-write");
        self.fire(step, attempt, &task_id, &session_id, resumed, &prompt)?;
        Ok(None)
    }

    pub(super) fn fire(
        &mut self,
        step: u32,
        attempt: u32,
        task_id: &str,
        session_id: &str,
        resumed: bool,
        prompt: &str,
    ) -> crate::error::Result<()> {
        self.fire_as(step, attempt, (task_id, session_id), resumed, prompt, false)
    }

    /// How the agent is called for `step`: a step's agent as the settings say; a reviewer and
    /// the planning call, which change nothing, offered only tools that read.
    fn agent_config(&self, m: &M1, step: u32, review: bool) -> agent::AgentConfig {
        let cfg = self.settings.agent_for(m);
        if review {
            super::review::reviewer(cfg, m)
        } else if step == 0 {
            cfg.read_only()
        } else {
            cfg
        }
    }

    /// Starts an agent run: a step's attempt, or (`review`) a review of the step, read-only,
    /// in a fresh session, outside the task ledger (reviews are not attempts).
    pub(super) fn fire_as(
        &mut self,
        step: u32,
        attempt: u32,
        (task_id, session_id): (&str, &str),
        resumed: bool,
        prompt: &str,
        review: bool,
    ) -> crate::error::Result<()> {
        let m = self.view();
        let caps = self.settings.caps(&m);
        let session = if resumed {
            Session::Resume(session_id.to_string())
        } else {
            Session::New(session_id.to_string())
        };
        let mut inv = agent::invocation(&self.agent_config(&m, step, review), prompt, &session);
        // The hooks keep a step's agent on its step; a reviewer is told its task by its prompt
        // alone (the step's verdict lines would contradict it).
        if !review {
            inv = inv.with_settings(&self.agent_settings()?);
        }
        let mut env = inv.env_set;
        let file = std::path::absolute(&self.file).unwrap_or_else(|_| self.file.clone());
        env.push(("LOOP_STEP".into(), step.to_string()));
        env.push(("LOOP_ATTEMPT".into(), attempt.to_string()));
        env.push(("LOOP_TASK_ID".into(), task_id.to_string()));
        env.push(("LOOP_FILE".into(), file.display().to_string()));
        env.push(("LOOP_ID".into(), self.loop_id.clone()));
        if review {
            env.push(("LOOP_REVIEW".into(), "1".into()));
        }
        env.push(("LOOP_SESSION_ID".into(), session_id.to_string()));
        env.extend(self.settings.agent_env.iter().cloned());
        let mut command = vec![inv.program];
        command.extend(inv.args);
        let req = FireRequest {
            command,
            timeout: Some(caps.step_timeout),
            idle_timeout: caps.idle_timeout,
            idle_exempt_marker: Some(agent::RESULT_MARKER.into()),
            cwd: Some(self.workdir.clone()),
            stdin: None,
            input: Some(inv.input),
            env,
            env_remove: inv.env_remove,
            // Should this runner die while the step runs, the step's end brings it back.
            on_exit: std::env::current_exe()
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
                .unwrap_or_default(),
            on_exit_unless_held: Some(super::lock::path_for(&file)),
        };
        if review {
            self.note_tree_before_review(task_id)?;
        }
        bridge::fire_with_id(&self.state_dir, task_id, &req)
            .map_err(|e| e.context(format!("while starting task {task_id}")))?;
        self.ledger
            .started(task_id, (step, attempt), session_id, review);
        crash::point("after-fire");
        Ok(())
    }

    /// A task is on record: re-adopt it if it runs, judge it if it ended, spawn it if the
    /// spawn never happened, count an attempt if it was lost.
    pub(super) fn await_task(
        &mut self,
        step: u32,
        task_id: &str,
    ) -> crate::error::Result<Option<Exit>> {
        if let Some(j) = self.ledger.judged(task_id).cloned() {
            // Judged before (M1.md was saved from a text older than that record, or the
            // runner died between the two writes): the same record again, not a new judgement.
            // The text is older than every judgement after it too (a review of the step, the
            // next steps): those go back as well, in order, or they would be made again.
            let (edits, ids) = self.ledger.record_since(task_id);
            self.commit(&edits)?;
            let also = if ids.is_empty() {
                String::new()
            } else {
                format!(
                    ", with those of the tasks judged after it ({})",
                    ids.join(", ")
                )
            };
            self.say(&format!(
                "ledger: task {task_id} was judged already ({}); its record is put back{also}; \
                 nothing is judged or run again",
                j.verdict
            ));
            return Ok(None);
        }
        if !bridge::exists(&self.state_dir, task_id) {
            self.start_recorded(step, task_id)?;
        }
        let dir = bridge::task_dir(&self.state_dir, task_id);
        self.watch.set_task_dir(Some(&dir));
        let watched = self.watch_task(step, task_id);
        self.watch.set_task_dir(None);
        self.progress.end();
        match watched? {
            Ok(report) => self.evaluate(step, task_id, &report),
            Err(stop) => self.stop_now(&stop).map(Some),
        }
    }

    /// Starts a task whose spawn was recorded (write-ahead) but never happened: a runner died
    /// between the record and the start.
    fn start_recorded(&mut self, step: u32, task_id: &str) -> crate::error::Result<()> {
        let m = self.view();
        let attempt = m.current.attempt.unwrap_or(1);
        let session_id = m
            .current
            .session_id
            .clone()
            .unwrap_or_else(agent::new_session_id);
        let review = super::review::is_review(&m);
        // A review's session is always a fresh one.
        let resumed = !review && resumes(&m, step, Some(&session_id));
        self.say(&format!(
            "resume: {}task {task_id} was recorded but never started; starting it now",
            if review { "review " } else { "" }
        ));
        let prompt = if review {
            self.review_prompt(&m, step)
        } else {
            self.prompt_for(&m, step, attempt, resumed)
        };
        self.fire_as(
            step,
            attempt,
            (task_id, &session_id),
            resumed,
            &prompt,
            review,
        )
    }

    /// Watches a running task until it ends (its report) or a stop file appears (its path),
    /// keeping it on record and its pid in CURRENT, and the live line up to date. Its stream
    /// is read as it grows: a CLI retrying a refused key is ended at once (see
    /// [`Self::end_auth_failing`]).
    fn watch_task(
        &mut self,
        step: u32,
        task_id: &str,
    ) -> crate::error::Result<Result<TaskReport, engine::Stop>> {
        let mut stream: Option<StreamFollower> = None;
        loop {
            let report = bridge::check(&self.state_dir, task_id)?;
            let stream = stream.get_or_insert_with(|| {
                self.begin_progress(step, &report);
                StreamFollower::new(&report.stdout_path)
            });
            stream.poll();
            self.progress.update(stream.summary());
            if report.state == TaskState::Running && stream.summary().auth_failing() {
                return self.end_auth_failing(task_id, stream.summary()).map(Ok);
            }
            if let Some(pid) = report.pid
                && report.state == TaskState::Running
                && report.elapsed >= PID_RECORD_AFTER
                && self.view().current.cc_pid != Some(pid)
            {
                // An instant step is spared the write.
                self.commit(&engine::pid_recorded(pid).edits)?;
                crash::point("after-pid-write");
            }
            if report.state != TaskState::Running {
                return Ok(Ok(report));
            }
            self.until_next_check(step, task_id, stream)?;
            if let Some(stop) = stopfile::requested(&self.state_dir) {
                return Ok(Err(stop));
            }
        }
    }

    /// Ends a run whose CLI is retrying an authentication error (401, 403): it would retry for
    /// about 3 minutes though only a human can fix the key. Ended as a stop ends it, the run is
    /// then judged from its stream like any other (an auth failure: WAITING), also by a runner
    /// that finds it ended after a crash.
    fn end_auth_failing(
        &mut self,
        task_id: &str,
        stream: &agent::StreamSummary,
    ) -> crate::error::Result<TaskReport> {
        let what = stream.api_error.as_deref().unwrap_or("401");
        self.say(&format!(
            "auth: task {task_id}: the CLI is retrying an authentication error ({what}); \
             ending it now rather than after its own retries"
        ));
        bridge::kill(&self.state_dir, task_id, super::KILL_GRACE).map_err(|e| {
            e.context(format!(
                "while ending task {task_id} on an authentication error"
            ))
        })
    }

    /// Sleeps on events until the next full check of a running task. Output makes the task
    /// directory busy; between full checks (at most every `PID_RECORD_AFTER`, and on each poll)
    /// a wake costs one look for the exit record. A full check comes at least every POLL by
    /// the clock, however often M1.md is saved: its events never keep the runner from seeing
    /// the task end.
    fn until_next_check(
        &mut self,
        step: u32,
        task_id: &str,
        stream: &mut StreamFollower,
    ) -> crate::error::Result<()> {
        let exit_record = bridge::exit_record_path(&self.state_dir, task_id);
        let checked = std::time::Instant::now();
        loop {
            let left = POLL.saturating_sub(checked.elapsed());
            if left.is_zero() {
                return Ok(());
            }
            match self.watch.wait(left) {
                Wake::M1Changed => {
                    // A broken or half-written file is reported and waited out later, by the
                    // write that needs it; the task is watched on meanwhile.
                    if self.reload()? {
                        self.keep_task_on_record(step, task_id)?;
                    }
                }
                Wake::Task if !exit_record.exists() && checked.elapsed() < PID_RECORD_AFTER => {
                    stream.poll();
                    if stream.summary().auth_failing() {
                        return Ok(());
                    }
                    self.progress.update(stream.summary());
                }
                Wake::Stop | Wake::Task | Wake::Timeout => return Ok(()),
            }
        }
    }

    /// Starts the live line for a task just found (or re-adopted) running.
    fn begin_progress(&mut self, step: u32, report: &TaskReport) {
        let m = self.view();
        let what = if step == 0 {
            "planning".to_string()
        } else {
            format!("step {step}")
        };
        // A review run is counted apart from the step's attempts (CURRENT.ATTEMPT holds its
        // run): "attempt 2" there would read as the step failing once.
        let kind = if super::review::is_review(&m) {
            "review"
        } else {
            "attempt"
        };
        let label = format!("{what} {kind} {}", m.current.attempt.unwrap_or(1));
        self.progress
            .begin(label, report.elapsed, engine::spent(&m));
    }

    /// A save made from a text read before the runner recorded this task (an editor that
    /// ignores the change on disk) drops the record while the task runs: it goes back.
    fn keep_task_on_record(&mut self, step: u32, task_id: &str) -> crate::error::Result<()> {
        let m = self.view();
        if m.current.task_id.as_deref() == Some(task_id) || m.status != crate::m1::Status::Running {
            return Ok(());
        }
        let entry = self.ledger.entry(task_id).cloned();
        let t = engine::kept_on_record(&entry.as_ref().map_or(
            OnRecord {
                step,
                task_id,
                attempt: None,
                session_id: None,
                review: false,
            },
            on_record,
        ));
        self.apply(&t).map(|_| ())
    }

    /// Judges a task that ended and records the judgement: gather what it left (I/O), ask the
    /// engine (running VERIFY when it asks for it), carry the transition out.
    fn evaluate(
        &mut self,
        step: u32,
        task_id: &str,
        report: &TaskReport,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        if super::review::is_review(&m) {
            return self.evaluate_review(step, task_id, report);
        }
        let caps = self.settings.caps(&m);
        self.clean_up_after(task_id, report)?;
        let model = self.settings.agent_for(&m).model;
        let run = Run::read(report, model.as_deref());
        for why in &run.compactions_failed {
            self.say(&format!(
                "compaction: step {step}'s session could not compact its context (not counted): {why}"
            ));
        }
        let attempt = m.current.attempt.unwrap_or(1);
        let (transients, restarts) = (m.result(step).transient, m.result(step).restarts);
        let Some((judgement, verified)) = self.judge(
            &m,
            &caps,
            step,
            task_id,
            &run,
            attempt,
            (transients, restarts),
        )?
        else {
            let stop = self.stop_cause();
            return self.stop_now(&stop).map(Some);
        };
        let prior = m.results.get(&step);
        let head_before = m.current.git_head.clone();
        let (prior_session_s, in_session) = session_time(&m, step, report.elapsed);
        let facts = Facts {
            step,
            attempt,
            exit_code: report.exit_code,
            session_id: run.session_id.or_else(|| m.current.session_id.clone()),
            cost_usd: run.cost_usd,
            duration_s: report.elapsed.as_secs_f64(),
            prior_cost_usd: prior.and_then(|r| r.cost_usd).unwrap_or(0.0),
            prior_duration_s: prior.and_then(|r| r.duration_s).unwrap_or(0.0),
            transients,
            restarts,
            uncounted: engine::uncounted(&m, step),
            handoff: engine::handoff_reason(&caps, run.context_pct, in_session),
            context_pct: run.context_pct,
            compactions: m.result(step).compactions + run.compactions,
            prior_session_s,
            commit: crate::runner::git::head(&self.workdir)
                .filter(|h| Some(h) != head_before.as_ref()),
            verified,
            report: Some(format!("tasks/{task_id}/stdout")),
            next_step: engine::open_step(&m, step)
                .filter(|_| step > 0)
                .map(|s| (s.n, s.text.clone())),
            notify_each_step: self.settings.notify_each_step,
            review: caps.review,
            plan_only: m.plan_only,
            base_head: m.result(step).base_head.clone().or(head_before),
            now: Utc::now(),
        };
        let t = engine::record(&judgement, &facts);
        self.record_judged(task_id, engine::LedgerVerdict::from(&judgement), &t.edits)?;
        crash::point("before-record-write");
        let exit = self.apply(&t)?;
        crash::point("after-record-write");
        if matches!(judgement, Judgement::Restart { .. }) {
            // Recorded (held for the next spawn's write), the fresh session not begun.
            crash::point("after-restart");
        }
        Ok(exit)
    }

    /// Asks the engine for its judgement of an attempt, running VERIFY when it asks for it:
    /// the judgement, and whether every check that applies passed (exit, result and verdict,
    /// or there would be no pass; VERIFY when one is set). `None` when a stop ended VERIFY.
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &mut self,
        m: &M1,
        caps: &engine::Caps,
        step: u32,
        task_id: &str,
        run: &Run,
        attempt: u32,
        (transients, restarts): (u32, u32),
    ) -> crate::error::Result<Option<(Judgement, bool)>> {
        let verify_cmd = if step == 0 {
            None
        } else {
            self.settings.verify(m)
        };
        let mut verify_outcome = None;
        let allowed = self.settings.agent_for(m).allowed_tools;
        loop {
            let j = engine::judge(&Attempt {
                step,
                attempt,
                end: run.end.clone(),
                class: run.class.clone(),
                answer: &run.answer,
                denials: &run.denials,
                background_stopped: &run.background_stopped,
                verify_configured: verify_cmd.is_some(),
                verify: verify_outcome.as_ref(),
                transients,
                restarts,
                uncounted: engine::uncounted(m, step),
                resumed: resumes(m, step, m.current.session_id.as_deref()),
                allowed_tools: &allowed,
                caps,
                now: Utc::now(),
            });
            if j != Judgement::NeedsVerify {
                let verified =
                    verify_cmd.is_none() || matches!(verify_outcome, Some(verify::Outcome::Passed));
                return Ok(Some((j, verified)));
            }
            let cmd = verify_cmd.clone().unwrap_or_default();
            match self.verify(step, attempt, task_id, &cmd, caps.step_timeout)? {
                verify::Outcome::Stopped => return Ok(None),
                outcome => verify_outcome = Some(outcome),
            }
        }
    }

    /// Ends what is left of a task before it is judged: a LOST task's processes (its
    /// supervisor and guardian died), and processes that left its group, which are named.
    pub(super) fn clean_up_after(
        &mut self,
        task_id: &str,
        report: &TaskReport,
    ) -> crate::error::Result<()> {
        if report.state == TaskState::Lost {
            // Ended, and confirmed dead, before any retry can start beside them.
            let after = bridge::kill(&self.state_dir, task_id, super::KILL_GRACE).map_err(|e| {
                e.context(format!("while ending what is left of lost task {task_id}"))
            })?;
            self.say(&format!(
                "lost: task {task_id} lost its supervisor; its processes were ended ({})",
                after.line()
            ));
        }
        if !report.killed_outside_group.is_empty() {
            self.say(&format!(
                "cleanup: task {task_id} left processes outside its process group; ended: {}",
                bridge::describe(&report.killed_outside_group)
            ));
        }
        Ok(())
    }

    /// Runs the VERIFY command of a step whose attempt reported done.
    fn verify(
        &mut self,
        step: u32,
        attempt: u32,
        task_id: &str,
        cmd: &str,
        timeout: std::time::Duration,
    ) -> crate::error::Result<verify::Outcome> {
        crash::point("before-verify");
        self.say(&format!("verify: step {step}: running `{cmd}`"));
        let state_dir = self.state_dir.clone();
        let env = [
            ("LOOP_STEP".to_string(), step.to_string()),
            ("LOOP_ATTEMPT".to_string(), attempt.to_string()),
        ];
        verify::run(
            cmd,
            &self.workdir,
            &env,
            &self.state_dir,
            task_id,
            timeout,
            &mut || stopfile::requested(&state_dir).is_some(),
        )
    }

    /// What was started cannot be unstarted: before a spawn, a task of this loop that no
    /// judgement covers (an attempt or a review run that M1.md lost track of) is taken back
    /// on record, never started a second time (see [`ledger`]). Whether there was one.
    pub(super) fn adopt_unjudged(&mut self) -> crate::error::Result<bool> {
        let Some(e) = self.ledger.unjudged().cloned() else {
            return Ok(false);
        };
        self.apply(&engine::adopted(&on_record(&e)))?;
        Ok(true)
    }
}
