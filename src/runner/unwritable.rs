//! A state directory the runner cannot write for a while (a full disk, a spent quota, a file
//! system turned read-only): the runner neither dies nor touches the running step. The write
//! that failed is as if never tried (M1.md, the ledger and the task directory are each written
//! whole or not at all), so the runner waits, then decides again from what is on disk, as a
//! runner after a crash would; the step goes on under its supervisor, which waits out its own
//! writes. The terminal is told at once; `loop.log`, which cannot be written either, gets the
//! lines said meanwhile once it can, and a line saying how long the wait was.

use std::path::PathBuf;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::voice::Voice;
use super::watch::Watch;
use crate::error::{Error, Result};

/// The state directory as the runner last met it: writable, or not since when. The runner
/// hands it each error that ended a decision, and tells it of each write that got through.
#[derive(Debug)]
pub(super) struct Unwritable {
    state_dir: PathBuf,
    /// Since when the state directory cannot be written, while it cannot.
    outage: Option<Outage>,
}

/// The state directory could not be written, since.
#[derive(Debug)]
struct Outage {
    since: DateTime<Utc>,
    began: Instant,
    /// What the OS said the first time.
    why: String,
    /// Tries that met it.
    waits: u32,
}

impl Unwritable {
    pub(super) fn new(state_dir: PathBuf) -> Self {
        Self {
            state_dir,
            outage: None,
        }
    }

    /// `e` ended a decision: when it says the state directory cannot be written for now, waits
    /// a little (saying so the first time) and returns, for the decision to be made again;
    /// any other error is handed back.
    ///
    /// # Errors
    /// `e` itself, unless it is an unwritable state directory; a stop asked for while waiting.
    pub(super) fn wait_out(&mut self, e: Error, watch: &Watch, voice: &Voice) -> Result<()> {
        let why = match &e {
            Error::Internal(inner) => crate::full_disk::cause(inner),
            _ => None,
        };
        let Some(why) = why else { return Err(e) };
        if let Some(stop) = watch.stop() {
            return Err(Error::waiting(format!(
                "stopped by {} while {} could not be written ({why}); the last decision was \
                 not recorded (`loop resume` makes it again)",
                stop.by(),
                self.state_dir.display()
            )));
        }
        let outage = self.outage.get_or_insert_with(|| Outage {
            since: Utc::now(),
            began: Instant::now(),
            why: why.clone(),
            waits: 0,
        });
        let waits = outage.waits;
        outage.waits += 1;
        if waits == 0 {
            let dir = self.state_dir.display().to_string();
            voice.clear();
            crate::errln!(
                "loop: {dir} cannot be written ({why}); the loop waits for room and tries again \
                 (the running step goes on; this costs no attempt)"
            );
            voice.say(&format!(
                "disk: {dir} cannot be written for now ({e}); waiting for room, the running step \
                 goes on"
            ));
        }
        let _ = watch.wait(crate::full_disk::backoff(waits));
        Ok(())
    }

    /// A write got through: if the state directory could not be written before, says for how
    /// long, on the terminal and in the log.
    pub(super) fn note_writable(&mut self, voice: &Voice) {
        let Some(o) = self.outage.take() else { return };
        let took = crate::duration::human(o.began.elapsed());
        let line = format!(
            "disk: {} can be written again, after {took} (since {}, {}; {} tries waited): \
             nothing was lost, the running step went on, and the wait cost no attempt",
            self.state_dir.display(),
            o.since.format("%H:%M:%S"),
            o.why,
            o.waits
        );
        voice.warn(&line);
    }
}

/// The supervisor of task `task_id` has not started its command after `waited`: says so,
/// with the last line of its log (`log`), which says why (a full disk).
pub(super) fn supervisor_waits(
    voice: &Voice,
    task_id: &str,
    waited: std::time::Duration,
    log: &std::path::Path,
) {
    let last = crate::decision_log::last_lines(log, 1).pop();
    voice.warn(&format!(
        "start: task {task_id} has waited {} for its supervisor to start its agent{}",
        crate::duration::human(waited),
        last.map(|l| format!(": {}", l.trim_start_matches("supervisor: ")))
            .unwrap_or_default()
    ));
}
