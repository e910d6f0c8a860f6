//! The runner's side of each move of the scheduler: the parallel driver (`AtOnce`) does the
//! I/O on the steps' loops and hands back what came of it; what that makes of M1.md, a
//! transition of the engine written with the runner's record, is here.

use std::path::Path;

use chrono::Utc;

use super::merge::{self, Merging, child_result};
use super::steps::{self, MAX_STARTS, RunOn, unmerged};
use super::tell::{self, Carried};
use crate::engine::{
    self,
    parallel::{MergeCheck, MergeFailure, MergeOutcome, Move},
};
use crate::exit::Status as Exit;
use crate::m1::keys::{ParallelKey, RunKey};
use crate::m1::{Edit, M1, StepState};
use crate::runner::{Runner, crash};

/// How VERIFY on a merged result came out.
#[derive(Debug)]
enum Checked {
    /// Passed; `ran`: a VERIFY is set and ran.
    Passed { ran: bool },
    /// A stop ended it.
    Stopped,
    /// A person set the step SKIPPED by hand while it ran: it is not merged.
    Skipped,
    /// The loop ended while it ran (a stop while M1.md was invalid).
    Ended(Exit),
    /// What it said, last.
    Failed(String),
}

impl Runner {
    /// Carries out one move; `Some` when the command ends with it.
    pub(super) fn carry(&mut self, mv: Move) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        match mv {
            Move::Start(n) => self.start_step(n),
            Move::SetAside(n) => steps::set_aside(&m, n, &self.voice).map(|()| None),
            Move::Drive(n) => self.drive_step(n),
            Move::Merge(n) => {
                let started = Utc::now();
                let merged = self.merge_step(n);
                let failed = merged.as_ref().err().map(|e| format!("{e:#}"));
                self.io.trace_merge(&self.view(), n, started, failed);
                merged
            }
            Move::SendBack { step, gate } => {
                let (t, told) = engine::parallel::sent_back_by_a_person(step, &gate);
                self.apply(&t)?;
                merge::send_back(&self.view(), step, &told, &[], &self.voice).map(|()| None)
            }
            Move::CleanUp(n) => {
                self.at_once.clean_up(&m, n, &self.voice);
                self.commit(&[Edit::Remove(crate::m1::keys::run_block(n))])
                    .map(|()| None)
            }
            Move::Drop(n) => {
                let kept = self.at_once.take_down(&m, n, &self.voice);
                let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
                let branch = run.branch.clone().unwrap_or_default();
                let done_by_hand =
                    engine::by_hand::closed_while_running(&m, n) == Some(StepState::Done);
                let child = child_result(run.loop_file.as_deref(), n);
                let kept = kept.then_some(branch.as_str());
                let t = engine::parallel::dropped(n, done_by_hand, kept, &child);
                self.apply(&t).map(|_| None)
            }
            Move::Mirror { step, gate } => self.apply(&engine::parallel::mirrored(&m, step, &gate)),
            Move::Carry {
                step,
                gate,
                step_gate,
                choice,
                by,
            } => self.carry_decision(step, &gate, &step_gate, &choice, &by),
            Move::Settled {
                step,
                gate,
                choice,
                by,
            } => {
                let t = engine::parallel::settled(step, &gate, &choice, &by, Utc::now());
                let _held = self.decide_lock()?;
                self.apply(&t)
            }
            Move::RetryThere(n) => {
                if !tell::retry_there(&m, n)? {
                    return Ok(None);
                }
                self.apply(&engine::parallel::retried_there(n))
            }
            Move::Fail { step, reason } => {
                let others: Vec<u32> = self
                    .stop_steps(&m)
                    .into_iter()
                    .filter(|s| *s != step)
                    .collect();
                let run = m.parallel.runs.get(&step).cloned().unwrap_or_default();
                let child = child_result(run.loop_file.as_deref(), step);
                let t = engine::parallel::failed(step, &reason, &others, &child);
                self.apply(&t).map(|e| e.or(Some(Exit::Failed)))
            }
            Move::Finish => self.finish_parallel().map(Some),
            Move::Halt { reason, how } => self.halted(&reason, &how),
            Move::OverBudget { step, reason } => self
                .apply(&engine::gate::over_budget(&m, step, &reason))
                .map(|e| e.or(Some(Exit::Waiting))),
            Move::Wait => self.wait_for_people(),
        }
    }

    /// The loop halts WAITING, at no step, with `reason` and `how` to go on.
    fn halted(&mut self, reason: &str, how: &str) -> crate::error::Result<Option<Exit>> {
        self.apply(&engine::halt(0, reason, how))
            .map(|e| e.or(Some(Exit::Waiting)))
    }

    /// The integration branch, made (and recorded first) when the loop has none yet.
    fn integration(&mut self) -> crate::error::Result<String> {
        let m = self.view();
        if let Some(b) = self.at_once.integration_of(&m)? {
            return Ok(b);
        }
        let (branch, base) = self.at_once.new_integration(&m)?;
        self.commit(&[
            ParallelKey::Branch.set(branch.clone()),
            ParallelKey::Base.set(base.clone()),
        ])?;
        self.at_once.branch_off(&branch, &base, &self.voice)?;
        Ok(branch)
    }

    /// Starts step `n`: its record first, then (the driver's) its worktree, its loop and its
    /// runner. What git cannot do with the record (a hand-written base it does not have) halts
    /// the loop, naming the record: never an error with nobody driving.
    fn start_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let integration = self.integration()?;
        let m = self.view();
        let names = self.at_once.names_for(&m, n, &integration)?;
        if !m.parallel.runs.contains_key(&n) || m.parallel.runs[&n].loop_file.is_none() {
            self.apply(&engine::parallel::recorded(n, &names))?;
        }
        let m = self.view();
        let max_steps = self.settings.caps(&m).max_steps;
        let resolved = self.settings.runs_with(&m);
        let doc = self.record.doc();
        let runs_with = |p: &crate::m1::KeyPath| match resolved.get(p) {
            Some(v) => v.clone(),
            None => doc.get_at(p),
        };
        let at_once = &self.at_once;
        let text = |wt: &Path| at_once.step_loop_text(&m, n, wt, max_steps, &runs_with);
        let Err(why) = self.at_once.start(&names, &text)? else {
            return Ok(None);
        };
        self.halted(
            &format!("step {n}'s worktree cannot be made from its record PARALLEL.STEP_{n}: {why}"),
            &format!(
                "fix or remove PARALLEL.STEP_{n} in M1.md (its WORKTREE, BRANCH and BASE), then \
                 `loop resume`"
            ),
        )
    }

    /// Step `n`'s loop runs on: the mark that it was stopped (or waited) with this loop goes
    /// first, then (the driver's) its runner starts. A loop that could not start, or was started
    /// too often without a person's word, halts this loop, saying why.
    fn drive_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let Some(run) = m.parallel.runs.get(&n) else {
            return Ok(None);
        };
        if run.stopped {
            self.commit(&[RunKey::Stopped.remove(n)])?;
            // A person's `loop resume`: the count begins again.
            self.at_once.forget_starts(n);
        }
        let Some(f) = run.loop_file.clone() else {
            return Ok(None);
        };
        match self.at_once.run_on(n, Path::new(&f), &self.voice)? {
            RunOn::Started => Ok(None),
            RunOn::TooOften { out } => self.halted(
                &format!(
                    "step {n}'s loop was started {MAX_STARTS} times, and its runner ended each \
                     time with the step unfinished"
                ),
                &format!(
                    "read what it printed ({}) and its log, fix what ends it, then `loop resume`",
                    out.display()
                ),
            ),
            RunOn::CannotStart(why) => self.halted(
                &format!("step {n}'s loop cannot start: {why}"),
                &format!(
                    "fix what it says (in {f} or this loop's environment), then `loop resume`"
                ),
            ),
        }
    }

    /// Stops every step's loop that runs (marking each first, so that `loop resume` carries
    /// it on); the steps stopped.
    pub(super) fn stop_steps(&mut self, m: &M1) -> Vec<u32> {
        let running = unmerged(m);
        let marks: Vec<Edit> = running
            .iter()
            .map(|(n, _)| RunKey::Stopped.set(*n, "true"))
            .collect();
        if let Err(e) = self.commit(&marks) {
            self.voice.say(&format!(
                "parallel: the stop marks could not be written: {e}"
            ));
        }
        steps::stop_loops(&running);
        running.into_iter().map(|(n, _)| n).collect()
    }

    /// Every step is DONE or SKIPPED and none is in flight: (the driver's) the result lands in
    /// the project, or on its branch, then DONE.
    fn finish_parallel(&mut self) -> crate::error::Result<Exit> {
        let landed = self.at_once.finish(&self.view());
        self.watch.set_step_dirs(&[]);
        let m = self.view();
        let t = engine::parallel::finished(&m, &landed);
        self.tell_done(&t.edits);
        self.commit(&t.edits)?;
        self.voice.say(&t.log);
        self.carry_out(&m, &t.effects);
        Ok(Exit::Ok)
    }

    /// Merges step `n`, whose loop is DONE, once: a merge noted beside its loop (a save of an
    /// older M1.md put its record back) is recorded again, not made again. The merged result
    /// goes through VERIFY before the integration branch moves.
    fn merge_step(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let integration = self.integration()?;
        if let Some((commit, check)) = self.at_once.merged_before(&run) {
            return self.record_merged(n, &commit, check).map(|()| None);
        }
        let (merged, check) = match self.at_once.merge(&m, n, &integration)? {
            Merging::In { commit, check } => (commit, check),
            Merging::Conflict(files) => {
                return self.merge_failed(n, &MergeOutcome::Conflict(files));
            }
            Merging::Merged { merged, old, wt } => {
                let ran = match self.verify_merged(&m, n, &wt)? {
                    Checked::Passed { ran } => ran,
                    // The queue's next look sees the stop, or drops the step; the branch
                    // has not moved.
                    Checked::Stopped | Checked::Skipped => return Ok(None),
                    Checked::Ended(exit) => return Ok(Some(exit)),
                    Checked::Failed(failure) => {
                        return self.merge_failed(n, &MergeOutcome::Red(failure));
                    }
                };
                self.at_once.move_integration(&integration, &merged, &old)?;
                let check = if ran {
                    MergeCheck::Verified
                } else {
                    MergeCheck::NoVerify
                };
                (merged, check)
            }
        };
        merge::note_merged(&run, &merged)?;
        self.record_merged(n, &merged, check)?;
        crash::point("parallel-after-merged-write");
        Ok(None)
    }

    /// Step `n` is merged at `commit`: DONE, with what its own loop recorded.
    fn record_merged(
        &mut self,
        n: u32,
        commit: &str,
        check: MergeCheck,
    ) -> crate::error::Result<()> {
        let m = self.view();
        let run = m.parallel.runs.get(&n).cloned().unwrap_or_default();
        let child = child_result(run.loop_file.as_deref(), n);
        let t = engine::parallel::merged(&m, n, commit, check, &child, run.loop_file.as_deref());
        self.apply(&t)?;
        if self.settings.notify_each_step {
            let summary = child.summary.clone().unwrap_or_else(|| "done".into());
            self.carry_out(&m, &[engine::Effect::StepDone { step: n, summary }]);
        }
        Ok(())
    }

    /// VERIFY on step `n` merged, in the merge worktree `wt` (passed, not run, when none is
    /// set). It runs as a step's VERIFY does ([`crate::verify::run`]): a task of the exec
    /// bridge, ended with its whole group at the step timeout or a stop.
    fn verify_merged(&mut self, m: &M1, n: u32, wt: &Path) -> crate::error::Result<Checked> {
        use crate::verify::Outcome;
        let Some(cmd) = self.settings.verify(m) else {
            return Ok(Checked::Passed { ran: false });
        };
        let state_dir = self.state_dir.clone();
        let how = crate::verify::Run {
            command: &cmd,
            cwd: wt,
            env: &[("LOOP_STEP".to_owned(), n.to_string())],
            state_dir: &state_dir,
            step_task: &super::merge_task(&self.at_once.id(m), n),
            timeout: self.settings.caps(m).step_timeout,
        };
        let sandbox = self.settings.sandbox(m);
        let outcome = self.io.verify_confined(&sandbox, &how, wt)?;
        // It may have run for minutes: what a person did meanwhile comes first.
        if let Some(exit) = self.refresh()? {
            return Ok(Checked::Ended(exit));
        }
        if engine::by_hand::closed_while_running(&self.view(), n) == Some(StepState::Skipped) {
            self.voice.say(&format!(
                "merge: step {n} was set SKIPPED by hand while VERIFY ran on its merged result: \
                 it is not merged"
            ));
            return Ok(Checked::Skipped);
        }
        let tail = |t: &str| crate::text::one_line(t.trim(), 300);
        Ok(match outcome {
            Outcome::Passed => Checked::Passed { ran: true },
            Outcome::Stopped => Checked::Stopped,
            Outcome::Refused { code, said, .. } => Checked::Failed(format!(
                "`{cmd}` exited {}: {said}",
                code.map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
            )),
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

    /// Step `n`'s merge failed: back to its session, or a gate (the engine's choice).
    fn merge_failed(
        &mut self,
        n: u32,
        outcome: &MergeOutcome,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let place = merge::work_place(&m, n);
        let caps = self.settings.caps(&m);
        match engine::parallel::merge_failed(&m, n, outcome, &caps, &place) {
            MergeFailure::Gate(t) => self.apply(&t),
            MergeFailure::SendBack { transition, told } => {
                self.apply(&transition)?;
                let files = match outcome {
                    MergeOutcome::Conflict(f) => f.clone(),
                    MergeOutcome::Red(_) => Vec::new(),
                };
                merge::send_back(&self.view(), n, &told, &files, &self.voice).map(|()| None)
            }
        }
    }

    /// The decision `choice` on gate `gate` here goes to gate `step_gate` of step `n`'s loop
    /// (the driver's); a loop that refuses it halts this one, and a step its loop runs on
    /// again is running here too.
    fn carry_decision(
        &mut self,
        n: u32,
        gate: &str,
        step_gate: &str,
        choice: &str,
        by: &str,
    ) -> crate::error::Result<Option<Exit>> {
        let m = self.view();
        let carried = tell::carry_decision(&m, n, gate, step_gate, choice, by, &self.voice)?;
        match carried {
            Carried::Nowhere | Carried::Told { runs_on: false } => Ok(None),
            Carried::Refused { why, file } => self.halted(
                &format!("step {n}'s loop refused gate {gate}'s decision `{choice}`: {why}"),
                &format!(
                    "decide its gate {step_gate} there (`loop --file {file} gates`), then `loop \
                     resume` here"
                ),
            ),
            Carried::Told { runs_on: true } => {
                if (self.view().plan.steps.iter())
                    .any(|s| s.n == n && s.state != StepState::Running)
                {
                    self.apply(&engine::parallel::retried_there(n))?;
                }
                Ok(None)
            }
        }
    }
}
