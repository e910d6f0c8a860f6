//! `loop retry [N]`: a person's decision to try a step again, recorded as one (see
//! [`crate::engine::retried`]), then the loop runs on as `loop resume` runs it.

use std::path::Path;

use chrono::Utc;

use super::detach::detach;
use super::settings::{Overrides, Settings};
use super::start::{check_agent_of, prepare_to_carry_on};
use super::{RunOptions, Runner, lock};
use crate::engine;
use crate::error::{Error, Result};
use crate::exit::Status as ExitStatus;
use crate::m1::StepState;

/// `loop retry [N] [--detach]`.
///
/// # Errors
/// No loop, no such step, no step to retry, a runner driving the loop, a stop file (exit 2 or
/// 3); I/O failures.
pub(crate) fn retry(
    file: &Path,
    step: Option<u32>,
    detach_it: bool,
    opts: &RunOptions,
) -> Result<ExitStatus> {
    let state_dir = prepare_to_carry_on(file, detach_it)?;
    // A step whose decision a running loop waits for (a step running at once, whose gate is
    // shown here): the retry is that decision, taken as `loop answer` takes it.
    if lock::holder(file).is_some()
        && let Some(id) = step.and_then(|n| gate_offering_retry(file, n))
    {
        let req = crate::engine::gate::Request {
            id: Some(id),
            step: None,
            answer: crate::engine::gate::Answer::Text(crate::m1::GateOption::Retry.as_str().into()),
            shown: None,
            by: "loop retry".into(),
        };
        let how = super::gates::DecideOptions {
            detach: detach_it,
            json: false,
        };
        return super::gates::decide(file, &req, how, opts);
    }
    if let Some(pid) = lock::holder(file) {
        return Err(Error::bad_input(format!(
            "a runner (pid {pid}) drives {}; stop it first ({}), then `loop retry`",
            file.display(),
            super::stopfile::command_for(file)
        )));
    }
    let settings = Settings::load(&state_dir, Overrides::default())?;
    check_agent_of(file, &settings)?;
    let mut runner = Runner::open(file, settings, opts)?;
    let n = which_step(&runner, step)?;
    let t = runner.retried(n, None, "loop retry")?;
    runner.apply(&t)?;
    super::revive::forget(file);
    if detach_it {
        drop(runner);
        return detach(file, None);
    }
    runner.watch.catch_interrupt();
    runner.drive_in_view()
}

/// Step `n` of the loop at `file`, which no runner drives, runs again as `loop retry` runs it,
/// told `why` when there is a reason; `by` decides the gates that asked about it. Its runner
/// ends with the write: a runner of its own is the caller's to start.
///
/// # Errors
/// Its lock is held, its M1.md or the ledger cannot be read or written.
pub(super) fn retried_there(file: &Path, n: u32, why: Option<&str>, by: &str) -> Result<()> {
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    let settings = Settings::load(&state_dir, Overrides::default())?;
    let mut runner = Runner::open(file, settings, &RunOptions::default())?;
    let t = runner.retried(n, why, by)?;
    runner.apply(&t)?;
    Ok(())
}

impl Runner {
    /// Step `n` runs again, as a person's `loop retry` runs it: the ledger learns first that
    /// its pass (if it passed) no longer counts, then the transition gives it a fresh budget
    /// and answers `retry` on the gates that asked about it (`by` deciding them); `why`: what
    /// its agent is told, when there is a reason. For the caller to apply.
    pub(super) fn retried(
        &mut self,
        n: u32,
        why: Option<&str>,
        by: &str,
    ) -> Result<engine::Transition> {
        let m = self.view();
        if m.plan
            .steps
            .iter()
            .any(|s| s.n == n && s.state == StepState::Done)
        {
            self.ledger
                .mark_retried(n, &Utc::now().to_rfc3339())
                .map_err(|e| e.context(format!("while recording the retry of step {n}")))?;
        }
        Ok(engine::retried_by(&m, n, why, by, Utc::now()))
    }
}

/// The pending gate of step `n` that offers `retry`, if the loop of `file` has one.
fn gate_offering_retry(file: &Path, n: u32) -> Option<String> {
    let m = crate::m1::load(file).ok()?.view();
    m.pending_gates()
        .find(|g| g.step == n && g.option(crate::m1::GateOption::Retry.as_str()).is_some())
        .map(|g| g.id.clone())
}

/// The step a retry is about: the one named, which must be in the plan; else the failed or
/// waiting one.
fn which_step(runner: &Runner, step: Option<u32>) -> Result<u32> {
    let m = runner.view();
    match step {
        Some(0) | None if m.plan.steps.is_empty() => Ok(0),
        Some(n) if m.plan.steps.iter().any(|s| s.n == n) => Ok(n),
        Some(n) => Err(Error::bad_input(format!(
            "there is no step {n}: the plan has steps {}",
            m.plan
                .steps
                .iter()
                .map(|s| s.n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => engine::retry_target(&m).ok_or_else(|| {
            Error::bad_input(format!(
                "no step of {} is FAILED or waiting (the loop is {}); name the step to run \
                 again: `loop retry N`",
                runner.file().display(),
                m.status.as_str()
            ))
        }),
    }
}
