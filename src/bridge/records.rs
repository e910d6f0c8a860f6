//! The JSON files of a task directory, and how each is written.
//!
//! `spec.json` and `exit.json` must survive a power cut, so they are fsynced before the
//! rename that publishes them. `pid.json`, `supervisor.json` and `kill.json` only mean
//! something while the machine is up, so they are renamed into place without fsync, which
//! keeps `fire` and the exit path fast.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::sweep::Stray;

pub(crate) const SPEC_FILE: &str = "spec.json";
pub(crate) const EXIT_FILE: &str = "exit.json";
pub(crate) const PID_FILE: &str = "pid.json";
pub(crate) const SUPERVISOR_FILE: &str = "supervisor.json";
pub(crate) const KILL_FILE: &str = "kill.json";
pub(crate) const LOCK_FILE: &str = "lock";
pub(crate) const STDIN_FILE: &str = "stdin";
pub(crate) const STDOUT_FILE: &str = "stdout";
pub(crate) const STDERR_FILE: &str = "stderr";
/// The one directory of a task the task's own command may write, made when it is asked for
/// ([`super::FireRequest::hand_back`]): the rest of the task directory is the bridge's and the
/// runner's, never written by what it records.
pub(crate) const HAND_BACK_DIR: &str = "hooks";
pub(crate) const SUPERVISOR_LOG: &str = "supervisor.log";

/// What to run, as `fire` resolved it: paths absolute, so the supervisor needs nothing else.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TaskSpec {
    pub id: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub stdin: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    /// The allowlist of inherited variables, when the command's environment is one.
    #[serde(default)]
    pub env_keep: Option<Vec<String>>,
    /// The command is confined by bubblewrap (its exit status tells a signal as 128 + it).
    #[serde(default)]
    pub confined: bool,
    pub timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    #[serde(default)]
    pub idle_exempt_marker: Option<String>,
    pub grace_ms: u64,
    #[serde(with = "super::time_serde")]
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub on_exit: Vec<String>,
    #[serde(default)]
    pub on_exit_unless_held: Option<PathBuf>,
}

/// Why a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reason {
    /// The command ended by itself (any exit code, or a signal nobody here sent).
    Exited,
    /// The wall-clock timeout.
    Timeout,
    /// The no-output timeout.
    Idle,
    /// `loop kill`, or a SIGTERM/SIGINT/SIGHUP to the supervisor.
    Killed,
    /// The command could not be started.
    SpawnFailed,
}

/// `exit.json`: how the task ended. Its presence is what makes a task finished.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ExitRecord {
    pub reason: Reason,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub message: Option<String>,
    pub pid: Option<u32>,
    #[serde(with = "super::time_serde")]
    pub started_at: DateTime<Utc>,
    #[serde(with = "super::time_serde")]
    pub ended_at: DateTime<Utc>,
    /// Processes of the task found outside its process group and killed when it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub killed_outside_group: Vec<Stray>,
}

/// `pid.json`: the command's leader, written as soon as it is spawned. The group id equals
/// the pid; session id and start time let a later reader recognise the group's members.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PidRecord {
    pub pid: u32,
    pub sid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_ticks: u64,
    #[serde(with = "super::time_serde")]
    pub started_at: DateTime<Utc>,
}

/// `supervisor.json`: who to send SIGTERM to for `kill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SupervisorRecord {
    pub pid: u32,
    pub start_ticks: u64,
}

/// `kill.json`: written by `kill` just before it signals the supervisor, so the supervisor
/// knows the grace period asked for and that the SIGTERM was a deliberate kill.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KillRequest {
    pub grace_ms: u64,
    #[serde(with = "super::time_serde")]
    pub requested_at: DateTime<Utc>,
}

/// Reads a record; `None` when the file does not exist.
pub(crate) fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("while reading {}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("while parsing {}", path.display()))
}

/// Durable publish: temp file, fsync, rename, fsync of the directory.
pub(crate) fn write_durable<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let mut f = atomic_write_file::AtomicWriteFile::open(path)
        .with_context(|| format!("while creating {}", path.display()))?;
    f.write_all(&to_json(value)?)
        .and_then(|()| f.commit())
        .with_context(|| format!("while writing {}", path.display()))
}

/// Quick publish: readers see the old file or the whole new one, but a power cut may lose it.
pub(crate) fn write_quick<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let tmp = temp_name(path);
    fs::write(&tmp, to_json(value)?)
        .and_then(|()| fs::rename(&tmp, path))
        .with_context(|| format!("while writing {}", path.display()))
}

/// Durable publish that never replaces an existing file: for writers that are only a
/// fallback to the supervisor, whose record must win. Returns whether ours was published.
pub(crate) fn write_if_absent<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<bool> {
    let tmp = temp_name(path);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&to_json(value).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = fs::remove_file(&tmp);
    let published = result.with_context(|| format!("while writing {}", path.display()))?;
    if published && let Some(dir) = path.parent() {
        fs::File::open(dir).and_then(|d| d.sync_all()).ok();
    }
    Ok(published)
}

fn to_json<T: Serialize>(value: &T) -> anyhow::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value).context("while encoding a task record")?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn temp_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}
