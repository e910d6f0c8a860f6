//! `loop stop`: this loop's runner ends its step and goes WAITING, and a later `loop resume`
//! runs at once (nothing is left to remove); `--all` is the seed's emergency brake, the stop
//! file every loop on the machine obeys until someone removes it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::settings::{Overrides, Settings};
use super::{RunOptions, Runner};
use super::{lock, registry, stopfile};
use crate::engine;
use crate::error::{Error, Result};
use crate::exit::Status as ExitStatus;
use crate::m1::Status;

/// How long `loop stop` waits for the runners it stopped: a runner sees a stop within a
/// second, then ends its step (a grace period, then SIGKILL) and writes WAITING.
pub(crate) const STOP_PATIENCE: Duration = Duration::from_secs(10);

/// `loop stop [--all]`.
///
/// # Errors
/// No loop at `file` (exit 2); a stop that cannot be written; [`Error::Failed`] when a runner
/// has not exited in time.
pub(crate) fn stop(file: &Path, all: bool) -> Result<ExitStatus> {
    if all {
        return stop_all(file);
    }
    if !file.exists() {
        return Err(Error::bad_input(format!(
            "no loop at {}: nothing to stop (`loop stop --all` stops every loop on this machine)",
            file.display()
        )));
    }
    match lock::holder(file) {
        Some(pid) => stop_runner(file, pid),
        None => stop_unattended(file),
    }
}

/// A runner drives the loop: give it a stop of its own, wait until it has let go of the loop,
/// and take the stop away again.
fn stop_runner(file: &Path, pid: u32) -> Result<ExitStatus> {
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    let stop = stopfile::create_local(&state_dir)
        .with_context(|| format!("while creating the stop file in {}", state_dir.display()))?;
    let deadline = Instant::now() + STOP_PATIENCE;
    while lock::holder(file) == Some(pid) {
        if Instant::now() >= deadline {
            return Err(Error::failed(format!(
                "the runner (pid {pid}) of {} has not stopped within {}s; {} stays until it \
                 has (remove it to call the stop off)",
                file.display(),
                STOP_PATIENCE.as_secs(),
                stop.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stopfile::clear_local(&state_dir);
    crate::outln!(
        "stopped {} (runner pid {pid}): the loop is WAITING; `loop resume` carries on",
        file.display()
    );
    Ok(ExitStatus::Ok)
}

/// No runner drives the loop (it died; a step may still run under its supervisor): stop it as
/// its runner would, holding its lock.
fn stop_unattended(file: &Path) -> Result<ExitStatus> {
    let state_dir = crate::layout::Layout::of(file).state_dir().to_path_buf();
    let settings = Settings::load(&state_dir, Overrides::default())?;
    let mut runner = match Runner::open(file, settings, &RunOptions::default()) {
        Ok(r) => r,
        // A runner took the loop in the meantime (a revival, a `loop resume`): stop that one.
        Err(e) => match lock::holder(file) {
            Some(pid) => return stop_runner(file, pid),
            None => return Err(e),
        },
    };
    let m = runner.view();
    if m.status != Status::Running {
        crate::outln!(
            "{}: no runner, and the loop is {}: nothing to stop",
            file.display(),
            m.status.as_str()
        );
        return Ok(ExitStatus::Ok);
    }
    runner.stop_now(&engine::Stop::Command)?;
    crate::outln!(
        "stopped {}: no runner was driving it; its step was ended and the loop is WAITING; \
         `loop resume` carries on",
        file.display()
    );
    Ok(ExitStatus::Ok)
}

/// `loop stop --all`: creates the global stop file, then waits (at most [`STOP_PATIENCE`])
/// until the runners it stops have let go of their loops, so that `rm STOPFILE; loop resume`
/// right after it finds no runner in the way. It waits for the runner of `file` and for every
/// runner of this user registered as obeying the same stop file ([`registry`]).
fn stop_all(file: &Path) -> Result<ExitStatus> {
    // The runners it stops, looked for before the stop file appears: one that lets go of its
    // loop at once is named as stopped all the same.
    let runners = obeying(file, &stopfile::global());
    let (p, found) = stopfile::create().with_context(|| {
        format!(
            "while creating the stop file {}",
            stopfile::global().display()
        )
    })?;
    // Something was there: a stop of this user's from before stays as it is; anything else
    // (another user's file, a link) is not written through, and still stops every loop.
    let refused = match found {
        None => {
            crate::outln!(
                "created {}: every loop on this machine halts within a second and goes WAITING, \
                 and none may run until it is removed (`rm {}`); then `loop resume`.",
                p.display(),
                p.display()
            );
            None
        }
        Some(f) if f.own_file => {
            crate::outln!(
                "{} exists already (a stop of yours): every loop on this machine halts within a \
                 second and goes WAITING, and none may run until it is removed (`rm {}`); then \
                 `loop resume`.",
                p.display(),
                p.display()
            );
            None
        }
        Some(f) => {
            let why = format!(
                "{} is {f}, so nothing was written: `loop stop --all` writes nothing through a \
                 link, nor into a file it did not make, in a directory other users may write \
                 (the file a link names would be written with your authority). It stops every \
                 loop all the same, as anything at that path does; look at who put it there, \
                 then remove it (`rm {}`), or give your loops a stop file of your own \
                 (LOOP_STOP_FILE)",
                p.display(),
                p.display()
            );
            Some(why)
        }
    };
    let result = wait_for_stopped(runners);
    match refused {
        Some(why) => result.and(Err(Error::failed(why))),
        None => result,
    }
}

/// The runners that obey the stop file `p`: the runner of `file`, and every runner of this
/// user registered as obeying the same stop file.
fn obeying(file: &Path, p: &Path) -> Vec<registry::Entry> {
    let p = p.to_path_buf();
    let stop_file = std::path::absolute(&p).unwrap_or(p);
    let mut runners: Vec<registry::Entry> = registry::live()
        .into_iter()
        .filter(|e| e.stop_file == stop_file)
        .collect();
    if let Some(pid) = lock::holder(file) {
        let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        if !runners.iter().any(|e| e.pid == pid && e.file == abs) {
            runners.push(registry::Entry {
                pid,
                file: abs,
                stop_file,
            });
        }
    }
    runners
}

/// Waits (at most [`STOP_PATIENCE`]) until `runners` have let go of their loops, naming each.
fn wait_for_stopped(runners: Vec<registry::Entry>) -> Result<ExitStatus> {
    if runners.is_empty() {
        crate::outln!("no runner of this user was running; nothing to wait for");
    }
    let deadline = Instant::now() + STOP_PATIENCE;
    let mut left = runners;
    loop {
        left.retain(|e| {
            let live = e.is_live();
            if !live {
                crate::outln!("stopped {} (runner pid {})", e.file.display(), e.pid);
            }
            live
        });
        if left.is_empty() {
            return Ok(ExitStatus::Ok);
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = left
                .iter()
                .map(|e| format!("{} (runner pid {})", e.file.display(), e.pid))
                .collect();
            return Err(Error::failed(format!(
                "still running {}s after the stop file appeared: {}",
                STOP_PATIENCE.as_secs(),
                names.join(", ")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
