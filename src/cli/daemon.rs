//! `loop daemon`: keeps loops running. It looks at each loop it was given (and each one
//! `loop service install` named) every `--every` and when a wait ends, and revives a loop that
//! is RUNNING with no runner ([`crate::runner::revive`]). Between looks it sleeps: a few stat
//! and lock probes per loop each time, nothing while the loops run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::DaemonArgs;
use crate::error::Error;
use crate::exit::Status;
use crate::runner::revive::{self, Revival};

/// The longest a loop that will not come back waits between two revivals.
const MAX_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// How a loop the daemon revived fares: a runner that does not take it over (the agent
/// missing, a broken file) is revived again later and later, not every look.
#[derive(Debug, Default)]
struct Tries {
    count: u32,
    not_before: Option<Instant>,
}

/// `loop daemon`.
///
/// # Errors
/// No loop to keep, or the Telegram bot cannot be started.
pub(crate) fn run(args: &DaemonArgs) -> crate::error::Result<Status> {
    let mut tries: HashMap<PathBuf, Tries> = HashMap::new();
    let mut bot: Option<(Child, Instant)> = None;
    let first = loops(args);
    // A schedules file with a mistake is one too: the daemon says what is wrong, and starts
    // its schedules once the file is fixed.
    let scheduled = crate::schedule::path().is_ok_and(|p| p.exists());
    if first.is_empty() && !scheduled {
        return Err(Error::bad_input(
            "no loop to keep running and no schedule: pass --loop M1.md, run `loop service \
             install --file M1.md` first, or add a schedule (`loop schedule add`)",
        ));
    }
    let wake = schedule_watch();
    let mut said = None;
    say(&format!(
        "keeping {} loop(s) running: {}",
        first.len(),
        first
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    loop {
        // Read each time: `loop service install` adds loops while the daemon runs.
        let all = loops(args);
        let mut sleep = args.every;
        for file in &all {
            if let Some(until) = look_after(file, tries.entry(file.clone()).or_default(), args) {
                sleep = sleep.min(until);
            }
        }
        if args.telegram
            && let Some(file) = all.first()
        {
            keep_bot(&mut bot, file);
        }
        if all.is_empty() {
            // No loop to look after: asleep until a due time or an edit of the schedules.
            sleep = MAX_SLEEP;
        }
        sleep = sleep.min(schedules(&mut said));
        // Woken early by an edit of the schedules file; the next round reads it.
        let _ = wake.edited.recv_timeout(sleep);
        while wake.edited.try_recv().is_ok() {}
    }
}

/// The longest the daemon sleeps with nothing due: a wall clock set forward (or a machine
/// resumed from suspend) is noticed within it.
const MAX_SLEEP: Duration = Duration::from_secs(10 * 60);

/// What wakes the daemon for its schedules, and says that it runs: held for its life.
struct Wake {
    /// `daemon.lock` in the per-user state directory: `loop start --at` knows from it that a
    /// daemon runs.
    _held: Option<crate::lockfile::Held>,
    /// Watches the per-user state directory for edits of the schedules file.
    _watcher: Option<notify::RecommendedWatcher>,
    edited: std::sync::mpsc::Receiver<()>,
}

fn schedule_watch() -> Wake {
    let (tx, edited) = std::sync::mpsc::channel();
    let Ok(dir) = crate::dirs::user_state_dir() else {
        return Wake {
            _held: None,
            _watcher: None,
            edited,
        };
    };
    let _ = std::fs::create_dir_all(&dir);
    let held = crate::lockfile::try_exclusive(&dir.join("daemon.lock"))
        .ok()
        .and_then(Result::ok);
    let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if e.is_ok_and(|e| e.paths.iter().any(|p| p.ends_with("schedules.md"))) {
            let _ = tx.send(());
        }
    })
    .ok()
    .and_then(|mut w| {
        use notify::Watcher;
        w.watch(&dir, notify::RecursiveMode::NonRecursive)
            .ok()
            .map(|()| w)
    });
    Wake {
        _held: held,
        _watcher: watcher,
        edited,
    }
}

/// The daemon's voice for the schedules: its log, and a loop's chat.
struct Voice;

impl crate::schedule::daemon::Say for Voice {
    fn log(&mut self, line: &str) {
        say(line);
    }

