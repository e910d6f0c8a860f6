//! `kill`: end all of a task (its process group and its strays) and wait until it is dead.
//!
//! The supervisor is asked first (it writes the record, so concurrent timeouts and kills
//! agree on one). Only if it is gone or hung does `kill` end the task itself, recognising
//! the group's members by process group, session and start time, and the strays by their
//! `LOOP_TASK_ID` and start time, never by a bare pid.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use nix::sys::signal::{Signal, kill as send};
use nix::unistd::Pid;

use super::records::{
    self, ExitRecord, KILL_FILE, KillRequest, PID_FILE, PidRecord, Reason, SPEC_FILE,
    SUPERVISOR_FILE, SupervisorRecord, TaskSpec,
};
use super::report::{TaskReport, TaskState, check};
use super::sweep::{self, Group, Sweep};
use super::{lock, procfs, task_dir};

/// Extra time, beyond the grace period, allowed for a supervisor or guardian to finish.
const SLACK: Duration = Duration::from_secs(3);
const TICK: Duration = Duration::from_millis(1);

/// Ends the whole task, its process group and every process of it outside the group (those
/// that called `setsid`, those left behind by a dead supervisor), waits until all are dead
/// (bounded by grace + a little), and returns the final report. A task that already ended is
/// reported as it is; a LOST task whose processes are all gone stays LOST (nothing was
/// killed); a LOST task with processes left becomes KILLED, its report naming the ones found
/// outside the group in `killed_outside_group` and `message`.
///
/// # Errors
/// As `check`, plus failures to write the kill request or the fallback exit record, and
/// processes of a LOST task that are still running after SIGKILL (named in the error).
pub fn kill(state_dir: &Path, id: &str, grace: Duration) -> crate::error::Result<TaskReport> {
    let report = check(state_dir, id)?;
    let dir = task_dir(state_dir, id);
    if report.state == TaskState::Running {
        let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        records::write_quick(
            &dir.join(KILL_FILE),
            &KillRequest {
                grace_ms: ms,
                requested_at: Utc::now(),
            },
        )?;
        let live = recorded_supervisor(&dir)?.filter(|s| procfs::is_alive_as(s.pid, s.start_ticks));
        if let Some(s) = &live {
            let _ = send(Pid::from_raw(s.pid.cast_signed()), Signal::SIGTERM);
        }
        if !wait_until(Instant::now() + grace + SLACK, || settled(&dir)) {
            // Hung supervisor: SIGKILL it; its guardian then kills the group and lets go.
            if let Some(s) = live.filter(|s| procfs::is_alive_as(s.pid, s.start_ticks)) {
                let _ = send(Pid::from_raw(s.pid.cast_signed()), Signal::SIGKILL);
            }
            wait_until(Instant::now() + SLACK, || settled(&dir));
        }
        if ended(&dir) {
            return check(state_dir, id);
        }
    } else if report.state != TaskState::Lost {
        return Ok(report);
    }
    end_orphaned_task(&dir, id, grace)?;
    check(state_dir, id)
}

/// Whether the task in `dir` has its exit record.
fn ended(dir: &Path) -> bool {
    dir.join(records::EXIT_FILE).exists()
}

/// Whether the task in `dir` is no longer its supervisor's to end: it ended, or nothing holds
/// it any more.
fn settled(dir: &Path) -> bool {
    ended(dir) || !lock::is_held(dir).unwrap_or(true)
}

/// The supervisor of a running task, as it recorded itself. It does so just after it started
/// its command, so a kill that comes as the command starts can find the task held and no
/// record yet: that is waited for (at most [`SLACK`]), not taken for a supervisor that is
/// gone, which would get no signal while its command ran on. `None`: no record came, or the
/// task ended or was let go meanwhile.
fn recorded_supervisor(dir: &Path) -> anyhow::Result<Option<SupervisorRecord>> {
    let path = dir.join(SUPERVISOR_FILE);
    let mut found = Ok(None);
    wait_until(Instant::now() + SLACK, || match records::read(&path) {
        Ok(None) => settled(dir),
        other => {
            found = other;
            true
        }
    });
    found
}

/// The fallback when nobody supervises the task any more: end what is left of it, in its
/// group or not, and record `killed`, unless nothing is left (then the task stays LOST).
fn end_orphaned_task(dir: &Path, id: &str, grace: Duration) -> anyhow::Result<()> {
    let Some(_lock) = lock::try_take(dir)? else {
        anyhow::bail!(
            "task {} is still held by its supervisor after SIGKILL",
            dir.display()
        );
    };
    if ended(dir) {
        return Ok(());
    }
    let leader = records::read::<PidRecord>(&dir.join(PID_FILE))?;
    let group = leader.as_ref().map(|l| Group {
        pgid: l.pid,
        sid: l.sid,
        leader_start: l.start_ticks,
    });
    let group_left =
        || group.is_some_and(|g| !procfs::group_members(g.pgid, g.sid, g.leader_start).is_empty());
    let signal_group =
        |sig| group.is_some_and(|g| procfs::signal_group(g.pgid, g.sid, g.leader_start, sig));
    let mut strays = Sweep::new(id, group, None, &[]);
    if !strays.scan() && !group_left() {
        return Ok(());
    }
    signal_group(Signal::SIGTERM);
    signal_group(Signal::SIGCONT);
    strays.signal(Signal::SIGTERM);
    if !wait_until(Instant::now() + grace, || {
        !group_left() && !strays.any_alive()
    }) {
        signal_group(Signal::SIGKILL);
        strays.signal(Signal::SIGKILL);
    }
    // Confirmed only when a fresh look finds nothing: anything started meanwhile gets SIGKILL.
    let dead = wait_until(Instant::now() + SLACK, || {
        let group_alive = signal_group(Signal::SIGKILL);
        let strays_alive = strays.scan();
        strays.signal(Signal::SIGKILL);
        !group_alive && !strays_alive
    });
    if !dead {
        anyhow::bail!(
            "processes of task {id} are still running after SIGKILL: group {:?}, others {:?}",
            group.map(|g| g.pgid),
            strays.live_pids()
        );
    }
    let killed = strays.killed().to_vec();
    let started_at = match &leader {
        Some(l) => l.started_at,
        None => {
            records::read::<TaskSpec>(&dir.join(SPEC_FILE))?.map_or_else(Utc::now, |s| s.created_at)
        }
    };
    let rec = ExitRecord {
        reason: Reason::Killed,
        exit_code: None,
        signal: None,
        message: sweep::with_strays(
            Some("the supervisor was gone; loop kill ended the remaining processes".into()),
            &killed,
        ),
        pid: leader.map(|l| l.pid),
        started_at,
        ended_at: Utc::now(),
        killed_outside_group: killed,
    };
    records::write_if_absent(&dir.join(records::EXIT_FILE), &rec)?;
    Ok(())
}

/// Polls `cond` until it holds or `deadline` passes; returns whether it held.
pub(crate) fn wait_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
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
