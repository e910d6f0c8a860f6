//! Watching a run's task while it runs: its end, a stop, an edit that dropped it from M1.md,
//! its stream (a CLI retrying a refused key is ended at once, one in a storm of rate-limit
//! retries as soon as it is seen), the live line.

use super::{Runner, crash};
use crate::agent::{self, Follow};
use crate::bridge::{self, TaskReport, TaskState};
use crate::engine::{self, OnRecord, RunOnRecord};
use crate::m1::M1;
use crate::runner::watch::Wake;

/// A step that has run this long gets its agent's pid recorded in CURRENT.
const PID_RECORD_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Task `e` of the ledger as the running one.
pub(super) fn on_record(e: &super::ledger::Entry) -> OnRecord<'_> {
    OnRecord {
        step: e.step,
        task_id: &e.task_id,
        attempt: Some(e.attempt),
        session_id: e.session_id.as_deref(),
        review: e.review,
    }
}

impl Runner {
    /// Watches a running task until it ends (its report) or a stop file appears (its path),
    /// keeping it on record and its pid in CURRENT, and the live line up to date. Its stream
    /// is read as it grows: a CLI retrying a refused key is ended at once (see
    /// [`super::step_io::StepIo::end_auth_failing`]).
    pub(super) fn watch_task(
        &mut self,
        run: &RunOnRecord,
    ) -> crate::error::Result<Result<TaskReport, engine::Stop>> {
        let (step, task_id) = (run.step, run.task_id.as_str());
        let mut stream: Option<Box<dyn Follow>> = None;
        loop {
            let woken = self.watch.woken();
            let report = bridge::check(&self.state_dir, task_id)?;
            let stream = stream.get_or_insert_with(|| {
                let m = self.view();
                begin_progress(&mut self.voice, run, &report, &m);
                let backend = self.settings.backend_of(&m, run.kind, run.step);
                agent::follow(backend, &report.stdout_path, &report.stderr_path)
            });
            stream.poll();
            self.voice.live().update(stream.summary());
            if report.state == TaskState::Running && stream.summary().auth_failing() {
                return (self.io)
                    .end_auth_failing(&self.voice, task_id, stream.summary())
                    .map(Ok);
            }
            if report.state == TaskState::Running && stream.summary().rate_limit_storm() {
                return (self.io)
                    .end_rate_limit_storm(&self.voice, task_id, stream.summary())
                    .map(Ok);
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
            let m = self.view();
            if let Some(named) = stream.summary().session_id.clone()
                && report.state == TaskState::Running
                && report.elapsed >= PID_RECORD_AFTER
                && m.current.session_id.as_deref() != Some(named.as_str())
                && !engine::resumes(&m, step, m.current.session_id.as_deref())
            {
                // Codex names its thread in its first event: on record at once, not only
                // when the run is judged. A run that resumed the step's session keeps that one
                // on record until it is judged, whatever it names: it is judged as a resume.
                let t = engine::session_named(&named);
                self.commit(&t.edits)?;
                self.voice.say(&t.log);
            }
            if report.state != TaskState::Running {
                return Ok(Ok(report));
            }
            if self.watch.woken() != woken {
                // A write above waited (for a broken M1.md to be fixed) and took the events
                // that came meanwhile, the task's end among them perhaps: look again first.
                if let Some(stop) = self.watch.stop() {
                    return Ok(Err(stop));
                }
                continue;
            }
            // The one timer of a running step: the look that records its pid (and a named
            // session) once it has run PID_RECORD_AFTER. After it, only events wake the runner.
            let due = (report.elapsed < PID_RECORD_AFTER)
                .then(|| PID_RECORD_AFTER.saturating_sub(report.elapsed));
            self.until_next_check(step, task_id, stream.as_mut(), due)?;
            if let Some(stop) = self.watch.stop() {
                return Ok(Err(stop));
            }
        }
    }

    /// Sleeps on events until the next full check of a running task: the task directory
    /// changed (output, its exit record, its lock let go), a stop, or `due` (from now) passed.
    /// Output makes the task directory busy; between full checks (at most every
    /// `PID_RECORD_AFTER`) a wake costs one look for the exit record. With nothing due the
    /// runner sleeps until an event: no timer but the live line's clock on a terminal and the
    /// rare look for a lost event ([`super::watch::Watch::fallback`]). M1.md's events never
    /// keep the runner from seeing the task end: its record's events end the wait. A wake
    /// taken as output brings a full check at most `PID_RECORD_AFTER` after the last one: the
    /// task's end may have come with that output (its supervisor and guardian killed, their
    /// lock let go, the agent gone with them), and no event may follow it.
    fn until_next_check(
        &mut self,
        step: u32,
        task_id: &str,
        stream: &mut dyn Follow,
        due: Option<std::time::Duration>,
    ) -> crate::error::Result<()> {
        let exit_record = bridge::exit_record_path(&self.state_dir, task_id);
        let checked = std::time::Instant::now();
        let longest = self.watch.longest_sleep(self.voice.ticks());
        let mut limit = due.map_or(longest, |d| d.min(longest));
        loop {
            let left = limit.saturating_sub(checked.elapsed());
            if left.is_zero() {
                return Ok(());
            }
            match self.watch.wait(left) {
                Wake::M1Changed => {
                    // A broken or half-written file is reported and waited out later, by the
                    // write that needs it; the task is watched on meanwhile.
                    let woken = self.watch.woken();
                    if self.reload()? {
                        self.keep_task_on_record(step, task_id)?;
                    }
                    if self.watch.woken() != woken {
                        // That write waited, taking events: the full check sees what they said.
                        return Ok(());
                    }
                }
                Wake::Task if !exit_record.exists() && checked.elapsed() < PID_RECORD_AFTER => {
                    limit = limit.min(PID_RECORD_AFTER);
                    stream.poll();
                    if stream.summary().auth_failing() || stream.summary().rate_limit_storm() {
                        return Ok(());
                    }
                    self.voice.live().update(stream.summary());
                }
                Wake::Stop | Wake::Task | Wake::Timeout => return Ok(()),
            }
        }
    }

    /// A save made from a text read before the runner recorded this task (an editor that
    /// ignores the change on disk) drops the record while the task runs: it goes back.
    fn keep_task_on_record(&mut self, step: u32, task_id: &str) -> crate::error::Result<()> {
        let entry = self.ledger.entry(task_id).cloned();
        let on = entry.as_ref().map_or(
            OnRecord {
                step,
                task_id,
                attempt: None,
                session_id: None,
                review: false,
            },
            on_record,
        );
        match engine::kept_on_record(&self.view(), &on) {
            Some(t) => self.apply(&t).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// Starts the live line for a task of `run` of the loop `m` just found (or re-adopted)
/// running.
fn begin_progress(voice: &mut super::voice::Voice, run: &RunOnRecord, report: &TaskReport, m: &M1) {
    let what = if run.step == 0 {
        "planning".to_string()
    } else {
        format!("step {}", run.step)
    };
    // A review run is counted apart from the step's attempts: "attempt 2" there would
    // read as the step failing once.
    let label = format!("{what} {} {}", run.kind.number_word(), run.number);
    voice.live().begin(label, report.elapsed, engine::spent(m));
}
