//! The git a step's commit needs, run as child processes in the work tree's top: what `git
//! status` lists, the content of paths taken into git's object store as the agent left them,
//! the commit of those contents built in an index of the loop's own, and the search for a
//! commit made before a runner died.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Own;

/// How many of the latest commits are searched for a step's commit made before a crash: it
/// is the last thing the loop does before it records it, so it is at HEAD unless a person
/// committed in between.
const FOUND_WITHIN: &str = "50";

/// `git ARGS` in `top`, with `env` set and `input` on its standard input: its output, trimmed
/// of the last newline.
pub(super) fn git(
    top: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    input: Option<&[u8]>,
) -> Result<String, crate::git::Error> {
    let out = crate::git::run_with(top, args, env, input)?;
    Ok(out
        .strip_suffix('\n')
        .map_or_else(|| out.clone(), str::to_owned))
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

/// Every path `git status` lists (untracked files one by one, ignored ones not at all), from
/// the top, with a hash of its content ([`super::super::tree::hash`]: `-` when it is not
/// there); the loop's own files left out.
pub(super) fn changed(top: &Path, own: &Own) -> Result<BTreeMap<String, String>, String> {
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
        .map(|e| &e[3..])
        .filter(|p| !own.holds(p))
        .map(|p| (p.to_owned(), super::super::tree::hash(&top.join(p))))
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

/// `git ARGS` in `top` on the index file `index` (one of the loop's own, not the person's).
fn on_index(
    top: &Path,
    index: &Path,
    args: &[&str],
    input: Option<&[u8]>,
) -> Result<String, String> {
    // git reads the variable from `top`, not from where the loop runs.
    let index = std::path::absolute(index)
        .map_err(|e| format!("while finding {}: {e}", index.display()))?;
    Ok(git(
        top,
        args,
        &[
            ("GIT_INDEX_FILE", index.as_os_str()),
            ("GIT_LITERAL_PATHSPECS", std::ffi::OsStr::new("1")),
        ],
        input,
    )?)
}

/// The index file `index` made anew from commit `head` (empty when there is none). What a
/// runner that died while using it left (the file, git's lock beside it) goes first: the loop
/// holds its lock, so no one else uses it.
fn fresh_index(top: &Path, index: &Path, head: Option<&str>) -> Result<(), String> {
    let mut lock = index.as_os_str().to_owned();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    for f in [index, lock.as_path()] {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("while removing {}: {e}", f.display())),
        }
    }
    if let Some(dir) = index.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("while making {}: {e}", dir.display()))?;
    }
    match head {
        Some(h) => on_index(top, index, &["read-tree", h], None),
        None => on_index(top, index, &["read-tree", "--empty"], None),
    }
    .map(drop)
}

/// NUL-terminated `paths`, as `--stdin -z` and `--pathspec-file-nul` read them.
fn nul_list<'a>(paths: impl Iterator<Item = &'a str>) -> String {
    paths.fold(String::new(), |mut l, p| {
        l.push_str(p);
        l.push('\0');
        l
    })
}