    fn tell(&mut self, state_dir: &Path, text: &str) {
        let exe = std::env::current_exe().ok();
        crate::notifier::from_env(state_dir, exe.as_deref())
            .notify(&crate::notifier::Event::Text(text.to_owned()));
    }
}

/// One look at the schedules; how long until the next due time. A mistake in the file is
/// said once, not every round.
fn schedules(said: &mut Option<String>) -> Duration {
    let Ok(exe) = std::env::current_exe() else {
        return MAX_SLEEP;
    };
    let looked = crate::schedule::daemon::look(Utc::now(), &exe, &mut Voice);
    if looked.problem != *said {
        if let Some(p) = &looked.problem {
            say(&format!(
                "the schedules file has mistakes; no schedule starts until they are fixed:\n{p}"
            ));
        }
        said.clone_from(&looked.problem);
    }
    looked
        .next
        .map_or(MAX_SLEEP, |t| (t - Utc::now()).to_std().unwrap_or_default())
        // Never a busy loop, even when a ledger that cannot be written keeps a time due.
        .max(Duration::from_millis(200))
}

/// Looks at one loop and revives it if it needs it; how soon it wants another look, when
/// sooner than the next round (a wait that ends).
fn look_after(file: &Path, tries: &mut Tries, args: &DaemonArgs) -> Option<Duration> {
    let now = Utc::now();
    match revive::look(file, now) {
        Revival::WaitsUntil(until) => {
            // Woken at the deadline, not a round later: a backoff survives a reboot exactly.
            return (until - now).to_std().ok();
        }
        Revival::Started => {}
        Revival::Idle => {
            // A DONE loop whose runner died before it finished its end gets it finished.
            crate::runner::revive::finish_ended(file);
            *tries = Tries::default();
            return None;
        }
        _ => {
            *tries = Tries::default();
            return None;
        }
    }
    if tries.not_before.is_some_and(|t| Instant::now() < t) {
        return None;
    }
    match revive::revive(file, "loop daemon") {
        Ok(Revival::Started) => {
            say(&format!("revived {}", file.display()));
            let wait = args
                .every
                .saturating_mul(2u32.saturating_pow(tries.count))
                .min(MAX_BACKOFF);
            tries.count += 1;
            tries.not_before = Some(Instant::now() + wait);
        }
        Ok(Revival::Halted(why)) => say(&format!("{}: WAITING: {why}", file.display())),
        Ok(_) => {}
        Err(e) => say(&format!("could not revive {}: {e:#}", file.display())),
    }
    None
}

/// The loops to keep: those given, then those the service names, then those the schedules
/// started (as the start ledger names them), each once, absolute.
fn loops(args: &DaemonArgs) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = Vec::new();
    // --file first: the loop a person named that way is the one the bot (`--telegram`) serves.
    let given = args.file.iter().chain(&args.loops).cloned();
    let scheduled = crate::schedule::ledger_path()
        .map(|p| crate::schedule::ledger::read(&p))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| match r.what {
            crate::schedule::ledger::What::Started { file, .. } => Some(file),
            _ => None,
        })
        .filter(|f| f.exists());
    for p in given
        .chain(super::service::installed_loops())
        .chain(scheduled)
    {
        let p = std::path::absolute(&p).unwrap_or(p);
        if !all.contains(&p) {
            all.push(p);
        }
    }
    all
}

/// How often at most the Telegram bot is started again after it ended.
const BOT_RESTART: Duration = Duration::from_secs(60);

/// Runs `loop telegram` for `file` as a child, started again (at most every minute) if it
/// ended.
fn keep_bot(bot: &mut Option<(Child, Instant)>, file: &Path) {
    if let Some((child, started)) = bot
        && (matches!(child.try_wait(), Ok(None)) || started.elapsed() < BOT_RESTART)
    {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    match Command::new(exe)
        .arg("--file")
        .arg(file)
        .arg("telegram")
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(child) => {
            say(&format!("started the Telegram bot (pid {})", child.id()));
            *bot = Some((child, Instant::now()));
        }
        Err(e) => say(&format!("could not start the Telegram bot: {e}")),
    }
}

fn say(line: &str) {
    crate::outln!(
        "{} loop daemon: {line}",
        Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
    );
}
