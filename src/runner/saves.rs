//! What the runner says of saves that met its own reads and writes of M1.md: a text waited
//! for while someone was still writing it, and a save kept beside the file because a newer one
//! replaced the runner's text first.

use std::time::Duration;

use super::Runner;
use crate::m1::WriterWait;

/// A wait for a writer shorter than this is the ordinary life of a save (a chunk written, the
/// next one on its way) and is not logged.
const LOG_WAITS_FROM: Duration = Duration::from_millis(20);

impl Runner {
    /// Logs what the store met since the last look: a long wait for a writer, a late save
    /// kept aside.
    pub(super) fn note_saves(&mut self) {
        if let Some(w) = self.store.take_wait()
            && (w.gave_up || w.took >= LOG_WAITS_FROM)
        {
            self.voice.say(&wait_line(&w));
        }
        if let Some(aside) = self.store.take_set_aside() {
            self.voice.say(&format!(
                "late save: a save written into the file the runner's write had just replaced \
                 was found after a newer save of M1.md, which never saw it; it is kept as {} \
                 (not applied), so compare it with M1.md and copy over what you want",
                aside.display()
            ));
        }
    }
}

/// `save: waited 60 ms for pid 4242 (vim) to finish writing M1.md before reading it`.
fn wait_line(w: &WriterWait) -> String {
    let who = if w.writers.is_empty() {
        "a process".to_owned()
    } else {
        w.writers.join(", ")
    };
    let took = if w.took < Duration::from_secs(1) {
        format!("{} ms", w.took.as_millis())
    } else {
        crate::duration::human(w.took)
    };
    if w.gave_up {
        format!(
            "save: {who} kept M1.md open for writing for {took}; its text was taken once it \
             had been still (a process that holds the file open for good is not waited for \
             again)"
        )
    } else {
        format!("save: waited {took} for {who} to finish writing M1.md before reading it")
    }
}
