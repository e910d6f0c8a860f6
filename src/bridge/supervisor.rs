//! `loop __supervise DIR`: the process that owns one task from spawn to exit record.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::{SigHandler, SigSet, Signal, kill, signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{ForkResult, Pid, fork, getpid, getppid};

use super::guardian::Guardian;
use super::records::{
    self, ExitRecord, LOCK_FILE, PidRecord, Reason, SPEC_FILE, STDERR_FILE, STDOUT_FILE,
    SUPERVISOR_FILE, SupervisorRecord, TaskSpec,
};
use super::relay::{self, Relay};
use super::sweep::{self, Group, Sweep, TASK_ID_ENV};
use super::{lock, procfs, wait_loop};
use crate::exit::Status;

/// The signals the supervisor handles through its signalfd.
const HANDLED: [Signal; 4] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
];

/// The hidden supervisor mode, `loop __supervise DIR` run by hand: takes the task's lock if
/// nobody holds it, forks the real supervisor, records its pid in `supervisor.json` and
/// returns, leaving the task in `task_dir` to run to its end.
///
/// # Errors
/// When the spec cannot be read, the lock is held, or the fork fails.
pub(crate) fn supervise(task_dir: &Path) -> anyhow::Result<Status> {
    let lock = lock::try_take(task_dir)?
        .with_context(|| format!("task {} already has a supervisor", task_dir.display()))?;
    let (spec, lock) = prepare(task_dir, lock)?;
    // SAFETY: `loop __supervise` is single-threaded (nothing here has spawned a thread).
    match unsafe { fork() }.context("while forking the supervisor")? {
        ForkResult::Parent { child } => {
            if let Err(e) = record(task_dir, child) {
                let _ = kill(child, Signal::SIGKILL);
                return Err(e);
            }
            Ok(Status::Ok)
        }
        ForkResult::Child => {
            let result = run(task_dir, &spec, &mut || {});
            drop(lock);
            result.map(|()| Status::Ok)
        }
    }
}

/// Becomes the supervisor of the task in `task_dir`, in this process (a fork of the starter,
/// [`super::starter`], in a session of its own), with the task's lock as `fire` took it, and
/// runs the task to its end. Once its command is started (or could not be), it records itself
/// in `supervisor.json` and says so through `ready` (or why it cannot supervise): the record
/// comes after the start, off the way to it, as when the parent of `loop __supervise`'s
/// fork wrote it while the fork went on. Call only while this process has a single thread.
///
/// # Errors
/// When the spec cannot be read, `lock` is not this task's lock file, or the task cannot be
/// run to its end (as [`supervise`]).
pub(crate) fn become_supervisor(
    task_dir: &Path,
    lock: File,
    ready: impl FnOnce(Result<(), String>),
) -> anyhow::Result<Status> {
    let (spec, lock) = match prepare(task_dir, lock) {
        Ok(p) => p,
        Err(e) => {
            ready(Err(format!("{e:#}")));
            return Err(e);
        }
    };
    let mut ready = Some(ready);
    let mut recorded = || {
        let Some(ready) = ready.take() else { return };
        // Its command runs: a full disk is waited out, not a reason to end it.
        let r = crate::full_disk::retry(
            || record(task_dir, getpid()),
            waiting_for("supervisor.json"),
        );
        ready(match &r {
            Ok(()) => Ok(()),
            Err(e) => Err(format!("{e:#}")),
        });
        if r.is_err() {
            // Unrecorded, it would be a supervisor nobody can find: it dies, as the parent of
            // `loop __supervise`'s fork killed it then; its guardian ends the command's group
            // and the task reads LOST.
            let _ = nix::sys::signal::raise(Signal::SIGKILL);
        }
    };
    let result = run(task_dir, &spec, &mut recorded);
    // Failed before its command was started: recorded all the same, so the task reads LOST
    // once this process is gone, as it did.
    recorded();
    drop(lock);
    result.map(|()| Status::Ok)
}

/// What a supervisor checks before it takes a task on: its spec, and that `lock` is its lock.
/// Resets the signals the supervisor handles, whatever it inherited (their mask is set when
/// it starts waiting, and emptied for its command).
fn prepare(task_dir: &Path, lock: File) -> anyhow::Result<(TaskSpec, File)> {
    let spec: TaskSpec = records::read(&task_dir.join(SPEC_FILE))?
        .with_context(|| format!("no {SPEC_FILE} in {}", task_dir.display()))?;
    let lock = check_lock(task_dir, lock)?;
    // Inherited dispositions would break us: SIGCHLD ignored means no exit status to read.
    for sig in HANDLED {
        // SAFETY: restoring the default disposition installs no handler code.
        unsafe { signal(sig, SigHandler::SigDfl) }.context("while resetting signals")?;
    }
    Ok((spec, lock))
}

