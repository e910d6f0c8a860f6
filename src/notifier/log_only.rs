//! The notifier used when Telegram is not set up: messages go to `state/loop.log`, so a user
//! who checks the log still sees what would have been sent, and one hint line says how to get
//! them on a phone instead: once per log, not once per process (every `loop notify` and every
//! runner is a process of its own, and the hint stood before each of their notifications).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::render::{Format, render_as};
use super::{Event, Notifier};

/// Whether this process has already written the setup hint.
static HINT_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Writes each message into the decision log.
#[derive(Debug)]
pub(crate) struct LogNotifier {
    state_dir: PathBuf,
}

impl LogNotifier {
    pub(crate) fn new(state_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
        }
    }
}

impl Notifier for LogNotifier {
    fn notify(&mut self, event: &Event) {
        // `loop notify` may run before any loop created the state directory.
        let _ = crate::dirs::create_state_dir(&self.state_dir);
        if !HINT_WRITTEN.swap(true, Ordering::SeqCst)
            && let Some(hint) = super::setup_hint()
        {
            let line = format!("notify: {hint}");
            if !logged_before(&self.state_dir, &line) {
                let _ = crate::decision_log::append(&self.state_dir, &line);
            }
        }
        let text = super::redact(&render_as(event, Format::Plain));
        let line = format!("notify ({}): {text}", event.kind());
        if let Err(e) = crate::decision_log::append(&self.state_dir, &line) {
            crate::errln!("loop: could not write a notification to the log: {e}");
        }
    }
}

/// Whether the log of `state_dir` holds `line` already (after its timestamp). Read once per
/// process, at its first notification: a log is small next to what a loop does.
fn logged_before(state_dir: &Path, line: &str) -> bool {
    let bytes = std::fs::read(crate::decision_log::path(state_dir)).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .any(|l| l.split_once(' ').is_some_and(|(_, said)| said == line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_land_in_the_log_as_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = LogNotifier::new(dir.path());
        n.notify(&Event::Waiting {
            goal: "g".into(),
            reason: "which db?".into(),
            how_to_continue: "edit M1.md".into(),
        });
        n.notify(&Event::Text("hello".into()));
        let log = std::fs::read_to_string(crate::decision_log::path(dir.path())).unwrap();
        assert!(
            log.contains("notify (waiting): ⏸ g ⏎ WAITING: which db? ⏎ To continue: edit M1.md"),
            "{log}"
        );
        assert!(log.contains("notify (text): hello"), "{log}");
    }
}
