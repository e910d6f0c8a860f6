//! The one way the loop runs git. Every git command of the loop (a step's commit, the handoff's
//! and the review's diffs, the worktrees, merges and checks of a loop that runs its steps at
//! once, the report's `git show`, the check of `.gitignore`) is made here, and none of them
//! runs a program that the repository names.
//!
//! A repository can name programs for git to run, and an agent writes the repository. git's
//! documentation lists these (githooks(5), git-config(1) and gitattributes(5)); each is met:
//!
//! | what runs a program | met by |
//! |---|---|
//! | hooks (`.git/hooks/*`: `post-index-change`, `post-commit`, `post-checkout`, `post-merge`, `pre-merge-commit`, `reference-transaction`, …) | `core.hooksPath=/dev/null`: git looks for every hook there, and finds none |
//! | `core.hooksPath` set by the repository | the same: the command line's value wins over every file's |
//! | `core.fsmonitor` (a hook program run by `status`, `add`, `diff`) | `core.fsmonitor=false` |
//! | `diff.external`, `diff.<driver>.command` | `--no-ext-diff` on every command that diffs, and `GIT_EXTERNAL_DIFF` removed |
//! | `diff.<driver>.textconv` | `--no-textconv` on every command that diffs |
//! | `filter.<driver>.clean` / `smudge` / `process` (`add`, `status`, checkouts) | the drivers come from config files only; a run cannot write the repository's (the sandbox mounts `.git/config` read-only), so only the person's own drivers run, as in their own git |
//! | `merge.<driver>.driver` | the same: config only |
//! | `include.path`, `includeIf` | the same: they are read from config, which a run cannot write |
//! | `core.sshCommand`, `GIT_SSH`, `core.gitProxy`, `credential.helper`, `core.askPass` | the loop's git never reaches a remote; set to do nothing all the same, and `GIT_SSH*`, `GIT_ASKPASS` removed. The one exception is [`push`] (a loop that opens a pull request), which reaches the person's own remote as their own `git push` would, with their transport and credentials, and still no hook |
//! | `core.editor`, `sequence.editor`, `core.pager`, `pager.*` | `GIT_EDITOR=:`, `GIT_PAGER=cat`: no commit message is edited, output goes to a pipe |
//! | `gpg.program` (signed commits) | the person's config only, as the filters are |
//!
//! A config file a run could write would defeat the "config only" rows: that is why the sandbox
//! mounts the repository's `config` and `hooks/` read-only in every run, and pins `.git` (a
//! directory, or a linked worktree's `.git` file and its `commondir`) where it is, so that a
//! run cannot put another git directory in its place. See `runner::confine`.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The configuration every git command of the loop runs with (`git -c KEY=VALUE`, which wins
/// over every config file), each switching off a program the repository could name.
pub(crate) const NEUTRAL: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("core.gitProxy", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
];

/// Variables of the loop's own environment that would name a program to git, taken out.
const REMOVED_ENV: &[&str] = &[
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_CONFIG_COUNT",
];

/// The subcommands that can show a diff, and so run a diff driver or a text conversion.
const DIFFS: &[&str] = &["diff", "show", "log", "format-patch", "whatchanged"];

/// `git -C DIR ARGS`, as the loop runs it: with [`NEUTRAL`], without [`REMOVED_ENV`], and with
/// `--no-ext-diff --no-textconv` after a subcommand that diffs. Standard input is null unless
/// the caller says otherwise.
#[must_use]
pub(crate) fn command<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir);
    for (k, v) in NEUTRAL {
        cmd.arg("-c").arg(format!("{k}={v}"));
    }
    let mut args = args.iter().map(AsRef::as_ref);
    if let Some(sub) = args.next() {
        cmd.arg(sub);
        if sub.to_str().is_some_and(|s| DIFFS.contains(&s)) {
            cmd.args(["--no-ext-diff", "--no-textconv"]);
        }
    }
    cmd.args(args);
    for k in REMOVED_ENV {
        cmd.env_remove(k);
    }
    cmd.env("GIT_EDITOR", ":")
        .env("GIT_SEQUENCE_EDITOR", ":")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    cmd
}

