//! What a step's commit changed, as `git show --stat` says it: the report's "diff stat per
//! step". `COMMIT` may name one commit, several (the agent's own, then the loop's), or a
//! range; each word is given to git as it is.

use std::path::Path;

use serde::Serialize;

/// The files a step's commits changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct DiffStat {
    /// `abc1234 subject`, one per commit.
    pub commits: Vec<String>,
    /// `path | 3 ++-`, one per file and commit, as git writes them.
    pub files: Vec<String>,
    pub files_changed: u32,
    pub insertions: u32,
    pub deletions: u32,
}

/// Where a line of `git show` output begins a commit (a byte git never writes in a path).
const MARK: &str = "\u{1}";

/// `git show --stat` of the commits `commit` names, in `dir`'s repository; `None` outside one,
/// or when git knows none of them.
#[must_use]
pub(crate) fn of(dir: &Path, commit: &str) -> Option<DiffStat> {
    let words: Vec<&str> = commit
        .split([' ', ','])
        .map(str::trim)
        .filter(|w| !w.is_empty() && !w.starts_with('-'))
        .collect();
    if words.is_empty() {
        return None;
    }
    let mut args = vec!["show", "--no-color", "--stat=100", "--format=\u{1}%h %s"];
    args.extend(&words);
    args.push("--");
    let out = crate::git::output(dir, &args)?;
    Some(parse(&out))
}

/// Reads `git show --stat` output whose commit lines start with [`MARK`].
fn parse(text: &str) -> DiffStat {
    let mut d = DiffStat::default();
    for line in text.lines() {
        if let Some(commit) = line.strip_prefix(MARK) {
            d.commits.push(commit.to_owned());
        } else if line.contains(" changed") && !line.contains('|') {
            let (f, i, x) = summary(line);
            d.files_changed += f;
            d.insertions += i;
            d.deletions += x;
        } else if line.contains('|') {
            d.files.push(line.trim().to_owned());
        }
    }
    d
}

/// ` 2 files changed, 5 insertions(+), 1 deletion(-)` → (2, 5, 1).
fn summary(line: &str) -> (u32, u32, u32) {
    let (mut files, mut added, mut removed) = (0, 0, 0);
    for part in line.split(',') {
        let mut words = part.split_whitespace();
        let count: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        match words.next() {
            Some(what) if what.starts_with("file") => files = count,
            Some(what) if what.starts_with("insertion") => added = count,
            Some(what) if what.starts_with("deletion") => removed = count,
            _ => {}
        }
    }
    (files, added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_files_and_totals_are_read_from_git_show() {
        let text = "\u{1}a690fb3 loop: step 1: investigate\n\n step1.txt | 1 +\n \
                    docs/a.md | 4 ++--\n 2 files changed, 3 insertions(+), 2 deletions(-)\n\
                    \u{1}b12c3d4 agent's own commit\n\n x | 1 -\n 1 file changed, 1 deletion(-)\n";
        let d = parse(text);
        assert_eq!(
            d.commits,
            [
                "a690fb3 loop: step 1: investigate",
                "b12c3d4 agent's own commit"
            ]
        );
        assert_eq!(
            d.files,
            ["step1.txt | 1 +", "docs/a.md | 4 ++--", "x | 1 -"]
        );
        assert_eq!((d.files_changed, d.insertions, d.deletions), (3, 3, 3));
    }

    #[test]
    fn a_commit_outside_a_repository_has_no_diff() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(of(dir.path(), "a690fb3"), None);
        assert_eq!(of(dir.path(), " , "), None);
    }
}
