//! `loop list [--json] [--all]`: this user's loops on this machine, from any directory
//! ([`super::loops`]): running, waiting and finished, each with its M1.md, STATUS, goal, step,
//! cost and last activity; `--all` adds the archives `loop start` made. Never writes.

use std::fmt::Write as _;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::loops::{self, Seen};
use crate::exit::Status;
use crate::m1::StepState;

/// One loop, as `--json` gives it.
#[derive(Debug, Serialize)]
struct Entry {
    file: String,
    archived: bool,
    /// STATUS, or `INVALID` when the file cannot be read (`error` says why).
    status: String,
    /// The pid of the runner that drives it.
    runner_pid: Option<u32>,
    goal: String,
    /// The current step (0: planning), of `steps`; `steps_done` of them DONE.
    step: u32,
    steps: u32,
    steps_done: u32,
    cost_usd: f64,
    tokens: u64,
    /// When it last did something (its file, its log, its running task's output).
    last_activity: Option<DateTime<Utc>>,
    last_action: Option<String>,
    next_action: Option<String>,
    loop_id: Option<String>,
    workdir: Option<String>,
    error: Option<String>,
}

fn entry(s: &Seen) -> Entry {
    let mut e = Entry {
        file: s.file.display().to_string(),
        archived: s.archived,
        status: "INVALID".into(),
        runner_pid: s.runner,
        goal: String::new(),
        step: 0,
        steps: 0,
        steps_done: 0,
        cost_usd: 0.0,
        tokens: 0,
        last_activity: s.active,
        last_action: None,
        next_action: None,
        loop_id: None,
        workdir: None,
        error: None,
    };
    match &s.m {
        Ok(m) => {
            let done = m
                .plan
                .steps
                .iter()
                .filter(|x| x.state == StepState::Done)
                .count();
            m.status.as_str().clone_into(&mut e.status);
            e.goal.clone_from(&m.goal);
            e.steps = u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX);
            e.steps_done = u32::try_from(done).unwrap_or(u32::MAX);
            e.step = if m.status == crate::m1::Status::Done {
                e.steps
            } else {
                m.plan.current_step
            };
            // With what the loops of its steps that run at once spent so far.
            let spent = crate::engine::figures::totals(m, &crate::runner::step_loops(m));
            e.cost_usd = spent.cost_usd;
            e.tokens = spent.tokens;
            e.last_action.clone_from(&m.last_action);
            e.next_action.clone_from(&m.next_action);
            e.loop_id.clone_from(&m.loop_id);
            e.workdir.clone_from(&m.workdir);
        }
        Err(why) => e.error = Some(why.clone()),
    }
    e
}

/// Running first, then waiting, idle, failed, done, invalid, archived; the latest first in each.
fn rank(e: &Entry) -> (u8, std::cmp::Reverse<Option<DateTime<Utc>>>) {
    let group = match (e.archived, e.status.as_str()) {
        (true, _) => 7,
        (false, "RUNNING") => 0,
        (false, "WAITING") => 1,
        (false, "IDLE") => 2,
        (false, "FAILED") => 3,
        (false, "DONE") => 4,
        _ => 5,
    };
    (group, std::cmp::Reverse(e.last_activity))
}

