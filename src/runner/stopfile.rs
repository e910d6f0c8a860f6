//! Stopping loops: `LOOP_STOP_FILE` (default `/tmp/croppy-stop`, `loop stop --all`) is the
//! emergency brake every loop obeys; a `STOP` file beside M1.md stops that loop only (`loop
//! stop` puts one there and takes it away once the runner is gone); Ctrl-C stops the loop of a
//! runner in the foreground.
//!
//! The global stop file is in a directory every user may write (`/tmp`), so whatever is at its
//! path may be another user's: the loop never writes through it ([`create`]), and anything at
//! the path counts as a stop, looked at without following a link. A link does not count less
//! than a file: anyone who can plant a link there can put a plain file there too, which stops
//! every loop as it is meant to; and a link that did not count would turn off the machine's
//! brake, since `loop stop --all` will not write its own file through it.

use std::path::{Path, PathBuf};

/// The default global stop file of the seed.
pub(crate) const DEFAULT_STOP_FILE: &str = "/tmp/croppy-stop";

/// The global stop file: `LOOP_STOP_FILE`, else [`DEFAULT_STOP_FILE`].
#[must_use]
pub(crate) fn global() -> PathBuf {
    std::env::var_os("LOOP_STOP_FILE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_STOP_FILE), PathBuf::from)
}

/// The per-loop stop file beside M1.md.
#[must_use]
pub(crate) fn local(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).stop_file()
}

/// Both stop files that apply to the loop in `state_dir`.
#[must_use]
pub(crate) fn paths(state_dir: &Path) -> [PathBuf; 2] {
    [global(), local(state_dir)]
}

/// Whether something is at `path`: a file, a link (even one to nothing), anything, never
/// followed.
fn there(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// The first stop file that exists, if any.
#[must_use]
pub(crate) fn present(state_dir: &Path) -> Option<PathBuf> {
    let [global, local] = paths(state_dir);
    if there(&global) {
        return Some(global);
    }
    local.exists().then_some(local)
}

/// Creates the global stop file (what `loop stop --all` does): created only where nothing is,
/// never through a link, never over a file ([`crate::dirs::create_in_shared`]). Its path, and
/// what was there already when something was (left as it was: a stop all the same).
///
/// # Errors
/// When the file cannot be created for another reason.
pub(crate) fn create() -> std::io::Result<(PathBuf, Option<crate::dirs::Found>)> {
    let p = global();
    let found = crate::dirs::create_in_shared(
        &p,
        &format!(
            "stopped by loop stop at {}\n",
            chrono::Utc::now().to_rfc3339()
        ),
    )?;
    Ok((p, found))
}

/// What `loop stop` writes into the loop's `STOP`: a stop of its own, which it removes once
/// the runner is gone (one put there by hand stays until its author removes it).
const BY_COMMAND: &str = "stopped by loop stop";

/// Puts the `STOP` of `loop stop` beside M1.md; returns its path.
///
/// # Errors
/// When the file cannot be created.
pub(crate) fn create_local(state_dir: &Path) -> std::io::Result<PathBuf> {
    let p = local(state_dir);
    // Whole or not at all: a runner that sees the file must read who put it there.
    let tmp = p.with_file_name(format!(".STOP.{}.tmp", std::process::id()));
    std::fs::write(
        &tmp,
        format!(
            "{BY_COMMAND} (pid {}) at {}\n",
            std::process::id(),
            chrono::Utc::now().to_rfc3339()
        ),
    )?;
    std::fs::rename(&tmp, &p)?;
    Ok(p)
}

/// Whether the loop's `STOP` is one `loop stop` put there (and left: its runner had not let go
/// in time).
#[must_use]
pub(crate) fn left_by_command(state_dir: &Path) -> bool {
    crate::named_file::read(&local(state_dir), 4096)
        .is_ok_and(|(t, _)| t.starts_with(BY_COMMAND.as_bytes()))
}

/// Removes the loop's `STOP` if `loop stop` put it there; whether it had.
pub(crate) fn clear_local(state_dir: &Path) -> bool {
    let ours = left_by_command(state_dir);
    if ours {
        let _ = std::fs::remove_file(local(state_dir));
    }
    ours
}

/// Set by Ctrl-C on a foreground runner (see [`catch_interrupt`]).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the loop in `state_dir` is asked to stop, and by whom: Ctrl-C, the machine-wide
/// stop file, or its own `STOP` (by `loop stop`, or by hand).
#[must_use]
pub(crate) fn requested(state_dir: &Path) -> Option<crate::engine::Stop> {
    use crate::engine::Stop;
    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        return Some(Stop::Interrupt);
    }
    let global = global();
    if there(&global) {
        return Some(Stop::File(global.display().to_string()));
    }
    let local = local(state_dir);
    // Read as a named file: a FIFO put there would block a plain read, and the runner with it.
    // Asked at every wake: the read's own error says when there is no file.
    match crate::named_file::read(&local, 4096) {
        Ok((t, _)) if t.starts_with(BY_COMMAND.as_bytes()) => Some(Stop::Command),
        Err(crate::named_file::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            None
        }
        _ => Some(Stop::File(local.display().to_string())),
    }
}

/// Blocks SIGINT in this thread and every thread it starts from now on: call it first thing,
/// before any thread exists, in a runner that will [`catch_interrupt`]. (Child processes get
/// the default mask back when they start.)
pub(crate) fn block_interrupt() {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    let _ = set.thread_block();
}

/// Turns Ctrl-C (SIGINT, blocked by [`block_interrupt`]) into a stop of this loop: a thread
/// waits for it, marks the stop, and calls `wake` (the runner's watcher wakes it). A person's
/// decision, not a crash: the runner ends the step and goes WAITING, as `loop stop` makes it.
pub(crate) fn catch_interrupt(wake: impl Fn() + Send + 'static) {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    std::thread::spawn(move || {
        while set.wait().is_ok() {
            INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            wake();
        }
    });
}

/// The command that stops the loop of `file` only, for messages that say to stop it first.
#[must_use]
pub(crate) fn command_for(file: &Path) -> String {
    format!("`loop stop --file {}`", file.display())
}
