//! `fire`: publish a task directory atomically and start its supervisor, detached.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;
use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};

use super::records::{HAND_BACK_DIR, LOCK_FILE, SPEC_FILE, STDIN_FILE, SUPERVISOR_LOG, TaskSpec};
use super::{DEFAULT_GRACE, FireRequest, new_task_id, validate_task_id};
use crate::error::{Error, Result};

/// The `loop` binary the unit tests fire tasks with (see `use_loop_binary`).
static LOOP_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Names the `loop` binary whose starter (`loop __starter`) supervises the tasks this process
/// fires.
/// Only the unit tests, which fire tasks in-process from a test binary, need it; `loop` starts
/// its own binary. The first call wins.
#[cfg(test)]
pub(crate) fn use_loop_binary(path: PathBuf) {
    let _ = LOOP_BINARY.set(path);
}

/// Creates the task directory, starts its supervisor, and returns the new task id at once.
///
/// # Errors
/// Bad input (exit 2) for an empty command, a missing `cwd` or `stdin`, both `stdin` and
/// `input`, a zero timeout or a bad variable name; otherwise any failure to create the
/// directory or start the supervisor.
pub(crate) fn fire(state_dir: &Path, req: &FireRequest) -> Result<String> {
    let id = new_task_id();
    fire_with_id(state_dir, &id, req)?;
    Ok(id)
}

/// Like [`fire`] with an id the caller chose first: the runner records it in M1.md before
/// spawning (write-ahead), so that "no task directory" means "never started".
///
/// # Errors
/// As [`fire`]; also bad input when `id` is invalid or already used.
pub(crate) fn fire_with_id(state_dir: &Path, id: &str, req: &FireRequest) -> Result<()> {
    fire_published(state_dir, id, req, &mut || {}, &mut |_| {})
}

/// [`fire_with_id`], calling `published` once the task directory is in place and before its
/// supervisor is asked for (where a crash leaves a task nobody ever took: see
/// [`super::take_back_unstarted`]), and `waiting` every 2 s while the supervisor is not
/// running yet, with the time waited.
///
/// # Errors
/// As [`fire_with_id`].
pub(crate) fn fire_published(
    state_dir: &Path,
    id: &str,
    req: &FireRequest,
    published: &mut dyn FnMut(),
    waiting: &mut dyn FnMut(Duration),
) -> Result<()> {
    validate_task_id(id)?;
    let mut spec = resolve(id, req)?;
    let tasks = crate::layout::Layout::dir(state_dir).tasks();
    crate::dirs::create_state_dir(state_dir)
        .with_context(|| format!("while creating {}", state_dir.display()))?;
    fs::create_dir_all(&tasks).with_context(|| format!("while creating {}", tasks.display()))?;
    let tasks = tasks
        .canonicalize()
        .with_context(|| format!("while resolving {}", tasks.display()))?;
    let dir = tasks.join(id);
    if dir.exists() {
        return Err(Error::bad_input(format!(
            "task {id:?} already exists in {}",
            tasks.display()
        )));
    }
    if req.input.is_some() {
        spec.stdin = Some(dir.join(STDIN_FILE));
    }
    let lock = publish(&tasks, &dir, &spec, req.input.as_deref(), req.hand_back)?;
    published();
    start_supervisor(&dir, &lock, waiting)
        .with_context(|| format!("while starting the supervisor of task {id}"))?;
    Ok(())
}

/// Checks the request and makes every path absolute, so the supervisor depends on nothing
/// of the caller but its environment.
fn resolve(id: &str, req: &FireRequest) -> Result<TaskSpec> {
    let bad = Error::BadInput;
    if req.command.first().is_none_or(String::is_empty) {
        return Err(bad(
            "nothing to run: the command is empty (use: loop fire -- CMD [ARGS]...)".into(),
        ));
    }
    let here = std::env::current_dir().context("while reading the current directory")?;
    let cwd = match &req.cwd {
        Some(d) => {
            let d = here.join(d);
            if !d.is_dir() {
                return Err(bad(format!("--cwd {}: no such directory", d.display())));
            }
            d
        }
        None => here.clone(),
    };
    let stdin = match &req.stdin {
        Some(_) if req.input.is_some() => {
            return Err(bad(
                "standard input can come from a file or from a text, not both".into(),
            ));
        }
        Some(f) => {
            let f = here.join(f);
            File::open(&f).map_err(|e| bad(format!("--stdin {}: {e}", f.display())))?;
            Some(f)
        }
        None => None,
    };
    for (flag, limit) in [
        ("--timeout", req.timeout),
        ("--idle-timeout", req.idle_timeout),
    ] {
        if limit == Some(Duration::ZERO) {
            return Err(bad(format!("{flag} must be longer than zero")));
        }
    }
    let names = req.env.iter().map(|(k, _)| k).chain(&req.env_remove);
    if let Some(k) = names
        .into_iter()
        .find(|k| k.is_empty() || k.contains(['=', '\0']))
    {
        return Err(bad(format!("invalid environment variable name {k:?}")));
    }
    if let Some((k, _)) = req.env.iter().find(|(_, v)| v.contains('\0')) {
        return Err(bad(format!(
            "environment variable {k:?} has a NUL byte in its value"
        )));
    }
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Ok(TaskSpec {
        id: id.to_owned(),
        command: req.command.clone(),
        cwd,
        stdin,
        env: req.env.clone(),
        env_remove: req.env_remove.clone(),
        env_keep: req.env_keep.clone(),
        confined: req.confined,
        timeout_ms: req.timeout.map(ms),
        idle_timeout_ms: req.idle_timeout.map(ms),
        idle_exempt_marker: req.idle_exempt_marker.clone(),
        grace_ms: ms(DEFAULT_GRACE),
        created_at: chrono::Utc::now(),
        on_exit: req.on_exit.clone(),
        on_exit_unless_held: req.on_exit_unless_held.clone(),
    })
}

