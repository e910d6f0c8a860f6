//! Exit statuses a user or a script acts on; [`crate::error::Error`] says which one a failure
//! asks for.
//!
//! Every code `loop` exits with is a named constant in [`code`]; `loop --help` lists them
//! ([`HELP`]), and a test holds the manual's table (`docs/03-commands.md`) to that list. A code means one thing: a FAILED loop (1) is not an unexpected error
//! (70), and a task `loop check` found FAILED (11) is not a `check` that failed.

/// The exit codes of `loop`, one constant each.
pub(crate) mod code {
    /// The command did what it was asked. `start`/`resume`: the loop is DONE; `check`: the
    /// task is DONE.
    pub(crate) const SUCCESS: u8 = 0;
    /// `start`/`resume`, and a decision (`answer`, `approve`, `reject`, `skip`) that leaves it
    /// so: the loop is FAILED. `notify`: a message is still pending or was
    /// rejected. `stop`: a runner had not exited when `stop` gave up waiting. `service`:
    /// systemd could not install, tell or remove the unit (no systemctl, no user bus).
    pub(crate) const FAILED: u8 = 1;
    /// Bad input: a bad flag, id or duration, an invalid M1.md, or a loop that is in the way
    /// (another runner, a live loop `start` would replace).
    pub(crate) const BAD_INPUT: u8 = 2;
    /// `start`/`resume`, and a decision that leaves it so: the loop is WAITING: stopped, needs
    /// a human, or waiting out a limit.
    pub(crate) const WAITING: u8 = 3;
    /// `check`: the task is still RUNNING.
    pub(crate) const TASK_RUNNING: u8 = 10;
    /// `check`: the task's command exited non-zero (or could not start) and is FAILED.
    pub(crate) const TASK_FAILED: u8 = 11;
    /// `check`: the task was killed for its wall-clock or no-output timeout (TIMEOUT).
    pub(crate) const TASK_TIMEOUT: u8 = 12;
    /// `check`: the task was KILLED on request (`loop kill`, a stop).
    pub(crate) const TASK_KILLED: u8 = 13;
    /// `check`: the task's supervisor is gone without an exit record (LOST).
    pub(crate) const TASK_LOST: u8 = 14;
    /// An error `loop` did not expect: an I/O failure or a bug; stderr says which. The value
    /// is sysexits' `EX_SOFTWARE`. (A panic, always a bug, exits 101, as any Rust program.)
    pub(crate) const INTERNAL: u8 = 70;
}

/// The exit codes, as `loop --help` shows them after the commands.
pub(crate) const HELP: &str = "\
Exit status:
  0    success; start/resume: the loop is DONE; check: the task is DONE
  1    start/resume, or a decision (answer, approve, reject, skip) that leaves it so: the
       loop is FAILED; notify: a message is still pending or was rejected;
       stop: a runner had not exited within 10s; service: systemd could not install, tell
       or remove the unit (install then prints a tmux and a cron line instead)
  2    bad input: a flag, id or duration, an invalid M1.md, or a loop in the way
  3    start/resume, or a decision that leaves it so: the loop is WAITING (stopped, needs a
       human, or waiting out a limit)
  10   check: the task is RUNNING
  11   check: the task is FAILED (its own exit code is in `check --json`)
  12   check: the task is TIMEOUT
  13   check: the task is KILLED
  14   check: the task is LOST
  70   unexpected error (I/O failure or a bug); stderr says which
  101  a panic: a bug, please report it";

/// The documented outcomes of `loop`, each with its code from [`code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// [`code::SUCCESS`].
    Ok = code::SUCCESS,
    /// [`code::FAILED`].
    Failed = code::FAILED,
    /// [`code::BAD_INPUT`].
    BadInput = code::BAD_INPUT,
    /// [`code::WAITING`].
    Waiting = code::WAITING,
    /// [`code::TASK_RUNNING`].
    TaskRunning = code::TASK_RUNNING,
    /// [`code::TASK_FAILED`].
    TaskFailed = code::TASK_FAILED,
    /// [`code::TASK_TIMEOUT`].
    TaskTimeout = code::TASK_TIMEOUT,
    /// [`code::TASK_KILLED`].
    TaskKilled = code::TASK_KILLED,
    /// [`code::TASK_LOST`].
    TaskLost = code::TASK_LOST,
    /// [`code::INTERNAL`].
    Internal = code::INTERNAL,
}

impl Status {
    #[must_use]
    pub fn code(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_help() {
        for s in [
            Status::Ok,
            Status::Failed,
            Status::BadInput,
            Status::Waiting,
            Status::TaskRunning,
            Status::TaskFailed,
            Status::TaskTimeout,
            Status::TaskKilled,
            Status::TaskLost,
            Status::Internal,
        ] {
            let line = format!("\n  {:<4} ", s.code());
            assert!(HELP.contains(&line), "{s:?} missing from the help");
        }
    }
}
