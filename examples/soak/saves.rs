//! Saves that race the runner's own writes, denser than the storm of every 20 ms: an editor that
//! saves in place (open, truncate, write in two parts) every 5–15 ms from the moment the loop's
//! file exists, one save in place in the first milliseconds of `loop start`, and `>>` appends
//! that hold the file open a moment before they write, from the last step to the runner's exit
//! (the final DONE write). Each save adds a line `# save N`; a line missing from the final text
//! is a lost save.
//!
//! `--only-in-place-storms` runs the dense storm alone, `--at-once N` loops at a time (4 by
//! default) of ten steps of 0.3 s, so the saves of several editors meet the writes of several
//! runners on the machine's cores; `--busy N` adds N threads that spin for the whole run (a
//! loaded machine).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Loop, Tally};
use crate::common::{Rng, wait_for};

/// Steps of a loop of the dense storm, and how long each works.
pub const DENSE_STEPS: u64 = 10;
pub const DENSE_STEP_MS: u64 = 300;

/// Waits for `loop start` to have written the loop's file; whether it did within 30 s.
fn file_written(l: &Loop) -> bool {
    wait_for(Duration::from_secs(30), || {
        std::fs::metadata(&l.file).is_ok_and(|m| m.len() > 0)
    })
}

/// One save in place: the file opened for writing and truncated, then `text` written in two
/// parts cut at a random byte, with a pause of up to `pause_ms` between them (an editor that
/// writes in chunks, or is held up between them on a busy machine). Whether it was written
/// into a file the runner's write had displaced by then.
fn save_in_place(file: &Path, text: &str, rng: &mut Rng, pause_ms: u64) -> Option<bool> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(file)
        .ok()?;
    let cut = usize::try_from(rng.below(text.len() as u64)).unwrap_or(0);
    let cut = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    f.write_all(&text.as_bytes()[..cut]).ok()?;
    let pause = rng.below(pause_ms + 1);
    if pause > 0 {
        std::thread::sleep(Duration::from_millis(pause));
    }
    f.write_all(&text.as_bytes()[cut..]).ok()?;
    let ours = f.metadata().map(|m| m.ino()).ok();
    Some(ours != std::fs::metadata(file).map(|m| m.ino()).ok())
}

/// Saves in place every 5–15 ms from the moment the file exists until the runner exits; the
/// number of saves.
pub fn dense_storm(l: &Loop, runner: &mut Child, rng: &mut Rng, t: &mut Tally) -> usize {
    let mut n = 0;
    if !file_written(l) {
        return 0;
    }
    t.storms += 1;
    while runner.try_wait().ok().flatten().is_none() {
        let text = l.text();
        if text.is_empty() {
            continue;
        }
        n += 1;
        if let Some(displaced) = save_in_place(&l.file, &format!("{text}# save {n}\n"), rng, 3) {
            t.in_place_saves += 1;
            t.displaced_saves += usize::from(displaced);
        }
        t.storm_saves += 1;
        std::thread::sleep(Duration::from_millis(5 + rng.below(11)));
    }
    n
}

/// One save in place in the first milliseconds of `loop start`, written in two parts 5 ms
/// apart: the runner opens the file it has just written while the save is half done. The
/// number of saves (1, or 0 when the file never appeared).
pub fn save_at_start(l: &Loop, rng: &mut Rng, t: &mut Tally) -> usize {
    // Polled without a pause: the save must land within a few milliseconds of the write.
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&l.file).map_or(true, |m| m.len() == 0) {
        if std::time::Instant::now() > end {
            return 0;
        }
        std::hint::spin_loop();
    }
    let text = l.text();
    if text.is_empty() {
        return 0;
    }
    let cut = text.len() / 2 + usize::try_from(rng.below(16)).unwrap_or(0);
    let text = format!("{text}# save 1\n");
    let cut = (cut.min(text.len())..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&l.file)
    else {
        return 0;
    };
    let _ = f.write_all(&text.as_bytes()[..cut]);
    std::thread::sleep(Duration::from_millis(5));
    let _ = f.write_all(&text.as_bytes()[cut..]);
    t.saves_at_start += 1;
    t.in_place_saves += 1;
    1
}

/// `>>` appends from the moment the last step runs until the runner exits: each opens the file,
/// waits up to 3 ms (a command whose output is appended, `cmd >> M1.md`, opens the file before
/// the command writes), writes its line and closes; the next follows 1–5 ms later. The runner's
/// final write (DONE) then often falls between an append's open and its write. The number of
/// appends.
pub fn appends_at_the_end(
    l: &Loop,
    runner: &mut Child,
    last: u64,
    rng: &mut Rng,
    t: &mut Tally,
) -> usize {
    let mut n = 0;
    wait_for(Duration::from_secs(60), || l.started(last));
    while runner.try_wait().ok().flatten().is_none() {
        let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&l.file) else {
            continue;
        };
        n += 1;
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        let _ = writeln!(f, "# save {n}");
        drop(f);
        t.appends_at_end += 1;
        std::thread::sleep(Duration::from_micros(1000 + rng.below(4000)));
    }
    n
}

/// Threads that spin until dropped: a loaded machine.
pub struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    pub fn start(n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) + 1);
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
