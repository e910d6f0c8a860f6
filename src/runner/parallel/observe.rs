//! What each step running at once looks like now: its own loop read from disk, whether a
//! runner drives it, and whose it is. The engine decides from this alone.

use std::collections::BTreeMap;
use std::path::Path;

use super::at_once::AtOnce;
use crate::engine::parallel::{Observed, Seen};
use crate::m1::{GateState, M1, ParallelRun, Status, StepState};

impl AtOnce {
    /// Each recorded step's loop, as it stands.
    pub(super) fn observe_steps(&self, m: &M1) -> BTreeMap<u32, Observed> {
        let me = self.id(m);
        m.parallel
            .runs
            .iter()
            .filter(|(_, run)| run.merged.is_none())
            .map(|(&n, run)| (n, observe(&self.file, &me, n, run)))
            .collect()
    }

    /// The steps whose loops wait for something a person must do that is not a gate (what
    /// their `NEXT_ACTION` says).
    pub(super) fn halted_steps(&self, m: &M1) -> Vec<(u32, String)> {
        self.observe_steps(m)
            .into_iter()
            .filter_map(|(n, o)| match o.seen {
                Seen::Halted(why) => Some((n, why)),
                _ => None,
            })
            .collect()
    }
}

/// Step `n`'s loop, recorded as `run` by the loop `parent_id` whose file is `parent`.
fn observe(parent: &Path, parent_id: &str, n: u32, run: &ParallelRun) -> Observed {
    let Some(file) = run.loop_file.as_deref().map(Path::new) else {
        return Observed::new(Seen::Unmade);
    };
    let worktree_made = run
        .worktree
        .as_deref()
        .is_some_and(|w| Path::new(w).join(".git").exists());
    if !file.exists() || !worktree_made {
        return Observed::new(Seen::Unmade);
    }
    let driven = crate::runner::lock::holder(file).is_some();
    let child = match crate::m1::load(file) {
        Ok(doc) => doc.view(),
        // Being written by its runner, or broken by a hand edit there: its runner says which.
        Err(_) if driven => return Observed::new(Seen::Driven),
        Err(e) => {
            return Observed::new(Seen::Halted(format!(
                "its M1.md ({}) does not read: {e}",
                file.display()
            )));
        }
    };
    if let Some(why) = foreign(parent, parent_id, n, &child) {
        return Observed::new(Seen::Foreign(why));
    }
    let spent = crate::engine::spent(&child);
    let decided = child
        .gates
        .iter()
        .filter(|g| g.state == GateState::Decided)
        .map(|g| {
            (
                g.id.clone(),
                g.choice.clone().unwrap_or_default(),
                g.by.clone().unwrap_or_default(),
            )
        })
        .collect();
    let seen = seen(&child, n, driven);
    Observed {
        seen,
        spent,
        decided,
    }
}

/// How step `n`'s loop `child` stands; `driven`: a runner holds it.
fn seen(child: &M1, n: u32, driven: bool) -> Seen {
    let step = child.plan.steps.iter().find(|s| s.n == n).map(|s| s.state);
    // DONE is the last thing a step's runner writes: its step can be merged while the runner
    // exits (the release of its lock makes no file event to wake on).
    if child.status == Status::Done {
        return if step == Some(StepState::Skipped) {
            Seen::Skipped
        } else {
            Seen::Done
        };
    }
    if driven {
        return Seen::Driven;
    }
    if let Some(g) = child.pending_gates().next() {
        return Seen::Decision(Box::new(g.clone()));
    }
    let said = || {
        child
            .next_action
            .clone()
            .or_else(|| child.last_action.clone())
            .unwrap_or_else(|| format!("its loop is {}", child.status.as_str()))
    };
    match child.status {
        Status::Running | Status::Idle => Seen::Undriven,
        Status::Waiting => Seen::Halted(child.last_action.clone().unwrap_or_else(said)),
        Status::Failed => Seen::Failed(child.last_action.clone().unwrap_or_else(said)),
        Status::Done => Seen::Done,
    }
}

/// Why the loop `child` at step `n`'s path is not that step's of the loop `parent_id` (whose
/// file is `parent`); `None` when it is. A loop written before loops were bound by id is this
/// loop's when its `PARENT` names this file.
fn foreign(parent: &Path, parent_id: &str, n: u32, child: &M1) -> Option<String> {
    match (&child.parent_id, child.parent_step) {
        (Some(id), Some(step)) if id == parent_id && step == n => None,
        (Some(id), Some(step)) => Some(format!(
            "it runs step {step} of the loop {id}, not step {n} of this loop ({parent_id})"
        )),
        (None, _) => {
            let abs = std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf());
            let named = child
                .parent
                .as_deref()
                .is_some_and(|p| Path::new(p) == abs.as_path());
            (!named).then(|| "it names no parent loop".to_owned())
        }
        (Some(id), None) => Some(format!("it belongs to the loop {id}, but to no step of it")),
    }
}
