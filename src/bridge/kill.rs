//! `kill`: end a task's whole process group and wait until it is dead.
//!
//! The supervisor is asked first (it writes the record, so concurrent timeouts and kills
//! agree on one). Only if it is gone or hung does `kill` end the group itself, recognising
//! the group's members by process group, session and start time, never by a bare pid.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use nix::sys::signal::{Signal, kill as send};
use nix::unistd::Pid;

use super::records::{
    self, ExitRecord, KILL_FILE, KillRequest, PID_FILE, PidRecord, Reason, SUPERVISOR_FILE,
    SupervisorRecord,
};
use super::report::{TaskReport, TaskState, check};
use super::{lock, procfs, task_dir};

/// Extra time, beyond the grace period, allowed for a supervisor or guardian to finish.
const SLACK: Duration = Duration::from_secs(3);
const TICK: Duration = Duration::from_millis(5);

/// Ends the whole process group, waits until it is dead (bounded by grace + a little), and
/// returns the final report. A task that already ended is reported as it is; a LOST task
/// whose processes are all gone stays LOST (nothing was killed).
///
/// # Errors
/// As [`check`], plus failures to write the kill request or the fallback exit record.
pub fn kill(state_dir: &Path, id: &str, grace: Duration) -> anyhow::Result<TaskReport> {
    let report = check(state_dir, id)?;
    let dir = task_dir(state_dir, id);
    let done = |dir: &Path| dir.join(records::EXIT_FILE).exists();
    if report.state == TaskState::Running {
        let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        records::write_quick(
            &dir.join(KILL_FILE),
            &KillRequest {
                grace_ms: ms,
                requested_at: Utc::now(),
            },
        )?;
        let supervisor: Option<SupervisorRecord> = records::read(&dir.join(SUPERVISOR_FILE))?;
        let live = supervisor.filter(|s| procfs::is_alive_as(s.pid, s.start_ticks));
        if let Some(s) = &live {
            let _ = send(Pid::from_raw(s.pid.cast_signed()), Signal::SIGTERM);
        }
        let settled = |dir: &Path| done(dir) || !lock::is_held(dir).unwrap_or(true);
        if !wait_until(Instant::now() + grace + SLACK, || settled(&dir)) {
            // Hung supervisor: SIGKILL it; its guardian then kills the group and lets go.
            if let Some(s) = live.filter(|s| procfs::is_alive_as(s.pid, s.start_ticks)) {
                let _ = send(Pid::from_raw(s.pid.cast_signed()), Signal::SIGKILL);
            }
            wait_until(Instant::now() + SLACK, || settled(&dir));
        }
        if done(&dir) {
            return check(state_dir, id);
        }
    } else if report.state != TaskState::Lost {
        return Ok(report);
    }
    end_orphaned_group(&dir, grace)?;
    check(state_dir, id)
}

/// The fallback when nobody supervises the task any more: end what is left of its group
/// and record `killed`, unless the group is already gone (then the task stays LOST).
fn end_orphaned_group(dir: &Path, grace: Duration) -> anyhow::Result<()> {
    let Some(_lock) = lock::try_take(dir)? else {
        anyhow::bail!(
            "task {} is still held by its supervisor after SIGKILL",
            dir.display()
        );
    };
    if dir.join(records::EXIT_FILE).exists() {
        return Ok(());
    }
    let Some(leader) = records::read::<PidRecord>(&dir.join(PID_FILE))? else {
        return Ok(());
    };
    let (pgid, sid, start) = (leader.pid, leader.sid, leader.start_ticks);
    if !procfs::signal_group(pgid, sid, start, Signal::SIGTERM) {
        return Ok(());
    }
    let gone = || procfs::group_members(pgid, sid, start).is_empty();
    if !wait_until(Instant::now() + grace, gone) {
        procfs::signal_group(pgid, sid, start, Signal::SIGKILL);
        wait_until(Instant::now() + SLACK, gone);
    }
    let rec = ExitRecord {
        reason: Reason::Killed,
        exit_code: None,
        signal: None,
        message: Some("the supervisor was gone; loop kill ended the remaining processes".into()),
        pid: Some(leader.pid),
        started_at: leader.started_at,
        ended_at: Utc::now(),
    };
    records::write_if_absent(&dir.join(records::EXIT_FILE), &rec)?;
    Ok(())
}

/// Polls `cond` until it holds or `deadline` passes; returns whether it held.
fn wait_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(TICK);
    }
}
