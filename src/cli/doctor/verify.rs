//! `loop doctor`'s VERIFY row: the loop's VERIFY (or `--verify CMD`) run in this project as the
//! loop's sandbox runs it, and what it reached for that the sandbox hid, with the flag that
//! grants it. A VERIFY that fails for its own reasons (a red test) is said, not failed: that is
//! the loop's work to fix.

use std::path::Path;
use std::process::Stdio;

use super::{Mark, Row, row};
use crate::runner::confine::RunOf;
use crate::runner::settings::SandboxSettings;

/// The row for `command` run in `project` (the loop's state directory `state_dir`) confined as
/// `s` says.
pub(super) fn check(command: &str, project: &Path, state_dir: &Path, s: &SandboxSettings) -> Row {
    let name = "verify";
    let shown = crate::text::one_line(command, 80);
    if s.mode == crate::m1::SandboxMode::Off {
        return row(
            name,
            Mark::Off,
            format!("`{shown}` runs unconfined (AGENT.SANDBOX off): not tried"),
        );
    }
    let bwrap = match crate::sandbox::probe() {
        Ok(b) => b,
        Err(why) => return row(name, Mark::Fail, why),
    };
    let policy = crate::runner::confine::policy(
        s,
        state_dir,
        project,
        RunOf::Verify { work_tree: project },
        None,
    );
    let argv = vec!["sh".to_owned(), "-c".to_owned(), command.to_owned()];
    let (mut cmd, confined) = super::contract::sandboxed(&bwrap, &policy, &argv);
    cmd.current_dir(project).stdin(Stdio::null());
    for k in crate::notifier::CREDENTIALS {
        cmd.env_remove(k);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => return row(name, Mark::Fail, format!("`{shown}` could not start: {e}")),
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        return row(name, Mark::Ok, format!("`{shown}` passed in the sandbox"));
    }
    let code = out
        .status
        .code()
        .map_or_else(|| "by a signal".to_owned(), |c| c.to_string());
    match crate::sandbox::refusal(&said, &confined, &crate::runner::confine::home()) {
        Some(r) => row(
            name,
            Mark::Fail,
            format!("`{shown}` exited {code}: {}", r.said()),
        ),
        None => row(
            name,
            Mark::Ok,
            format!(
                "`{shown}` ran in the sandbox and exited {code}, not on anything the sandbox \
                 hid: {}",
                crate::text::one_line(said.trim(), 200)
            ),
        ),
    }
}
