//! Telling a step's own loop what was decided here: a decision on its gate, a person's retry,
//! a merge that sends it back. Never by writing its file from outside: its own runner (the
//! one that holds its lock, here for a moment) applies a transition of the engine, as `loop
//! answer` and `loop retry` do from a shell, and a runner of its own then carries it on.

use std::path::Path;

use super::steps::spawn_runner;
use crate::engine::gate::{Answer, Request};
use crate::m1::M1;
use crate::runner::voice::Voice;
use crate::runner::{RunOptions, gates, lock, retry, stop};

/// What came of a decision carried to a step's loop.
#[derive(Debug)]
pub(super) enum Carried {
    /// The step has no loop to carry it to.
    Nowhere,
    /// Its loop refused it: why, and its M1.md.
    Refused { why: String, file: String },
    /// Its gate has it; `runs_on`: its loop runs on, a runner of its own started.
    Told { runs_on: bool },
}

/// The decision `choice` on gate `gate` here goes to gate `step_gate` of step `n`'s loop,
/// once: its gate decides it (a second carry finds it decided), then its loop runs on.
pub(super) fn carry_decision(
    m: &M1,
    n: u32,
    gate: &str,
    step_gate: &str,
    choice: &str,
    by: &str,
    voice: &Voice,
) -> crate::error::Result<Carried> {
    let Some(file) = step_loop_of(m, n) else {
        return Ok(Carried::Nowhere);
    };
    let req = Request {
        id: Some(step_gate.to_owned()),
        step: None,
        answer: Answer::Text(choice.to_owned()),
        shown: None,
        by: format!("{by} (gate {gate} of the loop that runs this one)"),
    };
    let (decided, runner) = gates::take(Path::new(&file), &req, &RunOptions::default())?;
    let runs_on = runner.is_some();
    drop(runner);
    match decided {
        gates::Decided::Refused(why) => return Ok(Carried::Refused { why, file }),
        gates::Decided::Made { .. } | gates::Decided::Already(_) | gates::Decided::Stale(_) => {}
    }
    voice.say(&crate::engine::parallel::carried(
        n, gate, step_gate, choice,
    ));
    if runs_on {
        spawn_runner(Path::new(&file))?;
    }
    Ok(Carried::Told { runs_on })
}

/// A person's `loop retry N` here, after step `n`'s loop FAILED: that loop's step gets a
/// fresh budget and runs on. `false`: the step has no loop.
pub(super) fn retry_there(m: &M1, n: u32) -> crate::error::Result<bool> {
    let Some(file) = step_loop_of(m, n) else {
        return Ok(false);
    };
    run_again(Path::new(&file), n, None)?;
    Ok(true)
}

/// Step `n`'s merge sent it back: its loop at `file` runs it again in its session, told
/// `told`.
pub(super) fn tell_sent_back(
    file: &Path,
    n: u32,
    told: &str,
    voice: &Voice,
) -> crate::error::Result<()> {
    run_again(file, n, Some(told))?;
    voice.say(&format!(
        "merge: step {n} goes back to its session: {}",
        crate::text::one_line(told, 200)
    ));
    Ok(())
}

/// The `M1.md` of step `n`'s own loop, as `m` records it.
fn step_loop_of(m: &M1, n: u32) -> Option<String> {
    m.parallel.runs.get(&n).and_then(|r| r.loop_file.clone())
}

/// Step `n` of the loop at `file` runs again, as `loop retry` runs it (a fresh budget, its
/// pass marked retried in the ledger, its gates answered), told `why` when there is a reason;
/// then a runner of its own carries it on.
fn run_again(file: &Path, n: u32, why: Option<&str>) -> crate::error::Result<()> {
    if let Some(pid) = lock::wait_released(file, stop::STOP_PATIENCE) {
        return Err(anyhow::anyhow!(
            "step {n}'s loop {} is still driven by pid {pid}",
            file.display()
        )
        .into());
    }
    retry::retried_there(file, n, why, "the loop that runs this one")?;
    spawn_runner(file)
}