/// What git would commit of each of `want` as the work tree holds it now, `add` taken in as
/// `git add` takes a file (its mode, its content through the person's filters, into git's
/// object store) and `remove` taken out, in the index file `index` made from `head`; a path of
/// neither as `head` holds it. Each path's `MODE BLOB`, `None` for one that is not there.
pub(super) fn take(
    top: &Path,
    index: &Path,
    head: Option<&str>,
    add: &[&str],
    remove: &[&str],
    want: &[&str],
) -> Result<BTreeMap<String, Option<String>>, String> {
    fresh_index(top, index, head)?;
    if !add.is_empty() {
        on_index(
            top,
            index,
            &["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
            Some(nul_list(add.iter().copied()).as_bytes()),
        )?;
    }
    if !remove.is_empty() {
        on_index(
            top,
            index,
            &["update-index", "--force-remove", "-z", "--stdin"],
            Some(nul_list(remove.iter().copied()).as_bytes()),
        )?;
    }
    let listed = on_index(top, index, &["ls-files", "-s", "-z"], None)?;
    let mut held: BTreeMap<String, Option<String>> =
        want.iter().map(|p| ((*p).to_owned(), None)).collect();
    for entry in listed.split('\0') {
        // `MODE BLOB STAGE\tPATH`
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        if let Some(slot) = held.get_mut(path)
            && let Some((mode_blob, _stage)) = meta.rsplit_once(' ')
        {
            *slot = Some(mode_blob.to_owned());
        }
    }
    Ok(held)
}

/// Commits, on top of `head` (a root commit when there is none), `entries` (each path's `MODE
/// BLOB` as [`take`] gives it, `None` to delete it), with `message`: built in the index file
/// `index`, never the person's, so what the person staged stays staged and nothing of the work
/// tree is read. No hook runs (`commit-tree` runs none), nothing is signed (a signing prompt
/// would hang a loop nobody watches), the message is kept as it is. HEAD moves to it only if
/// it is still `head`. The commit's full id; `None` when the entries held nothing to commit.
pub(super) fn build(
    top: &Path,
    index: &Path,
    head: Option<&str>,
    entries: &[(&str, Option<&str>)],
    message: &str,
) -> Result<Option<String>, String> {
    fresh_index(top, index, head)?;
    let put: String = entries
        .iter()
        .filter_map(|(p, e)| e.map(|e| format!("{e}\t{p}\0")))
        .collect();
    if !put.is_empty() {
        on_index(
            top,
            index,
            &["update-index", "-z", "--index-info"],
            Some(put.as_bytes()),
        )?;
    }
    let gone = nul_list(entries.iter().filter(|(_, e)| e.is_none()).map(|(p, _)| *p));
    if !gone.is_empty() {
        on_index(
            top,
            index,
            &["update-index", "--force-remove", "-z", "--stdin"],
            Some(gone.as_bytes()),
        )?;
    }
    let tree = on_index(top, index, &["write-tree"], None)?;
    let before = head.and_then(|h| rev_tree(top, h));
    if before.as_deref() == Some(tree.as_str()) || (head.is_none() && put.is_empty()) {
        return Ok(None);
    }
    let mut args: Vec<String> = super::super::parallel::git::commit_args(top);
    args.extend(["commit-tree", "--no-gpg-sign", &tree, "-F", "-"].map(String::from));
    if let Some(h) = head {
        args.extend(["-p".to_owned(), h.to_owned()]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let commit = git(top, &refs, &[], Some(message.as_bytes()))?;
    git(
        top,
        &[
            "update-ref",
            "-m",
            "loop: a step's commit",
            "HEAD",
            &commit,
            head.unwrap_or(""),
        ],
        &[],
        None,
    )?;
    Ok(Some(commit))
}

/// The tree of commit `c`.
fn rev_tree(top: &Path, c: &str) -> Option<String> {
    git(
        top,
        &["rev-parse", "--verify", "--quiet", &format!("{c}^{{tree}}")],
        &[],
        None,
    )
    .ok()
}

/// The person's index, for each path commit `c` changed, brought to what `c` holds (added,
/// updated, removed), so that `git status` shows the commit's paths as the commit against the
/// work tree: clean where the tree holds what was committed, changed where something wrote the
/// path after the agent. What the person staged elsewhere stays staged.
pub(super) fn index_to(top: &Path, c: &str) -> Result<(), String> {
    let raw = git(
        top,
        &[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--no-commit-id",
            "--root",
            c,
        ],
        &[],
        None,
    )?;
    // `:OLDMODE NEWMODE OLDBLOB NEWBLOB STATUS\0PATH\0`; a new mode of zeros removes the path.
    let mut fields = raw.split('\0');
    let mut info = String::new();
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if let [_, mode, _, blob, _] = parts[..] {
            let mode = if mode.bytes().all(|b| b == b'0') {
                "0"
            } else {
                mode
            };
            let _ = write!(info, "{mode} {blob}\t{path}\0");
        }
    }
    if info.is_empty() {
        return Ok(());
    }
    git(
        top,
        &["update-index", "-z", "--index-info"],
        &[],
        Some(info.as_bytes()),
    )?;
    Ok(())
}
