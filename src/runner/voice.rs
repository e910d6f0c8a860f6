//! What the runner says, and where: a line of the decision log (`loop.log`), the same line on
//! the terminal when a person watches (`--echo`), the live line while a step runs, and a
//! message to the human through the notifier. The runner hands it lines and events; it holds
//! the lines `loop.log` could not take (a full disk) until it can, and remembers what it said
//! that it says once: the wait it last told, the report page it named.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::progress::{self, Progress};
use crate::notifier::{Event, Notifier};

/// Lines said while `loop.log` could not take them, kept for it: at most this many.
const HELD_LINES: usize = 1000;

/// The runner's voice: the decision log, the terminal and the notifier of one loop.
pub(super) struct Voice {
    state_dir: PathBuf,
    notifier: Box<dyn Notifier>,
    /// Each decision on stdout as well as in the log.
    echo: bool,
    /// The live line while a step runs (foreground runners only).
    progress: Progress,
    /// Lines said while `loop.log` could not take them, for it once it can.
    unlogged: RefCell<Vec<String>>,
    /// The end of the wait this runner last logged (when it recorded it, or when it came to
    /// it), so that a wait is logged once however often the runner wakes during it.
    told_wait: Option<DateTime<Utc>>,
    /// The report page this runner wrote when the loop ended, for its closing line.
    report: Option<PathBuf>,
}

impl std::fmt::Debug for Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Voice")
            .field("state_dir", &self.state_dir)
            .field("echo", &self.echo)
            .finish_non_exhaustive()
    }
}

impl Voice {
    pub(super) fn new(
        state_dir: PathBuf,
        notifier: Box<dyn Notifier>,
        echo: bool,
        mode: progress::Mode,
    ) -> Self {
        Self {
            state_dir,
            notifier,
            echo,
            progress: Progress::new(mode),
            unlogged: RefCell::new(Vec::new()),
            told_wait: None,
            report: None,
        }
    }

    /// Writes a line to the decision log (and to stdout when echoing).
    pub(super) fn say(&self, line: &str) {
        self.log(line);
        if self.echo {
            self.progress.clear();
            crate::outln!("{} {line}", Utc::now().format("%H:%M:%S"));
        }
    }

    /// Says `line`, and on stderr too whoever runs the loop: what a person must see even when
    /// not echoing (the disk cannot be written, a task's supervisor is slow to start).
    pub(super) fn warn(&self, line: &str) {
        self.progress.clear();
        crate::errln!("loop: {line}");
        self.say(line);
    }

    /// Says that the loop waits until `until` (for `reason`), unless that wait was told.
    pub(super) fn say_wait(&mut self, until: DateTime<Utc>, reason: &str) {
        if self.told_wait != Some(until) {
            self.say(&format!("wait: until {} ({reason})", until.to_rfc3339()));
            self.told_wait = Some(until);
        }
    }

    /// Notes the wait a line just said records (its end, `None` when there is none).
    pub(super) fn told_wait(&mut self, until: Option<DateTime<Utc>>) {
        self.told_wait = until;
    }

    /// Logs the loop's report `page`, just written, and keeps it for the closing line.
    pub(super) fn reported(&mut self, page: PathBuf) {
        self.log(&format!("report: {}", page.display()));
        self.report = Some(page);
    }

    /// The report page this runner wrote, if it wrote one.
    pub(super) fn report(&self) -> Option<&Path> {
        self.report.as_deref()
    }

    /// Queues a message to the human (never fatal: a failed one is reported by the notifier).
    pub(super) fn notify(&mut self, event: &Event) {
        self.notifier.notify(event);
    }

    /// Whether a person watches: decisions go to stdout too.
    pub(super) fn echoes(&self) -> bool {
        self.echo
    }

    /// Takes the live line off the terminal, before something else is printed there.
    pub(super) fn clear(&self) {
        self.progress.clear();
    }

    /// Whether the live line shows a clock, which wants a redraw every second.
    pub(super) fn ticks(&self) -> bool {
        self.progress.ticks()
    }

    /// The live line, to start, update or end.
    pub(super) fn live(&mut self) -> &mut Progress {
        &mut self.progress
    }

    /// Appends `line` to `loop.log`, after any lines it could not take before; keeps it for
    /// later when it cannot take it now either.
    pub(super) fn log(&self, line: &str) {
        let stamped = crate::decision_log::stamped(line);
        let mut held = self.unlogged.borrow_mut();
        if !held.is_empty() {
            if crate::decision_log::append_stamped(&self.state_dir, &held.concat()).is_err() {
                if held.len() < HELD_LINES {
                    held.push(stamped);
                }
                return;
            }
            held.clear();
        }
        if crate::decision_log::append_stamped(&self.state_dir, &stamped).is_err() {
            held.push(stamped);
        }
    }
}
