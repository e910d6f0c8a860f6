//! The runner: the one owner of a loop's state. It asks the engine what to do, does it (spawn,
//! wait, verify, kill, notify), and records each outcome in M1.md with one compare-and-swap
//! write. It blocks on file events and timers; while a step runs it does no work at all.

pub(crate) mod confine;
mod crash;
mod detach;
pub(crate) mod gates;
pub(crate) mod git;
mod github;
pub(crate) mod known;
pub(crate) mod ledger;
pub mod lock;
mod observe;
mod parallel;
pub(crate) mod plan_import;
mod progress;
pub(crate) mod pull_request;
mod record;
pub(crate) mod registry;
mod retry;
pub(crate) mod revive;
mod run;
pub(crate) mod settings;
mod start;
mod step_commit;
mod step_io;
pub(crate) mod stop;
pub(crate) mod stopfile;
mod traces;
mod tree;
mod unwritable;
mod voice;
pub(crate) mod watch;
mod watching;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;

use crate::engine::{self, Effect, Next, Outcome, Transition, Write};
use crate::exit::Status as Exit;
use crate::m1::keys::CurrentKey;
use crate::m1::{Document, Edit, M1, Status, StepState, StoreError};
use crate::notifier::{self, Event};
use crate::runner::record::Reloaded;
use crate::runner::settings::Settings;
use crate::runner::watch::{Wake, Watch};

pub use crash::{PARALLEL_POINTS, STEP_POINTS as CRASH_POINTS};
pub(crate) use ledger::tasks_of as ledger_tasks;
pub(crate) use parallel::{merge_task, step_loops};
pub(crate) use progress::Mode as ProgressMode;
pub(crate) use retry::retry;
pub(crate) use start::{StartRequest, resume_as, start};
pub(crate) use stop::{STOP_PATIENCE, stop};

pub(crate) use step_io::KILL_GRACE;

/// Field changes for the log: the first few, each cut to a line.
fn shown_changes(changes: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut shown: Vec<String> = changes
        .iter()
        .take(SHOWN)
        .map(|c| crate::text::one_line(c, 160))
        .collect();
    if changes.len() > SHOWN {
        shown.push(format!("and {} more", changes.len() - SHOWN));
    }
    shown.join("; ")
}

/// A loop being driven.
pub(crate) struct Runner {
    file: PathBuf,
    state_dir: PathBuf,
    workdir: PathBuf,
    /// M1.md as the runner knows it, and the edits it holds for its next write (see
    /// [`record`]).
    record: record::Record,
    settings: Settings,
    /// What the runner says: the log, the terminal, the live line, messages (see [`voice`]).
    voice: voice::Voice,
    watch: Watch,
    /// Whether the state directory can be written, and since when not (see [`unwritable`]).
    disk: unwritable::Unwritable,
    /// The loop's identity (`LOOP_ID`), which its tasks carry in their environment.
    loop_id: String,
    /// What this loop started and how each start was judged (see [`ledger`]).
    ledger: ledger::Ledger,
    /// The I/O of the loop's runs: starting, confining, observing, committing, tracing them
    /// (see [`step_io`]).
    io: step_io::StepIo,
    /// The driver of steps at once, and what it keeps between passes (see [`parallel`]).
    at_once: parallel::AtOnce,
    _lock: lock::RunnerLock,
    /// This runner in the per-user registry, for `loop stop` to wait on; removed on drop.
    _registration: Option<crate::runner::registry::Registration>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// Options of one runner.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    /// Print each decision on stdout, as well as logging it.
    pub echo: bool,
    /// Show what the agent does while a step runs (see [`ProgressMode`]).
    pub progress: ProgressMode,
}

