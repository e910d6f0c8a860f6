//! The git a parallel loop needs: worktrees on branches of their own, a commit of what an
//! agent left, a merge in a worktree of the loop's own, a compare-and-swap of the integration
//! branch, and a check by content that a branch's work is in it before anything is removed.
//! Real git, run as a child process; the user's checkout is only ever read, but for the last
//! fast-forward.

use std::path::Path;

/// `git ARGS` in `dir`: its stdout, trimmed.
pub(super) fn run(dir: &Path, args: &[&str]) -> Result<String, crate::git::Error> {
    crate::git::run(dir, args).map(|out| out.trim().to_owned())
}

/// The commit `name` (a branch, `HEAD`) is at, if it exists.
pub(super) fn commit_of(dir: &Path, name: &str) -> Option<String> {
    run(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{name}^{{commit}}"),
        ],
    )
    .ok()
}

/// Whether `dir` is a git work tree.
pub(super) fn is_repo(dir: &Path) -> bool {
    run(dir, &["rev-parse", "--is-inside-work-tree"]).is_ok_and(|o| o == "true")
}

/// A commit with the repository's identity, or the loop's where it has none.
pub(in crate::runner) fn commit_args(dir: &Path) -> Vec<String> {
    let known = run(dir, &["config", "user.email"]).is_ok_and(|e| !e.is_empty());
    if known {
        Vec::new()
    } else {
        vec![
            "-c".into(),
            "user.name=m1loop".into(),
            "-c".into(),
            "user.email=m1loop@localhost".into(),
        ]
    }
}

/// `git [identity] ARGS` in `dir`.
pub(super) fn run_as_author(dir: &Path, args: &[&str]) -> Result<String, crate::git::Error> {
    let mut all: Vec<String> = commit_args(dir);
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    run(dir, &refs)
}

/// Creates worktree `path` on a new branch `branch` from `base`, or on `branch` if it exists;
/// nothing when `path` is a worktree already.
pub(super) fn worktree(repo: &Path, path: &Path, branch: &str, base: &str) -> Result<(), String> {
    if path.join(".git").exists() {
        return Ok(());
    }
    let p = path.display().to_string();
    if commit_of(repo, &format!("refs/heads/{branch}")).is_some() {
        run(repo, &["worktree", "add", &p, branch])?;
    } else {
        run(repo, &["worktree", "add", "-b", branch, &p, base])?;
    }
    Ok(())
}

/// Commits whatever the agent left uncommitted in worktree `wt` (so no step is done without
/// a commit); whether there was anything.
pub(super) fn commit_all(wt: &Path, message: &str) -> Result<bool, String> {
    run(wt, &["add", "-A"])?;
    if run(wt, &["diff", "--cached", "--quiet"]).is_ok() {
        return Ok(false);
    }
    run_as_author(wt, &["commit", "-q", "--no-verify", "-m", message])?;
    Ok(true)
}

/// How a merge of a step's branch onto the integration head went.
#[derive(Debug)]
pub(super) enum Merged {
    /// The merge commit (or the head, when the branch added nothing).
    At(String),
    /// These files conflicted; the merge was aborted, nothing was written.
    Conflict(Vec<String>),
}

/// Merges `branch` onto commit `onto` in the loop's own merge worktree `wt` (made when
/// missing), leaving it at the result.
pub(super) fn merge(
    repo: &Path,
    wt: &Path,
    onto: &str,
    branch: &str,
    message: &str,
) -> Result<Merged, String> {
    if !wt.join(".git").exists() {
        run(
            repo,
            &[
                "worktree",
                "add",
                "--detach",
                &wt.display().to_string(),
                onto,
            ],
        )?;
    }
    // The merge worktree is the loop's alone: whatever a crash left in it goes.
    let _ = run(wt, &["merge", "--abort"]);
    run(wt, &["checkout", "-q", "--detach", "--force", onto])?;
    run(wt, &["clean", "-fdq"])?;
    match run_as_author(wt, &["merge", "--no-ff", "-q", "-m", message, branch]) {
        Ok(_) => Ok(Merged::At(run(wt, &["rev-parse", "HEAD"])?)),
        Err(why) => {
            let files = run(wt, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
            let _ = run(wt, &["merge", "--abort"]);
            if files.is_empty() {
                return Err(why.into());
            }
            Ok(Merged::Conflict(files.lines().map(str::to_owned).collect()))
        }
    }
}

/// Moves `branch` to `new` only if it is still at `old` (a compare-and-swap of the ref).
pub(super) fn move_branch(repo: &Path, branch: &str, new: &str, old: &str) -> Result<(), String> {
    run(
        repo,
        &["update-ref", &format!("refs/heads/{branch}"), new, old],
    )?;
    Ok(())
}

/// Whether every change of `branch` is in `integration`, by content: `git cherry` lists no
/// commit of it whose patch is missing there (a rebase breaks ancestry, not this).
pub(super) fn holds(repo: &Path, integration: &str, branch: &str) -> bool {
    run(repo, &["cherry", integration, branch])
        .is_ok_and(|out| out.lines().all(|l| !l.starts_with('+')))
}

/// Whether commit `a` is in the history of `b`.
pub(super) fn is_ancestor(repo: &Path, a: &str, b: &str) -> bool {
    run(repo, &["merge-base", "--is-ancestor", a, b]).is_ok()
}

/// Removes worktree `path` and its branch, once [`holds`] says the integration branch has its
/// work: a dirty worktree is refused by git (never `--force`), and kept.
pub(super) fn remove(
    repo: &Path,
    path: &Path,
    branch: &str,
    integration: &str,
) -> Result<(), String> {
    if !holds(repo, integration, branch) {
        return Err(format!("{branch} has commits that {integration} lacks"));
    }
    if path.exists() {
        run(repo, &["worktree", "remove", &path.display().to_string()])?;
    }
    run(repo, &["branch", "-D", branch])?;
    Ok(())
}

/// Brings the project's checkout to `integration` when it is still at `base` with no change
/// to a tracked file: a fast-forward, never a merge, a reset or a checkout of anything else.
pub(super) fn fast_forward(project: &Path, integration: &str, base: &str) -> Result<(), String> {
    let head = commit_of(project, "HEAD").unwrap_or_default();
    if head != base {
        return Err(format!(
            "the project's HEAD moved ({} → {})",
            short(base),
            short(&head)
        ));
    }
    let changed = run(project, &["status", "--porcelain", "--untracked-files=no"])?;
    if !changed.is_empty() {
        return Err("the project has uncommitted changes to tracked files".into());
    }
    run(project, &["merge", "--ff-only", "-q", integration])?;
    Ok(())
}

/// A commit's first 7 characters.
pub(super) fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}
