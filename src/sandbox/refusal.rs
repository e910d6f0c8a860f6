//! A failure that was the sandbox's doing: a run or VERIFY that reached for a path the sandbox
//! hides (`No such file or directory` for a file that exists, a shim's exit 127) or keeps
//! read-only (`Read-only file system`). No agent can fix that, and a retry fails the same way:
//! the person is told which path, and the flag that grants it.

use std::path::{Path, PathBuf};

use super::mounts::Mount;

/// What the sandbox refused a run, read from what it printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The path the run reached for, which exists outside it.
    pub path: PathBuf,
    /// Whether it wanted to write there (it was there, read-only).
    pub write: bool,
    /// What to grant: the path's toolchain-sized directory, as the flag takes it.
    pub grant: String,
}

impl Refusal {
    /// One sentence for a failure line, a gate and a message.
    #[must_use]
    pub(crate) fn said(&self) -> String {
        use crate::m1::keys::AgentKey;
        use crate::m1::settings::{Kept, row};
        let (what, key) = if self.write {
            ("kept read-only", AgentKey::SandboxWrite)
        } else {
            ("hid", AgentKey::SandboxRead)
        };
        let flag = row(Kept::Agent(key))
            .and_then(|s| s.flag)
            .unwrap_or_default();
        format!(
            "the sandbox {what} {}, which exists outside the run: grant it with `--{flag} {}` \
             (AGENT.{} in M1.md)",
            self.path.display(),
            self.grant,
            key.name()
        )
    }
}

/// The words with which a program says a path was not there, or not writable.
const MISSING: &[&str] = &[
    "No such file or directory",
    "not found",
    "cannot access",
    "can't open",
    "Permission denied",
];
const READ_ONLY: &str = "Read-only file system";

/// The first path of `output` that the run of `command` (`bwrap` and its arguments, as
/// recorded) could not reach and that exists here: hidden by the sandbox, or read-only where
/// the output says a write failed. `None` when the output names no such path.
#[must_use]
pub(crate) fn refusal(output: &str, command: &[String], home: &Path) -> Option<Refusal> {
    let (program, args) = command.split_first()?;
    if Path::new(program).file_name().is_none_or(|n| n != "bwrap") {
        return None;
    }
    let mounts = Mount::parse(args);
    for line in output.lines() {
        let write = line.contains(READ_ONLY);
        if !write && !MISSING.iter().any(|m| line.contains(m)) {
            continue;
        }
        for path in paths_in(line).into_iter().map(|p| resolved(&p)) {
            // A write may be of a file to be made: its directory exists.
            let there = |p: &Path| std::fs::symlink_metadata(p).is_ok();
            let exists = there(&path) || (write && path.parent().is_some_and(there));
            if !exists || !super::toolchains::allowed(&path, home) {
                continue;
            }
            let seen = seen_as(&mounts, &path);
            let refused = match seen {
                None => true,
                Some(writable) => write && !writable,
            };
            if refused {
                return Some(Refusal {
                    grant: grant_for(&path, home),
                    path,
                    write,
                });
            }
        }
    }
    None
}

/// Absolute paths in `line`, as programs quote them (`'/a/b'`, `"/a/b"`, `/a/b:`).
fn paths_in(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '(' | ')'))
        .map(|w| w.trim_end_matches([':', ',', ';', '.']))
        .filter(|w| w.starts_with('/') && w.len() > 1)
        .map(PathBuf::from)
        .collect()
}

/// `path` as the kernel resolves it (`..` and links), where it or its directory exists.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|e| match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir).map(|d| d.join(name)),
            _ => Err(e),
        })
        .unwrap_or_else(|_| path.to_path_buf())
}

/// How the sandbox shows `path`: `None` when it does not (no mount over it, or an empty one,
/// such as the home's), else whether it is writable there.
fn seen_as(mounts: &[Mount], path: &Path) -> Option<bool> {
    let over = mounts.iter().rev().find_map(|m| match m {
        Mount::Read(p) if path.starts_with(p) => Some((false, false)),
        Mount::Write(p) if path.starts_with(p) => Some((true, false)),
        Mount::Empty(p) if path.starts_with(p) => Some((true, true)),
        _ => None,
    })?;
    match over {
        (_, true) => None,
        (writable, false) => Some(writable),
    }
}

/// What to grant for `path`: under the home, its first directory there (`~/.pyenv` for
/// `~/.pyenv/libexec/pyenv`); elsewhere the directory that holds it.
fn grant_for(path: &Path, home: &Path) -> String {
    if let Ok(rest) = path.strip_prefix(home)
        && let Some(first) = rest.components().next()
    {
        return format!("~/{}", first.as_os_str().to_string_lossy());
    }
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    dir.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bwrap(mounts: &[&str]) -> Vec<String> {
        let mut v = vec!["/usr/bin/bwrap".to_owned()];
        v.extend(mounts.iter().map(|s| (*s).to_owned()));
        v.extend(["--".to_owned(), "sh".to_owned()]);
        v
    }

    #[test]
    fn a_shim_that_cannot_find_its_manager_under_home_is_the_sandboxs_doing() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let pyenv = home.join(".pyenv/libexec/pyenv");
        std::fs::create_dir_all(pyenv.parent().unwrap()).unwrap();
        std::fs::write(&pyenv, "").unwrap();
        let h = home.display().to_string();
        let shims = format!("{h}/.pyenv/shims");
        let cmd = bwrap(&["--tmpfs", &h, "--ro-bind-try", &shims, &shims]);
        let out = format!(
            "{shims}/python: line 12: {}: No such file or directory\n",
            pyenv.display()
        );
        let r = refusal(&out, &cmd, &home).expect("a refusal");
        assert_eq!(r.path, pyenv);
        assert_eq!(r.grant, "~/.pyenv");
        assert!(!r.write);
        assert!(r.said().contains("--sandbox-read ~/.pyenv"), "{}", r.said());
        // A path that is not there outside either is the program's own problem.
        let gone = format!("{h}/.pyenv/libexec/other: No such file or directory");
        assert_eq!(refusal(&gone, &cmd, &home), None);
        // Nor is one the run sees, nor output of an unconfined run.
        let shown = format!("{h}/.pyenv/shims: No such file or directory");
        std::fs::create_dir_all(home.join(".pyenv/shims")).unwrap();
        assert_eq!(refusal(&shown, &cmd, &home), None);
        assert_eq!(refusal(&out, &["sh".to_owned()], &home), None);
    }

    #[test]
    fn a_write_refused_where_the_sandbox_reads_only_asks_for_a_writable_grant() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let d = data.display().to_string();
        let cmd = bwrap(&["--ro-bind-try", &d, &d]);
        let out = format!("touch: cannot touch '{d}/x': Read-only file system");
        let r = refusal(&out, &cmd, Path::new("/nonexistent-home")).expect("a refusal");
        assert!(r.write);
        assert_eq!(r.grant, d, "the directory that holds the file to be made");
        assert!(r.said().contains("--sandbox-write"), "{}", r.said());
        // A secret place is never offered.
        let home = dir.path().to_path_buf();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let key = format!("cat: {}/.ssh/id: No such file or directory", home.display());
        std::fs::write(home.join(".ssh/id"), "k").unwrap();
        assert_eq!(refusal(&key, &bwrap(&[]), &home), None);
    }
}