/// A git command of the loop that did not succeed: which one, in which directory, and what git
/// said (or why it could not be started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    /// The command's arguments, as a person would type them after `git`.
    pub(crate) args: String,
    /// The directory it ran in (`git -C`).
    pub(crate) dir: PathBuf,
    /// Its standard error and then its standard output on one line (some refusals, such as
    /// `git commit`'s "nothing to commit", are on standard output), or why it did not start.
    pub(crate) said: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "git {} in {}: {}",
            self.args,
            self.dir.display(),
            self.said
        )
    }
}

impl std::error::Error for Error {}

/// Most of the loop's git work reports its failures as text, said in a log line or a halt.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}

/// How much of what a failed git said is kept in an [`Error`].
const SAID_CAP: usize = 400;

/// `git -C DIR ARGS` as [`command`] makes it, run to its end: its standard output (as git wrote
/// it) when it succeeded.
///
/// # Errors
/// That git could not be started, or exited with a failure: the command, `dir` and what it said.
pub(crate) fn run<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<String, Error> {
    run_with(dir, args, &[], None)
}

/// [`run`], with `env` added to git's environment and `input` on its standard input.
///
/// # Errors
/// As [`run`].
pub(crate) fn run_with<S: AsRef<OsStr>>(
    dir: &Path,
    args: &[S],
    env: &[(&str, &OsStr)],
    input: Option<&[u8]>,
) -> Result<String, Error> {
    let error = |said: String| Error {
        args: args
            .iter()
            .map(|a| a.as_ref().to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        dir: dir.to_path_buf(),
        said,
    };
    let mut cmd = command(dir, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| error(format!("could not be started: {e}")))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(bytes)
            .map_err(|e| error(format!("its standard input could not be written: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| error(format!("could not be waited for: {e}")))?;
    answer(&out).map_err(error)
}

/// What a finished git said: its standard output when it succeeded, else its standard error
/// and output on one line (or that it said nothing), for the error.
fn answer(out: &std::process::Output) -> Result<String, String> {
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let told = format!(
        "{} {}",
        String::from_utf8_lossy(&out.stderr).trim(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    let told = told.trim();
    Err(if told.is_empty() {
        format!("failed ({}) and said nothing", out.status)
    } else {
        crate::text::one_line(told, SAID_CAP)
    })
}

/// [`run`]'s standard output when git succeeded, `None` when it did not (for a question whose
/// answer is "not known" when git cannot give it).
#[must_use]
pub(crate) fn output<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Option<String> {
    run(dir, args).ok()
}

/// `git push REMOTE refs/heads/BRANCH:refs/heads/BRANCH`, run by the runner (never in a run's
/// sandbox) when a loop opens a pull request. It reaches the person's own remote with their own
/// transport and credentials (`core.sshCommand`, a credential helper, `GIT_SSH_COMMAND`, from
/// their config and environment, which a run cannot write), so [`NEUTRAL`]'s transport keys are
/// not set here; no hook runs (`core.hooksPath=/dev/null` and `--no-verify` for `pre-push`),
/// and no prompt waits for a terminal nobody watches (`GIT_TERMINAL_PROMPT=0`). Pushing a
/// branch the remote has already at the same commit does nothing, so a push repeated after a
/// crash is harmless.
///
/// # Errors
/// As [`run`]: the push, the directory, and what git said.
pub(crate) fn push(dir: &Path, remote: &str, branch: &str) -> Result<String, Error> {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let args = [
        "push",
        "--no-verify",
        "--porcelain",
        remote,
        refspec.as_str(),
    ];
    let error = |said: String| Error {
        args: args.join(" "),
        dir: dir.to_path_buf(),
        said,
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", ":")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| error(format!("could not be started: {e}")))?;
    answer(&out).map_err(error)
}

/// `.git/index.lock` of the work tree `dir` (its own git directory's), cleared where no live
/// git holds it: a git killed in mid-write (a power cut, the OOM killer, a group kill) leaves
/// it, and every later `git add` or `commit` then fails with "File exists". A lock some process
/// has open is waited for, up to `patience`. `Ok(Some(what))`: a stale lock was removed (said
/// so); `Ok(None)`: there was none; `Err`: one is still held, by whom.
///
/// # Errors
/// That a process still holds the lock after `patience`, or the lock could not be removed.
pub(crate) fn clear_stale_index_lock(
    dir: &Path,
    patience: std::time::Duration,
) -> Result<Option<String>, String> {
    let Some(git_dir) = output(dir, &["rev-parse", "--absolute-git-dir"]) else {
        return Ok(None);
    };
    let lock = Path::new(git_dir.trim()).join("index.lock");
    let deadline = std::time::Instant::now() + patience;
    loop {
        if std::fs::symlink_metadata(&lock).is_err() {
            return Ok(None);
        }
        match holder_of(&lock) {
            None => {
                return std::fs::remove_file(&lock)
                    .map(|()| {
                        Some(format!(
                            "{} was left by a git that is gone (no process holds it): removed",
                            lock.display()
                        ))
                    })
                    .or_else(|e| {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            Ok(None)
                        } else {
                            Err(format!("{} could not be removed: {e}", lock.display()))
                        }
                    });
            }
            Some(pid) if std::time::Instant::now() >= deadline => {
                return Err(format!(
                    "{} is held by process {pid} ({}) after {}s",
                    lock.display(),
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .unwrap_or_default()
                        .trim(),
                    patience.as_secs()
                ));
            }
            Some(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

/// A process that has `file` open, found through `/proc/*/fd`.
fn holder_of(file: &Path) -> Option<u32> {
    let want = std::fs::canonicalize(file).ok()?;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == want))
        {
            return Some(pid);
        }
    }
    None
}

/// git as a person runs it, for tests: their own config and hooks, with an identity. Its
/// standard output, trimmed; a failure panics with what git said.
#[cfg(test)]
pub(crate) fn person(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn person_git(dir: &Path, args: &[&str]) {
        person(dir, args);
    }

    #[test]
    fn a_failed_git_says_the_command_the_directory_and_what_git_said() {
        let dir = tempfile::tempdir().unwrap();
        person_git(dir.path(), &["init", "-q"]);
        let err = run(dir.path(), &["rev-parse", "--verify", "no-such-branch"]).unwrap_err();
        assert_eq!(err.args, "rev-parse --verify no-such-branch");
        assert_eq!(err.dir, dir.path());
        let said = err.to_string();
        assert!(
            said.starts_with(&format!(
                "git rev-parse --verify no-such-branch in {}: ",
                dir.path().display()
            )),
            "{said}"
        );
        assert!(said.contains("fatal"), "what git said is kept: {said}");
        // Standard input reaches git, and its output comes back as it wrote it.
        let blob = run_with(dir.path(), &["hash-object", "--stdin"], &[], Some(b"one\n")).unwrap();
        assert_eq!(blob.trim().len(), 40, "{blob}");
        assert!(blob.ends_with('\n'));
    }

    /// A repository whose config and hooks name programs that write `ran-*` files beside it.
    fn planted() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        person_git(&repo, &["init", "-q"]);
        std::fs::write(repo.join("a.txt"), "1\n").unwrap();
        person_git(&repo, &["add", "a.txt"]);
        person_git(&repo, &["commit", "-q", "-m", "one"]);
        let ran = dir.path().display().to_string();
        let script = |name: &str| {
            let p = dir.path().join(format!("{name}.sh"));
            std::fs::write(&p, format!("#!/bin/sh\ntouch '{ran}/ran-{name}'\ncat\n")).unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
            p.display().to_string()
        };
        for hook in [
            "post-index-change",
            "post-commit",
            "pre-commit",
            "reference-transaction",
        ] {
            let p = repo.join(".git/hooks").join(hook);
            std::fs::write(&p, format!("#!/bin/sh\ntouch '{ran}/ran-hook-{hook}'\n")).unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
        }
        let fsmonitor = script("fsmonitor");
        let textconv = script("textconv");
        let external = script("external");
        person_git(&repo, &["config", "core.fsmonitor", &fsmonitor]);
        person_git(&repo, &["config", "diff.evil.textconv", &textconv]);
        person_git(&repo, &["config", "diff.external", &external]);
        std::fs::write(repo.join(".gitattributes"), "*.txt diff=evil\n").unwrap();
        std::fs::write(repo.join("a.txt"), "2\n").unwrap();
        (dir, repo)
    }

    fn ran(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("ran-"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_push_of_the_loops_branch_reaches_the_remote_and_runs_no_hook_of_the_repository() {
        let (dir, repo) = planted();
        let origin = dir.path().join("origin.git");
        person_git(dir.path(), &["init", "-q", "--bare", "origin.git"]);
        person_git(
            &repo,
            &["remote", "add", "origin", &origin.display().to_string()],
        );
        person_git(&repo, &["branch", "loop/issue-5"]);
        for hook in ["pre-push", "reference-transaction"] {
            let p = repo.join(".git/hooks").join(hook);
            let ran = dir.path().display().to_string();
            std::fs::write(&p, format!("#!/bin/sh\ntouch '{ran}/ran-hook-{hook}'\n")).unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
        }
        // The person's own git above ran the planted hooks; the loop's push runs none.
        for f in ran(dir.path()) {
            std::fs::remove_file(dir.path().join(f)).unwrap();
        }
        push(&repo, "origin", "loop/issue-5").unwrap();
        let head = person(&repo, &["rev-parse", "loop/issue-5"]);
        let pushed = person(&origin, &["rev-parse", "refs/heads/loop/issue-5"]);
        assert_eq!(pushed, head);
        assert_eq!(ran(dir.path()), Vec::<String>::new());
        // Again, as a runner killed after pushing does: nothing to do, and no failure.
        push(&repo, "origin", "loop/issue-5").unwrap();
        let err = push(&repo, "nowhere", "loop/issue-5").unwrap_err();
        assert!(err.to_string().contains("git push --no-verify"), "{err}");
    }

    #[test]
    fn an_index_lock_no_process_holds_is_removed_and_a_held_one_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        person_git(dir.path(), &["init", "-q"]);
        let lock = dir.path().join(".git/index.lock");
        assert_eq!(clear_stale_index_lock(dir.path(), Duration::ZERO), Ok(None));
        std::fs::write(&lock, "").unwrap();
        let said = clear_stale_index_lock(dir.path(), Duration::ZERO).unwrap();
        assert!(said.is_some_and(|s| s.contains("removed")));
        assert!(!lock.exists());
        // Held open by a live process (this one): not removed.
        let held = std::fs::File::create(&lock).unwrap();
        let err = clear_stale_index_lock(dir.path(), Duration::from_millis(200)).unwrap_err();
        assert!(err.contains("is held by process"), "{err}");
        assert!(lock.exists());
        drop(held);
        assert!(clear_stale_index_lock(dir.path(), Duration::ZERO).is_ok());
        assert!(!lock.exists());
    }

    #[test]
    fn the_loops_git_runs_no_hook_fsmonitor_textconv_or_external_diff_the_repository_names() {
        let (dir, repo) = planted();
        // The planted programs do run for a git that is not the loop's: the test can fail.
        let plain = Command::new("git")
            .args(["-C"])
            .arg(&repo)
            .args(["diff", "HEAD"])
            .output()
            .unwrap();
        assert!(plain.status.success());
        assert!(!ran(dir.path()).is_empty(), "the planted programs run");
        for f in ran(dir.path()) {
            std::fs::remove_file(dir.path().join(f)).unwrap();
        }
        for args in [
            &["status", "--porcelain"][..],
            &["diff", "HEAD"],
            &["diff", "--stat", "HEAD"],
            &["add", "a.txt"],
            &[
                "-c",
                "user.name=l",
                "-c",
                "user.email=l@example.invalid",
                "commit",
                "-q",
                "-m",
                "two",
            ],
            &["show", "--stat", "HEAD"],
            &["log", "-p", "-n", "1"],
        ] {
            let out = command(&repo, args).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        }
        assert_eq!(ran(dir.path()), Vec::<String>::new());
        let shown = output(&repo, &["show", "HEAD"]).unwrap();
        assert!(shown.contains("+2"), "the plain diff is shown: {shown}");
    }
}