/// `loop list`. `here`: the loop of `--file`, listed too when it is there.
///
/// # Errors
/// When `--json` cannot be printed (never, in practice).
pub(crate) fn list(
    here: &Path,
    json: bool,
    all: bool,
    this_project: bool,
) -> crate::error::Result<Status> {
    let (files, _) = loops::gather(here);
    let files = if this_project {
        loops::within(files, &loops::project_of(here))
    } else {
        files
    };
    let mut entries: Vec<Entry> = Vec::new();
    let mut archives = 0;
    for f in &files {
        let Some(seen) = loops::see(f, false) else {
            continue;
        };
        entries.push(entry(&seen));
        let old = loops::archives_of(f);
        archives += old.len();
        if all {
            entries.extend(
                old.iter()
                    .filter_map(|a| loops::see(a, true))
                    .map(|s| entry(&s)),
            );
        }
    }
    entries.sort_by_key(rank);
    if json {
        let text = serde_json::to_string_pretty(&entries).map_err(anyhow::Error::from)?;
        crate::outln!("{text}");
        return Ok(Status::Ok);
    }
    if entries.is_empty() {
        crate::outln!(
            "no loop found: none has run as this user here (`loop start` begins one; `loop \
             demo` shows one)"
        );
        return Ok(Status::Ok);
    }
    crate::outln!("{}", table(&entries, Utc::now()));
    crate::outln!("{}", summary(&entries, archives, all));
    Ok(Status::Ok)
}

/// The human view: one line a loop, columns aligned.
fn table(entries: &[Entry], now: DateTime<Utc>) -> String {
    let rows: Vec<[String; 7]> = entries
        .iter()
        .map(|e| {
            [
                e.status.clone(),
                if e.archived {
                    "archived".into()
                } else {
                    e.runner_pid
                        .map_or_else(|| "-".into(), |p| format!("pid {p}"))
                },
                if e.steps == 0 {
                    "-".into()
                } else {
                    format!("{}/{}", e.step, e.steps)
                },
                crate::text::spent(e.cost_usd, e.tokens),
                e.last_activity.map_or_else(|| "-".into(), |t| ago(now, t)),
                crate::text::one_line(e.error.as_deref().unwrap_or(&e.goal), 40),
                loops::shown(Path::new(&e.file)),
            ]
        })
        .collect();
    let head = [
        "STATUS", "RUNNER", "STEP", "COST", "ACTIVE", "GOAL", "M1.md",
    ]
    .map(String::from);
    let mut widths = head.clone().map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    std::iter::once(&head)
        .chain(&rows)
        .map(|r| {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(widths).enumerate() {
                if i + 1 == r.len() {
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.push_str(&" ".repeat(w - c.chars().count() + 2));
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `3 loops: 1 running, 2 finished; 4 archived (…)`.
fn summary(entries: &[Entry], archives: usize, all: bool) -> String {
    let current: Vec<&Entry> = entries.iter().filter(|e| !e.archived).collect();
    let count = |s: &[&str]| {
        current
            .iter()
            .filter(|e| s.contains(&e.status.as_str()))
            .count()
    };
    let mut parts = Vec::new();
    for (n, word) in [
        (count(&["RUNNING"]), "running"),
        (count(&["WAITING", "IDLE"]), "waiting"),
        (count(&["DONE", "FAILED"]), "finished"),
        (count(&["INVALID"]), "unreadable"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    let mut line = format!(
        "{} loop{}: {}",
        current.len(),
        if current.len() == 1 { "" } else { "s" },
        parts.join(", ")
    );
    if archives > 0 {
        let _ = write!(
            line,
            "; {archives} archived M1.md file{} ({}`loop clean` keeps the newest {} of each loop)",
            if archives == 1 { "" } else { "s" },
            if all {
                ""
            } else {
                "`loop list --all` lists them; "
            },
            super::clean::KEEP
        );
    }
    line
}

/// How long ago `t` was: `12s ago`, `5m ago`, `3h ago`, `2d ago`.
fn ago(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86_400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_is_said_in_the_largest_whole_unit() {
        let now = Utc::now();
        let before = |s: i64| now - chrono::Duration::seconds(s);
        assert_eq!(ago(now, before(12)), "12s ago");
        assert_eq!(ago(now, before(300)), "5m ago");
        assert_eq!(ago(now, before(3 * 3600 + 5)), "3h ago");
        assert_eq!(ago(now, before(2 * 86_400)), "2d ago");
        assert_eq!(ago(now, now + chrono::Duration::seconds(3)), "0s ago");
    }
}
