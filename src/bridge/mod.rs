//! The exec bridge: detached, supervised tasks under `<state>/tasks/<TASK_ID>/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exit::Status;

pub mod commands;

/// What to run as a task.
#[derive(Debug, Clone, Default)]
pub struct FireRequest {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Wall-clock limit: the whole process group is killed after it.
    pub timeout: Option<Duration>,
    /// No-output limit: the whole process group is killed after this long without output.
    pub idle_timeout: Option<Duration>,
    /// Working directory (default: the caller's).
    pub cwd: Option<PathBuf>,
    /// Standard input from this file (default: /dev/null).
    pub stdin: Option<PathBuf>,
    /// Variables to set in the command's environment.
    pub env: Vec<(String, String)>,
    /// Variables to remove from the command's environment.
    pub env_remove: Vec<String>,
}

/// Creates the task directory, starts its supervisor, and returns the task id at once.
pub fn fire(_state_dir: &Path, _req: &FireRequest) -> anyhow::Result<String> {
    anyhow::bail!("fire: not built yet")
}

/// The hidden supervisor mode: runs the task in `task_dir` to its end.
pub fn supervise(_task_dir: &Path) -> anyhow::Result<Status> {
    anyhow::bail!("supervise: not built yet")
}
