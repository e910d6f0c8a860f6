//! The exec bridge: detached, supervised tasks under `<state>/tasks/<TASK_ID>/`.
//!
//! A task is one command (one agent step) run so that it can be neither orphaned nor lost:
//!
//! - `fire` creates the task directory atomically (spec written under a temporary name, then
//!   renamed), takes the task's lock, and has its process's starter (one `loop __starter`
//!   per firing process, see `starter`) fork the supervisor in a new session, handing it
//!   the locked file; the supervisor shows itself as `loop __supervise DIR` and records its
//!   pid before `fire` returns. From then until the supervisor and its guardian are gone,
//!   the lock is held: "lock held" means "someone is still responsible for this task".
//! - The supervisor starts the command in its own process group, blocks in `poll` on a
//!   signalfd (no wakeups unless a timeout is set), kills the whole group on timeout, idle
//!   timeout or `kill`, and writes `exit.json` atomically.
//! - A guardian process, forked from the supervisor before the command starts, waits for the
//!   supervisor's death on a pipe; if the supervisor dies without saying it is done (SIGKILL,
//!   OOM killer), the guardian kills the command's whole process group. Nothing is left
//!   running even if nobody ever calls `check`. The command's leader also has
//!   `PR_SET_PDEATHSIG=SIGKILL` as a second line.
//! - A process can leave the group (`setsid sleep 600 &`). Every process of the task carries
//!   `LOOP_TASK_ID=<id>` (the supervisor sets it in the command's environment), so whoever
//!   ends a task (the supervisor on any ending, including a command that exits leaving
//!   processes behind; the guardian; `kill` of a LOST task) also looks through `/proc` for
//!   the task's processes outside the group and kills them, by pid and start time. Those are
//!   named in the exit record (`killed_outside_group`) and in `supervisor.log`.
//!   [`survivors`] lists what is still running for a task id.
//! - `check` reads the exit record; without one it probes the lock: held means RUNNING,
//!   free means LOST. No pid is trusted for liveness, so pid reuse and zombies cannot make a
//!   dead task look alive.
//!
//! Files of a task directory: `spec.json`, `lock`, `supervisor.json`, `pid.json`, `stdin` (the
//! input the task was given as text), `stdout`, `stderr`, `supervisor.log`, `kill.json` (a
//! kill request), `exit.json` (the exit record).

use std::path::{Path, PathBuf};
use std::time::Duration;

mod fire;
mod guardian;
mod kill;
mod lock;
pub mod procfs;
mod records;
mod relay;
mod report;
mod starter;
mod supervisor;
mod sweep;
mod time_serde;
mod title;
mod wait_loop;

#[cfg(test)]
pub(crate) use fire::use_loop_binary;
pub(crate) use fire::{fire, fire_published, fire_with_id};

#[cfg(test)]
pub(crate) use kill::wait_until;
pub(crate) use records::{
    EXIT_FILE, HAND_BACK_DIR, LOCK_FILE, SPEC_FILE, STDERR_FILE, STDOUT_FILE, SUPERVISOR_LOG,
};
pub(crate) use report::{TaskEnd, TaskReport, check};
pub(crate) use starter::serve as serve_starter;
pub(crate) use supervisor::supervise;
pub(crate) use sweep::TASK_ID_ENV;
pub(crate) use sweep::describe;

