//! `check`: what a task is doing, from its exit record or, failing that, its lock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use super::records::{
    self, ExitRecord, PidRecord, Reason, SPEC_FILE, STDERR_FILE, STDOUT_FILE, TaskSpec,
};
use super::sweep::Stray;
use super::{lock, task_dir, validate_task_id};
use crate::error::Error;

/// The answer of `loop check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    /// The supervisor is alive (it holds the task lock).
    Running,
    /// Exited with code 0.
    Done,
    /// Exited with another code or a signal, or could not be started.
    Failed,
    /// Killed for the wall-clock or the no-output timeout.
    Timeout,
    /// Killed on request (`loop kill`).
    Killed,
    /// The supervisor is gone and left no exit record: a reboot, a SIGKILL.
    Lost,
}

impl TaskState {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "RUNNING",
            TaskState::Done => "DONE",
            TaskState::Failed => "FAILED",
            TaskState::Timeout => "TIMEOUT",
            TaskState::Killed => "KILLED",
            TaskState::Lost => "LOST",
        }
    }

    /// Whether the task has ended for good (everything but RUNNING).
    #[must_use]
    pub fn is_final(self) -> bool {
        self != TaskState::Running
    }
}

/// How a task ended; what `check --json` calls its `reason` (`exited`, `timeout`, `idle`,
/// `killed`, `spawn_failed`, `lost`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEnd {
    /// The command ended by itself: its exit code, or the signal that ended it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The wall-clock timeout killed it.
    Timeout,
    /// The no-output timeout killed it.
    Idle,
    /// Someone ended it (`loop kill`, a stop).
    Killed,
    /// The command could not be started, for this reason.
    SpawnFailed(String),
    /// Its supervisor vanished without an exit record (a reboot, a SIGKILL).
    Lost,
}

impl TaskEnd {
    /// The name `check --json` gives it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskEnd::Exited { .. } => "exited",
            TaskEnd::Timeout => "timeout",
            TaskEnd::Idle => "idle",
            TaskEnd::Killed => "killed",
            TaskEnd::SpawnFailed(_) => "spawn_failed",
            TaskEnd::Lost => "lost",
        }
    }
}