/// Writes `supervisor.json`: who to send SIGTERM to for `kill`.
fn record(task_dir: &Path, supervisor: Pid) -> anyhow::Result<()> {
    let start_ticks = procfs::stat(supervisor.as_raw()).map_or(0, |s| s.start_ticks);
    let rec = SupervisorRecord {
        pid: supervisor.as_raw().cast_unsigned(),
        start_ticks,
    };
    records::write_quick(&task_dir.join(SUPERVISOR_FILE), &rec)
}

/// The lock handed over, after checking that it really is this task's lock file; kept from
/// the command (close-on-exec).
fn check_lock(task_dir: &Path, lock: File) -> anyhow::Result<File> {
    let lock_path = task_dir.join(LOCK_FILE);
    let want = fs::metadata(&lock_path)
        .with_context(|| format!("while reading {}", lock_path.display()))?;
    let have = lock.metadata().context("while reading the handed lock")?;
    anyhow::ensure!(
        have.dev() == want.dev() && have.ino() == want.ino(),
        "the lock handed over is not {}",
        lock_path.display()
    );
    fcntl(&lock, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("while setting FD_CLOEXEC")?;
    Ok(lock)
}

/// The real supervisor: guardian, command, wait, exit record. `started` is called once the
/// command is started or could not be.
fn run(task_dir: &Path, spec: &TaskSpec, started: &mut dyn FnMut()) -> anyhow::Result<()> {
    std::env::set_current_dir("/").context("while leaving the caller's directory")?;
    let guardian = Guardian::start(&spec.id)?;
    let mut mask = SigSet::empty();
    for s in HANDLED {
        mask.add(s);
    }
    mask.thread_block().context("while blocking signals")?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("while creating the signalfd")?;
    // Orphaned descendants of the command are re-parented to us, so we reap them and can
    // tell when the whole group is gone, even where PID 1 does not reap.
    nix::sys::prctl::set_child_subreaper(true).context("while becoming a subreaper")?;

    let started_at = Utc::now();
    let spawned = spawn(task_dir, spec);
    started();
    let (leader, relays) = match spawned {
        Ok(started) => started,
        Err(e) => return record_spawn_failure(task_dir, guardian, started_at, &e),
    };
    let pid = leader.id();
    let pid_rec = PidRecord {
        pid,
        sid: nix::unistd::getsid(None).map_or(0, |s| s.as_raw().cast_unsigned()),
        start_ticks: procfs::stat(pid.cast_signed()).map_or(0, |s| s.start_ticks),
        started_at,
    };
    guardian.arm(&pid_rec);
    if let Err(e) = records::write_quick(&task_dir.join(records::PID_FILE), &pid_rec) {
        crate::errln!("supervisor: {e:#}");
    }
    let ms = Duration::from_millis;
    let limits = wait_loop::Limits {
        timeout: spec.timeout_ms.map(ms),
        idle: spec.idle_timeout_ms.map(ms),
        idle_exempt_marker: spec.idle_exempt_marker.clone(),
        grace: ms(spec.grace_ms),
    };
    let group = Group {
        pgid: pid,
        sid: pid_rec.sid,
        leader_start: pid_rec.start_ticks,
    };
    // Our descendants are the task's (we are a subreaper), the guardian excepted.
    let me = getpid().as_raw();
    let mut strays = Sweep::new(&spec.id, Some(group), Some(me), &[guardian.pid.as_raw()]);
    let outcome = wait_loop::run(
        task_dir,
        &sigfd,
        Pid::from_raw(pid.cast_signed()),
        guardian.pid,
        &limits,
        &mut strays,
    );
    // All the output is in the task's files before the exit record says the task ended.
    for r in relays {
        r.finish();
    }
    let killed = strays.killed().to_vec();
    if !killed.is_empty() {
        crate::errln!(
            "supervisor: killed outside the process group of the command: {}",
            sweep::describe(&killed)
        );
    }
    // A command confined by bubblewrap ends as bwrap does: the status of what it ran, a
    // signal that killed it as 128 plus the signal.
    let (exit_code, signal) = match (spec.confined, outcome.exit_code, outcome.signal) {
        (true, Some(code), None) if (129..=192).contains(&code) => (None, Some(code - 128)),
        (_, code, signal) => (code, signal),
    };
    let rec = ExitRecord {
        reason: outcome.reason,
        exit_code,
        signal,
        message: sweep::with_strays(outcome.message, &killed),
        pid: Some(pid),
        started_at,
        ended_at: outcome.ended_at,
        killed_outside_group: killed,
    };
    write_exit_record(task_dir, &rec)?;
    guardian.done();
    after_exit(spec);
    Ok(())
}

/// Writes the exit record, waiting out a full or read-only disk: without it the task would
/// read LOST once this process is gone, and its run be counted as a failed attempt, though
/// it ended as it did.
fn write_exit_record(task_dir: &Path, rec: &ExitRecord) -> anyhow::Result<()> {
    let path = task_dir.join(records::EXIT_FILE);
    crate::full_disk::retry(
        || records::write_durable(&path, rec),
        waiting_for(records::EXIT_FILE),
    )
}

/// What the supervisor says (in `supervisor.log`, its standard error) while `what` waits for a
/// disk that cannot be written: the first time, then every 30th try.
fn waiting_for(what: &str) -> impl FnMut(&str, u32) + '_ {
    move |why, waits| {
        if waits % 30 == 0 {
            crate::errln!(
                "supervisor: {what} cannot be written ({why}); waiting for room, try {}",
                waits + 1
            );
        }
    }
}