/// Builds the directory under a temporary name (locked lock file, fsynced spec, the `input`
/// for standard input) and renames it into place without replacing anything. Returns the held
/// lock.
fn publish(
    tasks: &Path,
    dir: &Path,
    spec: &TaskSpec,
    input: Option<&str>,
    hand_back: bool,
) -> Result<File> {
    let tmp = tasks.join(format!(".{}.{}.tmp", spec.id, std::process::id()));
    let built = (|| -> Result<File> {
        fs::create_dir(&tmp).with_context(|| format!("while creating {}", tmp.display()))?;
        let lock = File::create(tmp.join(LOCK_FILE)).context("while creating the lock file")?;
        lock.try_lock()
            .context("while locking the new task's lock file")?;
        let json = serde_json::to_vec_pretty(spec).context("while encoding the task spec")?;
        let mut f = File::create(tmp.join(SPEC_FILE)).context("while creating spec.json")?;
        std::io::Write::write_all(&mut f, &json)
            .and_then(|()| f.sync_all())
            .context("while writing spec.json")?;
        // Not fsynced, like the records of a running task: a power cut ends the task too, and
        // an ended task is never started again from its directory.
        if let Some(text) = input {
            fs::write(tmp.join(STDIN_FILE), text).context("while writing the task's input")?;
        }
        if hand_back {
            fs::create_dir(tmp.join(HAND_BACK_DIR))
                .context("while creating the task's hand-back directory")?;
        }
        renameat2(AT_FDCWD, &tmp, AT_FDCWD, dir, RenameFlags::RENAME_NOREPLACE).map_err(|e| {
            if e == nix::errno::Errno::EEXIST || e == nix::errno::Errno::ENOTEMPTY {
                Error::bad_input(format!("task {:?} already exists", spec.id))
            } else {
                anyhow::Error::from(e)
                    .context(format!("while renaming {} into place", tmp.display()))
                    .into()
            }
        })?;
        Ok(lock)
    })();
    if built.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    let lock = built?;
    File::open(tasks).and_then(|d| d.sync_all()).ok();
    Ok(lock)
}

/// Starts the task's supervisor in a new session, handing it the locked file (through this
/// process's starter, see [`super::starter`]), and returns once it runs: the supervisor is
/// never our child (no zombie, nothing for our `wait` calls to see) and the lock is never
/// free while the task runs.
fn start_supervisor(
    dir: &Path,
    lock: &File,
    waiting: &mut dyn FnMut(Duration),
) -> anyhow::Result<()> {
    let exe = match LOOP_BINARY.get() {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("while locating the loop binary")?,
    };
    let log_path = dir.join(SUPERVISOR_LOG);
    let log = File::create(&log_path).context("while creating supervisor.log")?;
    let Err(e) = super::starter::start(&exe, dir, (lock, &log), waiting) else {
        return Ok(());
    };
    let mut log_text = String::new();
    File::open(&log_path)
        .and_then(|mut f| f.read_to_string(&mut log_text))
        .ok();
    anyhow::bail!(
        "the supervisor failed to start ({e:#}): {}",
        log_text.trim()
    )
}

/// A task directory published as `fire` does, its supervisor not started: the directory and
/// the held lock.
#[cfg(test)]
pub(super) fn publish_for_test(state_dir: &Path, id: &str, req: &FireRequest) -> (PathBuf, File) {
    let spec = resolve(id, req).unwrap();
    let tasks = crate::layout::Layout::dir(state_dir).tasks();
    fs::create_dir_all(&tasks).unwrap();
    let tasks = tasks.canonicalize().unwrap();
    let dir = tasks.join(id);
    let lock = publish(&tasks, &dir, &spec, None, false).unwrap();
    (dir, lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_input_from_a_file_and_from_a_text_at_once_is_refused() {
        let req = FireRequest {
            command: vec!["cat".into()],
            stdin: Some(PathBuf::from("/dev/null")),
            input: Some("the prompt".into()),
            ..FireRequest::default()
        };
        let err = resolve("task_x", &req).unwrap_err();
        assert_eq!(err.code(), crate::exit::Status::BadInput);
        assert!(err.to_string().contains("not both"), "{err}");
    }
}
