//! The ledger's index, `tasks/.ledger/`: which tasks each loop started, one file of lines per
//! loop (`<loop id>.jsonl`), so that opening a loop reads its own tasks and not the spec of
//! every task directory the state directory holds (thousands, after many loops).
//!
//! A task's line is appended before its directory is published (write-ahead, as M1.md's
//! record): a task directory never exists without its line, whenever the runner dies. The
//! lines are not fsynced: data a process wrote survives the process, and is lost only when
//! the kernel goes (a power cut, a crash of the machine), which means a new boot. So the
//! index says under which boot it was last made whole (`boot`, the kernel's boot id): a
//! runner opening a loop under another boot (or with no `boot`: a state directory of an
//! older version, an index removed by hand) rebuilds it first from the task directories,
//! whose publishing is durable, reading every spec once, and adds what they have and the
//! lines lack. Rebuilding only appends, so it never loses a line another runner is adding;
//! lines may repeat (two rebuilds at once), and a reader keeps the first of each task. A
//! line whose task directory does not exist (the runner died before publishing it, or a
//! person removed it) is not a task: the ledger leaves it out.
//!
//! Caveat: a version of `loop` without the index that fires tasks here after it was built
//! leaves lines out until the next boot.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The index directory inside `tasks/` (hidden: it is no task).
const DIR: &str = ".ledger";
/// The boot under which the index was last made whole.
const BOOT_FILE: &str = "boot";

/// A task a loop started, as the index (or its spec) says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Line {
    pub task: String,
    pub step: u32,
    pub attempt: u32,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub review: bool,
    /// RFC 3339, milliseconds, UTC (as a spec's `created_at`): the ledger's order.
    pub created_at: String,
}

/// The time a line records: the format of a spec's `created_at`.
pub(super) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn index_file(tasks_dir: &Path, loop_id: &str) -> PathBuf {
    tasks_dir.join(DIR).join(format!("{loop_id}.jsonl"))
}

/// Appends `line` to loop `loop_id`'s index (creating it). Call before the task's directory
/// is published.
pub(super) fn append(tasks_dir: &Path, loop_id: &str, line: &Line) -> std::io::Result<()> {
    let path = index_file(tasks_dir, loop_id);
    let mut text = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    text.push(b'\n');
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
    };
    let mut file = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(tasks_dir.join(DIR))?;
            open()?
        }
        other => other?,
    };
    // One write of a whole line with O_APPEND: lines of other writers never interleave.
    file.write_all(&text)
}

/// The tasks loop `loop_id` started, in the order they were noted, each once; the index is
/// rebuilt first when this boot has not made it whole.
pub(super) fn read(tasks_dir: &Path, loop_id: &str) -> Vec<Line> {
    let boot = boot_id();
    let whole =
        boot.is_some() && std::fs::read_to_string(tasks_dir.join(DIR).join(BOOT_FILE)).ok() == boot;
    if !whole {
        rebuild(tasks_dir, boot.as_deref());
    }
    lines(&index_file(tasks_dir, loop_id))
}

/// The kernel's id of this boot, newline included; `None` where it cannot be read (then the
/// index is rebuilt at every open, as if it were missing).
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// The lines of an index file, each task once (its first line); cut or unreadable lines
/// (a crash in the middle of an append) are skipped.
fn lines(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seen = HashSet::new();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .filter(|l| crate::layout::validate_task_id(&l.task).is_ok())
        .filter(|l| seen.insert(l.task.clone()))
        .collect()
}

#[derive(Deserialize)]
struct SpecFields {
    #[serde(default)]
    env: Vec<(String, String)>,
    #[serde(default)]
    created_at: String,
}

fn env_of<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The loop a task directory belongs to and its line, from its spec; `None` for a task of no
/// loop (a plain `loop fire`, a VERIFY run) or no task at all.
pub(super) fn from_spec(dir: &Path) -> Option<(String, Line)> {
    let task = dir.file_name()?.to_str()?.to_owned();
    if task.starts_with('.') {
        return None;
    }
    let spec: SpecFields =
        serde_json::from_slice(&std::fs::read(dir.join(crate::bridge::SPEC_FILE)).ok()?).ok()?;
    let loop_id = env_of(&spec.env, "LOOP_ID")?.to_owned();
    let num = |k| env_of(&spec.env, k).and_then(|v| v.parse().ok());
    Some((
        loop_id,
        Line {
            step: num("LOOP_STEP")?,
            attempt: num("LOOP_ATTEMPT")?,
            session: env_of(&spec.env, "LOOP_SESSION_ID").map(String::from),
            review: env_of(&spec.env, "LOOP_REVIEW") == Some("1"),
            created_at: spec.created_at,
            task,
        },
    ))
}

