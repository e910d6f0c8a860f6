//! The parallel driver as a part of the runner: what it keeps between passes, and where it
//! works. Its moves are I/O on the loops of the steps (start and stop them, merge their
//! worktrees, tell them a decision, look at them: `steps`, `merge`, `tell`, `observe`), each
//! handing back what it found or did; what that makes of M1.md (a transition, a write) is the
//! runner's, which holds the record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::m1::M1;

/// The driver of steps at once.
#[derive(Debug)]
pub(in crate::runner) struct AtOnce {
    /// The loop's M1.md, which its steps' loops name as their `PARENT`.
    pub(super) file: PathBuf,
    /// The loop's state directory, under which its steps' worktrees and loops are.
    pub(super) state_dir: PathBuf,
    /// The project, whose git repository holds the integration branch and the worktrees.
    pub(super) workdir: PathBuf,
    /// The loop's id while its M1.md has none yet (it gets one with its next spawn).
    loop_id: String,
    /// The runner has taken the loop up as one of steps at once: each pass of its drive loop
    /// asks the scheduler, until the runner ends or an error sends it back to the first
    /// question.
    pub(in crate::runner) driving: bool,
    /// Each step's loop started again while that loop stood still (see `steps`): a count,
    /// and when the next start may be.
    pub(super) restarts: BTreeMap<u32, Restarts>,
}

impl AtOnce {
    pub(in crate::runner) fn new(
        file: &Path,
        state_dir: &Path,
        workdir: &Path,
        loop_id: &str,
    ) -> Self {
        Self {
            file: file.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            workdir: workdir.to_path_buf(),
            loop_id: loop_id.to_owned(),
            driving: false,
            restarts: BTreeMap::new(),
        }
    }

    /// The loop's identity, as its steps' loops are bound to it.
    pub(super) fn id(&self, m: &M1) -> String {
        m.loop_id.clone().unwrap_or_else(|| self.loop_id.clone())
    }

    /// How long until step `n`'s loop may be started again; `None`: it may be now.
    pub(super) fn start_due(&self, n: u32) -> Option<std::time::Duration> {
        let r = self.restarts.get(&n)?;
        r.due.checked_duration_since(std::time::Instant::now())
    }

    /// A person's `loop resume` carried step `n`'s loop on: its count of starts begins again.
    pub(super) fn forget_starts(&mut self, n: u32) {
        self.restarts.remove(&n);
    }
}

/// A step's loop this runner started: how often, and when the next start may be.
#[derive(Debug, Clone)]
pub(super) struct Restarts {
    pub(super) count: u32,
    pub(super) due: std::time::Instant,
}
