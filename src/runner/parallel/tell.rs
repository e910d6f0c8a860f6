//! Telling a step's own loop what was decided here: a decision on its gate, a person's retry,
//! a merge that sends it back. Never by writing its file from outside: its own runner (the
//! one that holds its lock, here for a moment) applies a transition of the engine, as `loop
//! answer` and `loop retry` do from a shell, and a runner of its own then carries it on.

use std::path::Path;

use super::super::{RunOptions, Runner, gates::Decided, settings::Overrides, settings::Settings};
use super::steps::spawn_runner;
use crate::engine::{
    self,
    gate::{Answer, Request},
};
use crate::exit::Status as Exit;
use crate::m1::StepState;

impl Runner {
    /// The decision `choice` on gate `gate` here goes to gate `step_gate` of step `n`'s loop,
    /// once: its gate decides it (a second carry finds it decided), then its loop runs on.
    pub(super) fn carry_decision(
        &mut self,
        n: u32,
        gate: &str,
        step_gate: &str,
        choice: &str,
        by: &str,
    ) -> crate::error::Result<Option<Exit>> {
        let Some(file) = self.step_loop_of(n) else {
            return Ok(None);
        };
        let req = Request {
            id: Some(step_gate.to_owned()),
            step: None,
            answer: Answer::Text(choice.to_owned()),
            shown: None,
            by: format!("{by} (gate {gate} of the loop that runs this one)"),
        };
        let (decided, runner) =
            super::super::gates::take(Path::new(&file), &req, &RunOptions::default())?;
        let carries_on = runner.is_some();
        drop(runner);
        match decided {
            Decided::Refused(why) => {
                let t = engine::halt(
                    0,
                    &format!("step {n}'s loop refused gate {gate}'s decision `{choice}`: {why}"),
                    &format!(
                        "decide its gate {step_gate} there (`loop --file {file} gates`), then \
                         `loop resume` here"
                    ),
                );
                return self.apply(&t).map(|e| e.or(Some(Exit::Waiting)));
            }
            Decided::Made { .. } | Decided::Already(_) | Decided::Stale(_) => {}
        }
        self.voice
            .say(&engine::parallel::carried(n, gate, step_gate, choice));
        if carries_on {
            spawn_runner(Path::new(&file))?;
            if self
                .view()
                .plan
                .steps
                .iter()
                .any(|s| s.n == n && s.state != StepState::Running)
            {
                self.apply(&engine::parallel::retried_there(n))?;
            }
        }
        Ok(None)
    }

    /// The `M1.md` of step `n`'s own loop, as recorded.
    fn step_loop_of(&self, n: u32) -> Option<String> {
        self.view()
            .parallel
            .runs
            .get(&n)
            .and_then(|r| r.loop_file.clone())
    }

    /// A person's `loop retry N` here, after step `n`'s loop FAILED: that loop's step gets a
    /// fresh budget and runs on.
    pub(super) fn retry_there(&mut self, n: u32) -> crate::error::Result<Option<Exit>> {
        let Some(file) = self.step_loop_of(n) else {
            return Ok(None);
        };
        run_again(Path::new(&file), n, None)?;
        self.apply(&engine::parallel::retried_there(n))
    }

    /// Step `n`'s merge sent it back: its loop runs it again in its session, told `told`.
    pub(super) fn tell_sent_back(
        &mut self,
        file: &Path,
        n: u32,
        told: &str,
    ) -> crate::error::Result<()> {
        run_again(file, n, Some(told))?;
        self.voice.say(&format!(
            "merge: step {n} goes back to its session: {}",
            crate::text::one_line(told, 200)
        ));
        Ok(())
    }
}

/// Step `n` of the loop at `file` runs again, as `loop retry` runs it (a fresh budget, its
/// pass marked retried in the ledger, its gates answered), told `why` when there is a reason;
/// then a runner of its own carries it on.
fn run_again(file: &Path, n: u32, why: Option<&str>) -> crate::error::Result<()> {
    if let Some(pid) = super::super::lock::wait_released(file, super::super::stop::STOP_PATIENCE) {
        return Err(anyhow::anyhow!(
            "step {n}'s loop {} is still driven by pid {pid}",
            file.display()
        )
        .into());
    }
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    let settings = Settings::load(&state_dir, Overrides::default())?;
    let mut runner = Runner::open(file, settings, &RunOptions::default())?;
    let t = runner.retried(n, why, "the loop that runs this one")?;
    runner.apply(&t)?;
    drop(runner);
    spawn_runner(file)
}
