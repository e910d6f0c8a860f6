//! `loop check` and `loop kill`: the bridge's answers, printed for people or scripts.

use std::path::Path;

use anyhow::Context;

use crate::bridge::{DEFAULT_GRACE, TaskReport, TaskState};
use crate::exit::Status;

/// `loop check ID [--json]`: exits with the task's state (see [`status_for`]), so a script
/// can branch on `$?` without parsing; 2 for a bad or unknown id.
///
/// # Errors
/// Bad input for an invalid or unknown id; I/O errors reading the task.
pub(crate) fn check(state_dir: &Path, id: &str, json: bool) -> crate::error::Result<Status> {
    let report = crate::bridge::check(state_dir, id)?;
    print(&report, json)?;
    Ok(status_for(report.state))
}

/// The exit status of `loop check` for a task in `state`: 0 only for DONE, a code of its own
/// for every other state (see [`crate::exit::code`]).
#[must_use]
pub(crate) fn status_for(state: TaskState) -> Status {
    match state {
        TaskState::Done => Status::Ok,
        TaskState::Running => Status::TaskRunning,
        TaskState::Failed => Status::TaskFailed,
        TaskState::Timeout => Status::TaskTimeout,
        TaskState::Killed => Status::TaskKilled,
        TaskState::Lost => Status::TaskLost,
    }
}

/// `loop kill ID`: ends the task's process group, waits until it is dead, prints the result.
/// Exit 0 once the task has ended, whatever its state (`check` tells which).
///
/// # Errors
/// As [`check`], plus failures to end the task.
pub(crate) fn kill(state_dir: &Path, id: &str) -> crate::error::Result<Status> {
    let report = crate::bridge::kill(state_dir, id, DEFAULT_GRACE)?;
    print(&report, false)?;
    Ok(Status::Ok)
}

fn print(report: &TaskReport, json: bool) -> crate::error::Result<()> {
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string(report).context("while encoding the report")?
        );
    } else {
        crate::outln!("{}", report.line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_state_has_an_exit_code_of_its_own() {
        let states = [
            TaskState::Running,
            TaskState::Done,
            TaskState::Failed,
            TaskState::Timeout,
            TaskState::Killed,
            TaskState::Lost,
        ];
        let mut codes: Vec<u8> = states.iter().map(|&s| status_for(s).code()).collect();
        assert_eq!(status_for(TaskState::Done), Status::Ok);
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), states.len());
    }
}
