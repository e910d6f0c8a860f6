//! What the runner waits on: M1.md edited, a stop file created, the running task's directory
//! changed (its exit record landing, its lock's last holder gone). One `notify` watcher feeds
//! one channel; the runner blocks on it until an event or a timer that is due. Where the
//! watcher cannot start (no inotify left), the runner polls the same conditions every second
//! instead; where it runs, a look every few minutes stays, for an event lost to an overflowed
//! queue (see [`Watch::fallback`]).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// How often the runner looks for itself while events arrive and nothing is due: only for an
/// event the kernel dropped (an inotify queue that overflowed is reported as a rescan, which
/// wakes the runner at once; this covers what even that could miss). Rare enough to cost
/// nothing, short enough that a step's end is never missed for long.
pub(crate) const LOST_EVENT_LOOK: Duration = Duration::from_secs(300);

/// How often the runner re-checks what it waits for where file events do not arrive (no
/// inotify watcher, a directory it could not watch), and how often a terminal's live line is
/// redrawn. Where events arrive, the runner sleeps until one comes or a timer is due.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// Why the runner woke up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// M1.md (or its directory's entry for it) changed.
    M1Changed,
    /// A stop file appeared.
    Stop,
    /// Something changed in the watched task directory.
    Task,
    /// The timeout passed with no event.
    Timeout,
}

#[derive(Debug, Default)]
struct Targets {
    m1: PathBuf,
    /// Where the text the runner's last write replaced is watched for a late save.
    displaced: PathBuf,
    stops: Vec<PathBuf>,
    task: Option<PathBuf>,
    /// The directories of the loops of steps running at once (their M1.md and lock).
    steps: Vec<PathBuf>,
}

/// The runner's watcher. Dropping it stops watching.
pub(crate) struct Watch {
    watcher: Option<RecommendedWatcher>,
    rx: Receiver<Wake>,
    /// For others to wake the runner (Ctrl-C).
    tx: Sender<Wake>,
    targets: Arc<Mutex<Targets>>,
    watched_dirs: Vec<PathBuf>,
    task_dir: Option<PathBuf>,
    step_dirs: Vec<PathBuf>,
    /// A directory that should be watched is not (a stop file's directory that does not
    /// exist, a task directory that could not be watched): what happens there is only seen
    /// by looking, so the runner looks every [`POLL`].
    blind: bool,
    task_blind: bool,
    /// How many wakes [`Watch::wait`] has handed out: a caller that sees it move while it did
    /// something else (a write that waited for a broken file to be fixed) knows that events
    /// were taken by that wait, and looks again instead of sleeping on them.
    woken: std::cell::Cell<u64>,
    /// The state directory of the loop watched, whose stop files [`Watch::stop`] looks at.
    state_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("watched_dirs", &self.watched_dirs)
            .finish_non_exhaustive()
    }
}

fn classify(targets: &Targets, path: &Path) -> Option<Wake> {
    if path == targets.m1 || path == targets.displaced {
        return Some(Wake::M1Changed);
    }
    if targets.stops.iter().any(|s| s == path) {
        return Some(Wake::Stop);
    }
    if let Some(task) = &targets.task
        && (path == task || path.parent() == Some(task) && is_news(path))
    {
        return Some(Wake::Task);
    }
    if targets
        .steps
        .iter()
        .any(|d| path.parent() == Some(d.as_path()))
    {
        return Some(Wake::Task);
    }
    None
}

