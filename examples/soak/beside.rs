//! Faults from beside a loop: its state directory full (read-only) for 3 s during a step, its
//! runner killed in the first milliseconds of a start (right after its first task is
//! published, before or while its supervisor takes it), and a process that writes into the
//! project all along, so into every review (as `loop start … --review > loop.out` does).
//! Counts runners that died of a full disk, attempts counted for a run whose agent never ran
//! (or for a full disk), and reviews halted on a change the reviewer could not have made.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::common::{Rng, kill9, wait_for};
use super::{Loop, STEPS, Tally};

/// `dir` made read-only (a bind mount of it over itself, which needs root) until dropped: every
/// new write there fails (`Read-only file system`), as on a full disk, while files opened
/// before (an agent's output) are written on.
pub struct ReadOnly(PathBuf);

impl ReadOnly {
    pub fn mount(dir: &Path) -> Result<Self, String> {
        let run = |args: &[&str]| {
            // A remount refused as busy is tried again: its complaint is not the soak's.
            Command::new("mount")
                .args(args)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let d = dir.to_str().ok_or("a path that is not UTF-8")?;
        // A file opened for writing through the new mount before it turns read-only makes the
        // remount busy: then it is tried again from the start.
        for _ in 0..50 {
            if !run(&["--bind", d, d]) {
                return Err(format!("cannot bind-mount {d} (needs root)"));
            }
            let guard = Self(dir.to_path_buf());
            if run(&["-o", "remount,bind,ro", d]) {
                return Ok(guard);
            }
            drop(guard);
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(format!("cannot remount {d} read-only: always busy"))
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let d = self.0.to_string_lossy().into_owned();
        // A mount still busy (a process with a file open in it) is let go lazily instead:
        // the first refusal is not the soak's to print.
        let ok = Command::new("umount")
            .arg(&d)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").args(["-l", &d]).status();
        }
    }
}

/// The state directory read-only for 3 s from a random moment of a random step.
pub fn full_state_dir(l: &Loop, rng: &mut Rng, t: &mut Tally) {
    let k = 1 + rng.below(STEPS);
    if !wait_for(Duration::from_secs(30), || l.step_running(k)) {
        return;
    }
    std::thread::sleep(Duration::from_millis(rng.below(200)));
    match ReadOnly::mount(&l.state()) {
        Ok(full) => {
            t.full_disks += 1;
            std::thread::sleep(Duration::from_secs(3));
            drop(full);
        }
        Err(e) => t.failures.push(format!("{}: {e}", l.dir.display())),
    }
}

/// Kills the runner the moment its first task is published (plus 0–3 ms), then resumes.
pub fn kill_after_first_spawn(l: &Loop, runner: &mut Child, rng: &mut Rng, t: &mut Tally) {
    let tasks = l.state().join("tasks");
    let published = || {
        std::fs::read_dir(&tasks)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().starts_with('.') && e.path().is_dir())
    };
    let began = Instant::now();
    while !published() && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_micros(100));
    }
    std::thread::sleep(Duration::from_micros(rng.below(3000)));
    if runner.try_wait().ok().flatten().is_some() {
        return;
    }
    kill9(runner.id());
    let _ = runner.wait();
    t.early_kills += 1;
    t.runner_kills += 1;
    *runner = l.cmd(&["resume"]).spawn().unwrap();
}

/// Appends a line to `loop.out` in the project every 20 ms until dropped: the loop's output
/// redirected into the project, and so written during every review.
pub struct Appender {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Appender {
    /// Makes `l`'s project a git repository (so its reviews look at the work tree) and starts
    /// writing into it.
    pub fn in_git(l: &Loop) -> Self {
        let project = l.dir.join("project");
        super::git(&project, &["init", "-q"]);
        super::git(&project, &["commit", "-q", "--allow-empty", "-m", "start"]);
        Self::start(&project)
    }

    pub fn start(project: &Path) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let path = project.join("loop.out");
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let Ok(mut f) = std::fs::File::create(path) else {
                return;
            };
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let _ = writeln!(f, "output line {n}");
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the faults beside the loop did to it: each finding counted in `t`, and said.
pub fn assess(
    l: &Loop,
    kind: usize,
    review: bool,
    status: Option<std::process::ExitStatus>,
    t: &mut Tally,
) -> Vec<String> {
    let mut bad = Vec::new();
    let log = std::fs::read_to_string(l.state().join("loop.log")).unwrap_or_default();
    // Every step's agent passes at its first run: an attempt beyond the runs its agent made
    // was counted for nothing (a run whose agent never started, a full disk).
    let m = m1loop::m1::Document::parse(&l.text()).map(|d| d.view());
    let calls = l.calls();
    for s in 1..=STEPS {
        let ran: std::collections::HashSet<u64> = calls
            .iter()
            .filter(|c| c["step"].as_u64() == Some(s) && c["review"].as_bool() != Some(true))
            .filter_map(|c| c["attempt"].as_u64())
            .collect();
        let counted = m
            .as_ref()
            .ok()
            .and_then(|m| m.results.get(&u32::try_from(s).unwrap_or(0)))
            .and_then(|r| r.attempts)
            .map_or(0, u64::from);
        if counted > ran.len() as u64 {
            let extra = usize::try_from(counted - ran.len() as u64).unwrap_or(0);
            if kind == super::FULL_DISK {
                t.full_disk_attempts += extra;
            } else {
                t.attempts_without_agent += extra;
            }
            bad.push(format!(
                "step {s}: {counted} attempt(s) counted, its agent ran {} time(s)",
                ran.len()
            ));
        }
    }
    t.taken_back += log
        .lines()
        .filter(|l| l.contains("never handed to a supervisor"))
        .count();
    t.full_disk_waits += log
        .lines()
        .filter(|l| l.contains("can be written again"))
        .count();
    if kind == super::FULL_DISK && !status.is_some_and(|s| s.success()) {
        t.full_disk_runner_deaths += 1;
        bad.push(format!(
            "the runner did not see the full disk through: {status:?}"
        ));
    }
    if review {
        let halts = log
            .lines()
            .filter(|l| l.contains("the work tree changed while step"))
            .count();
        if halts > 0 {
            t.review_halts += halts;
            bad.push(format!("{halts} review(s) halted on the tree"));
        }
        t.review_outside_changes += log
            .lines()
            .filter(|l| l.contains("not by the reviewer"))
            .count();
    }
    bad
}

/// The figures of the faults beside the loop.
pub fn report(t: &Tally) {
    println!(
        "  beside the loop: state directory full (read-only) 3 s during a step {} ({} waits \
         logged by runners): runners that died of it {}, attempts it cost {}; runner killed as \
         its first task was published {} ({} tasks taken back unstarted): attempts counted for \
         an agent that never ran {}; reviewed loops with loop.out written all along {}: \
         reviews halted on a change not the reviewer's {} ({} changes said not the \
         reviewer's)",
        t.full_disks,
        t.full_disk_waits,
        t.full_disk_runner_deaths,
        t.full_disk_attempts,
        t.early_kills,
        t.taken_back,
        t.attempts_without_agent,
        t.reviewed,
        t.review_halts,
        t.review_outside_changes
    );
}
