//! `loop gates`, `loop approve`, `loop reject`, `loop answer`: a person's decision on a gate,
//! from the shell or (through these same commands) from the chat.
//!
//! A decision is made under the loop's runner lock, against M1.md as it is then, and written
//! (atomically, with the loop set RUNNING when it carries on) before anything says it was
//! made: so two deciders, whichever comes first, make one decision, and the other is told
//! "already decided". A decider that dies after the write leaves a RUNNING loop with no
//! runner, which the next decider (or `loop daemon`, or `loop resume`) carries on.

use std::fmt::Write as _;
use std::path::Path;

use chrono::Utc;
use serde_json::json;

use super::settings::{Overrides, Settings};
use super::start::{detach, must_exist, refuse_if_stopped};
use super::{RunOptions, Runner, lock, stopfile};
use crate::engine::gate::{Decision, Request};
use crate::error::{Error, Result};
use crate::exit::Status as ExitStatus;
use crate::m1::{Gate, GateKind, Status};

/// How a decision is carried out.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DecideOptions {
    /// Carry the loop on in the background and return at once.
    pub detach: bool,
    /// One JSON object saying what became of the decision (for the chat bot).
    pub json: bool,
}

/// `loop approve | reject | answer`.
///
/// # Errors
/// No loop, no such gate, an answer that does not fit (exit 2); a runner that keeps driving
/// the loop; I/O failures.
pub(crate) fn decide(
    file: &Path,
    req: &Request,
    how: DecideOptions,
    opts: &RunOptions,
) -> Result<ExitStatus> {
    if !how.detach {
        stopfile::block_interrupt();
    }
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    must_exist(file)?;
    // A gate decided while a runner drives the loop (the runner that decision started): say
    // so at once, there is nothing to carry on.
    if lock::holder(file).is_some()
        && let Ok(doc) = crate::m1::load(file)
        && let Decision::Already(g) = crate::engine::gate::decide(&doc.view(), req, &[], Utc::now())
    {
        say(how, "already", Some(&g), &already(&g));
        return Ok(ExitStatus::BadInput);
    }
    // The runner that opened the gate may still be on its way out.
    if let Some(pid) = lock::wait_released(file, super::STOP_PATIENCE) {
        return Err(Error::bad_input(format!(
            "a runner (pid {pid}) still drives {} {}s later; nothing was decided: try again once \
             it waits (`loop status`)",
            file.display(),
            super::STOP_PATIENCE.as_secs()
        )));
    }
    let settings = Settings::load(&state_dir, Overrides::default())?;
    let mut runner = Runner::open(file, settings, opts)?;
    let m = runner.view();
    let allowed = runner.settings.agent_for(&m).allowed_tools;
    let carry_on = match crate::engine::gate::decide(&m, req, &allowed, Utc::now()) {
        Decision::Refused(why) => {
            say(how, "refused", None, &why);
            return Err(Error::bad_input(why));
        }
        Decision::Already(g) => {
            let line = already(&g);
            // A decision written by a decider that died before carrying the loop on.
            let carry_on = m.status == Status::Running;
            say(how, "already", Some(&g), &line);
            if !carry_on {
                return Ok(ExitStatus::BadInput);
            }
            true
        }
        Decision::Stale { gate, transition } => {
            runner.apply(&transition)?;
            let line = format!(
                "gate {}: what was shown has changed since; nothing was decided, and it is shown \
                 again as it is now",
                gate.id
            );
            say(how, "stale", Some(&gate), &line);
            return Ok(ExitStatus::Waiting);
        }
        Decision::Made {
            gate,
            choice,
            transition,
            carries_on,
        } => {
            runner.apply(&transition)?;
            super::crash::point("after-decision-write");
            let decided = runner.view().gate(&gate.id).cloned().unwrap_or(gate);
            say(
                how,
                "decided",
                Some(&decided),
                &format!("gate {}: {choice}", decided.id),
            );
            carries_on
        }
    };
    if !carry_on {
        return Ok(ExitStatus::Waiting);
    }
    if let Err(e) = refuse_if_stopped(&state_dir) {
        crate::errln!("loop: the decision is recorded, but the loop cannot carry on yet: {e}");
        return Ok(ExitStatus::Waiting);
    }
    super::revive::forget(file);
    if how.detach {
        drop(runner);
        return detach(file, None);
    }
    stopfile::catch_interrupt(runner.watch.waker());
    runner.drive_in_view()
}

/// "already decided: …", with who and when.
fn already(g: &Gate) -> String {
    let mut line = format!(
        "gate {} was already decided: {}",
        g.id,
        g.choice.as_deref().unwrap_or("?")
    );
    if let Some(by) = &g.by {
        let _ = write!(line, " by {by}");
    }
    if let Some(at) = g.at {
        let _ = write!(line, " at {}", at.format("%Y-%m-%d %H:%M UTC"));
    }
    line
}

/// Says what became of the decision: a line, or one JSON object.
fn say(how: DecideOptions, outcome: &str, gate: Option<&Gate>, line: &str) {
    if how.json {
        crate::outln!(
            "{}",
            json!({
                "outcome": outcome,
                "gate": gate,
                "message": line,
            })
        );
    } else {
        crate::outln!("{line}");
    }
}

/// `loop gates [--json]`: the loop's gates, the pending ones first, each with how to decide it.
///
/// # Errors
/// No loop, or an M1.md that does not read.
pub(crate) fn list(file: &Path, as_json: bool) -> Result<ExitStatus> {
    let doc = crate::m1::load(file).map_err(|e| Error::bad_input(e.to_string()))?;
    let m = doc.view();
    if as_json {
        crate::outln!("{}", json!({ "gates": m.gates }));
        return Ok(ExitStatus::Ok);
    }
    if m.gates.is_empty() {
        crate::outln!("no gates: the loop waits for no decision");
        return Ok(ExitStatus::Ok);
    }
    for g in m.pending_gates() {
        crate::outln!(
            "{} {} PENDING: {}",
            g.id,
            g.kind,
            crate::engine::gate::about(&m, g)
        );
        crate::outln!("    {}", crate::engine::gate::how(g));
        if !matches!(g.kind, GateKind::Plan | GateKind::Ask) {
            for o in &g.options {
                crate::outln!("      {o}: {}", crate::m1::gates::what_it_does(g.kind, o));
            }
        }
    }
    for g in m.gates.iter().filter(|g| !g.is_pending()) {
        crate::outln!("{} {}: {}", g.id, g.kind, crate::engine::gate::about(&m, g));
        crate::outln!(
            "    {}",
            already(g).replacen(" was already decided", " decided", 1)
        );
    }
    Ok(ExitStatus::Ok)
}
