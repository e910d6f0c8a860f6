//! `loop logs [-f]`: this loop's decisions, from `loop.log`. Every runner of a loop, in the
//! foreground, detached, resumed or revived, writes its decisions there; a detached runner's
//! `runner.out` has only its own. The log is shared by every loop that ran in its directory,
//! so this loop's part starts at its `start:` line (or at its `STARTED_AT`). `-f` goes on
//! printing what is appended until no runner drives the loop any more.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::error::Error;
use crate::exit::Status;
use crate::layout::Layout;

/// How often `-f` looks for new lines and for the runner: a file poll, no busy loop.
const POLL: Duration = Duration::from_millis(200);

/// How long `-f` waits for a runner to take a RUNNING loop that has none yet (a `start
/// --detach` that just returned, a revival under way) before it stops following.
const RUNNER_GRACE: Duration = Duration::from_secs(5);

/// `loop logs [-f]` for the loop of `file`.
///
/// # Errors
/// No loop at `file` (exit 2); a log that cannot be read.
pub(crate) fn logs(file: &Path, follow: bool) -> crate::error::Result<Status> {
    if !file.exists() {
        return Err(Error::bad_input(format!(
            "no loop at {}: nothing to show (start one with `loop start \"GOAL\"`, or pass --file)",
            file.display()
        )));
    }
    let layout = Layout::of(file);
    let log = layout.log();
    let text = read_from(&log, 0)?;
    let started = started_at(file);
    let from = crate::decision_log::this_loops_part(&text, started);
    let mut offset = text.len() as u64;
    let mut partial = String::new();
    print_lines(&text[from..], &mut partial);
    if !follow {
        if !partial.is_empty() {
            crate::outln!("{partial}");
        }
        return Ok(Status::Ok);
    }
    let began = Instant::now();
    let mut seen_runner = false;
    loop {
        let driven = crate::runner::lock::holder(file).is_some();
        seen_runner |= driven;
        let appended = read_from(&log, offset)?;
        offset += appended.len() as u64;
        print_lines(&appended, &mut partial);
        let waiting_for_one = !seen_runner && began.elapsed() < RUNNER_GRACE && is_running(file);
        if !driven && !waiting_for_one {
            // What the runner wrote as it let go was read above, after it had let go.
            if !partial.is_empty() {
                crate::outln!("{partial}");
            }
            let out = layout.runner_out();
            let also = if out.exists() {
                format!(
                    "; a detached runner's own output (errors too) is in {}",
                    out.display()
                )
            } else {
                String::new()
            };
            crate::errln!(
                "loop logs: no runner drives {} (any more){also}",
                file.display()
            );
            return Ok(Status::Ok);
        }
        std::thread::sleep(POLL);
    }
}

/// The log's bytes from `offset` on, as text (nothing when there is no log yet).
fn read_from(log: &Path, offset: u64) -> crate::error::Result<String> {
    let mut f = match std::fs::File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => {
            return Err(anyhow::Error::from(e)
                .context(format!("while reading {}", log.display()))
                .into());
        }
    };
    f.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    // A line is written whole by one write; a cut inside a character is only a half-read one.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Prints the complete lines of `chunk`, keeping an unfinished last line in `partial` for the
/// next chunk. A line an older version logged may hold a control character an agent wrote:
/// `out!` shows it as an escape, as the log's writer does now.
fn print_lines(chunk: &str, partial: &mut String) {
    partial.push_str(chunk);
    if let Some(end) = partial.rfind('\n') {
        let whole: String = partial.drain(..=end).collect();
        crate::out!("{whole}");
    }
}

/// The loop's `STARTED_AT`, when its M1.md can be read and has one.
fn started_at(file: &Path) -> Option<DateTime<Utc>> {
    crate::m1::load(file).ok()?.view().started_at
}

/// Whether the loop's M1.md says RUNNING (a runner may be about to take it).
fn is_running(file: &Path) -> bool {
    crate::m1::load(file).is_ok_and(|d| d.view().status == crate::m1::Status::Running)
}