/// Time between SIGTERM and SIGKILL when a task's process group is ended.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// What to run as a task.
#[derive(Debug, Clone, Default)]
pub(crate) struct FireRequest {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Wall-clock limit: the whole process group is killed after it.
    pub timeout: Option<Duration>,
    /// No-output limit: the whole process group is killed after this long without output.
    pub idle_timeout: Option<Duration>,
    /// Once the command's stdout contains this marker, the idle timeout no longer applies (the runner passes the agent's final `result` event, so a step that has
    /// answered is never killed for lingering quietly).
    pub idle_exempt_marker: Option<String>,
    /// Working directory (default: the caller's).
    pub cwd: Option<PathBuf>,
    /// Standard input from this file (default: /dev/null).
    pub stdin: Option<PathBuf>,
    /// Standard input from this text instead: it is written into the task directory
    /// (`stdin`) before the command starts, so the input is there whole, from a file that
    /// ends (never a pipe that could stay open), and stays for people to read.
    pub input: Option<String>,
    /// Variables to set in the command's environment. `LOOP_TASK_ID` is always set to the
    /// task's id, whatever this says: it is how the task's processes are found.
    pub env: Vec<(String, String)>,
    /// Variables to remove from the command's environment.
    pub env_remove: Vec<String>,
    /// When set, the command's environment is an allowlist: of what the supervisor inherits,
    /// only these names are kept (a trailing `*` keeps every name with that start), before
    /// `env_remove` and `env` apply. Names only: no value of the environment is written into
    /// the task's records.
    pub env_keep: Option<Vec<String>>,
    /// The command is the sandbox's (bubblewrap), which tells a signal that killed what it
    /// ran as exit status 128 + the signal: recorded as the signal.
    pub confined: bool,
    /// The task directory gets [`records::HAND_BACK_DIR`], empty, before the command starts:
    /// where what runs in a sandbox hands something back (the loop's hooks in an agent's run),
    /// and the only place of the task directory the sandbox lets it write.
    pub hand_back: bool,
    /// A command the supervisor starts once the exit record is written (empty: none), in a
    /// session of its own and not waited for: how a loop comes back when its runner died
    /// while the step ran.
    pub on_exit: Vec<String>,
    /// The on-exit command is started only if nobody holds this lock file then (the loop's
    /// runner lock: a live runner judges the task itself).
    pub on_exit_unless_held: Option<PathBuf>,
}

impl FireRequest {
    /// The same request without the loop's own credentials ([`crate::notifier::CREDENTIALS`])
    /// in the command's environment, whatever the runner's holds or `env` says: for every run
    /// of the agent (planning, attempts, reviews) and for VERIFY, whose output's tail goes
    /// into the agent's next prompt. The supervisor keeps them, for the runner its end may
    /// bring back.
    #[must_use]
    pub(crate) fn without_loop_credentials(mut self) -> Self {
        let secret = |k: &str| crate::notifier::CREDENTIALS.contains(&k);
        self.env.retain(|(k, _)| !secret(k));
        for k in crate::notifier::CREDENTIALS {
            if !self.env_remove.iter().any(|r| r == k) {
                self.env_remove.push(k.to_owned());
            }
        }
        self
    }
}

/// Whether the variable `name` is kept by the allowlist `keep` (a trailing `*` keeps every
/// name with that start).
#[must_use]
pub(crate) fn env_kept(keep: &[String], name: &str) -> bool {
    keep.iter().any(|k| match k.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => k == name,
    })
}

/// A new task id, `task_<UTC yyyymmddThhmmss>_<6 hex>`: sorts by creation time, safe in paths.
#[must_use]
pub(crate) fn new_task_id() -> String {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("task_{stamp}_{}", &random[..6])
}

pub(crate) use crate::layout::validate_task_id;
pub use kill::kill;
pub use report::TaskState;
pub use sweep::survivors;

/// The directory of task `id`: `state_dir/tasks/id`.
#[must_use]
pub(crate) fn task_dir(state_dir: &Path, id: &str) -> PathBuf {
    crate::layout::Layout::dir(state_dir).task(id)
}

/// Whether the task directory exists. Because it is created by an atomic rename, this also
/// means its spec is complete (the write-ahead check of `resume`).
#[must_use]
pub(crate) fn exists(state_dir: &Path, id: &str) -> bool {
    validate_task_id(id).is_ok() && task_dir(state_dir, id).is_dir()
}

/// Whether task `id` runs a command when it ends (a loop's step revives its runner so):
/// `loop status` says the loop comes back by itself instead of asking for `loop resume`.
#[must_use]
pub(crate) fn has_on_exit(state_dir: &Path, id: &str) -> bool {
    exists(state_dir, id)
        && records::read::<records::TaskSpec>(&task_dir(state_dir, id).join(records::SPEC_FILE))
            .ok()
            .flatten()
            .is_some_and(|spec| !spec.on_exit.is_empty())
}

