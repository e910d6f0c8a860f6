//! `loop schedule add | list | pause | resume | rm`, and `loop start --at`: the schedules
//! file's commands. `loop daemon` starts what they queue ([`crate::schedule::daemon`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Local, Utc};
use clap::Subcommand;

use crate::error::{Error, Result};
use crate::exit::Status;
use crate::schedule::daemon::local;
use crate::schedule::file::{self, DEFAULT_CATCH_UP, Entry, When};
use crate::schedule::{due, ledger};

#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleAction {
    /// Start a loop for GOAL in this project at each due time (`loop daemon` starts it), with
    /// `loop start`'s flags after --every: `loop schedule add "bump the dependencies" --every
    /// "weekdays 02:00" --verify "cargo test"`.
    #[command(
        override_usage = "loop schedule add <GOAL> --every <WHEN> [--catch-up DUR] [START FLAGS]..."
    )]
    Add {
        /// What each loop should achieve, in one line.
        goal: String,
        /// When, in local time: a cron expression (`0 2 * * 1-5`) or a phrase (`weekdays
        /// 02:00`, `daily 06:30`, `mondays,fridays 09:00`, `hourly`).
        #[arg(long, value_name = "WHEN")]
        every: String,
        /// A due time missed while the machine was off is started at the next boot if it is
        /// less than this old, else skipped and said (default 12h).
        #[arg(long, value_parser = parse_duration, value_name = "DUR")]
        catch_up: Option<Duration>,
        /// `loop start`'s own flags for each loop.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "START FLAGS"
        )]
        flags: Vec<String>,
    },
    /// List the schedules and queued starts: when each is next due, and what became of the
    /// last one.
    List {
        /// One JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Pause a schedule: no due time starts until `loop schedule resume`.
    Pause {
        /// The schedule, e.g. S1.
        id: String,
    },
    /// Resume a paused schedule from now on (the due times while it was paused are not
    /// caught up).
    Resume {
        /// The schedule, e.g. S1.
        id: String,
    },
    /// Remove a schedule, or cancel a queued start (`loop start --at`).
    Rm {
        /// The schedule, e.g. S1.
        id: String,
    },
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    crate::duration::parse(s)
}

/// `loop schedule …`.
///
/// # Errors
/// A malformed schedules file (`file:line:col`), an unknown id, bad flags, or I/O.
pub(crate) fn run(file: &Path, found_above: bool, action: ScheduleAction) -> Result<Status> {
    match action {
        ScheduleAction::Add {
            goal,
            every,
            catch_up,
            flags,
        } => {
            let when = match crate::schedule::cron::Cron::parse(&every) {
                Ok(cron) => When::Every { text: every, cron },
                Err(e) => return Err(Error::bad_input(format!("--every: {e}"))),
            };
            let entry = add(file, found_above, when, goal, flags, catch_up)?;
            let next = next_due(&entry, &[]);
            crate::outln!(
                "added schedule {}: {} in {}, next at {}",
                entry.id,
                entry.goal,
                entry.project.display(),
                next.map_or_else(|| "never".to_owned(), local)
            );
            say_if_no_daemon();
            Ok(Status::Ok)
        }
        ScheduleAction::List { json } => list(json),
        ScheduleAction::Pause { id } => set_paused(&id, true),
        ScheduleAction::Resume { id } => set_paused(&id, false),
        ScheduleAction::Rm { id } => {
            crate::schedule::edit(|l| {
                let text = file::remove(&l.text, &id).ok_or_else(|| unknown(&id, l))?;
                Ok((text, ()))
            })?;
            crate::outln!("removed {id}");
            Ok(Status::Ok)
        }
    }
}

fn unknown(id: &str, l: &crate::schedule::Loaded) -> Error {
    Error::bad_input(format!(
        "no schedule {id} in {} (`loop schedule list` shows them)",
        l.path.display()
    ))
}

