//! The project's git HEAD, read from `.git` directly: a step records the commit it made
//! (`COMMIT`), and starting `git` twice per step would cost more than the rest of the runner.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The repository directory of `dir`'s work tree: `.git` itself, or where a `.git` file (a
/// linked worktree or submodule) points.
fn git_dir(dir: &Path) -> Option<PathBuf> {
    for d in dir.ancestors() {
        let g = d.join(".git");
        if g.is_dir() {
            return Some(g);
        }
        if g.is_file() {
            let text = std::fs::read_to_string(&g).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            return Some(d.join(target));
        }
    }
    None
}

/// Whether `dir` is in a git work tree (an unborn branch too).
#[must_use]
pub(crate) fn in_repo(dir: &Path) -> bool {
    git_dir(dir).is_some()
}

/// `git diff --stat HEAD` in `dir`'s repository: what the working tree changed since the last
/// commit, for a handoff. `None` outside a repository, or when nothing changed.
#[must_use]
pub(crate) fn diff_stat(dir: &Path) -> Option<String> {
    git_dir(dir)?;
    let text = crate::git::output(dir, &["diff", "--stat", "HEAD"])?
        .trim_end()
        .to_owned();
    (!text.is_empty()).then_some(text)
}

/// `git ARGS -- . :(exclude)SKIP` in `dir`: the work tree without `skip` (the loop's own state
/// directory), where `skip` lies inside it. `None` outside a repository, or when git failed.
pub(super) fn git_outside(dir: &Path, skip: &Path, args: &[&str]) -> Option<String> {
    git_dir(dir)?;
    let skip = std::path::absolute(skip).unwrap_or_else(|_| skip.to_path_buf());
    let here = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let exclude = skip
        .strip_prefix(&here)
        .ok()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| format!(":(exclude){}", p.display()));
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--", "."]);
    all.extend(exclude.as_deref());
    crate::git::output(dir, &all)
}

/// What changed in `dir`'s repository since `base` (a commit; HEAD when `None`): `git diff`
/// against it, then each untracked file in full, cut at `cap` bytes with a note; nothing under
/// `skip` (the loop's own state directory). `None` outside a repository.
#[must_use]
pub(crate) fn review_diff(
    dir: &Path,
    base: Option<&str>,
    skip: &Path,
    cap: usize,
) -> Option<String> {
    git_dir(dir)?;
    let with = |args: &[&str]| git_outside(dir, skip, args).unwrap_or_default();
    let mut diff = with(&["diff", base.unwrap_or("HEAD")]);
    for file in with(&["ls-files", "--others", "--exclude-standard"]).lines() {
        let _ = write!(
            diff,
            "\n--- new file (untracked): {file}\n{}",
            untracked(dir, file, cap)
        );
    }
    if diff.len() > cap {
        let mut cut = cap;
        while !diff.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = diff.len();
        diff.truncate(cut);
        let _ = write!(
            diff,
            "\n[… cut here: the diff has {total} bytes, {cap} shown; read the files for the rest]"
        );
    }
    Some(if diff.trim().is_empty() {
        "(no changes)".into()
    } else {
        diff
    })
}

/// What a reviewer is shown of the untracked `file` in `dir`: its text, read without following
/// a link at any step of its path (the step's agent made it, and a link could name any file of
/// the person's); a link is shown as one, with where it points, as `git diff` shows a tracked
/// one.
fn untracked(dir: &Path, file: &str, cap: usize) -> String {
    let limit = u64::try_from(cap).unwrap_or(u64::MAX);
    match crate::named_file::read_beneath(dir, Path::new(file), limit) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(crate::named_file::ReadError::Refused(crate::named_file::Refused::NotRegular(
            crate::named_file::LINK,
        ))) => match std::fs::read_link(dir.join(file)) {
            Ok(to) => format!("(a symbolic link to {}: not followed)", to.display()),
            Err(_) => "(a symbolic link on its path: not followed)".into(),
        },
        Err(e) => format!("(not shown: {e})"),
    }
}

/// The short hash of HEAD, or `None` outside a repository or on an unborn branch.
#[must_use]
pub(crate) fn head(dir: &Path) -> Option<String> {
    let gd = git_dir(dir)?;
    let head = std::fs::read_to_string(gd.join("HEAD")).ok()?;
    let head = head.trim();
    let hash = match head.strip_prefix("ref:") {
        None => head.to_string(),
        Some(name) => {
            let name = name.trim();
            // Refs of a linked worktree live in the common directory.
            let common = std::fs::read_to_string(gd.join("commondir"))
                .map_or_else(|_| gd.clone(), |c| gd.join(c.trim()));
            [&gd, &common]
                .iter()
                .find_map(|base| std::fs::read_to_string(base.join(name)).ok())
                .map(|s| s.trim().to_string())
                .or_else(|| packed(&common, name))?
        }
    };
    (hash.len() >= 7 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hash[..7].to_string())
}

fn packed(common: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    text.lines().find_map(|l| {
        let (hash, r) = l.split_once(' ')?;
        (r == name).then(|| hash.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::person as git;

    #[test]
    fn agrees_with_git_through_loose_packed_and_detached_heads() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(head(d), None, "not a repository");
        git(d, &["init", "-q", "-b", "main"]);
        assert_eq!(head(d), None, "unborn branch");
        std::fs::write(d.join("a"), "1").unwrap();
        git(d, &["add", "a"]);
        git(d, &["commit", "-qm", "one"]);
        let sub = d.join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(
            head(&sub).unwrap(),
            git(d, &["rev-parse", "--short=7", "HEAD"])
        );
        git(d, &["pack-refs", "--all"]);
        assert_eq!(
            head(d).unwrap(),
            git(d, &["rev-parse", "--short=7", "HEAD"])
        );
        git(d, &["checkout", "-q", "--detach"]);
        assert_eq!(
            head(d).unwrap(),
            git(d, &["rev-parse", "--short=7", "HEAD"])
        );
        let wt = dir.path().join("wt");
        git(
            d,
            &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
        );
        assert_eq!(
            head(&wt).unwrap(),
            git(&wt, &["rev-parse", "--short=7", "HEAD"])
        );
    }
}
