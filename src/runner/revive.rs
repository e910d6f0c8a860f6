//! A loop comes back by itself when its runner died: the supervisor of a step that ends with
//! nobody driving the loop starts `loop __revive`, and so does `loop daemon` for a loop it
//! finds RUNNING with no runner (after a reboot, or a runner that died between steps). Either
//! way the loop goes on through the one runner lock and the task ledger, so nothing runs
//! twice, and a runner that keeps dying is not revived forever: past [`MAX_REVIVALS`] within
//! [`REVIVAL_WINDOW`], the loop goes WAITING and the human is told.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{RunOptions, Runner, lock, stopfile};
use crate::exit::Status as ExitStatus;
use crate::layout::Layout;
use crate::m1::{M1, Status};

/// Revivals of one loop within [`REVIVAL_WINDOW`] after which it is not revived again.
pub const MAX_REVIVALS: usize = 3;

/// The window in which [`MAX_REVIVALS`] revivals mean the runner keeps dying.
pub const REVIVAL_WINDOW: Duration = Duration::from_secs(10 * 60);

/// `LOOP_REVIVE=off` (or `0`, `false`, `no`) in a runner's environment: the steps it starts do
/// not revive it should it die (`loop daemon` still revives the loops it keeps).
pub const ENV: &str = "LOOP_REVIVE";

/// Whether the steps this runner starts revive it if it dies (see [`ENV`]).
#[must_use]
pub fn by_steps() -> bool {
    !std::env::var(ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// What a look at a loop that may need reviving found, and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revival {
    /// A runner holds the loop's lock: nothing to do.
    Driven,
    /// The loop is not RUNNING (or M1.md is missing or invalid): nothing to do.
    Idle,
    /// A stop file is present: a revival would only be refused.
    Stopped,
    /// The loop waits out a backoff or usage limit until then; revive it at that time.
    WaitsUntil(DateTime<Utc>),
    /// A runner was started in the background for it.
    Started,
    /// The runner died too often: the loop was put in WAITING instead.
    Halted(String),
}

/// Whether the loop at `file` needs a runner, from the file, its lock and the stop files.
#[must_use]
pub fn look(file: &Path, now: DateTime<Utc>) -> Revival {
    if crate::lockfile::is_held(&lock::path_for(file)).unwrap_or(true) {
        return Revival::Driven;
    }
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    if stopfile::present(&state_dir).is_some() {
        return Revival::Stopped;
    }
    let Some(m) = read(file) else {
        return Revival::Idle;
    };
    if m.status != Status::Running {
        return Revival::Idle;
    }
    match crate::engine::wait_until(&m) {
        Some(until) if m.current.task_id.is_none() && until > now => Revival::WaitsUntil(until),
        _ => Revival::Started,
    }
}

fn read(file: &Path) -> Option<M1> {
    crate::m1::load(file).ok().map(|d| d.view())
}

/// Revives the loop at `file` if it needs it (see [`look`]): starts `loop resume` in the
/// background, saying it was revived `by` whom, or halts the loop WAITING when its runner died
/// [`MAX_REVIVALS`] times within [`REVIVAL_WINDOW`].
///
/// # Errors
/// When the background runner cannot be started, or the halt cannot be written.
pub fn revive(file: &Path, by: &str) -> crate::error::Result<Revival> {
    let now = Utc::now();
    let found = look(file, now);
    if found != Revival::Started {
        return Ok(found);
    }
    let recent = recent_revivals(file, now);
    if recent.len() >= MAX_REVIVALS {
        return halt_storm(file, by, &recent);
    }
    super::start::detach(file, Some(by))?;
    Ok(Revival::Started)
}

/// The loop's runner died too often: write WAITING with the reason and tell the human, as
/// the runner (holding its lock), so that nothing else ever writes M1.md.
fn halt_storm(file: &Path, by: &str, recent: &[String]) -> crate::error::Result<Revival> {
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    let settings =
        super::settings::Settings::load(&state_dir, super::settings::Overrides::default())?;
    let Ok(mut runner) = Runner::open(file, settings, &RunOptions::default()) else {
        // Someone took the lock meanwhile: it is driven.
        return Ok(Revival::Driven);
    };
    let minutes = REVIVAL_WINDOW.as_secs() / 60;
    let reason = format!(
        "the runner died {} times within {minutes} minutes after it was revived (last by {}); \
         not reviving it again",
        recent.len(),
        recent.last().map_or(by, String::as_str)
    );
    let how = format!(
        "see loop.log and runner.out in {} for why the runner dies, then `loop resume`",
        state_dir.display()
    );
    runner.halt(&reason, &how)?;
    Ok(Revival::Halted(reason))
}

/// Who revived the loop, for each revival within [`REVIVAL_WINDOW`] before `now`.
fn recent_revivals(file: &Path, now: DateTime<Utc>) -> Vec<String> {
    let text = std::fs::read_to_string(Layout::of(file).revivals()).unwrap_or_default();
    let window = chrono::Duration::from_std(REVIVAL_WINDOW).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (at, by) = l.split_once(' ')?;
            let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
            (now - at <= window).then(|| by.to_owned())
        })
        .collect()
}

/// Records that a revived runner took the loop over (by `by`).
pub(super) fn record(file: &Path, by: &str) {
    let line = format!(
        "{} {}\n",
        Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        crate::text::one_line(by, 200)
    );
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Layout::of(file).revivals())
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// A person (or the chat) resumed the loop: the runner's deaths before count no more.
pub(super) fn forget(file: &Path) {
    let _ = std::fs::remove_file(Layout::of(file).revivals());
}

/// `loop __revive`: what the supervisor of a step that ended starts.
///
/// # Errors
/// As [`revive`].
pub fn command(file: &Path, by: &str) -> crate::error::Result<ExitStatus> {
    // The revived runner logs its start, and a halt is logged as any: nothing more to say.
    revive(file, by)?;
    Ok(ExitStatus::Ok)
}
