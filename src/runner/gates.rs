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

use super::detach::detach;
use super::settings::{Overrides, Settings};
use super::start::{must_exist, refuse_if_stopped};
use super::{RunOptions, Runner, lock, stopfile};
use crate::engine::gate::{Decision, Request};
use crate::error::{Error, Result};
use crate::exit::Status as ExitStatus;
use crate::m1::{Gate, GateKind, M1, Status};

/// How a decision is carried out.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DecideOptions {
    /// Carry the loop on in the background and return at once.
    pub detach: bool,
    /// One JSON object saying what became of the decision (for the chat bot).
    pub json: bool,
}

/// What became of a decision, once written (or refused).
#[derive(Debug)]
pub(crate) enum Decided {
    /// Written; whether the loop runs on.
    Made {
        gate: Gate,
        choice: String,
        carries_on: bool,
    },
    /// The gate was decided before: nothing changed.
    Already(Gate),
    /// What was shown has changed since: nothing decided, the gate is shown again.
    Stale(Gate),
    /// It cannot apply: why.
    Refused(String),
}

/// Takes the decision `req` on the loop of `file`, once, whoever else decides at the same
/// moment: every decider holds the loop's decision lock, and decides against the file as it
/// is then, writing before anything says it was made.
///
/// A loop whose runner drives it (steps running at once, one of which waits on this gate)
/// gets the decision written beside its runner, which carries it out. Otherwise the decider
/// takes the loop's runner lock (waiting a little for a runner on its way out) and returns
/// the runner, for the caller to carry the loop on when the decision says so.
///
/// # Errors
/// No loop, a runner that does not let go, I/O failures.
pub(crate) fn take(
    file: &Path,
    req: &Request,
    opts: &RunOptions,
) -> Result<(Decided, Option<Runner>)> {
    must_exist(file)?;
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    let decide_lock = crate::layout::Layout::decide_lock(file);
    loop {
        let held = crate::lockfile::exclusive(&decide_lock)?;
        if lock::holder(file).is_some() {
            let doc = crate::m1::load(file).map_err(|e| Error::bad_input(e.to_string()))?;
            let m = doc.view();
            if m.status == Status::Running {
                return Ok((beside(file, &state_dir, req)?, None));
            }
            if let Decision::Already(g) = crate::engine::gate::decide(&m, req, &[], Utc::now()) {
                return Ok((Decided::Already(g), None));
            }
            // The runner that opened the gate is on its way out; it may need the decision lock
            // to get there.
            drop(held);
            if let Some(pid) = lock::wait_released(file, super::stop::STOP_PATIENCE) {
                return Err(Error::bad_input(format!(
                    "a runner (pid {pid}) still drives {} {}s later; nothing was decided: try \
                     again once it waits (`loop status`)",
                    file.display(),
                    super::stop::STOP_PATIENCE.as_secs()
                )));
            }
            continue;
        }
        let settings = Settings::load(&state_dir, Overrides::default())?;
        let mut runner = match Runner::open(file, settings, opts) {
            Ok(runner) => runner,
            // A runner took the loop since the look above (the one a decision just made started
            // in the background, say): ask again, of a loop it drives.
            Err(_) if lock::holder(file).is_some() => {
                drop(held);
                continue;
            }
            Err(e) => return Err(e),
        };
        let m = runner.view();
        let allowed = runner.settings.agent_for(&m).allowed_tools;
        let decision = crate::engine::gate::decide(&m, req, &allowed, Utc::now());
        if let Decision::Already(g) = decision {
            // A decision written by a decider that died before carrying the loop on.
            let carries_on = m.status == Status::Running;
            drop(held);
            return Ok((Decided::Already(g), carries_on.then_some(runner)));
        }
        let decided = settle(decision, |t| {
            runner.apply(t)?;
            Ok(M1::clone(&runner.view()))
        })?;
        drop(held);
        let carries_on = matches!(
            decided,
            Decided::Made {
                carries_on: true,
                ..
            }
        );
        return Ok((decided, carries_on.then_some(runner)));
    }
}