impl Serialize for TaskEnd {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Everything known about one task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskReport {
    pub id: String,
    pub state: TaskState,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// How it ended; `None` while it runs.
    #[serde(rename = "reason")]
    pub end: Option<TaskEnd>,
    /// e.g. the spawn error text
    pub message: Option<String>,
    /// The command's pid (= its process group id).
    pub pid: Option<u32>,
    #[serde(with = "super::time_serde::option")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time_serde::option")]
    pub ended_at: Option<DateTime<Utc>>,
    /// Seconds, as a float, in JSON.
    #[serde(serialize_with = "seconds")]
    pub elapsed: Duration,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
    /// Processes of the task found outside its process group (they had called `setsid`, or
    /// been left behind after a supervisor's death) and killed when it ended: pid and command
    /// name. Also named in `message`. Empty for most tasks.
    pub killed_outside_group: Vec<Stray>,
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// Reports task `id`: its exit record if it has one, else RUNNING while its lock is held,
/// else LOST.
///
/// # Errors
/// Bad input (exit 2) for an invalid id or no such task; I/O errors reading its files.
pub(crate) fn check(state_dir: &Path, id: &str) -> crate::error::Result<TaskReport> {
    validate_task_id(id)?;
    let dir = task_dir(state_dir, id);
    if !dir.is_dir() {
        let tasks = crate::layout::Layout::dir(state_dir).tasks();
        return Err(Error::bad_input(format!(
            "no task {id:?} in {}",
            tasks.display()
        )));
    }
    let exit_path = dir.join(records::EXIT_FILE);
    if let Some(rec) = records::read::<ExitRecord>(&exit_path)? {
        return Ok(finished(id, &dir, &rec));
    }
    let running = lock::is_held(&dir)?;
    // The supervisor writes its record before it lets go of the lock: look again.
    if !running && let Some(rec) = records::read::<ExitRecord>(&exit_path)? {
        return Ok(finished(id, &dir, &rec));
    }
    let pid: Option<PidRecord> = records::read(&dir.join(records::PID_FILE)).unwrap_or(None);
    let started_at = match &pid {
        Some(p) => Some(p.started_at),
        None => records::read::<TaskSpec>(&dir.join(SPEC_FILE))?.map(|s| s.created_at),
    };
    let (state, end) = if running {
        (TaskState::Running, None)
    } else {
        (TaskState::Lost, Some(TaskEnd::Lost))
    };
    Ok(TaskReport {
        id: id.to_owned(),
        state,
        exit_code: None,
        signal: None,
        end,
        message: (!running).then(|| "the supervisor is gone and left no exit record".to_owned()),
        pid: pid.map(|p| p.pid),
        started_at,
        ended_at: None,
        elapsed: started_at.map_or(Duration::ZERO, |t| {
            (Utc::now() - t).to_std().unwrap_or_default()
        }),
        stdout_path: dir.join(STDOUT_FILE),
        stderr_path: dir.join(STDERR_FILE),
        killed_outside_group: Vec::new(),
    })
}

fn finished(id: &str, dir: &Path, rec: &ExitRecord) -> TaskReport {
    let state = match rec.reason {
        Reason::Exited if rec.exit_code == Some(0) => TaskState::Done,
        Reason::Exited | Reason::SpawnFailed => TaskState::Failed,
        Reason::Timeout | Reason::Idle => TaskState::Timeout,
        Reason::Killed => TaskState::Killed,
    };
    TaskReport {
        id: id.to_owned(),
        state,
        exit_code: rec.exit_code,
        signal: rec.signal,
        end: Some(match rec.reason {
            Reason::Exited => TaskEnd::Exited {
                code: rec.exit_code,
                signal: rec.signal,
            },
            Reason::Timeout => TaskEnd::Timeout,
            Reason::Idle => TaskEnd::Idle,
            Reason::Killed => TaskEnd::Killed,
            Reason::SpawnFailed => TaskEnd::SpawnFailed(rec.message.clone().unwrap_or_default()),
        }),
        message: rec.message.clone(),
        pid: rec.pid,
        started_at: Some(rec.started_at),
        ended_at: Some(rec.ended_at),
        elapsed: (rec.ended_at - rec.started_at).to_std().unwrap_or_default(),
        stdout_path: dir.join(STDOUT_FILE),
        stderr_path: dir.join(STDERR_FILE),
        killed_outside_group: rec.killed_outside_group.clone(),
    }
}

impl TaskReport {
    /// The one-line human answer: `task_… DONE exit 0 after 12.3s`.
    #[must_use]
    pub fn line(&self) -> String {
        let id = &self.id;
        let state = self.state.as_str();
        let after = elapsed(self.elapsed);
        let code = match (self.exit_code, self.signal) {
            (Some(c), _) => format!(" exit {c}"),
            (None, Some(s)) => format!(" signal {s}"),
            (None, None) => String::new(),
        };
        let note = self
            .message
            .as_deref()
            .map_or_else(String::new, |m| format!(": {m}"));
        match self.state {
            TaskState::Running => match self.pid {
                Some(pid) => format!("{id} {state} for {after} pid {pid}"),
                None => format!("{id} {state} for {after} (starting)"),
            },
            TaskState::Done => format!("{id} {state}{code} after {after}"),
            TaskState::Failed | TaskState::Timeout | TaskState::Killed => {
                format!("{id} {state}{code} after {after}{note}")
            }
            TaskState::Lost => format!("{id} {state} after {after}{note}"),
        }
    }
}

/// `12.3s` under a minute, else `12m03s` / `2h05m`.
fn elapsed(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        crate::duration::human(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(reason: Reason, exit_code: Option<i32>, signal: Option<i32>) -> ExitRecord {
        let started_at = DateTime::parse_from_rfc3339("2026-02-17T05:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        ExitRecord {
            reason,
            exit_code,
            signal,
            message: None,
            pid: Some(99),
            started_at,
            ended_at: started_at + chrono::Duration::milliseconds(12_345),
            killed_outside_group: Vec::new(),
        }
    }

    #[test]
    fn exit_records_map_to_states() {
        let dir = Path::new("/state/tasks/t");
        let state = |r| finished("t", dir, &r).state;
        assert_eq!(
            state(record(Reason::Exited, Some(0), None)),
            TaskState::Done
        );
        assert_eq!(
            state(record(Reason::Exited, Some(3), None)),
            TaskState::Failed
        );
        assert_eq!(
            state(record(Reason::Exited, None, Some(9))),
            TaskState::Failed
        );
        assert_eq!(
            state(record(Reason::SpawnFailed, None, None)),
            TaskState::Failed
        );
        assert_eq!(
            state(record(Reason::Timeout, None, Some(15))),
            TaskState::Timeout
        );
        assert_eq!(
            state(record(Reason::Idle, Some(0), None)),
            TaskState::Timeout
        );
        assert_eq!(
            state(record(Reason::Killed, Some(0), None)),
            TaskState::Killed
        );
    }

    #[test]
    fn lines_and_json_read_as_documented() {
        let dir = Path::new("/state/tasks/t");
        let done = finished("t", dir, &record(Reason::Exited, Some(0), None));
        assert_eq!(done.line(), "t DONE exit 0 after 12.3s");
        let mut timeout = record(Reason::Idle, None, Some(15));
        timeout.message = Some("no output for 30s".into());
        assert_eq!(
            finished("t", dir, &timeout).line(),
            "t TIMEOUT signal 15 after 12.3s: no output for 30s"
        );
        let json: serde_json::Value = serde_json::to_value(&done).unwrap();
        assert_eq!(json["state"], "DONE");
        assert_eq!(json["elapsed"], 12.345);
        assert_eq!(json["started_at"], "2026-02-17T05:30:00.000Z");
        assert_eq!(json["stdout_path"], "/state/tasks/t/stdout");
    }

    #[test]
    fn long_durations_use_minutes() {
        assert_eq!(elapsed(Duration::from_millis(59_940)), "59.9s");
        assert_eq!(elapsed(Duration::from_secs(723)), "12m03s");
    }
}
