//! `loop daemon`'s part in schedules: one look starts every due time (each once, through the
//! ledger), says what it skips, and tells how long the daemon may sleep.
//!
//! The start itself is `loop --file FILE start GOAL FLAGS… --detach` in the schedule's
//! project, a child that dies with the daemon (`PR_SET_PDEATHSIG`), so a daemon killed in the
//! middle leaves either no loop or a loop whose M1.md is written (which revival then runs):
//! never a start still under way that a restarted daemon would not know of.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::{DateTime, Local, Utc};

use super::due::{self, Next};
use super::file::{Entry, When};
use super::ledger::{self, Record, What};
use crate::m1::Status;

/// Who hears what the daemon does: its log line, and a loop's chat.
pub trait Say {
    /// A line of the daemon's log.
    fn log(&mut self, line: &str);
    /// A message to the chat of the loop whose state directory is `state_dir`.
    fn tell(&mut self, state_dir: &Path, text: &str);
}

/// What one look at the schedules found.
#[derive(Debug, Default)]
pub struct Looked {
    /// The next due time of any schedule (none: nothing scheduled).
    pub next: Option<DateTime<Utc>>,
    /// The file's mistakes, when it has some (then nothing was started).
    pub problem: Option<String>,
}

/// Looks at every schedule at `now`: starts what is due, resolves a start a killed daemon
/// left half done, and skips (and says) what was missed by more than its window.
#[must_use]
pub fn look(now: DateTime<Utc>, exe: &Path, say: &mut dyn Say) -> Looked {
    let (Ok(lock), Ok(ledger_path)) = (super::lock_path(), super::ledger_path()) else {
        return Looked::default();
    };
    if !lock.parent().is_some_and(Path::is_dir) {
        return Looked::default();
    }
    // One looker at a time: a second daemon, or a `loop schedule` edit, waits its turn.
    let Ok(_held) = crate::lockfile::exclusive(&lock) else {
        return Looked::default();
    };
    let loaded = match super::load() {
        Ok(l) => l,
        Err(e) => {
            return Looked {
                next: None,
                problem: Some(e.to_string()),
            };
        }
    };
    let records = ledger::read(&ledger_path);
    let mut looked = Looked::default();
    let mut over = Vec::new();
    for entry in &loaded.entries {
        let h = ledger::history(&records, &entry.id);
        let mut wake = |t: DateTime<Utc>| looked.next = Some(looked.next.map_or(t, |n| n.min(t)));
        match due::next(entry, &h, now, &Local) {
            Next::Wait(t) => wake(t),
            Next::Never => {
                if matches!(entry.when, When::At(_)) && !entry.paused {
                    over.push(entry.id.clone());
                }
            }
            Next::Unresolved(d) => {
                let prior = h.open.as_ref().and_then(|(_, _, p)| p.clone());
                resolve(entry, d, prior.as_deref(), now, &ledger_path, exe, say);
                wake(now);
            }
            Next::Start { due, coalesced } => {
                if coalesced {
                    say.log(&format!(
                        "{}: due times before {} were missed while no daemon ran; only this \
                         one is started",
                        entry.id,
                        local(due)
                    ));
                }
                start(entry, due, &ledger_path, exe, say);
                wake(now);
            }
            Next::Missed { first, through } => {
                let why = format!(
                    "missed: due at {} while no daemon ran, more than its catch-up window ({}) \
                     ago; not started",
                    local(first),
                    crate::duration::exact(entry.catch_up)
                );
                record(
                    &ledger_path,
                    entry,
                    through,
                    What::Skipped { why: why.clone() },
                    say,
                );
                say.log(&format!("{}: {why}", entry.id));
                tell(say, entry, &format!("schedule {}: {why}", entry.id));
                wake(now);
            }
        }
    }
    remove_over(&loaded, &over, say);
    looked
}

/// A queued start that is over leaves the file; the ledger keeps what became of it.
fn remove_over(loaded: &super::Loaded, over: &[String], say: &mut dyn Say) {
    if over.is_empty() {
        return;
    }
    let mut text = loaded.text.clone();
    for id in over {
        text = super::file::remove(&text, id).unwrap_or(text);
    }
    let write = || -> std::io::Result<()> {
        let mut f = atomic_write_file::AtomicWriteFile::open(&loaded.path)?;
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        f.commit()
    };
    if let Err(e) = write() {
        say.log(&format!("could not write {}: {e}", loaded.path.display()));
    }
}

/// A time as the person reads it: local, to the minute.
#[must_use]
pub fn local(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M %:z")
        .to_string()
}

fn tell(say: &mut dyn Say, entry: &Entry, text: &str) {
    if let Some(dir) = entry.file.parent() {
        say.tell(dir, text);
    }
}

fn record(ledger: &Path, entry: &Entry, due: DateTime<Utc>, what: What, say: &mut dyn Say) -> bool {
    let r = Record {
        id: entry.id.clone(),
        due,
        at: Utc::now(),
        what,
    };
    match ledger::append(ledger, &r) {
        Ok(()) => true,
        Err(e) => {
            say.log(&format!("{}: {e:#}", entry.id));
            false
        }
    }
}