/// The decision, written while the loop's runner drives it (under the decision lock, which
/// [`take`] holds): with a store of its own, as a person's edit would be, which the runner
/// reads at once and carries out.
fn beside(file: &Path, state_dir: &Path, req: &Request) -> Result<Decided> {
    let (mut store, doc) =
        crate::m1::Store::open(file).map_err(|e| Error::bad_input(e.to_string()))?;
    let m = doc.view();
    let settings = Settings::load(state_dir, Overrides::default())?;
    let allowed = settings.agent_for(&m).allowed_tools;
    let decision = crate::engine::gate::decide(&m, req, &allowed, Utc::now());
    settle(decision, |t| {
        let doc = store
            .commit(&t.edits)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let _ = crate::decision_log::append(
            state_dir,
            &format!("{} (the running loop carries it out)", t.log),
        );
        Ok(doc.view())
    })
}

/// The engine's `decision`, written by `write` (which records a transition and gives the loop
/// as written), as what became of it.
fn settle(
    decision: Decision,
    mut write: impl FnMut(&crate::engine::Transition) -> Result<crate::m1::M1>,
) -> Result<Decided> {
    Ok(match decision {
        Decision::Refused(why) => Decided::Refused(why),
        Decision::Already(g) => Decided::Already(g),
        Decision::Stale { gate, transition } => {
            write(&transition)?;
            Decided::Stale(gate)
        }
        Decision::Made {
            gate,
            choice,
            transition,
            carries_on,
        } => {
            let written = write(&transition)?;
            super::crash::point("after-decision-write");
            let gate = written.gate(&gate.id).cloned().unwrap_or(gate);
            Decided::Made {
                gate,
                choice,
                carries_on,
            }
        }
    })
}

/// `loop approve | reject | answer | skip`.
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
    let (decided, runner) = take(file, req, opts)?;
    match decided {
        Decided::Refused(why) => {
            say(how, "refused", None, &why);
            return Err(Error::bad_input(why));
        }
        Decided::Already(g) => {
            say(how, "already", Some(&g), &already(&g));
            if runner.is_none() {
                return Ok(ExitStatus::BadInput);
            }
        }
        Decided::Stale(gate) => {
            let line = format!(
                "gate {}: what was shown has changed since; nothing was decided, and it is shown \
                 again as it is now",
                gate.id
            );
            say(how, "stale", Some(&gate), &line);
            return Ok(ExitStatus::Waiting);
        }
        Decided::Made { gate, choice, .. } => {
            let line = if runner.is_none() && lock::holder(file).is_some() {
                format!(
                    "gate {}: {choice} (the running loop carries it out)",
                    gate.id
                )
            } else {
                format!("gate {}: {choice}", gate.id)
            };
            say(how, "decided", Some(&gate), &line);
        }
    }
    let Some(mut runner) = runner else {
        // Nobody to carry on: the running loop's runner carries the decision out (0), or the
        // decision ended the loop, which stands as `loop resume` would say it: FAILED (STOP)
        // exits 1, a loop still waiting 3.
        if lock::holder(file).is_some() {
            return Ok(ExitStatus::Ok);
        }
        let status = crate::m1::load(file).map(|d| d.view().status).ok();
        return Ok(match status {
            Some(Status::Failed) => ExitStatus::Failed,
            Some(Status::Done) => ExitStatus::Ok,
            _ => ExitStatus::Waiting,
        });
    };
    if let Err(e) = refuse_if_stopped(&state_dir) {
        crate::errln!("loop: the decision is recorded, but the loop cannot carry on yet: {e}");
        return Ok(ExitStatus::Waiting);
    }
    super::revive::forget(file);
    if how.detach {
        drop(runner);
        return detach(file, None);
    }
    runner.watch.catch_interrupt();
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
        if g.kind == GateKind::Plan {
            // The plan it asks about, as the chat's message shows it.
            for s in &m.plan.steps {
                crate::outln!("    {}. {}", s.n, s.text);
            }
        }
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