/// Whether a change of this file of a task directory is news to the runner: output (for the
/// live line and an authentication error's early end), the exit record landing, or the lock
/// let go by its last holder. The rest is the supervisor's own bookkeeping (its records and
/// their temporary files, its log) or the runner's (its verdict, a kill request), which the
/// runner reads when it looks anyway: waking for each would cost a look at every one.
fn is_news(path: &Path) -> bool {
    use crate::bridge::{EXIT_FILE, LOCK_FILE, STDERR_FILE, STDOUT_FILE};
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| [STDOUT_FILE, STDERR_FILE, EXIT_FILE, LOCK_FILE].contains(&n))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Watch {
    /// Watches a loop: its M1.md and the stop files that apply to it (the global one and the
    /// one in its state directory, `state_dir`), which [`Watch::stop`] then looks at.
    #[must_use]
    pub(crate) fn of_loop(m1: &Path, state_dir: &Path) -> Self {
        let mut me = Self::new(m1, &super::stopfile::paths(state_dir));
        me.state_dir = Some(state_dir.to_path_buf());
        me
    }

    /// What asks the watched loop to stop, now (see [`super::stopfile::requested`]); nothing
    /// for a watch made without a loop's state directory.
    #[must_use]
    pub(crate) fn stop(&self) -> Option<crate::engine::Stop> {
        self.state_dir
            .as_deref()
            .and_then(super::stopfile::requested)
    }

    /// The longest the runner sleeps with nothing due: a second where `ticks` (a terminal's
    /// live line shows a clock) or where events do not arrive; else only the rare look for a
    /// lost event ([`Watch::fallback`]).
    #[must_use]
    pub(crate) fn longest_sleep(&self, ticks: bool) -> Duration {
        if ticks { POLL } else { self.fallback() }
    }

    /// Watches M1.md's directory and each stop file's directory. A watcher that cannot start
    /// (no inotify left, say) is not an error: the runner then lives on its poll fallback.
    #[must_use]
    pub(crate) fn new(m1: &Path, stops: &[PathBuf]) -> Self {
        let (tx, rx) = channel();
        let targets = Arc::new(Mutex::new(Targets {
            m1: absolute(m1),
            displaced: absolute(&crate::layout::Layout::displaced(m1)),
            stops: stops.iter().map(|p| absolute(p)).collect(),
            task: None,
            steps: Vec::new(),
        }));
        let watcher = make_watcher(tx.clone(), Arc::clone(&targets));
        let mut me = Self {
            watcher,
            rx,
            tx,
            targets,
            watched_dirs: Vec::new(),
            task_dir: None,
            step_dirs: Vec::new(),
            blind: false,
            task_blind: false,
            woken: std::cell::Cell::new(0),
            state_dir: None,
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        {
            let t = me
                .targets
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for p in std::iter::once(&t.m1).chain(t.stops.iter()) {
                if let Some(d) = p.parent()
                    && !dirs.iter().any(|x| x == d)
                {
                    dirs.push(d.to_path_buf());
                }
            }
        }
        for d in dirs {
            me.add_dir(&d);
        }
        me
    }

    fn add_dir(&mut self, dir: &Path) {
        if let Some(w) = self.watcher.as_mut()
            && w.watch(dir, RecursiveMode::NonRecursive).is_ok()
        {
            self.watched_dirs.push(dir.to_path_buf());
        } else {
            self.blind = true;
        }
    }

    /// A way to wake the runner from another thread.
    #[must_use]
    pub(crate) fn waker(&self) -> Sender<Wake> {
        self.tx.clone()
    }

    /// Ctrl-C stops the watched loop: it wakes this watcher as a stop file does (see
    /// [`super::stopfile::catch_interrupt`]).
    pub(crate) fn catch_interrupt(&self) {
        let wake = self.waker();
        super::stopfile::catch_interrupt(move || {
            let _ = wake.send(Wake::Stop);
        });
    }

    /// Watches `dir` (a task directory) instead of the previous one; `None` stops watching it.
    pub(crate) fn set_task_dir(&mut self, dir: Option<&Path>) {
        let dir = dir.map(absolute);
        if self.task_dir == dir {
            return;
        }
        if let (Some(old), Some(w)) = (self.task_dir.take(), self.watcher.as_mut()) {
            let _ = w.unwatch(&old);
        }
        self.task_blind = match (&dir, self.watcher.as_mut()) {
            (Some(d), Some(w)) => w.watch(d, RecursiveMode::NonRecursive).is_err(),
            _ => false,
        };
        self.targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .task
            .clone_from(&dir);
        self.task_dir = dir;
    }

    /// Watches `dirs` (the loops of the steps running at once: their M1.md, lock and stop)
    /// instead of the previous ones: a change there wakes the runner as a task's would.
    pub(crate) fn set_step_dirs(&mut self, dirs: &[PathBuf]) {
        let dirs: Vec<PathBuf> = dirs.iter().map(|d| absolute(d)).collect();
        if self.step_dirs == dirs {
            return;
        }
        // The watcher's own thread takes `targets` for every event: it is not held while the
        // watcher is asked to (un)watch, which waits for that thread.
        if let Some(w) = self.watcher.as_mut() {
            for old in self.step_dirs.iter().filter(|d| !dirs.contains(d)) {
                let _ = w.unwatch(old);
            }
            for new in dirs.iter().filter(|d| !self.step_dirs.contains(d)) {
                let _ = w.watch(new, RecursiveMode::NonRecursive);
            }
        }
        self.targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .steps
            .clone_from(&dirs);
        self.step_dirs = dirs;
    }

    /// Whether events arrive at all (false: the runner relies on polling alone).
    #[must_use]
    pub(crate) fn is_live(&self) -> bool {
        self.watcher.is_some()
    }

    /// The longest the runner sleeps with nothing due: [`LOST_EVENT_LOOK`] while events
    /// arrive from everywhere it waits on, [`POLL`] where some cannot (no watcher, a
    /// directory that could not be watched).
    #[must_use]
    pub(crate) fn fallback(&self) -> Duration {
        if self.is_live() && !self.blind && !self.task_blind {
            LOST_EVENT_LOOK
        } else {
            POLL
        }
    }

    /// How many wakes [`Watch::wait`] has returned so far (see `woken`).
    #[must_use]
    pub(crate) fn woken(&self) -> u64 {
        self.woken.get()
    }

    /// Blocks until an event or `timeout`. Events already queued are coalesced; the most
    /// urgent (Stop, then Task, then `M1Changed`) is returned.
    #[must_use]
    pub(crate) fn wait(&self, timeout: Duration) -> Wake {
        let first = match self.rx.recv_timeout(timeout) {
            Ok(w) => w,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                if self.watcher.is_none() {
                    // No watcher means no sender: recv_timeout returns at once. Sleep instead.
                    std::thread::sleep(timeout);
                }
                return Wake::Timeout;
            }
        };
        // Coalesce what has already arrived (an atomic save is several events); waiting for
        // more would delay the runner just when a task has ended.
        let mut best = first;
        while let Ok(w) = self.rx.try_recv() {
            best = more_urgent(best, w);
        }
        self.woken.set(self.woken.get() + 1);
        best
    }
}