/// What the loop file holds: its STATUS and `LOOP_ID` (none when there is no loop there, or
/// none that can be read).
fn loop_of(file: &Path) -> (Option<Status>, Option<String>) {
    match crate::m1::load(file) {
        Ok(doc) => {
            let v = doc.view();
            (Some(v.status), v.loop_id)
        }
        Err(_) => (None, None),
    }
}

/// A start a killed daemon left between its intent and its outcome: the `LOOP_ID` tells.
fn resolve(
    entry: &Entry,
    due: DateTime<Utc>,
    prior: Option<&str>,
    now: DateTime<Utc>,
    ledger: &Path,
    exe: &Path,
    say: &mut dyn Say,
) {
    let (status, id) = loop_of(&entry.file);
    match id {
        Some(id) if Some(id.as_str()) != prior => {
            let what = What::Started {
                file: entry.file.clone(),
                loop_id: id.clone(),
            };
            if record(ledger, entry, due, what, say) {
                say.log(&format!(
                    "{}: the loop of {} was started (LOOP_ID {id}) before the daemon was stopped",
                    entry.id,
                    local(due)
                ));
            }
            // Its M1.md written and its runner not yet started: revival runs it.
            if status == Some(Status::Running) {
                let _ = crate::runner::revive::revive(&entry.file, "loop daemon");
            }
        }
        _ => {
            let window =
                chrono::Duration::from_std(entry.catch_up).unwrap_or(chrono::Duration::MAX);
            if now - due <= window {
                say.log(&format!(
                    "{}: the start of {} had not happened when the daemon was stopped; starting \
                     it now",
                    entry.id,
                    local(due)
                ));
                start(entry, due, ledger, exe, say);
            } else {
                let why = format!(
                    "the start of {} had not happened when the daemon was stopped, more than \
                     the catch-up window ago; not started",
                    local(due)
                );
                record(ledger, entry, due, What::Skipped { why: why.clone() }, say);
                say.log(&format!("{}: {why}", entry.id));
            }
        }
    }
}

/// Starts the loop of `due`: intent, start, outcome.
fn start(entry: &Entry, due: DateTime<Utc>, ledger: &Path, exe: &Path, say: &mut dyn Say) {
    let (status, prior) = loop_of(&entry.file);
    if let Some(s @ (Status::Running | Status::Waiting)) = status {
        let why = format!(
            "not started: the loop of {} still runs (STATUS {}), so the one due at {} waits \
             for the next time",
            entry.file.display(),
            s.as_str(),
            local(due)
        );
        record(ledger, entry, due, What::Skipped { why: why.clone() }, say);
        say.log(&format!("{}: {why}", entry.id));
        tell(say, entry, &format!("schedule {}: {why}", entry.id));
        return;
    }
    let intent = What::Intent {
        file: entry.file.clone(),
        prior: prior.clone(),
    };
    if !record(ledger, entry, due, intent, say) {
        // No start without its intent on the disk.
        return;
    }
    let outcome = spawn_start(entry, exe);
    let (_, id) = loop_of(&entry.file);
    match (id, outcome) {
        (Some(id), _) if Some(&id) != prior.as_ref() => {
            let what = What::Started {
                file: entry.file.clone(),
                loop_id: id.clone(),
            };
            record(ledger, entry, due, what, say);
            say.log(&format!(
                "{}: started the loop due at {} in {} (LOOP_ID {id}): {}",
                entry.id,
                local(due),
                entry.project.display(),
                entry.goal
            ));
        }
        (_, outcome) => {
            let why = match outcome {
                Ok(()) => "`loop start` wrote no new loop".to_owned(),
                Err(e) => e,
            };
            let why = format!("the start due at {} failed: {why}", local(due));
            record(ledger, entry, due, What::Failed { why: why.clone() }, say);
            say.log(&format!("{}: {why}", entry.id));
            tell(say, entry, &format!("schedule {}: {why}", entry.id));
        }
    }
}

/// Runs `loop start … --detach` for `entry`; what it said when it failed.
fn spawn_start(entry: &Entry, exe: &Path) -> Result<(), String> {
    let mut cmd = Command::new(exe);
    cmd.arg("--file")
        .arg(&entry.file)
        .arg("start")
        .arg(&entry.goal)
        .args(&entry.flags)
        .arg("--detach")
        .current_dir(&entry.project)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let daemon = nix::unistd::getpid();
    // SAFETY: only async-signal-safe calls (prctl, getppid) before exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            // The daemon may have died before PDEATHSIG was armed.
            if nix::unistd::getppid() != daemon {
                return Err(std::io::Error::other("the daemon died during the start"));
            }
            Ok(())
        });
    }
    let out = cmd.output().map_err(|e| {
        format!(
            "cannot run {} in {}: {e}",
            exe.display(),
            entry.project.display()
        )
    })?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = said.lines().rev().take(3).collect();
    Err(tail.into_iter().rev().collect::<Vec<_>>().join(" / "))
}
