//! A runner in the background: `loop --file FILE resume --quiet` in a session of its own, with
//! no input, its output appended to the loop's runner output file (decisions only: `loop
//! status` shows the agent's activity). What `--detach`, a revival and a step's loop start.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;

use crate::error::Result;
use crate::exit::Status as ExitStatus;

/// The command of a background runner for the loop of `file`, not started yet.
///
/// # Errors
/// The loop binary cannot be found, or the output file cannot be opened.
pub(super) fn background_runner(file: &Path) -> Result<Command> {
    let exe = std::env::current_exe().context("while finding the loop binary")?;
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let out_path = crate::layout::Layout::of(file).runner_out();
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path)
        .with_context(|| format!("while opening {}", out_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--file")
        .arg(&abs)
        .arg("resume")
        .arg("--quiet")
        .env("LOOP_DETACHED", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    Ok(cmd)
}

/// Runs `loop resume` for `file` in the background and returns at once, saying how to follow
/// it. A revival says `revived_by` whom, and prints nothing.
///
/// # Errors
/// As [`background_runner`], or the runner cannot be started.
pub(super) fn detach(file: &Path, revived_by: Option<&str>) -> Result<ExitStatus> {
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let out_path = crate::layout::Layout::of(file).runner_out();
    let mut cmd = background_runner(file)?;
    if let Some(by) = revived_by {
        cmd.arg("--revived-by").arg(by);
    }
    let child = cmd
        .spawn()
        .context("while starting the background runner")?;
    if revived_by.is_some() {
        return Ok(ExitStatus::Ok);
    }
    crate::outln!(
        "loop runs in the background (pid {}); follow it with `loop logs -f --file {}` (or \
         `loop status`), stop it with `loop stop`; its own output goes to {}",
        child.id(),
        abs.display(),
        out_path.display()
    );
    Ok(ExitStatus::Ok)
}
