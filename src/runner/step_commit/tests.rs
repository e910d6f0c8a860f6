//! The commit of a step against a real git repository.

use super::git::*;
use super::*;
use crate::git::person as sh_git;

/// A repository with `a.txt` committed, in a temporary directory.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sh_git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("a.txt"), "1\n").unwrap();
    sh_git(d, &["add", "a.txt"]);
    sh_git(d, &["commit", "-qm", "one"]);
    dir
}

const MESSAGE: &str = "loop: step 1/1: did it\n\nLoop-Id: abc\nLoop-Step: 1\nLoop-Run: task_1\n";

/// Commits `paths` of the work tree of `d` as a step's commit is made: each taken into git as
/// the tree holds it now, then committed from that.
fn commit_of(d: &Path, paths: &[&str]) -> Option<String> {
    let index = d.join(".git/loop-index");
    let head = rev(d, "HEAD");
    let (gone, there): (Vec<&str>, Vec<&str>) = paths.iter().partition(|p| !d.join(p).exists());
    let held = take(d, &index, head.as_deref(), &there, &gone, paths).unwrap();
    let entries: Vec<(&str, Option<&str>)> =
        paths.iter().map(|p| (*p, held[*p].as_deref())).collect();
    let c = build(d, &index, head.as_deref(), &entries, MESSAGE).unwrap()?;
    index_to(d, &c).unwrap();
    Some(c)
}

#[test]
fn a_file_rewritten_after_it_was_taken_is_committed_as_taken_and_shown_changed() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join("c.txt"), "the agent's\n").unwrap();
    std::fs::write(d.join("a.txt"), "the agent's too\n").unwrap();
    let index = d.join(".git/loop-index");
    let head = rev(d, "HEAD");
    let all = ["a.txt", "c.txt"];
    let held = take(d, &index, head.as_deref(), &all, &[], &all).unwrap();
    // Something else (VERIFY) rewrites both, and deletes one, after.
    std::fs::write(d.join("c.txt"), "VERIFY's\n").unwrap();
    std::fs::remove_file(d.join("a.txt")).unwrap();
    let entries: Vec<(&str, Option<&str>)> =
        all.iter().map(|p| (*p, held[*p].as_deref())).collect();
    let c = build(d, &index, head.as_deref(), &entries, MESSAGE)
        .unwrap()
        .unwrap();
    index_to(d, &c).unwrap();
    assert_eq!(sh_git(d, &["show", "HEAD:c.txt"]), "the agent's");
    assert_eq!(sh_git(d, &["show", "HEAD:a.txt"]), "the agent's too");
    assert_eq!(sh_git(d, &["status", "--porcelain"]), "D a.txt\n M c.txt");
}

#[test]
fn a_step_commit_takes_only_its_paths_and_what_you_staged_stays_staged() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join("a.txt"), "yours, staged\n").unwrap();
    sh_git(d, &["add", "a.txt"]);
    std::fs::write(d.join("c.txt"), "the step's\n").unwrap();
    std::fs::write(d.join("weird *name.txt"), "the step's too\n").unwrap();
    let c = commit_of(d, &["c.txt", "weird *name.txt"]).unwrap();
    assert_eq!(sh_git(d, &["rev-parse", "HEAD"]), c);
    assert_eq!(
        sh_git(d, &["show", "--format=", "--name-only", "HEAD"]),
        "c.txt\nweird *name.txt"
    );
    assert_eq!(
        sh_git(d, &["show", "HEAD:a.txt"]),
        "1",
        "your staged change is not in it"
    );
    assert_eq!(
        sh_git(d, &["status", "--porcelain"]),
        "M  a.txt",
        "and is still staged"
    );
    assert_eq!(sh_git(d, &["log", "-1", "--format=%B"]), MESSAGE.trim_end());
}

#[test]
fn a_commit_made_before_a_crash_is_found_by_its_trailers_and_no_other() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join("c.txt"), "x\n").unwrap();
    let c = commit_of(d, &["c.txt"]).unwrap();
    // A person's commit on top of it does not hide it.
    sh_git(d, &["commit", "-q", "--allow-empty", "-m", "mine"]);
    assert_eq!(find(d, "abc", 1, "task_1"), Some(c.clone()));
    assert_eq!(find(d, "abc", 1, "task_2"), None, "another run of the step");
    assert_eq!(find(d, "abc", 2, "task_1"), None);
    assert_eq!(files_of(d, &c), ["c.txt"]);
    assert_eq!(agent_commits(d, None, Some(&c)).len(), 2, "one, and mine");
}

#[test]
fn the_loops_own_files_beside_the_project_files_are_not_the_steps() {
    let dir = repo();
    let d = dir.path();
    for own in ["M1.md", "M1.md.lock", "loop.log", "M1.20260101T000000.md"] {
        std::fs::write(d.join(own), "loop\n").unwrap();
    }
    std::fs::create_dir(d.join("tasks")).unwrap();
    std::fs::write(d.join("tasks/out"), "x\n").unwrap();
    std::fs::write(d.join("README.md"), "project\n").unwrap();
    let own = Own::new(d, d, &d.join("M1.md"));
    let listed: Vec<String> = changed(d, &own).unwrap().into_keys().collect();
    assert_eq!(listed, ["README.md"]);
    // A state directory of its own, in the project: only the loop's names in it are its own.
    std::fs::create_dir(d.join("docs")).unwrap();
    std::fs::write(d.join("docs/M1.md"), "loop\n").unwrap();
    std::fs::write(d.join("docs/guide.md"), "project\n").unwrap();
    let own = Own::new(d, &d.join("docs"), &d.join("docs/M1.md"));
    let listed: Vec<String> = changed(d, &own).unwrap().into_keys().collect();
    assert!(listed.contains(&"docs/guide.md".to_owned()), "{listed:?}");
    assert!(!listed.contains(&"docs/M1.md".to_owned()), "{listed:?}");
}

#[test]
fn the_first_commit_of_an_unborn_branch_is_a_root_commit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sh_git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("c.txt"), "x\n").unwrap();
    let c = commit_of(d, &["c.txt"]).unwrap();
    assert_eq!(sh_git(d, &["rev-list", "--count", "HEAD"]), "1");
    assert_eq!(sh_git(d, &["rev-parse", "main"]), c);
    assert_eq!(sh_git(d, &["status", "--porcelain"]), "");
}

#[test]
fn paths_that_hold_nothing_to_commit_make_no_commit_and_no_error() {
    let dir = repo();
    let d = dir.path();
    // Staged, then put back as committed: listed, and nothing to commit.
    std::fs::write(d.join("a.txt"), "2\n").unwrap();
    sh_git(d, &["add", "a.txt"]);
    std::fs::write(d.join("a.txt"), "1\n").unwrap();
    let head = sh_git(d, &["rev-parse", "HEAD"]);
    assert_eq!(commit_of(d, &["a.txt"]), None);
    assert_eq!(sh_git(d, &["rev-parse", "HEAD"]), head);
}