/// Reads every task directory's spec and appends to each loop's index the tasks it lacks
/// (oldest first), then notes that `boot` has made the index whole.
fn rebuild(tasks_dir: &Path, boot: Option<&str>) {
    let mut by_loop: BTreeMap<String, Vec<Line>> = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir(tasks_dir) {
        for e in dir.flatten() {
            if let Some((loop_id, line)) = from_spec(&e.path()) {
                by_loop.entry(loop_id).or_default().push(line);
            }
        }
    }
    for (loop_id, mut found) in by_loop {
        if crate::layout::validate_task_id(&loop_id).is_err() {
            continue; // not a name a file may have
        }
        let known: HashSet<String> = lines(&index_file(tasks_dir, &loop_id))
            .into_iter()
            .map(|l| l.task)
            .collect();
        found.retain(|l| !known.contains(&l.task));
        found.sort_by(|a, b| (&a.created_at, &a.task).cmp(&(&b.created_at, &b.task)));
        for line in &found {
            if append(tasks_dir, &loop_id, line).is_err() {
                return; // a read-only state directory: read from the specs next time too
            }
        }
    }
    if let Some(boot) = boot {
        let dir = tasks_dir.join(DIR);
        let tmp = dir.join(format!(".{BOOT_FILE}.{}.tmp", std::process::id()));
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&tmp, boot))
            .and_then(|()| std::fs::rename(&tmp, dir.join(BOOT_FILE)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(task: &str, at: &str) -> Line {
        Line {
            task: task.into(),
            step: 1,
            attempt: 1,
            session: None,
            review: false,
            created_at: at.into(),
        }
    }

    fn task_dir(tasks: &Path, id: &str, loop_id: &str, at: &str) {
        let dir = tasks.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let spec = serde_json::json!({
            "id": id,
            "env": [["LOOP_ID", loop_id], ["LOOP_STEP", "1"], ["LOOP_ATTEMPT", "1"]],
            "created_at": at,
        });
        std::fs::write(dir.join("spec.json"), spec.to_string()).unwrap();
    }

    #[test]
    fn an_index_without_its_boot_is_rebuilt_from_the_task_directories() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks");
        task_dir(&tasks, "t1", "aaa", "2026-01-01T00:00:01.000Z");
        task_dir(&tasks, "t2", "bbb", "2026-01-01T00:00:02.000Z");
        task_dir(&tasks, "t3", "aaa", "2026-01-01T00:00:03.000Z");
        // A line noted before a crash, its directory never published.
        append(&tasks, "aaa", &line("t9", "2026-01-01T00:00:00.500Z")).unwrap();
        let got: Vec<String> = read(&tasks, "aaa").into_iter().map(|l| l.task).collect();
        assert_eq!(got, ["t9", "t1", "t3"]);
        assert_eq!(
            std::fs::read_to_string(tasks.join(DIR).join(BOOT_FILE)).ok(),
            boot_id()
        );
        // Made whole: a directory of this boot without a line is not looked for.
        task_dir(&tasks, "t4", "aaa", "2026-01-01T00:00:04.000Z");
        if boot_id().is_some() {
            assert_eq!(read(&tasks, "aaa").len(), 3);
        }
        // Another boot: found again, once.
        std::fs::write(tasks.join(DIR).join(BOOT_FILE), "another boot\n").unwrap();
        let got: Vec<String> = read(&tasks, "aaa").into_iter().map(|l| l.task).collect();
        assert_eq!(got, ["t9", "t1", "t3", "t4"]);
        assert_eq!(read(&tasks, "bbb").len(), 1);
        assert!(read(&tasks, "ccc").is_empty());
    }

    #[test]
    fn a_cut_or_repeated_line_is_read_once_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks");
        let l = line("t1", "2026-01-01T00:00:01.000Z");
        append(&tasks, "aaa", &l).unwrap();
        append(&tasks, "aaa", &l).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(index_file(&tasks, "aaa"))
            .unwrap();
        f.write_all(b"{\"task\":\"t2\",\"st").unwrap();
        assert_eq!(lines(&index_file(&tasks, "aaa")), vec![l]);
    }
}
