//! The loops of this user, found from any directory (`loop list`, `loop clean`): every M1.md a
//! runner of this user opened ([`crate::runner::known`]), every one a runner drives now (the
//! runner registry), every one the daemon keeps, and the loop of the current directory; and
//! of each, what its file says and what of it is alive. A step's own loop (of a loop that
//! runs its steps at once) is its parent's part, and not listed apart.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::layout::Layout;
use crate::m1::M1;

/// One loop as found.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// Its state file, absolute.
    pub file: PathBuf,
    /// An archive `loop start` made of it (`M1.<time>.md`).
    pub archived: bool,
    /// What its file says, or why it cannot be read.
    pub m: Result<M1, String>,
    /// The pid of the runner that drives it.
    pub runner: Option<u32>,
    /// When it last did something: its file, its log, its running task's output.
    pub active: Option<DateTime<Utc>>,
}

/// The state files of this user's loops (absolute, each once, only those still there):
/// those noted, those a runner drives, those the daemon keeps, and `here` (the `--file`
/// loop of the command) when it exists. With the files that are no longer there, apart.
pub(crate) fn gather(here: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut all: Vec<PathBuf> = crate::runner::known::all();
    all.extend(crate::runner::registry::live().into_iter().map(|e| e.file));
    all.extend(super::service::installed_loops());
    all.push(here.to_path_buf());
    let mut found: Vec<PathBuf> = Vec::new();
    let mut gone: Vec<PathBuf> = Vec::new();
    for p in all {
        let Ok(abs) = std::path::absolute(&p) else {
            continue;
        };
        let canon = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
        if found.contains(&canon) || gone.contains(&abs) {
            continue;
        }
        if canon.is_file() {
            found.push(canon);
        } else if p != here {
            gone.push(abs);
        }
    }
    (found, gone)
}

/// The project a command run with `--file` `here` is about: the directory that holds the state
/// directory of the loop found here (`state/` in the project), else the current directory.
#[must_use]
pub(crate) fn project_of(here: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if here.is_file() {
        let abs = std::fs::canonicalize(here).unwrap_or_else(|_| here.to_path_buf());
        let state = Layout::of(&abs).state_dir().to_path_buf();
        if let Some(project) = state.parent() {
            return project.to_path_buf();
        }
    }
    std::fs::canonicalize(&cwd).unwrap_or(cwd)
}

/// Of `files` (state files, absolute), those of loops within `project`: their state directory
/// beneath it.
#[must_use]
pub(crate) fn within(files: Vec<PathBuf>, project: &Path) -> Vec<PathBuf> {
    files
        .into_iter()
        .filter(|f| Layout::of(f).state_dir().starts_with(project))
        .collect()
}

/// The archives `loop start` made of the loop whose state file is `file`, newest first.
pub(crate) fn archives_of(file: &Path) -> Vec<PathBuf> {
    let Some(name) = file.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let dir = Layout::of(file).state_dir().to_path_buf();
    let mut found: Vec<(String, u32, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            crate::layout::is_archive_of(&name, &n).then(|| {
                let (time, nth) = archive_stamp(&n);
                (time, nth, e.path())
            })
        })
        .collect();
    found.sort();
    found.reverse();
    found.into_iter().map(|(_, _, p)| p).collect()
}

/// An archive's time and number (`M1.20260217T053000-2.md`: `20260217T053000`, 2), by which
/// archives sort from the oldest.
fn archive_stamp(name: &str) -> (String, u32) {
    let stamp = name
        .trim_end_matches(".md")
        .rsplit_once('.')
        .map_or("", |(_, s)| s);
    match stamp.split_once('-') {
        Some((time, n)) => (time.to_owned(), n.parse().unwrap_or(1)),
        None => (stamp.to_owned(), 1),
    }
}

/// The loop of `file` as it stands: its file read, its runner asked, its last activity.
/// `None` for a step's own loop (its parent lists it).
pub(crate) fn see(file: &Path, archived: bool) -> Option<Seen> {
    let m = crate::m1::load(file)
        .map(|d| d.view())
        .map_err(|e| crate::text::one_line(&e.to_string(), 200));
    if m.as_ref().is_ok_and(|m| m.parent.is_some()) {
        return None;
    }
    let runner = if archived {
        None
    } else {
        crate::runner::lock::holder(file)
    };
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    let mut times = vec![modified(file)];
    if !archived {
        times.push(modified(&Layout::dir(&state_dir).log()));
        if let Some(task) = m.as_ref().ok().and_then(|m| m.current.task_id.clone()) {
            let dir = crate::bridge::task_dir(&state_dir, &task);
            times.push(modified(&dir.join(crate::bridge::STDOUT_FILE)));
        }
    }
    Some(Seen {
        file: file.to_path_buf(),
        archived,
        m,
        runner,
        active: times.into_iter().flatten().max(),
    })
}

fn modified(path: &Path) -> Option<DateTime<Utc>> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .map(DateTime::<Utc>::from)
}

/// `path` as a person reads it: under the home directory as `~/…`.
pub(crate) fn shown(path: &Path) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match home.as_deref().and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_sort_newest_first_the_numbered_ones_of_a_second_after_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for n in [
            "M1.md",
            "M1.20260101T000000.md",
            "M1.20260101T000000-2.md",
            "M1.20260101T000000-10.md",
            "M1.20251231T235959.md",
            "notes.md",
            "other.20260101T000000.md",
        ] {
            std::fs::write(d.join(n), "").unwrap();
        }
        let names: Vec<String> = archives_of(&d.join("M1.md"))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "M1.20260101T000000-10.md",
                "M1.20260101T000000-2.md",
                "M1.20260101T000000.md",
                "M1.20251231T235959.md"
            ]
        );
    }
}