fn rank(w: Wake) -> u8 {
    match w {
        Wake::Stop => 3,
        Wake::Task => 2,
        Wake::M1Changed => 1,
        Wake::Timeout => 0,
    }
}

fn more_urgent(a: Wake, b: Wake) -> Wake {
    if rank(b) > rank(a) { b } else { a }
}

fn make_watcher(tx: Sender<Wake>, targets: Arc<Mutex<Targets>>) -> Option<RecommendedWatcher> {
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if event.need_rescan() {
            // The queue overflowed: events were lost, so anything may have happened.
            let _ = tx.send(Wake::Task);
            return;
        }
        // Opens and reads (the runner's own among them) are no news; a file written and
        // closed is: a task's lock closed by its last holder (a supervisor and guardian that
        // died) frees it, which makes the task lost.
        if matches!(event.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) {
            return;
        }
        let t = targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for p in &event.paths {
            if let Some(w) = classify(&t, p) {
                let _ = tx.send(w);
            }
        }
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Instant;

    /// A running loop's M1.md and one task's directory in `dir`, watched, with nothing
    /// pending: the watch and the task directory.
    fn watching_a_task(dir: &Path) -> (Watch, PathBuf) {
        let m1 = dir.join("M1.md");
        std::fs::write(&m1, "STATUS: RUNNING\n").unwrap();
        let task = dir.join("tasks").join("t1");
        std::fs::create_dir_all(&task).unwrap();
        let mut w = Watch::new(&m1, &[]);
        assert!(w.is_live());
        w.set_task_dir(Some(&task));
        while w.wait(Duration::from_millis(100)) != Wake::Timeout {}
        (w, task)
    }

    fn wait_for(w: &Watch, want: Wake) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if w.wait(Duration::from_millis(200)) == want {
                return true;
            }
        }
        false
    }

    #[test]
    fn sees_stop_file_m1_edit_and_task_record() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = dir.path().join("M1.md");
        std::fs::write(&m1, "STATUS: IDLE\n").unwrap();
        let stopdir = tempfile::tempdir().unwrap();
        let stop = stopdir.path().join("croppy-stop");
        let task = dir.path().join("tasks").join("t1");
        std::fs::create_dir_all(&task).unwrap();
        let mut w = Watch::new(&m1, std::slice::from_ref(&stop));
        assert!(w.is_live());
        w.set_task_dir(Some(&task));

        std::fs::write(&m1, "STATUS: RUNNING\n").unwrap();
        assert!(wait_for(&w, Wake::M1Changed));
        std::fs::write(task.join("exit.json"), "{}").unwrap();
        assert!(wait_for(&w, Wake::Task));
        std::fs::write(&stop, "").unwrap();
        assert!(wait_for(&w, Wake::Stop));
    }

    #[test]
    fn a_task_lock_let_go_by_its_last_holder_wakes_the_runner() {
        // A supervisor and guardian killed together write nothing: the kernel closing the
        // lock they held is the only news that the task is lost.
        let dir = tempfile::tempdir().unwrap();
        let (w, task) = watching_a_task(dir.path());
        let lock = std::fs::File::create(task.join("lock")).unwrap();
        assert_eq!(w.fallback(), LOST_EVENT_LOOK);
        while w.wait(Duration::from_millis(100)) != Wake::Timeout {}
        drop(lock);
        assert!(wait_for(&w, Wake::Task));
    }

    #[test]
    fn a_stop_file_in_a_missing_directory_keeps_the_one_second_look() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = dir.path().join("M1.md");
        std::fs::write(&m1, "STATUS: RUNNING\n").unwrap();
        let w = Watch::new(&m1, &[dir.path().join("no-such-dir").join("stop")]);
        assert_eq!(w.fallback(), POLL);
    }

    #[test]
    fn a_supervisors_own_records_do_not_wake_the_runner_and_its_output_does() {
        let dir = tempfile::tempdir().unwrap();
        let (w, task) = watching_a_task(dir.path());
        for name in ["pid.json", "supervisor.json", "judged.json"] {
            let tmp = task.join(format!(".{name}.1.tmp"));
            std::fs::write(&tmp, "{}").unwrap();
            std::fs::rename(&tmp, task.join(name)).unwrap();
        }
        std::fs::write(task.join("supervisor.log"), "a line\n").unwrap();
        assert_eq!(w.wait(Duration::from_millis(300)), Wake::Timeout);
        std::fs::write(task.join("stdout"), "{}\n").unwrap();
        assert!(wait_for(&w, Wake::Task));
    }

    #[test]
    fn unrelated_files_do_not_wake() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = dir.path().join("M1.md");
        std::fs::write(&m1, "STATUS: IDLE\n").unwrap();
        let w = Watch::new(&m1, &[]);
        std::fs::write(dir.path().join("other.txt"), "x").unwrap();
        assert_eq!(w.wait(Duration::from_millis(300)), Wake::Timeout);
    }

    #[test]
    fn a_change_in_a_steps_loop_wakes_the_runner_and_watching_more_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let m1 = dir.path().join("M1.md");
        std::fs::write(&m1, "STATUS: RUNNING\n").unwrap();
        let (a, b) = (
            dir.path().join("step-1.loop"),
            dir.path().join("step-2.loop"),
        );
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let mut w = Watch::new(&m1, &[]);
        // Events keep arriving while the watched set changes (the watcher's thread takes the
        // same lock for each): changing it must not wait on that thread forever.
        let writer = {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let _ = std::fs::write(a.join("M1.md"), format!("STATUS: RUNNING # {i}\n"));
                }
            })
        };
        for _ in 0..50 {
            w.set_step_dirs(std::slice::from_ref(&a));
            w.set_step_dirs(&[a.clone(), b.clone()]);
        }
        writer.join().unwrap();
        while w.wait(Duration::from_millis(50)) != Wake::Timeout {}
        std::fs::write(b.join("M1.md"), "STATUS: DONE\n").unwrap();
        if w.is_live() {
            assert!(wait_for(&w, Wake::Task));
        }
    }
}
