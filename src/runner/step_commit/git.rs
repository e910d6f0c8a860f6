//! The git a step's commit needs, run as child processes in the work tree's top: what `git
//! status` lists, the commit of only some paths, and the search for a commit made before a
//! runner died.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::Own;

/// How many of the latest commits are searched for a step's commit made before a crash: it
/// is the last thing the loop does before it records it, so it is at HEAD unless a person
/// committed in between.
const FOUND_WITHIN: &str = "50";

/// `git ARGS` in `top`, with `env` set and `input` on its standard input: its output, trimmed
/// of the last newline, or what it said when it failed.
pub(super) fn git(
    top: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    input: Option<&[u8]>,
) -> Result<String, String> {
    let mut cmd = crate::git::command(top, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let said = |e: &dyn std::fmt::Display| format!("git {}: {e}", args.join(" "));
    let mut child = cmd.spawn().map_err(|e| said(&e))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(bytes).map_err(|e| said(&e))?;
    }
    let out = child.wait_with_output().map_err(|e| said(&e))?;
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned())
    } else {
        // Some refusals are on standard output (`git commit`'s "nothing to commit").
        let told = format!(
            "{} {}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
        Err(said(&crate::text::one_line(told.trim(), 300)))
    }
}

/// The top of the git work tree `dir` is in.
pub(super) fn top_of(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"], &[], None)
        .ok()
        .filter(|t| !t.is_empty())
        .map(PathBuf::from)
}

/// The full id of commit `name`, if it exists.
pub(super) fn rev(top: &Path, name: &str) -> Option<String> {
    git(
        top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{name}^{{commit}}"),
        ],
        &[],
        None,
    )
    .ok()
}

pub(super) fn short(commit: &str) -> String {
    commit.get(..7).unwrap_or(commit).to_owned()
}

/// A path `git status` lists: how (its two status letters), and a hash of its content.
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub path: String,
    pub status: String,
    pub hash: String,
}

impl Change {
    /// Not in git yet: git must be told of it before a commit of only some paths takes it.
    pub(super) fn untracked(&self) -> bool {
        self.status == "??"
    }

    /// Added to the index, then deleted from the tree: in neither HEAD nor the tree.
    pub(super) fn added_then_deleted(&self) -> bool {
        self.status.starts_with('A') && self.hash == "-"
    }
}

/// Every path `git status` lists (untracked files one by one, ignored ones not at all), from
/// the top, with how and a hash of its content; the loop's own files left out.
pub(super) fn changed(top: &Path, own: &Own) -> Result<BTreeMap<String, Change>, String> {
    let listed = git(
        top,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=none",
        ],
        &[],
        None,
    )?;
    Ok(listed
        .split('\0')
        .filter(|e| e.len() > 3)
        .map(|e| (&e[..2], &e[3..]))
        .filter(|(_, p)| !own.holds(p))
        .map(|(status, p)| {
            let c = Change {
                path: p.to_owned(),
                status: status.to_owned(),
                hash: super::super::tree::hash(&top.join(p)),
            };
            (p.to_owned(), c)
        })
        .collect())
}

/// The commits since `base` (all of HEAD's on a branch that was unborn), oldest first,
/// `but` left out: the agent's own.
pub(super) fn agent_commits(top: &Path, base: Option<&str>, but: Option<&str>) -> Vec<String> {
    let range = base.map_or_else(|| "HEAD".to_owned(), |b| format!("{b}..HEAD"));
    git(
        top,
        &["rev-list", "--reverse", "--max-count=100", &range],
        &[],
        None,
    )
    .unwrap_or_default()
    .lines()
    .filter(|c| Some(*c) != but)
    .map(short)
    .collect()
}

/// The commit of run `run` of step `step` of loop `loop_id`, among the latest ones.
pub(super) fn find(top: &Path, loop_id: &str, step: u32, run: &str) -> Option<String> {
    let log = git(
        top,
        &["log", "-n", FOUND_WITHIN, "--format=%H%x00%B%x1e", "HEAD"],
        &[],
        None,
    )
    .ok()?;
    log.split('\x1e').find_map(|entry| {
        let (id, message) = entry.trim_start().split_once('\0')?;
        crate::engine::commit::is_commit_of(message, loop_id, step, run).then(|| id.to_owned())
    })
}

/// The files commit `c` changed.
pub(super) fn files_of(top: &Path, c: &str) -> Vec<String> {
    git(
        top,
        &[
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-commit-id",
            "--root",
            c,
        ],
        &[],
        None,
    )
    .unwrap_or_default()
    .split('\0')
    .filter(|p| !p.is_empty())
    .map(str::to_owned)
    .collect()
}

/// `git update-index --add --remove` of `paths` as the work tree has them, in the person's
/// index: literal paths, a deleted one removed.
pub(super) fn update_index(top: &Path, paths: &[String]) -> Result<String, String> {
    let mut list = paths.join("\0");
    list.push('\0');
    git(
        top,
        &["update-index", "--add", "--remove", "-z", "--stdin"],
        &[],
        Some(list.as_bytes()),
    )
}

/// Commits `paths` as the work tree has them, with `message`, on top of HEAD: git's own
/// commit of only those paths (`--only`), which builds the commit in an index of its own, so
/// what the person staged elsewhere stays staged, and brings the person's index to it for
/// those paths. No hook runs (a hook is the person's, for their own commits), nothing is
/// signed (a signing prompt would hang a loop nobody watches), the message is kept as it is.
/// The commit's full id; `None` when the paths held nothing to commit after all.
pub(super) fn make(top: &Path, paths: &[&Change], message: &str) -> Result<Option<String>, String> {
    let literal = [("GIT_LITERAL_PATHSPECS", std::ffi::OsStr::new("1"))];
    let list = |of: &mut dyn Iterator<Item = &&Change>| {
        let mut l = of.map(|c| c.path.as_str()).collect::<Vec<_>>().join("\0");
        l.push('\0');
        l
    };
    let new = list(&mut paths.iter().filter(|c| c.untracked()));
    if new.len() > 1 {
        git(
            top,
            &["add", "--pathspec-from-file=-", "--pathspec-file-nul"],
            &literal,
            Some(new.as_bytes()),
        )?;
    }
    let mut args: Vec<String> = super::super::parallel::git::commit_args(top);
    args.extend(
        [
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "--only",
            "--no-verify",
            "--no-gpg-sign",
            "--quiet",
            "--cleanup=verbatim",
            "-m",
            message,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ]
        .map(String::from),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    match git(
        top,
        &refs,
        &literal,
        Some(list(&mut paths.iter()).as_bytes()),
    ) {
        Ok(_) => Ok(rev(top, "HEAD")),
        Err(why) if why.contains("nothing to commit") || why.contains("no changes added") => {
            Ok(None)
        }
        Err(why) => Err(why),
    }
}