impl Runner {
    /// Takes the loop's lock and opens its state. Fails (exit 2) if another runner holds it.
    ///
    /// # Errors
    /// The lock is held, M1.md is missing or invalid, or `loop.yaml` is malformed.
    pub(crate) fn open(
        file: &Path,
        settings: Settings,
        opts: &RunOptions,
    ) -> crate::error::Result<Self> {
        let lock = lock::acquire(file)?;
        let registration = crate::runner::registry::register(file);
        let record = record::Record::open(file).map_err(|e| match e {
            // Bad input the person fixes: exit 2, with every error at its line and column.
            StoreError::DiskInvalid(errs) => crate::error::Error::bad_input(errs.to_string()),
            other => anyhow::Error::new(other).into(),
        })?;
        let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
        let opened = record.doc().view();
        // A loop carries on only with what it was started with, whoever carries it on.
        if !matches!(
            opened.status,
            crate::m1::Status::Done | crate::m1::Status::Failed
        ) {
            start::check_env(&opened, file)?;
        }
        // A loop of this user, for `loop list` and `loop clean` from anywhere (a step's own
        // loop is its parent's part).
        if opened.parent.is_none() {
            known::remember(file);
        }
        // The directory M1.md names, or where the loop is run from when it names none. One it
        // names that is not there is never replaced by another: the runner halts on it (see
        // `drive`), so no agent runs where its loop did not say.
        let workdir = match opened.workdir.map(PathBuf::from) {
            Some(dir) => dir,
            None => std::env::current_dir().context("while finding the project directory")?,
        };
        let watch = Watch::of_loop(file, &state_dir);
        // A parallel loop tells the person; the loops of its steps only their logs. They keep
        // the Telegram settings, for the parallel loop's runner should one of them revive it.
        // Messages are sent by a delivery process, the `loop` binary in a hidden mode.
        let notifier = if opened.parent.is_some() {
            notifier::log_only(&state_dir)
        } else {
            notifier::from_env(&state_dir, std::env::current_exe().ok().as_deref())
        };
        // A loop written by hand or by an older version has no id yet: it gets one with its
        // next spawn.
        let loop_id = opened.loop_id.unwrap_or_else(start::new_loop_id);
        let ledger = ledger::Ledger::load(&state_dir, &loop_id);
        let voice = voice::Voice::new(state_dir.clone(), notifier, opts.echo, opts.progress);
        let disk = unwritable::Unwritable::new(state_dir.clone());
        let io = step_io::StepIo::new(file, &state_dir, &workdir, &loop_id);
        let at_once = parallel::AtOnce::new(file, &state_dir, &workdir, &loop_id);
        let mut runner = Self {
            file: file.to_path_buf(),
            state_dir,
            workdir,
            record,
            settings,
            voice,
            watch,
            disk,
            loop_id,
            ledger,
            io,
            at_once,
            _lock: lock,
            _registration: registration,
        };
        runner.note_saves();
        // An old text saved while no runner watched: what it reverted goes back at once.
        if runner.note_restored() {
            runner.commit(&[])?;
        }
        let away = runner.record.edited_while_away();
        if !away.is_empty() {
            runner.voice.say(&format!(
                "edit: M1.md was changed by hand while no runner ran: {}",
                shown_changes(&away)
            ));
        }
        // Steps added by hand while no runner ran: the count follows them.
        if let Some(count) = engine::by_hand::step_count(&runner.view()) {
            runner.voice.say(&format!(
                "edit: TOTAL_STEPS set to {}, the steps PLAN.STEPS lists",
                runner.view().plan.steps.len()
            ));
            runner.record.hold(&[count]);
        }
        Ok(runner)
    }

    fn view(&self) -> std::sync::Arc<M1> {
        self.record.view()
    }

    /// Logs what the store met of saves since the last look (see [`record::Record::saves_met`]).
    fn note_saves(&mut self) {
        for line in self.record.saves_met() {
            self.voice.say(&line);
        }
    }

    /// Re-reads M1.md. A hand edit that broke it: report `file:line:column` once, write
    /// nothing, and wait for the fix (or a stop file).
    fn refresh(&mut self) -> crate::error::Result<Option<Exit>> {
        while !self.reload()? {
            if let Some(stop) = self.watch.stop() {
                return Ok(Some(self.stop_while_invalid(&stop)));
            }
            // Any wake is a reason to look again (a second where events do not arrive).
            let _ = self.watch.wait(self.watch.fallback());
        }
        Ok(None)
    }

    /// One look at M1.md, never blocking on a broken file: `false` when it is invalid (the
    /// problem is reported once). A stale save (an old text saved over newer records) comes
    /// back with what it reverted put back, and that is written at once.
    fn reload(&mut self) -> crate::error::Result<bool> {
        let reloaded = self.record.reload();
        self.note_saves();
        match reloaded {
            Ok(Reloaded::Changed(before)) => {
                self.note_hand_edit(&before);
                self.read_hand_edit(&before.view());
                if self.note_restored() {
                    self.commit(&[])?;
                }
                Ok(true)
            }
            Ok(Reloaded::Same) => Ok(true),
            Ok(Reloaded::Invalid(told)) => {
                if let Some(msg) = told {
                    self.voice.say(&format!(
                        "invalid: M1.md was edited into an invalid state; waiting for the fix, writing nothing: {msg}"
                    ));
                    crate::errln!(
                        "loop: {msg}\nloop: fix M1.md; the runner waits and writes nothing until then"
                    );
                }
                Ok(false)
            }
            Err(e) => Err(anyhow::Error::new(e).into()),
        }
    }

