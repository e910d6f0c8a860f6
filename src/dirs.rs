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
/// and an existing `.gitignore`, are left as they are (see [`keep_out_of_git`] for one this
/// call did not make).
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
    write_gitignore(dir).map(|_| ())
}

/// Writes the state directory's `.gitignore` unless one is there; whether this call wrote it.
fn write_gitignore(dir: &Path) -> std::io::Result<bool> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(crate::layout::Layout::dir(dir).gitignore())
    {
        Ok(mut f) => f.write_all(GITIGNORE.as_bytes()).map(|()| true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// What [`keep_out_of_git`] found, or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GitGuard {
    /// Git will not see the loop's files: the directory has a `.gitignore` (the loop's, or a
    /// person's, left as it is), git ignores it already, or it is in no git work tree.
    Out,
    /// The directory was in git's sight: its `.gitignore` holding `*` was written now.
    Wrote,
    /// The directory is the project's own (the work tree's top, or git tracks files in it,
    /// such as this one): a `*` there would hide the project's new files, so nothing was
    /// written, and the loop's files there would go into a commit of everything.
    Shared(String),
}

/// Keeps the loop's existing state directory `dir` out of git, whoever made it (an older
/// `loop doctor`, a person, a loop of an older version): a directory in a git work tree that
/// git does not ignore gets the `.gitignore` holding `*` that [`create_state_dir`] writes into
/// a directory it makes, unless it is the project's own ([`GitGuard::Shared`]). A `.gitignore`
/// already there is left as it is. Asks git only when there is none.
///
/// # Errors
/// When the `.gitignore` cannot be written.
pub(crate) fn keep_out_of_git(dir: &Path) -> std::io::Result<GitGuard> {
    let ignore = crate::layout::Layout::dir(dir).gitignore();
    if ignore.symlink_metadata().is_ok() || !dir.is_dir() {
        return Ok(GitGuard::Out);
    }
    let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]).map(PathBuf::from) else {
        return Ok(GitGuard::Out);
    };
    if dir.canonicalize().ok() == top.canonicalize().ok() {
        return Ok(GitGuard::Shared(
            "it is the top of the git work tree".to_owned(),
        ));
    }
    if let Some(tracked) = git(dir, &["ls-files", "--", "."]).filter(|t| !t.is_empty()) {
        let first = tracked.lines().next().unwrap_or_default();
        return Ok(GitGuard::Shared(format!(
            "git tracks files in it ({first}, …)"
        )));
    }
    // A line of the project's own `.gitignore` (`state/`) may ignore it already.
    if git_succeeds(dir, &["check-ignore", "-q", "--", "M1.md"]) {
        return Ok(GitGuard::Out);
    }
    Ok(if write_gitignore(dir)? {
        GitGuard::Wrote
    } else {
        GitGuard::Out
    })
}

/// `git ARGS` run in `dir`: its output, trimmed, when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    crate::git::output(dir, args).map(|o| o.trim().to_owned())
}

fn git_succeeds(dir: &Path, args: &[&str]) -> bool {
    git(dir, args).is_some()
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
/// `loop_dir` when `--file` (or `LOOP_FILE`) named the loop or that directory holds a loop
/// (its `M1.md`, `m1_name`) or the tasks of earlier fires; else the per-user directory, so
/// that running them anywhere never leaves a `state/` behind, nor fills a `state/` that
/// holds no loop (a project's own directory of that name, an empty one an older `loop
/// doctor` made).
///
/// # Errors
/// As [`user_state_dir`].
pub(crate) fn bridge_state_dir(
    loop_dir: &Path,
    m1_name: &std::ffi::OsStr,
    file_given: bool,
) -> crate::error::Result<PathBuf> {
    let layout = crate::layout::Layout::dir(loop_dir);
    if file_given || loop_dir.join(m1_name).is_file() || layout.tasks().is_dir() {
        Ok(loop_dir.to_path_buf())
    } else {
        user_state_dir()
    }
}

/// What was at a path in a shared directory where the loop would have created a file: the
/// loop writes nothing through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// What it is: `a regular file`, `a symbolic link to /home/x/.bashrc`, `a directory`, …
    pub what: String,
    /// Its owner, by name when the system knows one: `bob (uid 1000)`.
    pub owner: String,
    /// A regular file of the user the loop runs as: one this user made (an earlier stop).
    pub own_file: bool,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, owned by {}", self.what, self.owner)
    }
}

