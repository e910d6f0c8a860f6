//! Steps at once (`LIMITS.PARALLEL` above 1), in git worktrees, with one serial merge queue.
//! What to do is the engine's ([`crate::engine::parallel`]): each pass of the runner here
//! asks it ([`Runner::decide_at_once`]) and carries out the move it gets ([`moves`]), writing
//! what comes of it. The I/O on the steps' loops is the parallel driver's, a part of the
//! runner with its own state ([`AtOnce`]) that never calls it back: it looks at each step's
//! own loop ([`observe`]), starts and stops them ([`steps`]), merges their work ([`merge`]),
//! and tells a step's loop what a person decided here ([`tell`]), with git ([`git`]).
//!
//! - **A step's loop belongs to this loop.** It runs in its worktree under this loop's state
//!   directory (`parallel/<LOOP_ID>/`), bound by `PARENT_ID` and `PARENT_STEP`: no loop ever
//!   takes another's for its own. Its record here (`PARALLEL.STEP_N`) is written before its
//!   worktree and its loop exist, and carried out again where a crash cut it short.
//! - **One serial merge queue, verified.** A step whose loop is DONE has what its agent left
//!   committed, is merged onto the integration head in the loop's merge worktree, and VERIFY
//!   runs there on the merged result; the integration branch moves only when that passes,
//!   and only if it is still where the merge began (a compare-and-swap of the ref).
//! - **Decisions where the person is.** A step's gate is shown here as a gate of this loop
//!   (`loop gates`, `loop status`, Telegram's buttons), and decided here; the runner carries
//!   the decision to the step's loop, once. A merge that keeps failing waits on a gate too.
//! - **Nothing deleted that holds work**, and the project's checkout is only fast-forwarded,
//!   at the end, if it has not moved.

mod at_once;
mod catch_up;
pub(super) mod git;
mod merge;
mod moves;
mod observe;
mod steps;
mod tell;

pub(super) use at_once::AtOnce;
pub(crate) use merge::{merge_task, step_loops};

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Runner;
use crate::engine::{self, parallel::Move};
use crate::exit::Status as Exit;
use crate::m1::{M1, Status};

/// How long the queue sleeps between looks when no event wakes it (the watched directories
/// of its steps' loops say when one changes; this is the fallback where events do not arrive).
const POLL_FALLBACK: Duration = Duration::from_secs(2);

impl Runner {
    /// Why the project cannot run steps at once (no git repository, or no commit to branch
    /// from), as a halt; `None` when it can.
    pub(super) fn cannot_run_parallel(&self, m: &M1) -> Option<engine::Transition> {
        // The same test as `loop start --parallel`'s.
        if super::git::head(&self.workdir).is_some() {
            return None;
        }
        let what = if git::is_repo(&self.workdir) {
            "has no commit to branch the steps from"
        } else {
            "is not a git repository"
        };
        Some(engine::halt(
            0,
            &format!(
                "LIMITS.PARALLEL {} runs steps in git worktrees, but {} {what}",
                self.settings.parallel(m),
                self.workdir.display()
            ),
            "make it one with a first commit (`git init && git commit --allow-empty -m start`), \
             or set LIMITS.PARALLEL: 1 in M1.md, then `loop resume`",
        ))
    }

    /// Takes the loop up as one of steps at once: what a runner that died left of their
    /// worktrees is put right, and from now on each pass of [`Runner::drive`] asks the
    /// scheduler ([`Runner::decide_at_once`]).
    pub(super) fn take_up_at_once(&mut self) {
        self.at_once.reconcile_worktrees(&self.view(), &self.voice);
        self.at_once.driving = true;
    }