/// Once the exit record is written: the task's on-exit command, unless its lock is held.
fn after_exit(spec: &TaskSpec) {
    let held = spec
        .on_exit_unless_held
        .as_deref()
        .is_some_and(|lock| crate::lockfile::is_held(lock).unwrap_or(true));
    if !spec.on_exit.is_empty()
        && !held
        && let Err(e) = start_on_exit(&spec.on_exit)
    {
        crate::errln!("supervisor: could not start the on-exit command: {e:#}");
    }
}

/// Starts the task's on-exit command in a session of its own, output to nowhere, and does not
/// wait for it. It carries nothing of the task's (no `LOOP_TASK_ID`), so the task's cleanup
/// never takes it for one of the task's processes.
fn start_on_exit(command: &[String]) -> anyhow::Result<()> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove(TASK_ID_ENV);
    // SAFETY: setsid and the signal mask are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            SigSet::empty().thread_set_mask()?;
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("while starting {:?}", command[0]))?;
    Ok(())
}

/// The command could not be started: its exit record says why.
fn record_spawn_failure(
    task_dir: &Path,
    guardian: Guardian,
    started_at: chrono::DateTime<Utc>,
    e: &anyhow::Error,
) -> anyhow::Result<()> {
    let rec = ExitRecord {
        reason: Reason::SpawnFailed,
        exit_code: None,
        signal: None,
        message: Some(format!("{e:#}")),
        pid: None,
        started_at,
        ended_at: Utc::now(),
        killed_outside_group: Vec::new(),
    };
    write_exit_record(task_dir, &rec)?;
    guardian.done();
    Ok(())
}

/// Starts the command in its own process group, its output carried into the task's files
/// (see [`relay`]).
fn spawn(task_dir: &Path, spec: &TaskSpec) -> anyhow::Result<(std::process::Child, Vec<Relay>)> {
    let program = &spec.command[0];
    if !spec.cwd.is_dir() {
        anyhow::bail!(
            "cannot start {program:?}: working directory {} does not exist",
            spec.cwd.display()
        );
    }
    let stdin = match &spec.stdin {
        Some(p) => Stdio::from(
            File::open(p).with_context(|| format!("cannot open stdin file {}", p.display()))?,
        ),
        None => Stdio::null(),
    };
    // The command's output files cannot be made on a full disk: its start waits for room
    // (a start that failed for that would cost an attempt).
    let output = |name: &str| -> anyhow::Result<File> {
        let p = task_dir.join(name);
        crate::full_disk::retry(
            || {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&p)
                    .with_context(|| format!("cannot open {}", p.display()))
            },
            waiting_for(name),
        )
    };
    let (out_file, err_file) = (output(STDOUT_FILE)?, output(STDERR_FILE)?);
    let (out_read, out_write) = relay::pipe()?;
    let (err_read, err_write) = relay::pipe()?;
    let mut cmd = Command::new(program);
    cmd.args(&spec.command[1..])
        .current_dir(&spec.cwd)
        .stdin(stdin)
        .stdout(Stdio::from(out_write))
        .stderr(Stdio::from(err_write))
        .process_group(0);
    if let Some(keep) = &spec.env_keep {
        cmd.env_clear();
        for (k, v) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| super::env_kept(keep, k)) {
                cmd.env(k, v);
            }
        }
    }
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    // Inherited by everything the command starts, in its group or not: how they are found.
    cmd.env(TASK_ID_ENV, &spec.id);
    let supervisor = getpid();
    // SAFETY: only async-signal-safe calls (sigprocmask, prctl, getppid) before exec.
    unsafe {
        cmd.pre_exec(move || {
            SigSet::empty().thread_set_mask()?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died before PDEATHSIG was armed.
            if getppid() != supervisor {
                return Err(std::io::Error::other("the supervisor died during spawn"));
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {program:?}"))?;
    // The command holds the pipes' write ends now: ours close with `cmd`.
    drop(cmd);
    let relays = Relay::start(STDOUT_FILE, out_read, out_file)
        .and_then(|out| Ok(vec![out, Relay::start(STDERR_FILE, err_read, err_file)?]));
    match relays {
        Ok(relays) => Ok((child, relays)),
        Err(e) => {
            // A command whose output would go nowhere is not left running.
            let _ = kill(Pid::from_raw(-child.id().cast_signed()), Signal::SIGKILL);
            let _ = child.wait();
            Err(e)
        }
    }
}