/// What is at `path`, looked at without following a link; `None` when nothing is.
#[must_use]
pub(crate) fn found_at(path: &Path) -> Option<Found> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = path.symlink_metadata().ok()?;
    let t = meta.file_type();
    let what = if t.is_symlink() {
        match std::fs::read_link(path) {
            Ok(to) => format!("a symbolic link to {}", to.display()),
            Err(_) => "a symbolic link".to_owned(),
        }
    } else if t.is_file() {
        "a regular file".to_owned()
    } else if t.is_dir() {
        "a directory".to_owned()
    } else if t.is_fifo() {
        "a FIFO (named pipe)".to_owned()
    } else if t.is_socket() {
        "a socket".to_owned()
    } else {
        "a device".to_owned()
    };
    let uid = nix::unistd::Uid::from_raw(meta.uid());
    let owner = match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    };
    Some(Found {
        what,
        owner,
        own_file: t.is_file() && uid == nix::unistd::geteuid(),
    })
}

/// Creates `path`, a file in a directory others may write too (`/tmp`), holding `text`: only
/// when nothing is there, never through a link, never over a file of someone else's
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`). Another user can put anything at a name in `/tmp`
/// first, a link to a file of this user's among them, and writing through it would write
/// that file with this user's authority (root's, for root). `Ok(None)`: created;
/// `Ok(Some(found))`: something was there already, and is left as it was.
///
/// # Errors
/// When it cannot be created for another reason (no such directory, no permission).
pub(crate) fn create_in_shared(path: &Path, text: &str) -> std::io::Result<Option<Found>> {
    use std::os::unix::fs::OpenOptionsExt;
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path);
    match created {
        Ok(mut f) => f.write_all(text.as_bytes()).map(|()| None),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            Ok(Some(found_at(path).unwrap_or(Found {
                what: "something".to_owned(),
                owner: "someone".to_owned(),
                own_file: false,
            })))
        }
        Err(e) => Err(e),
    }
}

/// A new directory of this user's alone (mode 0700), named `prefix` and a random part, in the
/// machine's temporary directory: made by one `mkdir`, which fails on anything already there
/// (a directory or a link another user put at a name they could guess), so that nothing the
/// loop writes into it goes anywhere else.
///
/// # Errors
/// When no directory can be made there.
pub(crate) fn private_temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let mut last = None;
    for _ in 0..16 {
        let dir = base.join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_in_a_shared_directory_is_never_created_through_a_link_nor_over_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("bashrc");
        std::fs::write(&target, "mine\n").unwrap();
        let at = tmp.path().join("stop");
        std::os::unix::fs::symlink(&target, &at).unwrap();
        let found = create_in_shared(&at, "stop\n").unwrap().unwrap();
        assert!(found.what.starts_with("a symbolic link to "), "{found}");
        assert!(found.owner.contains("uid "), "{found}");
        assert!(!found.own_file);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine\n");
        // A dangling link: nothing is created where it points.
        let gone = tmp.path().join("nowhere");
        let at2 = tmp.path().join("stop2");
        std::os::unix::fs::symlink(&gone, &at2).unwrap();
        assert!(create_in_shared(&at2, "x").unwrap().is_some());
        assert!(!gone.exists());
        // A file already there is left as it is.
        let plain = tmp.path().join("stop3");
        std::fs::write(&plain, "earlier\n").unwrap();
        assert!(create_in_shared(&plain, "x").unwrap().unwrap().own_file);
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "earlier\n");
        // Nothing there: made.
        let new = tmp.path().join("stop4");
        assert_eq!(create_in_shared(&new, "made\n").unwrap(), None);
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "made\n");
    }

    #[test]
    fn a_private_temp_dir_is_new_and_its_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let a = private_temp_dir("loop-test").unwrap();
        let b = private_temp_dir("loop-test").unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_dir(a).unwrap();
        std::fs::remove_dir(b).unwrap();
    }

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

    /// A state directory made before the loop (an older `loop doctor` left one) is kept out
    /// of git, unless it is the project's own; one git ignores already, or that is in no work
    /// tree, is left as it is.
    #[test]
    fn a_state_dir_made_by_something_else_is_kept_out_of_git_unless_it_is_the_projects_own() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        assert_eq!(keep_out_of_git(&outside).unwrap(), GitGuard::Out);
        assert!(!outside.join(".gitignore").exists());

        let project = tmp.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&project)
            .status()
            .unwrap();
        assert!(init.success());
        let state = project.join("state");
        std::fs::create_dir(&state).unwrap();
        assert_eq!(keep_out_of_git(&state).unwrap(), GitGuard::Wrote);
        assert_eq!(
            std::fs::read_to_string(state.join(".gitignore")).unwrap(),
            GITIGNORE
        );
        assert_eq!(keep_out_of_git(&state).unwrap(), GitGuard::Out);

        assert!(matches!(
            keep_out_of_git(&project).unwrap(),
            GitGuard::Shared(why) if why.contains("top of the git work tree")
        ));
        assert!(!project.join(".gitignore").exists());

        let ignored = project.join("kept");
        std::fs::create_dir(&ignored).unwrap();
        std::fs::write(project.join(".gitignore"), "kept/\n").unwrap();
        assert_eq!(keep_out_of_git(&ignored).unwrap(), GitGuard::Out);
        assert!(!ignored.join(".gitignore").exists());
    }
}
