//! `loop check` and `loop kill`: the bridge's answers, printed for people or scripts.

use std::path::Path;

use anyhow::Context;

use super::{DEFAULT_GRACE, TaskReport};
use crate::exit::Status;

/// `loop check ID [--json]`: exit 0 for any known state (it answered), 2 for a bad id.
///
/// # Errors
/// Bad input for an invalid or unknown id; I/O errors reading the task.
pub fn check(state_dir: &Path, id: &str, json: bool) -> anyhow::Result<Status> {
    let report = super::check(state_dir, id)?;
    print(&report, json)?;
    Ok(Status::Ok)
}

/// `loop kill ID`: ends the task's process group, waits until it is dead, prints the result.
///
/// # Errors
/// As [`check`], plus failures to end the task.
pub fn kill(state_dir: &Path, id: &str) -> anyhow::Result<Status> {
    let report = super::kill(state_dir, id, DEFAULT_GRACE)?;
    print(&report, false)?;
    Ok(Status::Ok)
}

fn print(report: &TaskReport, json: bool) -> anyhow::Result<()> {
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