/// Takes back task `id` if it was published and never started, nor ever will be: no exit
/// record, nobody holding its lock (a supervisor, its guardian, or a starter the lock was
/// handed to: a lock in flight is held), and no trace of its command's start (`supervisor.json`,
/// `pid.json`, or `stdout`, which the supervisor creates right before the start). That is what
/// a firing process killed between publishing the task and handing it over leaves: a task
/// that reads LOST though its command never ran. Its directory is removed, under its lock, so
/// the same task can be fired again; whether it was.
///
/// # Errors
/// When the lock cannot be probed or the directory cannot be removed.
pub(crate) fn take_back_unstarted(state_dir: &Path, id: &str) -> anyhow::Result<bool> {
    if !exists(state_dir, id) {
        return Ok(false);
    }
    let dir = task_dir(state_dir, id);
    // Probed first, read-only: the task of a running step is looked at while the disk may be
    // full.
    if lock::is_held(&dir)? || dir.join(records::EXIT_FILE).exists() {
        return Ok(false);
    }
    let Some(_lock) = lock::try_take(&dir)? else {
        return Ok(false);
    };
    let traces = [
        records::EXIT_FILE,
        records::SUPERVISOR_FILE,
        records::PID_FILE,
        STDOUT_FILE,
    ];
    if traces.iter().any(|f| dir.join(f).exists()) {
        return Ok(false);
    }
    std::fs::remove_dir_all(&dir)
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context(format!("while removing {}", dir.display())))?;
    Ok(true)
}

/// The command task `id` runs (program and arguments), as its spec says; `None` when it
/// cannot be read.
#[must_use]
pub(crate) fn command_of(state_dir: &Path, id: &str) -> Option<Vec<String>> {
    let spec: records::TaskSpec = records::read(&task_dir(state_dir, id).join(SPEC_FILE))
        .ok()
        .flatten()?;
    Some(spec.command)
}

/// Path of the exit record; the runner watches the task dir for it (inotify) to be
/// event-driven.
#[must_use]
pub(crate) fn exit_record_path(state_dir: &Path, id: &str) -> PathBuf {
    task_dir(state_dir, id).join(records::EXIT_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_valid_and_sortable() {
        let a = new_task_id();
        validate_task_id(&a).unwrap();
        assert!(a.starts_with("task_") && a.len() == "task_20260217T053000_a1b2c3".len());
        assert_ne!(a, new_task_id());
    }

    #[test]
    fn bad_ids_are_refused_with_the_id_quoted() {
        for bad in ["", "a/b", "..", "a..b", ".hidden", "-x", "a b", "é", "x\0"] {
            let err = validate_task_id(bad).unwrap_err();
            assert_eq!(err.code(), crate::exit::Status::BadInput);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        validate_task_id(&"a".repeat(crate::layout::MAX_ID_LEN)).unwrap();
        validate_task_id(&"a".repeat(crate::layout::MAX_ID_LEN + 1)).unwrap_err();
        validate_task_id("task_20260217T053000_a1b2c3").unwrap();
        validate_task_id("step-2.retry_1").unwrap();
    }

    /// Not even a variable set on purpose gives the agent the loop's credentials.
    #[test]
    fn a_run_without_the_loops_credentials_has_them_removed_and_never_set() {
        let req = FireRequest {
            env: vec![
                ("TELEGRAM_BOT_TOKEN".into(), "123:abc".into()),
                ("LOOP_STEP".into(), "2".into()),
            ],
            env_remove: vec!["CLAUDECODE".into(), "TELEGRAM_CHAT_ID".into()],
            ..FireRequest::default()
        }
        .without_loop_credentials();
        assert_eq!(req.env, [("LOOP_STEP".to_owned(), "2".to_owned())]);
        let mut removed = req.env_remove.clone();
        removed.sort();
        assert_eq!(
            removed,
            [
                "CLAUDECODE",
                "TELEGRAM_API_BASE",
                "TELEGRAM_BOT_TOKEN",
                "TELEGRAM_CHAT_ID"
            ]
        );
    }
}
