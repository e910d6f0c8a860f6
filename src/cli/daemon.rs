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
    if first.is_empty() {
        return Err(Error::bad_input(
            "no loop to keep running: pass --loop M1.md, or run `loop service install --file \
             M1.md` first",
        ));
    }
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
        std::thread::sleep(sleep);
    }
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

/// The loops to keep: those given, then those the service names, each once, absolute.
fn loops(args: &DaemonArgs) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = Vec::new();
    // --file first: the loop a person named that way is the one the bot (`--telegram`) serves.
    let given = args.file.iter().chain(&args.loops).cloned();
    for p in given.chain(super::service::installed_loops()) {
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
