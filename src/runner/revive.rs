//! A loop comes back by itself when its runner died: the supervisor of a step that ends with
//! nobody driving the loop starts `loop __revive`, and so does `loop daemon` for a loop it
//! finds RUNNING with no runner (after a reboot, or a runner that died between steps). Either
//! way the loop goes on through the one runner lock and the task ledger, so nothing runs
//! twice, and a runner that keeps dying is not revived forever: past [`MAX_REVIVALS`] within
//! [`REVIVAL_WINDOW`], the loop goes WAITING and the human is told.

use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::{RunOptions, Runner, lock, stopfile};
use crate::exit::Status as ExitStatus;
use crate::layout::Layout;

pub(crate) use crate::engine::revival::Revival;

/// `LOOP_REVIVE=off` (or `0`, `false`, `no`) in a runner's environment: the steps it starts do
/// not revive it should it die (`loop daemon` still revives the loops it keeps).
pub(crate) const ENV: &str = "LOOP_REVIVE";

/// Whether the steps this runner starts revive it if it dies (see [`ENV`]).
#[must_use]
pub(crate) fn by_steps() -> bool {
    !std::env::var(ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// Whether the loop at `file` needs a runner (see [`crate::engine::revival::look`]), from its
/// lock, the stop files and the file.
#[must_use]
pub(crate) fn look(file: &Path, now: DateTime<Utc>) -> Revival {
    let driven = crate::lockfile::is_held(&lock::path_for(file)).unwrap_or(true);
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    let stopped = stopfile::present(&state_dir).is_some();
    let m = (!driven && !stopped)
        .then(|| crate::m1::load(file).ok().map(|d| d.view()))
        .flatten();
    crate::engine::revival::look(driven, stopped, m.as_ref(), now)
}

/// Revives the loop at `file` if it needs it (see [`look`]): starts `loop resume` in the
/// background, saying it was revived `by` whom, or halts the loop WAITING when its runner died
/// [`MAX_REVIVALS`] times within [`REVIVAL_WINDOW`].
///
/// # Errors
/// When the background runner cannot be started, or the halt cannot be written.
pub(crate) fn revive(file: &Path, by: &str) -> crate::error::Result<Revival> {
    let now = Utc::now();
    let found = look(file, now);
    if found != Revival::Started {
        return Ok(found);
    }
    let all = revivals(file);
    let recent = crate::engine::revival::recent(&all, now);
    let state_dir = Layout::of(file).state_dir().display().to_string();
    if let Some((reason, how)) = crate::engine::revival::too_many(&recent, by, &state_dir) {
        return halt_storm(file, &reason, &how);
    }
    super::detach::detach(file, Some(by))?;
    Ok(Revival::Started)
}

/// A DONE loop at `file` whose runner died right after writing DONE has its end finished (its
/// report page, its steps' commit notes cleaned up: see [`Runner::finish_end`]); nothing for
/// any other loop, or one a runner drives.
pub(crate) fn finish_ended(file: &Path) {
    let Ok(doc) = crate::m1::load(file) else {
        return;
    };
    let m = doc.view();
    if m.status != crate::m1::Status::Done
        || crate::lockfile::is_held(&lock::path_for(file)).unwrap_or(true)
    {
        return;
    }
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    // Looked at cheaply first: a daemon looks at every loop it keeps, every round.
    let page = m.parent_id.is_some() || crate::report::default_path(file).exists();
    let notes = m
        .loop_id
        .as_deref()
        .is_some_and(|id| Layout::dir(&state_dir).commits(id).exists());
    if page && !notes {
        return;
    }
    let Ok(settings) =
        super::settings::Settings::load(&state_dir, super::settings::Overrides::default())
    else {
        return;
    };
    if let Ok(mut runner) = Runner::open(file, settings, &RunOptions::default()) {
        runner.finish_end();
    }
}

/// The loop's runner died too often: write WAITING with the reason and tell the human, as
/// the runner (holding its lock), so that nothing else ever writes M1.md.
fn halt_storm(file: &Path, reason: &str, how: &str) -> crate::error::Result<Revival> {
    let state_dir = Layout::of(file).state_dir().to_path_buf();
    let settings =
        super::settings::Settings::load(&state_dir, super::settings::Overrides::default())?;
    let Ok(mut runner) = Runner::open(file, settings, &RunOptions::default()) else {
        // Someone took the lock meanwhile: it is driven.
        return Ok(Revival::Driven);
    };
    runner.halt(reason, how)?;
    Ok(Revival::Halted(reason.to_owned()))
}

/// Every revival on record: when, and by whom.
fn revivals(file: &Path) -> Vec<(DateTime<Utc>, String)> {
    let text = std::fs::read_to_string(Layout::of(file).revivals()).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (at, by) = l.split_once(' ')?;
            let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
            Some((at, by.to_owned()))
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
pub(crate) fn command(file: &Path, by: &str) -> crate::error::Result<ExitStatus> {
    // The revived runner logs its start, and a halt is logged as any: nothing more to say.
    revive(file, by)?;
    Ok(ExitStatus::Ok)
}
