//! Where `loop` keeps its files: a loop's state directory beside its M1.md, and a per-user
//! directory for what belongs to no loop (tasks fired from any shell, the runner registry).

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The name of the per-user directory under `$XDG_STATE_HOME`.
const APP: &str = "m1loop";

/// What a state directory's `.gitignore` says: ignore everything here. The agent commits with
/// `git add -A`; without it M1.md, the runner lock, task records and the outbox would go into
/// the user's history.
const GITIGNORE: &str = "# Written by loop: this is a loop's state, not part of the project.\n*\n";

/// Creates the state directory `dir` (and its parents) if it is missing. When this call is
/// what created it, it also writes a `.gitignore` holding `*` there; an existing directory,
/// and an existing `.gitignore`, are left as they are.
///
/// # Errors
/// When the directory or its `.gitignore` cannot be created.
pub(crate) fn create_state_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        // Another process made it first; it writes the .gitignore.
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(crate::layout::Layout::dir(dir).gitignore())
    {
        Ok(mut f) => f.write_all(GITIGNORE.as_bytes()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The per-user state directory: `$XDG_STATE_HOME/m1loop`, else `~/.local/state/m1loop`
/// (an `XDG_STATE_HOME` that is not absolute is ignored, as the XDG spec says).
///
/// # Errors
/// Bad input when neither `XDG_STATE_HOME` nor `HOME` is set.
pub(crate) fn user_state_dir() -> crate::error::Result<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = match xdg {
        Some(p) => p,
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|home| home.join(".local").join("state"))
            .ok_or_else(|| {
                Error::bad_input(
                    "neither XDG_STATE_HOME nor HOME is set, so there is no per-user directory \
                     for files outside a loop; set one, or name a loop with --file",
                )
            })?,
    };
    Ok(base.join(APP))
}

/// Where `fire`, `check`, `kill` and `notify` keep their files: the loop's state directory
/// `loop_dir` when `--file` (or `LOOP_FILE`) named the loop or that directory exists; else the
/// per-user directory, so that running them anywhere never leaves a `state/` behind.
///
/// # Errors
/// As [`user_state_dir`].
pub(crate) fn bridge_state_dir(loop_dir: &Path, file_given: bool) -> crate::error::Result<PathBuf> {
    if file_given || loop_dir.is_dir() {
        Ok(loop_dir.to_path_buf())
    } else {
        user_state_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_state_dir_gets_a_gitignore_and_an_existing_one_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a").join("state");
        create_state_dir(&dir).unwrap();
        let ignore = std::fs::read_to_string(dir.join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"), "{ignore}");

        let mine = tmp.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        create_state_dir(&mine).unwrap();
        assert!(!mine.join(".gitignore").exists());

        std::fs::write(dir.join(".gitignore"), "keep\n").unwrap();
        create_state_dir(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
            "keep\n"
        );
    }
}
