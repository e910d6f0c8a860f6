//! The work tree as a review found it and left it. A review must change nothing: whatever it
//! changed would go unreviewed into the next step's `git add -A`. `--tools` keeps a reviewer's
//! own tools from writing, but not a hook, an older CLI or a process beside it; so the runner
//! compares what `git status` lists, with a hash of each listed file's content, before the
//! review and after it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What `git status` showed of a work tree (the loop's state directory left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Snapshot {
    /// The commit checked out.
    head: Option<String>,
    /// Each path `git status` lists: its two status letters and a hash of its content.
    files: BTreeMap<String, String>,
}

/// The work tree of `dir` now, `skip` left out; `None` outside a git repository.
#[must_use]
pub(super) fn snapshot(dir: &Path, skip: &Path) -> Option<Snapshot> {
    let args = ["status", "--porcelain=v1", "-z", "--untracked-files=all"];
    let listed = super::git::git_outside(dir, skip, &args)?;
    // git names each path from the repository's top, which may be above the project.
    let top = crate::git::output(dir, &["rev-parse", "--show-toplevel"]).map_or_else(
        || dir.to_path_buf(),
        |t| std::path::PathBuf::from(t.trim_end()),
    );
    let mut files = BTreeMap::new();
    let mut entries = listed.split('\0').filter(|e| e.len() > 3);
    while let Some(entry) = entries.next() {
        let (status, path) = entry.split_at(2);
        let path = &path[1..];
        // A rename or copy names its source next; the destination is what is there now.
        if status.contains(['R', 'C']) {
            entries.next();
        }
        files.insert(
            path.to_owned(),
            format!("{status} {}", hash(&top.join(path))),
        );
    }
    Some(Snapshot {
        head: super::git::head(dir),
        files,
    })
}

/// What differs between `before` and `after`, one phrase a change (`a.txt (changed)`,
/// `b.txt (new)`, `c.txt (deleted)`, `d.txt (put back as committed)`); empty when nothing does.
#[must_use]
pub(super) fn changes(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut said = Vec::new();
    if before.head != after.head {
        let name = |h: &Option<String>| h.clone().unwrap_or_else(|| "none".into());
        said.push(format!(
            "HEAD ({} → {})",
            name(&before.head),
            name(&after.head)
        ));
    }
    let paths: std::collections::BTreeSet<&String> =
        before.files.keys().chain(after.files.keys()).collect();
    for path in paths {
        let what = match (before.files.get(path), after.files.get(path)) {
            (a, b) if a == b => continue,
            (None, Some(now)) if now.starts_with("??") => "new",
            (_, Some(now)) if now.ends_with(" -") => "deleted",
            (_, Some(_)) => "changed",
            (Some(_), None) => "put back as committed",
            (None, None) => continue,
        };
        said.push(format!("{path} ({what})"));
    }
    said
}

/// A hash of a file's content (FNV-1a, 64 bits: stable across builds, so a snapshot taken by
/// one runner compares with one taken by the next); `-` for a path that is not there, `dir`
/// for a directory (a nested repository).
pub(super) fn hash(path: &Path) -> String {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return "-".into();
    };
    if meta.is_dir() {
        return "dir".into();
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    if meta.is_symlink() {
        eat(std::fs::read_link(path)
            .unwrap_or_default()
            .as_os_str()
            .as_encoded_bytes());
    } else if let Ok(mut f) = std::fs::File::open(path) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            eat(&buf[..n]);
        }
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::person as git;

    #[test]
    fn every_change_to_the_tree_is_named_and_the_state_directory_is_not_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let state = d.join("state");
        std::fs::create_dir(&state).unwrap();
        assert_eq!(snapshot(d, &state), None, "not a repository");
        git(d, &["init", "-q"]);
        for f in ["kept.txt", "edited.txt", "gone.txt", "dirty.txt"] {
            std::fs::write(d.join(f), "1\n").unwrap();
        }
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "one"]);
        // The step left dirty.txt changed and an untracked file: that is the tree reviewed.
        std::fs::write(d.join("dirty.txt"), "2\n").unwrap();
        std::fs::write(d.join("untracked.txt"), "u\n").unwrap();
        let before = snapshot(d, &state).unwrap();
        assert!(changes(&before, &snapshot(d, &state).unwrap()).is_empty());
        std::fs::write(state.join("M1.md"), "x").unwrap();
        std::fs::write(d.join("edited.txt"), "2\n").unwrap();
        std::fs::remove_file(d.join("gone.txt")).unwrap();
        std::fs::write(d.join("dirty.txt"), "1\n").unwrap();
        std::fs::write(d.join("untracked.txt"), "v\n").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/new.txt"), "n\n").unwrap();
        let said = changes(&before, &snapshot(d, &state).unwrap());
        assert_eq!(
            said,
            [
                "dirty.txt (put back as committed)",
                "edited.txt (changed)",
                "gone.txt (deleted)",
                "sub/new.txt (new)",
                "untracked.txt (changed)",
            ]
        );
        let before = snapshot(d, &state).unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "two"]);
        let said = changes(&before, &snapshot(d, &state).unwrap());
        assert!(said[0].starts_with("HEAD ("), "{said:?}");
    }

    /// In a project below its repository's top, git names each path from the top, and each
    /// file was hashed from the project's directory instead: not there, so every content the
    /// reviewer gave an already changed file hashed alike, and the change went unseen.
    #[test]
    fn a_change_to_a_changed_file_of_a_project_below_the_repository_top_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let project = top.join("app");
        let state = project.join("state");
        std::fs::create_dir_all(&state).unwrap();
        git(top, &["init", "-q"]);
        std::fs::write(project.join("dirty.txt"), "1\n").unwrap();
        git(top, &["add", "."]);
        git(top, &["commit", "-qm", "one"]);
        std::fs::write(project.join("dirty.txt"), "2\n").unwrap();
        let before = snapshot(&project, &state).unwrap();
        std::fs::write(project.join("dirty.txt"), "3\n").unwrap();
        let after = snapshot(&project, &state).unwrap();
        assert_eq!(changes(&before, &after), ["app/dirty.txt (changed)"]);
    }
}