    /// One pass of [`Runner::drive`] for a loop of steps at once: the scheduler's first move,
    /// carried out; the exit it comes to, if any. With no move to make, sleeps until a step's
    /// loop changes.
    ///
    /// # Errors
    /// I/O failures the loop cannot go on from (git's are halts, saying which step).
    pub(super) fn decide_at_once(&mut self) -> crate::error::Result<Option<Exit>> {
        if let Some(stop) = self.watch.stop() {
            return self.stop_parallel(&stop).map(Some);
        }
        if let Some(exit) = self.refresh()? {
            return Ok(Some(exit));
        }
        let m = self.view();
        if m.status != Status::Running {
            return Ok(Some(self.left_running(&m)));
        }
        let Some(first) = self.schedule(&m).into_iter().next() else {
            self.sleep_on_steps(&m);
            return Ok(None);
        };
        self.carry(first)
    }

    /// The engine's moves for `m`, from what each step's loop looks like now, less the
    /// start of a step's loop that is not due yet (it backs off: see `steps`).
    fn schedule(&self, m: &M1) -> Vec<Move> {
        let seen = self.at_once.observe_steps(m);
        let caps = self.settings.caps(m);
        let mut moves = engine::parallel::schedule(m, &seen, self.settings.parallel(m), &caps);
        moves.retain(|mv| match mv {
            Move::Drive(n) => self.at_once.start_due(*n).is_none(),
            _ => true,
        });
        moves
    }

    /// The loop is no longer RUNNING (a person's edit, or a decision here that ends it): its
    /// runner ends. A loop that FAILED or was set IDLE stops the steps it runs; one that waits
    /// lets them end their step (a pause), and takes them up when resumed.
    fn left_running(&mut self, m: &M1) -> Exit {
        match m.status {
            Status::Done => Exit::Ok,
            Status::Failed => {
                self.stop_steps(m);
                Exit::Failed
            }
            _ => Exit::Waiting,
        }
    }

    /// Sleeps until a step's loop changes (its M1.md written, its runner gone), a hand edit, a
    /// decision, or a stop; costs nothing meanwhile.
    fn sleep_on_steps(&mut self, m: &M1) {
        let dirs: Vec<PathBuf> = m
            .parallel
            .runs
            .values()
            .filter_map(|r| {
                Path::new(r.loop_file.as_deref()?)
                    .parent()
                    .map(Path::to_path_buf)
            })
            .filter(|d| d.is_dir())
            .collect();
        self.watch.set_step_dirs(&dirs);
        let due = m
            .parallel
            .runs
            .keys()
            .filter_map(|n| self.at_once.start_due(*n))
            .min()
            .unwrap_or(POLL_FALLBACK);
        let _ = self.watch.wait(due.min(POLL_FALLBACK));
    }

    /// The loop's decision lock, held while the runner writes what a decider could be
    /// writing at the same moment (a gate closed, the loop set WAITING).
    fn decide_lock(&self) -> crate::error::Result<crate::lockfile::Held> {
        Ok(crate::lockfile::exclusive(
            &crate::layout::Layout::decide_lock(&self.file),
        )?)
    }

    /// Every step in flight waits for a person: the loop waits, unless a decision arrived
    /// meanwhile (checked under the decision lock, which deciders hold while they write: a
    /// decision is either seen here, or made on a loop that waits, by a decider who then
    /// carries it on).
    fn wait_for_people(&mut self) -> crate::error::Result<Option<Exit>> {
        let held = self.decide_lock()?;
        if let Some(exit) = self.refresh()? {
            return Ok(Some(exit));
        }
        let m = self.view();
        if m.status != Status::Running || self.schedule(&m) != [Move::Wait] {
            return Ok(None);
        }
        let halts = self.at_once.halted_steps(&m);
        let t = engine::parallel::waiting(&m, &halts);
        let exit = self.apply(&t)?;
        drop(held);
        Ok(exit.or(Some(Exit::Waiting)))
    }

    /// A stop: every step's loop is stopped, then this one.
    fn stop_parallel(&mut self, stop: &engine::Stop) -> crate::error::Result<Exit> {
        let m = self.view();
        let steps = self.stop_steps(&m);
        let t = engine::stopped_parallel(&steps, stop);
        self.apply(&t).map(|e| e.unwrap_or(Exit::Waiting))
    }
}