    /// Logs what a person changed in M1.md (every decision is in loop.log, a person's too): the
    /// fields that changed from what the runner knew to the text it reads now.
    fn note_hand_edit(&self, before: &Document) {
        // A gate decided while this runner drives the loop (`loop answer`, a tap): a decision,
        // which the decider logged, not a hand edit.
        let was = before.view();
        let now = self.view();
        let decided: Vec<String> = now
            .gates
            .iter()
            .filter(|g| !g.is_pending() && was.gate(&g.id).is_some_and(crate::m1::Gate::is_pending))
            .map(|g| {
                format!(
                    "{} ({} by {})",
                    g.id,
                    g.choice.as_deref().unwrap_or("?"),
                    g.by.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let mut changes = crate::m1::changes(before, self.record.doc());
        if !decided.is_empty() {
            self.voice.say(&format!(
                "decide: taken up, decided beside this runner: gate {}",
                decided.join(", gate ")
            ));
            // What the decision wrote; anything else is a person's edit.
            changes.retain(|c| {
                !["GATES.", "STATUS:", "LAST_ACTION:", "NEXT_ACTION:"]
                    .iter()
                    .any(|p| c.starts_with(p))
            });
        }
        if !changes.is_empty() {
            self.voice.say(&format!(
                "edit: M1.md was changed by hand: {}",
                shown_changes(&changes)
            ));
        }
    }

    /// Does what a person's hand edit asks of the runner beyond its text ([`engine::by_hand`]):
    /// keeps the step count, says which steps were set DONE by hand, notes a pause.
    fn read_hand_edit(&mut self, before: &M1) {
        let after = self.view();
        let running = engine::runs_on_record(&after).first().map(|r| r.step);
        let h = engine::by_hand::read(before, &after, running);
        for line in &h.said {
            self.voice.say(line);
        }
        self.record.hold(&h.edits);
        if h.paused {
            self.record.note_paused_by_hand();
        }
    }

    /// Logs what the store put back after a stale save; whether it did.
    fn note_restored(&mut self) -> bool {
        let Some(line) = self.record.restored() else {
            return false;
        };
        self.voice.say(&line);
        true
    }

    /// Applies edits with compare-and-swap. If the file on disk is invalid at that moment, the
    /// edits wait (nothing is written, nothing is dropped) until it is fixed. If a valid hand
    /// edit took away what they are about (so they would make it invalid), retrying cannot
    /// help: the loop halts WAITING with the reason, and the command ends with exit 3.
    fn commit(&mut self, edits: &[Edit]) -> crate::error::Result<()> {
        let all = self.record.with_held(edits);
        loop {
            let watch = &self.watch;
            let committed = self
                .record
                .commit(&all, edits, &mut || watch.stop().is_some());
            self.note_saves();
            match committed {
                Ok(merged) => {
                    if let Some(ours) = merged {
                        // A person's save met this write and was merged under it: what it
                        // changed is a hand edit like one read between writes (logged, a
                        // pause or a step set DONE taken up), not absorbed without a word.
                        self.note_hand_edit(&ours);
                        self.read_hand_edit(&ours.view());
                    }
                    self.note_restored();
                    self.disk.note_writable(&self.voice);
                    return Ok(());
                }
                Err(StoreError::DiskInvalid(_)) => {
                    if let Some(Exit::Waiting) = self.refresh()? {
                        return Err(crate::error::Error::waiting(
                            "stopped while M1.md was invalid; the last decision was not recorded",
                        ));
                    }
                }
                Err(StoreError::EditsInvalid(errs)) => return Err(self.halt_unrecordable(&errs)),
                Err(StoreError::Io(e)) => return Err(e.into()),
                Err(StoreError::Interrupted) => {
                    let stop = self.stop_cause();
                    self.stop_while_invalid(&stop);
                    return Err(crate::error::Error::waiting(format!(
                        "stopped by {} while M1.md kept changing; the last decision was not \
                         recorded (`loop resume` makes it again from the task's record)",
                        stop.by()
                    )));
                }
            }
        }
    }

    /// The runner's record cannot go into the file as a person left it: say so in the file
    /// (STATUS WAITING and the reason, nothing else) and end with exit 3.
    fn halt_unrecordable(&mut self, errs: &crate::m1::Errors) -> crate::error::Error {
        let t = engine::unrecordable(&errs.to_string());
        // Where even the reason cannot be written (a file at its size limit), STATUS alone:
        // WAITING is as long as RUNNING, so the file does not grow, and no revival runs it on.
        let status_only = [Edit::Status(Status::Waiting)];
        let written = match self.record.write_alone(&t.edits) {
            Ok(()) => "STATUS WAITING written",
            Err(_) => match self.record.write_alone(&status_only) {
                Ok(()) => "STATUS WAITING written, without the reason (it would not fit)",
                Err(_) => "nothing written",
            },
        };
        self.voice.say(&format!("{}; {written}", t.log));
        let m = self.view();
        self.carry_out(&m, &t.effects);
        let why = match t.effects.first() {
            Some(Effect::Waiting { reason, how }) => format!("{reason}; {how}"),
            _ => t.log.clone(),
        };
        crate::error::Error::waiting(why)
    }

    /// Writes how a task was judged into the ledger, before M1.md says it. A task is judged
    /// once: a later stop or failed write never replaces its judgement.
    fn record_judged(
        &mut self,
        task_id: &str,
        verdict: engine::LedgerVerdict,
        edits: &[Edit],
        log: &str,
    ) -> crate::error::Result<()> {
        if !crate::bridge::exists(&self.state_dir, task_id) || self.ledger.judged(task_id).is_some()
        {
            return Ok(());
        }
        self.ledger
            .judge(task_id, ledger::Judged::new(verdict, edits).said(log))
            .map_err(|e| e.context(format!("while recording the judgement of task {task_id}")))?;
        let m = self.view();
        self.io.trace_judged(
            &self.settings,
            &m,
            self.ledger.entry(task_id),
            task_id,
            verdict,
        );
        Ok(())
    }

    /// Writes held edits now: before the runner waits, pauses or exits.
    fn flush(&mut self) -> crate::error::Result<()> {
        if !self.record.holds_any() {
            return Ok(());
        }
        self.commit(&[])
    }

    /// Carries a transition out: writes it (or holds it for the next spawn's write, see
    /// `pending`), logs it, and does what follows it.
    fn apply(&mut self, t: &Transition) -> crate::error::Result<Option<Exit>> {
        let before = self.view();
        match (t.write, &t.outcome) {
            (Write::WithNextSpawn, Outcome::Continue) => self.record.hold(&t.edits),
            _ => self.commit(&t.edits)?,
        }
        self.voice.say(&t.log);
        // A transition that records a wait (a step's or a review's) has just logged it.
        let records_wait = t
            .edits
            .iter()
            .any(|e| e.sets(&CurrentKey::WaitUntil.path()));
        if records_wait {
            self.voice.told_wait(engine::wait_until(&self.view()));
        }
        // A loop that ended FAILED (at a step, or on a gate of one) gets its report as a DONE
        // one does (which writes it with its message, to name it there).
        if matches!(t.outcome, Outcome::Exit(Exit::Failed)) {
            self.write_report();
            self.comment_on_issue();
        }
        self.carry_out(&before, &t.effects);
        Ok(match t.outcome {
            Outcome::Exit(s) => Some(s),
            Outcome::Continue => None,
        })
    }

    /// Does what follows a recorded transition: notifications, ticking a checklist. `before`
    /// is the loop as it was before the transition (its goal, its plan).
    fn carry_out(&mut self, before: &M1, effects: &[Effect]) {
        let goal = before.goal.clone();
        for effect in effects {
            let event = match effect {
                Effect::Waiting { reason, how } => Event::Waiting {
                    goal: goal.clone(),
                    reason: reason.clone(),
                    how_to_continue: how.clone(),
                },
                Effect::Failed { step, reason } => {
                    let (answer, stderr_tail) =
                        self.io.failure_detail(&self.settings, &self.view(), *step);
                    Event::Failed {
                        goal: goal.clone(),
                        step: (*step > 0).then_some(*step),
                        reason: reason.clone(),
                        answer,
                        stderr_tail,
                    }
                }
                Effect::StepDone { step, summary } => Event::StepDone {
                    goal: goal.clone(),
                    step: *step,
                    total: u32::try_from(before.plan.steps.len()).unwrap_or(0),
                    summary: summary.clone(),
                },
                Effect::Planned => {
                    let steps: Vec<(bool, String)> = self
                        .view()
                        .plan
                        .steps
                        .iter()
                        .map(|s| (s.state == StepState::Done, s.text.clone()))
                        .collect();
                    if self.voice.echoes() {
                        self.voice.clear();
                        crate::outln!("{}", start::plan_lines(&steps));
                    }
                    Event::Started {
                        goal: goal.clone(),
                        steps: steps.into_iter().map(|(_, t)| t).collect(),
                        sandbox: Some(confine::loop_sandbox_words(&self.view(), &self.settings)),
                    }
                }
                Effect::UsageWait {
                    step,
                    until,
                    reason,
                } => Event::Text(format!(
                    "{goal}\nUsage limit hit on step {step} ({reason}). Waiting until {} UTC, \
                     then carrying on.",
                    until.format("%Y-%m-%d %H:%M")
                )),
                Effect::Fallback {
                    step,
                    to,
                    until,
                    reason,
                } => Event::Text(format!(
                    "{goal}\nUsage limit hit on step {step} ({reason}); it resets only at {} \
                     UTC, so the step goes on with {to}, in a fresh session.",
                    until.format("%Y-%m-%d %H:%M")
                )),
                Effect::Done => {
                    // Told before DONE was written ([`Runner::tell_done`]): the page its
                    // message names is written now.
                    self.write_report();
                    continue;
                }
                Effect::TickPlanFile(step) => {
                    self.tick_plan_file(*step);
                    continue;
                }
                Effect::Said(text) => Event::Text(format!("{goal}\n{text}")),
                Effect::Gate { id } => match self.gate_event(id) {
                    Some(event) => event,
                    None => continue,
                },
            };
            self.voice.notify(&event);
        }
    }

    /// [`Runner::drive`] for a person watching (a foreground runner): a line first saying
    /// where the loop's file and log are and how to stop it, and one at the end saying how it
    /// stands, what it spent and how long it took, what comes next, and where its report is.
    ///
    /// # Errors
    /// As [`Runner::drive`].
    pub(crate) fn drive_in_view(&mut self) -> crate::error::Result<Exit> {
        if self.voice.echoes() {
            let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            crate::errln!(
                "loop: {} (M1.md {}, log {}; sandbox: {}); Ctrl-C or {} stops it",
                self.view().goal,
                abs(&self.file).display(),
                abs(&crate::layout::Layout::dir(&self.state_dir).log()).display(),
                confine::loop_sandbox_words(&self.view(), &self.settings),
                stopfile::command_for(&self.file)
            );
        }
        self.io.open_trace(&self.voice, &self.view());
        let exit = self.drive();
        let m = self.view();
        let figures = engine::figures::totals(&m, &step_loops(&m));
        self.io.end_trace(&self.voice, &m, &figures);
        self.at_once.revive_parent(&self.view(), &self.voice);
        if self.voice.echoes() {
            self.voice.clear();
            let page = self
                .voice
                .report()
                .map_or_else(String::new, |p| format!("; report: {}", p.display()));
            crate::errln!("loop: {}{page}", self.closing_line());
        }
        exit
    }

    /// How the loop stands, in one line: its status, what it spent and in how long, and what
    /// comes next unless it is DONE.
    fn closing_line(&self) -> String {
        let m = self.view();
        let took = m.started_at.map_or_else(String::new, |t| {
            let secs = (Utc::now() - t).num_seconds();
            let d = Duration::from_secs(u64::try_from(secs).unwrap_or(0));
            format!(" in {}", crate::duration::human(d))
        });
        let spent = format!("{}{took}", engine::spent_words(&m));
        match m.status {
            Status::Done => {
                let n = m.plan.steps.len();
                let skipped = (m.plan.steps.iter())
                    .filter(|s| s.state == crate::m1::StepState::Skipped)
                    .count();
                let n = if skipped > 0 {
                    format!("{n} step(s), {skipped} skipped")
                } else {
                    format!("{n} step(s)")
                };
                let by_hand = m
                    .plan
                    .steps
                    .iter()
                    .filter(|s| engine::by_hand::done_by_hand(&m, s.n))
                    .count();
                let n = match engine::uncommitted(&m) {
                    0 => n,
                    u => format!("{n}, {u} uncommitted"),
                };
                let pr = m
                    .github
                    .pr
                    .as_deref()
                    .map_or_else(String::new, |url| format!("; pull request: {url}"));
                if by_hand > 0 {
                    format!("DONE: {n}, {by_hand} of them done by hand, {spent}{pr}")
                } else {
                    format!("DONE: {n}, {spent}{pr}")
                }
            }
            status => format!(
                "{}: {} ({spent}); next: {}",
                status.as_str(),
                m.last_action.clone().unwrap_or_default(),
                m.next_action.clone().unwrap_or_default()
            ),
        }
    }

    /// Drives the loop until it is DONE, FAILED or WAITING. A state directory that cannot be
    /// written for a while (a full disk, a file system turned read-only) stops nothing: the
    /// write is as if never tried, the runner waits and decides again from M1.md, as a runner
    /// after a crash would (see `unwritable`), and the running step goes on meanwhile.
    ///
    /// # Errors
    /// I/O failures the runner cannot work around; the loop's own outcomes are statuses.
    pub(crate) fn drive(&mut self) -> crate::error::Result<Exit> {
        if !self.workdir.is_dir() && self.view().status == Status::Running {
            let reason = format!(
                "WORKDIR {} is not a directory: the agent would run somewhere its loop does not \
                 say",
                self.workdir.display()
            );
            return self.halt(
                &reason,
                "make the directory again (or fix WORKDIR in M1.md), then `loop resume`",
            );
        }
        self.at_once.driving = false;
        loop {
            let decided = if self.at_once.driving {
                self.decide_at_once()
            } else {
                self.decide_once()
            };
            match decided {
                Ok(Some(exit)) => return Ok(exit),
                Ok(None) => {}
                Err(e) => {
                    // Decided again from the first question, as by a runner after a crash.
                    self.at_once.driving = false;
                    self.disk.wait_out(e, &self.watch, &self.voice)?;
                }
            }
        }
    }

    /// One decision of [`Runner::drive`] for a loop of one step at a time, carried out: the
    /// exit it comes to, if any. A loop of steps at once is handed to its scheduler here.
    fn decide_once(&mut self) -> crate::error::Result<Option<Exit>> {
        if let Some(stop) = self.watch.stop() {
            return self.stop_now(&stop).map(Some);
        }
        if let Some(exit) = self.refresh()? {
            return Ok(Some(exit));
        }
        let m = self.view();
        let caps = self.settings.caps(&m);
        let next = engine::next(&m, &caps, Utc::now());
        // A DONE step's commit, before anything else runs (in a loop of steps at once too).
        if let Next::Commit(due) = &next {
            return self.settle_commit(due);
        }
        // Steps at once: the parallel scheduler decides for every step, and for the end of
        // a loop that ran its steps at once.
        if engine::parallel::decides(&m, &next, self.settings.parallel(&m)) {
            if let Some(t) = self.cannot_run_parallel(&m) {
                return self.apply(&t).map(|e| Some(e.unwrap_or(Exit::Waiting)));
            }
            self.take_up_at_once();
            return self.decide_at_once();
        }
        // A held outcome rides on the next write; where none follows at once, write it now.
        if next.writes_held_first() {
            self.flush()?;
        }
        let exit = match next {
            Next::Finished(Status::Done) => {
                self.voice.say("done: STATUS is DONE; nothing to do");
                Some(Exit::Ok)
            }
            Next::Finished(_) => {
                self.voice
                    .say("failed: STATUS is FAILED; a human decides (see NEXT_ACTION)");
                Some(Exit::Failed)
            }
            Next::Paused(_) if self.record.take_paused_by_hand() => {
                self.apply(&engine::by_hand::paused(&m))?
            }
            Next::Paused(why) => {
                self.voice.say(&format!("waiting: {why}"));
                Some(Exit::Waiting)
            }
            Next::Complete => Some(self.complete(&m)?),
            Next::Await(run) => self.await_run(&run)?,
            Next::WaitUntil { until, reason } => {
                self.voice.say_wait(until, &reason);
                self.wait_until(until, &reason)?
            }
            Next::Run(spec) => self.start_run(&spec)?,
            Next::Exhausted { step, reason } => self.apply(&engine::exhausted(step, &reason))?,
            Next::Halt { reason, how } => {
                self.apply(&engine::halt(m.plan.current_step, &reason, &how))?
            }
            Next::Gate(gate) => self.apply(&engine::gate::opened(&m, &gate))?,
            Next::OverBudget { step, reason } => {
                self.apply(&engine::gate::over_budget(&m, step, &reason))?
            }
            Next::Commit(due) => self.settle_commit(&due)?,
            Next::Unreviewed { step } => self.apply(&engine::review::unreviewed(
                &m,
                step,
                self.settings.notify_each_step,
                Utc::now(),
            ))?,
        };
        Ok(exit)
    }

    /// Waits out a backoff or a usage limit, watching for stops and hand edits, with the live
    /// line counting the time left.
    fn wait_until(
        &mut self,
        until: chrono::DateTime<Utc>,
        reason: &str,
    ) -> crate::error::Result<Option<Exit>> {
        let label = match self.view().plan.current_step {
            0 => "planning".to_owned(),
            n => format!("step {n}"),
        };
        let waited = loop {
            let left = (until - Utc::now()).to_std().unwrap_or_default();
            if left.is_zero() {
                break None;
            }
            self.voice.live().wait(&label, until, reason);
            // Asleep until the wait's end or an event (see `Watch::longest_sleep`).
            match self
                .watch
                .wait(left.min(self.watch.longest_sleep(self.voice.ticks())))
            {
                // A hand edit may have changed the wait: decide again.
                Wake::M1Changed => break None,
                Wake::Stop | Wake::Task | Wake::Timeout => {
                    if let Some(stop) = self.watch.stop() {
                        break Some(stop);
                    }
                }
            }
        };
        self.voice.clear();
        match waited {
            Some(stop) => self.stop_now(&stop).map(Some),
            None => Ok(None),
        }
    }

    fn complete(&mut self, m: &M1) -> crate::error::Result<Exit> {
        // Before DONE is told and written, so that both name the pull request.
        self.open_pull_request();
        let opened = self.view();
        let m = if opened.github == m.github {
            m
        } else {
            &opened
        };
        let t = engine::complete(m);
        self.tell_done(&t.edits);
        crash::point("before-done-write");
        self.commit(&t.edits)?;
        self.voice.say(&t.log);
        crash::point("after-done-write");
        // What the steps' commits needed is needed no more: every step is DONE or SKIPPED.
        let _ = std::fs::remove_dir_all(
            crate::layout::Layout::dir(&self.state_dir).commits(&self.loop_id),
        );
        self.carry_out(m, &t.effects);
        Ok(Exit::Ok)
    }

    /// What the end of this DONE loop left undone when its runner died right after writing
    /// DONE (`after-done-write`): its report page, and the clean-up of what its steps' commits
    /// needed. Done now, and said; nothing when all of it is there.
    pub(crate) fn finish_end(&mut self) {
        let m = self.view();
        if m.status != Status::Done {
            return;
        }
        let commits = crate::layout::Layout::dir(&self.state_dir).commits(&self.loop_id);
        let no_page = m.parent_id.is_none() && !crate::report::default_path(&self.file).exists();
        if !no_page && !commits.exists() {
            return;
        }
        self.voice.say(
            "end: the loop's end was left unfinished (its runner died after DONE): finished now",
        );
        let _ = std::fs::remove_dir_all(&commits);
        if no_page {
            self.write_report();
        }
    }

    /// Gate `id`'s message, from M1.md as just written; `None` (logged) when it is not there.
    fn gate_event(&self, id: &str) -> Option<Event> {
        let m = self.view();
        let Some(g) = m.gate(id) else {
            self.voice.say(&format!(
                "notify: gate {id} is not in M1.md; no message sent"
            ));
            return None;
        };
        let mut message = gate_message(&m, g);
        if g.kind == crate::m1::GateKind::Failed {
            (message.answer, message.stderr_tail) =
                self.io.failure_detail(&self.settings, &m, g.step);
        }
        Some(Event::Gate(message))
    }

    /// The loop has ended: its report page, written beside M1.md (not for a step's own loop,
    /// whose runs are in the report of the loop that ran it). Cheap, and never in the way: a
    /// page that cannot be written is logged, and the loop ends as it would have.
    fn write_report(&mut self) -> Option<String> {
        if self.view().parent_id.is_some() {
            return None;
        }
        match crate::report::write_beside(&self.file) {
            Ok(page) => {
                let shown = page.display().to_string();
                self.voice.reported(page);
                Some(shown)
            }
            Err(e) => {
                self.voice.log(&format!("report: not written: {e:#}"));
                None
            }
        }
    }

    /// Queues the DONE message of the loop as `edits` (its end) leave it, before they are
    /// written: under a key of the loop's end, so it is queued once however often it is told.
    /// Told after the DONE write, a runner killed in between left a DONE loop that nobody
    /// carries on any more, and nobody told; told before, the runner that carries on a loop
    /// killed in between ends it again and queues nothing twice. The report is named where it
    /// is about to be written (a step's own loop writes none).
    fn tell_done(&mut self, edits: &[crate::m1::Edit]) {
        let mut doc = self.record.doc().clone();
        for e in edits {
            doc.apply(e);
        }
        let m = doc.view();
        let page = m.parent_id.is_none().then(|| {
            let page = crate::report::default_path(&self.file);
            std::path::absolute(&page)
                .unwrap_or(page)
                .display()
                .to_string()
        });
        let mut event = Self::done_event(&m, page);
        if let Event::Done { once, .. } = &mut event {
            let started = m.started_at.map(|t| t.timestamp()).unwrap_or_default();
            *once = Some(format!(
                "done-{}-{started}",
                m.loop_id.as_deref().unwrap_or(&self.loop_id)
            ));
        }
        self.voice.notify(&event);
    }

    /// The DONE notification: each step's summary, the cost, the time since the loop started,
    /// and where its report is.
    fn done_event(m: &M1, report: Option<String>) -> Event {
        let summaries = m
            .plan
            .steps
            .iter()
            .map(|s| {
                // A step a person set DONE has no result of the loop's: said as what it is.
                if let Some(words) = engine::by_hand::done_by_hand_words(m, s.n) {
                    let words = words.replacen("done", "DONE", 1);
                    return (s.n, format!("[{words}] {}", s.text));
                }
                let r = m.results.get(&s.n);
                let sum = r.and_then(|r| r.summary.clone());
                let reviewed = r.is_some_and(|r| {
                    matches!(r.review, Some(crate::m1::keys::Review::Approved(_)))
                });
                let sum = sum.unwrap_or_else(|| format!("[{}] {}", s.state.as_str(), s.text));
                (
                    s.n,
                    if reviewed {
                        format!("{sum} (reviewed)")
                    } else {
                        sum
                    },
                )
            })
            .collect();
        let elapsed_s = m.started_at.map_or(0, |t| {
            u64::try_from((Utc::now() - t).num_seconds()).unwrap_or(0)
        });
        let spent = engine::figures::totals(m, &step_loops(m));
        Event::Done {
            goal: m.goal.clone(),
            summaries,
            cost_usd: spent.cost_usd,
            tokens: spent.tokens,
            elapsed_s,
            report,
            once: None,
            uncommitted: engine::uncommitted(m),
            pull_request: m.github.pr.clone(),
        }
    }

    /// Ticks the step's box in the `--plan` file it came from, if any (one byte changes).
    fn tick_plan_file(&mut self, step: u32) {
        let Some(path) = self.view().plan_file.clone() else {
            return;
        };
        if let Err(e) = crate::runner::plan_import::tick(Path::new(&path), step) {
            self.voice.say(&format!(
                "plan file: could not tick step {step} in {path}: {e:#}"
            ));
        }
    }

    /// What asks this loop to stop, now; the global stop file when nothing does any more (a
    /// wait that gave up because of a stop that has since been taken away).
    fn stop_cause(&self) -> engine::Stop {
        self.watch
            .stop()
            .unwrap_or_else(|| engine::Stop::File(stopfile::global().display().to_string()))
    }

    /// A stop (a stop file, `loop stop`, Ctrl-C): kill the step's whole group, confirm it dead,
    /// then write WAITING, and say so in one line.
    fn stop_now(&mut self, stop: &engine::Stop) -> crate::error::Result<Exit> {
        let m = self.view();
        let task = m.current.task_id.clone().filter(|t| !t.is_empty());
        if let Some(id) = &task
            && crate::bridge::exists(&self.state_dir, id)
        {
            crate::bridge::kill(&self.state_dir, id, KILL_GRACE).map_err(|e| {
                e.context(format!(
                    "while killing task {id} for a stop ({})",
                    stop.by()
                ))
            })?;
        }
        let step = m.plan.current_step;
        let kept = engine::by_hand::closed_while_running(&m, step);
        let t = engine::stopped(step, kept, stop, task.as_deref());
        if let Some(id) = &task {
            self.record_judged(id, engine::LedgerVerdict::Stopped, &t.edits, &t.log)?;
        }
        let exit = self.apply(&t)?;
        Ok(exit.unwrap_or(Exit::Waiting))
    }

    /// A stop while M1.md is invalid: kill the task known from the last valid text, write
    /// nothing (the file is the human's to fix), and end WAITING.
    fn stop_while_invalid(&mut self, stop: &engine::Stop) -> Exit {
        let m = self.view();
        if let Some(id) = m.current.task_id.clone().filter(|t| !t.is_empty())
            && crate::bridge::exists(&self.state_dir, &id)
            && self.ledger.judged(&id).is_none()
        {
            let _ = crate::bridge::kill(&self.state_dir, &id, KILL_GRACE);
            // Once the file is fixed, its TASK_ID gets the stop's record, not a judgement.
            let step = m.plan.current_step;
            let kept = engine::by_hand::closed_while_running(&m, step);
            let t = engine::stopped(step, kept, stop, Some(&id));
            let _ = self.record_judged(&id, engine::LedgerVerdict::Stopped, &t.edits, &t.log);
        }
        self.voice.say(&format!(
            "stop: {} seen while M1.md is invalid; step killed, nothing written",
            stop.by()
        ));
        Exit::Waiting
    }

    /// This runner took over a loop whose runner died: recorded (for the guard against a
    /// runner that keeps dying), logged with who revived it, and told to the human.
    fn revived(&mut self, by: &str) {
        revive::record(&self.file, by);
        let m = self.view();
        let at_once: Vec<String> = m.parallel.runs.keys().map(u32::to_string).collect();
        let at = match (m.plan.current_step, at_once.as_slice()) {
            (_, [one]) => format!("while step {one} ran in its own loop"),
            (_, [_, ..]) => format!("while steps {} ran at once", at_once.join(", ")),
            (0, []) if m.plan.steps.is_empty() => "while planning".to_string(),
            (0, []) => "between steps".to_string(),
            (n, []) => format!("at step {n}"),
        };
        self.voice.say(&format!(
            "revive: the runner had died {at}; resumed by itself (revived by {by})"
        ));
        self.voice.notify(&Event::Text(format!(
            "{}\nThe runner died {at}; the loop resumed by itself (revived by {by}).",
            m.goal
        )));
        crash::point("after-revival");
    }

    /// Halts the loop WAITING with `reason` (and `how` to go on), telling the human.
    ///
    /// # Errors
    /// When M1.md cannot be written.
    pub(crate) fn halt(&mut self, reason: &str, how: &str) -> crate::error::Result<Exit> {
        let step = self.view().plan.current_step;
        Ok(self
            .apply(&engine::halt(step, reason, how))?
            .unwrap_or(Exit::Waiting))
    }

    /// The path of M1.md.
    #[must_use]
    pub(crate) fn file(&self) -> &Path {
        &self.file
    }
}

/// What gate `g` of the loop `m` shows in a message.
#[must_use]
pub(crate) fn gate_message(m: &M1, g: &crate::m1::Gate) -> notifier::GateMessage {
    notifier::GateMessage {
        goal: m.goal.clone(),
        id: g.id.clone(),
        kind: g.kind,
        step: g.step,
        steps: if g.kind == crate::m1::GateKind::Plan {
            m.plan.steps.iter().map(|s| s.text.clone()).collect()
        } else {
            Vec::new()
        },
        question: g.question.clone(),
        options: g.options.clone(),
        shown: g.shown.clone(),
        how: engine::gate::how(g),
        answer: None,
        stderr_tail: Vec::new(),
    }
}