/// Checks `loop start`'s flags as `loop start` would read them.
fn check_flags(goal: &str, flags: &[String]) -> Result<()> {
    for f in flags {
        let name = f.split('=').next().unwrap_or_default();
        if ["--at", "--detach", "--file", "--every", "--catch-up"].contains(&name) {
            return Err(Error::bad_input(format!(
                "{name} is not one of the flags each scheduled loop starts with (the schedule \
                 runs it detached, in the loop of this directory or of the --file before \
                 `schedule`, at its times; --every and --catch-up go before the start flags)"
            )));
        }
    }
    let args = ["loop", "start", goal]
        .into_iter()
        .map(str::to_owned)
        .chain(flags.iter().cloned());
    super::parse_from(args).map_err(|e| {
        Error::bad_input(format!(
            "the flags are not `loop start`'s: {}",
            e.to_string().lines().next().unwrap_or_default()
        ))
    })?;
    Ok(())
}

/// Adds an entry to the schedules file.
fn add(
    file: &Path,
    found_above: bool,
    when: When,
    goal: String,
    flags: Vec<String>,
    catch_up: Option<Duration>,
) -> Result<Entry> {
    check_flags(&goal, &flags)?;
    let abs = std::path::absolute(file)?;
    let project = if found_above {
        abs.parent()
            .and_then(Path::parent)
            .map_or_else(|| PathBuf::from("/"), PathBuf::from)
    } else {
        std::env::current_dir()?
    };
    let records = crate::schedule::ledger_path()
        .map(|p| ledger::read(&p))
        .unwrap_or_default();
    crate::schedule::edit(|l| {
        let used = l
            .entries
            .iter()
            .map(|e| e.id.as_str())
            .chain(records.iter().map(|r| r.id.as_str()));
        let n = used
            .filter_map(|id| id.strip_prefix('S')?.parse::<u32>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        let entry = Entry {
            id: format!("S{n}"),
            line: 0,
            when,
            goal,
            file: abs,
            project,
            flags,
            catch_up: catch_up.unwrap_or(DEFAULT_CATCH_UP),
            paused: false,
            since: Utc::now(),
        };
        let text = if l.text.is_empty() {
            format!("{HEADER}\n{}", file::render(&entry))
        } else {
            file::append(&l.text, &entry)
        };
        Ok((text, entry))
    })
}

/// What a new schedules file starts with.
const HEADER: &str = "# The schedules of `loop daemon` (`loop schedule --help`). Edit by hand if \
                      you like;\n# `loop schedule list` checks the file.\n";

fn set_paused(id: &str, paused: bool) -> Result<Status> {
    crate::schedule::edit(|l| {
        let mut text = file::set_key(&l.text, id, "PAUSED", if paused { "yes" } else { "no" })
            .ok_or_else(|| unknown(id, l))?;
        if !paused {
            // What was due while it was paused is not caught up.
            let now = file::stamp(Utc::now());
            text = file::set_key(&text, id, "SINCE", &now).unwrap_or(text);
        }
        Ok((text, ()))
    })?;
    crate::outln!("{} {id}", if paused { "paused" } else { "resumed" });
    Ok(Status::Ok)
}

/// The next due time of `entry`, as the daemon will see it.
fn next_due(entry: &Entry, records: &[ledger::Record]) -> Option<DateTime<Utc>> {
    let h = ledger::history(records, &entry.id);
    match due::next(entry, &h, Utc::now(), &Local) {
        due::Next::Wait(t) | due::Next::Start { due: t, .. } | due::Next::Unresolved(t) => Some(t),
        due::Next::Never | due::Next::Missed { .. } => None,
    }
}

/// The last outcome of `id`, said in a few words.
fn last(records: &[ledger::Record], id: &str) -> String {
    let h = ledger::history(records, id);
    h.closed.last().map_or_else(String::new, |(due, what)| {
        let w = match what {
            ledger::What::Started { loop_id, .. } => format!("started {loop_id}"),
            ledger::What::Skipped { .. } => "skipped".to_owned(),
            ledger::What::Failed { .. } => "failed".to_owned(),
            ledger::What::Intent { .. } => String::new(),
        };
        format!("{w} ({})", local(*due))
    })
}

fn list(json: bool) -> Result<Status> {
    let loaded = crate::schedule::load()?;
    let records = ledger::read(&crate::schedule::ledger_path()?);
    if json {
        let rows: Vec<serde_json::Value> = loaded
            .entries
            .iter()
            .map(|e| {
                let (every, at) = match &e.when {
                    When::Every { text, .. } => (Some(text.clone()), None),
                    When::At(t) => (None, Some(file::stamp(*t))),
                };
                serde_json::json!({
                    "id": e.id,
                    "every": every,
                    "at": at,
                    "goal": e.goal,
                    "file": e.file,
                    "project": e.project,
                    "flags": e.flags,
                    "paused": e.paused,
                    "next": next_due(e, &records).map(file::stamp),
                    "last": last(&records, &e.id),
                })
            })
            .collect();
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return Ok(Status::Ok);
    }
    if loaded.entries.is_empty() {
        crate::outln!(
            "no schedules ({}); add one with `loop schedule add GOAL --every \"weekdays 02:00\"`",
            loaded.path.display()
        );
        return Ok(Status::Ok);
    }
    for e in &loaded.entries {
        let when = match &e.when {
            When::Every { text, .. } => format!("every {text}"),
            When::At(_) => "once".to_owned(),
        };
        let next = if e.paused {
            "paused".to_owned()
        } else {
            next_due(e, &records).map_or_else(|| "-".to_owned(), |t| format!("next {}", local(t)))
        };
        crate::outln!(
            "{}  {next}  {when}  {}  {}",
            e.id,
            e.project.display(),
            e.goal
        );
        let last = last(&records, &e.id);
        if !last.is_empty() {
            crate::outln!("    last: {last}");
        }
    }
    say_if_no_daemon();
    Ok(Status::Ok)
}

/// Whether a `loop daemon` runs for this user (it holds its lock).
pub(crate) fn daemon_running() -> bool {
    crate::dirs::user_state_dir()
        .ok()
        .is_some_and(|d| crate::lockfile::is_held(&d.join("daemon.lock")).unwrap_or(false))
}

fn say_if_no_daemon() {
    if !daemon_running() {
        crate::outln!(
            "loop: no `loop daemon` runs, and only it starts a loop at its time: run `loop \
             service install` (a service that starts with the machine) or `loop daemon`"
        );
    }
}

/// `loop start --at TIME …`: queues the start for the daemon; `argv`: the whole command line,
/// whose `start` flags (less --at, --detach and --quiet) each start gets.
///
/// # Errors
/// A time that is not one, a malformed schedules file, or I/O.
pub(crate) fn queue_at(
    file: &Path,
    found_above: bool,
    at: &str,
    goal: &str,
    argv: &[String],
) -> Result<Status> {
    let when = crate::schedule::at::parse(at, Utc::now(), &Local).map_err(Error::bad_input)?;
    let flags = start_flags(argv, goal);
    let entry = add(
        file,
        found_above,
        When::At(when),
        goal.to_owned(),
        flags,
        None,
    )?;
    crate::outln!(
        "queued {}: the loop starts at {} in {} (`loop list` shows it; `loop stop` or `loop \
         schedule rm {}` cancels it)",
        entry.id,
        local(when),
        entry.project.display(),
        entry.id
    );
    say_if_no_daemon();
    Ok(Status::Ok)
}

/// The words after `start` on the command line, less the goal and the flags that are about
/// this one command rather than the loop (`--file`: the entry names the loop's file itself).
fn start_flags(argv: &[String], goal: &str) -> Vec<String> {
    let after = argv
        .iter()
        .position(|a| a == "start")
        .map_or(&[][..], |i| &argv[i + 1..]);
    let mut out = Vec::new();
    let mut goal_seen = false;
    let mut it = after.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--at" | "--file" => {
                it.next();
            }
            "--detach" | "--quiet" | "-q" => {}
            s if s.starts_with("--at=") || s.starts_with("--file=") => {}
            s if s == goal
                && !goal_seen
                && !out.last().is_some_and(|p: &String| takes_value(p)) =>
            {
                goal_seen = true;
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

/// Whether `flag` of `loop start` takes a value in the next word.
fn takes_value(flag: &str) -> bool {
    flag.starts_with("--")
        && !flag.contains('=')
        && ![
            "--review",
            "--force",
            "--plan-only",
            "--approve-plan",
            "--no-commit",
        ]
        .contains(&flag)
}

/// Every start still queued (`--at`, not yet begun), with its time; none when the schedules
/// cannot be read.
fn queued_starts() -> Vec<(Entry, DateTime<Utc>)> {
    let Ok(loaded) = crate::schedule::load() else {
        return Vec::new();
    };
    let records = crate::schedule::ledger_path()
        .map(|p| ledger::read(&p))
        .unwrap_or_default();
    loaded
        .entries
        .into_iter()
        .filter_map(|e| match e.when {
            When::At(t) if next_due(&e, &records).is_some() => Some((e, t)),
            _ => None,
        })
        .collect()
}

/// The starts queued for the loop of `file`, with their time.
#[must_use]
pub(crate) fn queued_for(file: &Path) -> Vec<(String, DateTime<Utc>)> {
    let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    queued_starts()
        .into_iter()
        .filter(|(e, _)| e.file == abs)
        .map(|(e, t)| (e.id, t))
        .collect()
}

/// Every queued start, for `loop list`: its M1.md, goal and time.
#[must_use]
pub(crate) fn queued() -> Vec<(PathBuf, String, DateTime<Utc>)> {
    queued_starts()
        .into_iter()
        .map(|(e, t)| (e.file, e.goal, t))
        .collect()
}

/// Says the starts queued for the loop of `file` (every loop's: `None`), for `loop status`
/// and `loop list`; whether there were any.
pub(crate) fn say_queued(file: Option<&Path>) -> bool {
    let all: Vec<(PathBuf, String, DateTime<Utc>)> = queued()
        .into_iter()
        .filter(|(f, ..)| file.is_none_or(|file| std::path::absolute(file).is_ok_and(|a| a == *f)))
        .collect();
    for (f, goal, t) in &all {
        crate::outln!("QUEUED  starts at {}  {}  {goal}", local(*t), f.display());
    }
    !all.is_empty()
}

/// `loop stop` of a loop that is only queued: cancels its queued starts; their ids.
///
/// # Errors
/// A malformed schedules file, or I/O.
pub(crate) fn cancel_queued(file: &Path) -> Result<Vec<String>> {
    let ids: Vec<String> = queued_for(file).into_iter().map(|(id, _)| id).collect();
    if ids.is_empty() {
        return Ok(ids);
    }
    crate::schedule::edit(|l| {
        let mut text = l.text.clone();
        for id in &ids {
            text = file::remove(&text, id).unwrap_or(text);
        }
        Ok((text, ()))
    })?;
    for id in &ids {
        crate::outln!("cancelled the queued start {id}");
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::start_flags;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn a_queued_start_keeps_the_loops_flags_and_drops_the_commands_own() {
        let argv =
            words("loop start --step g g --at 02:00 --verify true --detach -q --file x/M1.md");
        assert_eq!(start_flags(&argv, "g"), words("--step g --verify true"));
        let argv = words("loop --file y start g --at=02:00 --review --step a");
        assert_eq!(start_flags(&argv, "g"), words("--review --step a"));
    }
}
