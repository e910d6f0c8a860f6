//! The schedules file (`schedules.md` in the per-user state directory), read and edited as
//! text: a person may write it by hand, so an edit changes only the lines it must and keeps
//! every other byte, and a file with a mistake is reported with line and column, never
//! rewritten.
//!
//! ```text
//! ## S1
//! EVERY: weekdays 02:00
//! GOAL: bump the dependencies and fix what breaks
//! FILE: /home/me/app/state/M1.md
//! FLAGS: --verify 'cargo test'
//! CATCH_UP: 12h
//! PAUSED: no
//! SINCE: 2026-11-29T03:00:00Z
//! ```
//!
//! An entry is a `## ID` heading and its `KEY: value` lines; `EVERY` (a cron expression or a
//! phrase) repeats, `AT` (an RFC 3339 time) is due once, as `loop start --at` queues it.
//! `PROJECT` (default: the directory that holds FILE's directory) is where the loop works,
//! `FLAGS` are `loop start`'s own, shell-quoted. No due time before `SINCE` is ever started.
//! Lines starting with `#` alone, and blank lines, are the person's own.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::cron::Cron;

/// The catch-up window of a schedule that names none.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_secs(12 * 3600);

/// When an entry is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Again and again (`EVERY:`): the text as written, and what it says.
    Every { text: String, cron: Cron },
    /// Once (`AT:`).
    At(DateTime<Utc>),
}

/// One schedule (or one queued start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    /// The line of its `## ID` heading, from 1.
    pub line: usize,
    pub when: When,
    pub goal: String,
    /// The loop's M1.md, absolute.
    pub file: PathBuf,
    /// Where the loop works.
    pub project: PathBuf,
    /// `loop start`'s flags, as words.
    pub flags: Vec<String>,
    pub catch_up: Duration,
    pub paused: bool,
    pub since: DateTime<Utc>,
}

/// A mistake in the file: line and column from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

const KEYS: &[&str] = &[
    "EVERY", "AT", "GOAL", "FILE", "PROJECT", "FLAGS", "CATCH_UP", "PAUSED", "SINCE",
];

/// Reads the file's entries; every mistake, if any.
///
/// # Errors
/// Each problem with its line and column.
pub fn parse(text: &str) -> Result<Vec<Entry>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut entries = Vec::new();
    let mut block: Option<Block> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if let Some(id) = raw.strip_prefix("## ") {
            if let Some(b) = block.take() {
                b.finish(&mut entries, &mut problems);
            }
            let id = id.trim();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                problems.push(Problem {
                    line,
                    col: 4,
                    message: format!("`{id}` is not a schedule's id (letters, digits, - and _)"),
                });
            } else if entries.iter().any(|e: &Entry| e.id == id) {
                problems.push(Problem {
                    line,
                    col: 4,
                    message: format!("a second schedule {id}; each id names one"),
                });
            }
            block = Some(Block::new(id, line));
            continue;
        }
        if trimmed.is_empty() || (trimmed.starts_with('#') && !trimmed.starts_with("##")) {
            continue;
        }
        let Some(b) = block.as_mut() else {
            problems.push(Problem {
                line,
                col: 1,
                message: "a line outside any schedule: start one with `## ID`, or make it a \
                          comment with `#`"
                    .into(),
            });
            continue;
        };
        let Some((key, value)) = raw.split_once(':') else {
            problems.push(Problem {
                line,
                col: 1,
                message: "expected `KEY: value`".into(),
            });
            continue;
        };
        let key = key.trim();
        if !KEYS.contains(&key) {
            problems.push(Problem {
                line,
                col: raw.len() - raw.trim_start().len() + 1,
                message: format!("unknown key `{key}` (known: {})", KEYS.join(", ")),
            });
            continue;
        }
        let col = key_col(raw) + key.len() + 1 + (value.len() - value.trim_start().len()) + 1;
        b.set(key, value.trim(), line, col, &mut problems);
    }
    if let Some(b) = block.take() {
        b.finish(&mut entries, &mut problems);
    }
    if problems.is_empty() {
        Ok(entries)
    } else {
        problems.sort_by_key(|p| (p.line, p.col));
        Err(problems)
    }
}

fn key_col(raw: &str) -> usize {
    raw.len() - raw.trim_start().len()
}

/// An entry being read.
struct Block {
    id: String,
    line: usize,
    when: Option<When>,
    goal: Option<String>,
    file: Option<PathBuf>,
    project: Option<PathBuf>,
    flags: Vec<String>,
    catch_up: Duration,
    paused: bool,
    since: Option<DateTime<Utc>>,
    seen: Vec<&'static str>,
}

impl Block {
    fn new(id: &str, line: usize) -> Self {
        Self {
            id: id.to_owned(),
            line,
            when: None,
            goal: None,
            file: None,
            project: None,
            flags: Vec::new(),
            catch_up: DEFAULT_CATCH_UP,
            paused: false,
            since: None,
            seen: Vec::new(),
        }
    }

    fn set(
        &mut self,
        key: &str,
        value: &str,
        line: usize,
        col: usize,
        problems: &mut Vec<Problem>,
    ) {
        let mut bad = |at: usize, message: String| {
            problems.push(Problem {
                line,
                col: col + at,
                message,
            });
        };
        let Some(known) = KEYS.iter().find(|k| **k == key) else {
            return;
        };
        if self.seen.contains(known) {
            bad(0, format!("{key} is given twice in schedule {}", self.id));
            return;
        }
        self.seen.push(known);
        match key {
            "EVERY" | "AT" if self.when.is_some() => {
                bad(
                    0,
                    format!("schedule {} has both EVERY and AT; keep one", self.id),
                );
            }
            "EVERY" => match Cron::parse(value) {
                Ok(cron) => {
                    self.when = Some(When::Every {
                        text: value.to_owned(),
                        cron,
                    });
                }
                Err(e) => bad(e.offset, e.message),
            },
            "AT" | "SINCE" => match DateTime::parse_from_rfc3339(value) {
                Ok(t) if key == "AT" => self.when = Some(When::At(t.with_timezone(&Utc))),
                Ok(t) => self.since = Some(t.with_timezone(&Utc)),
                Err(e) => bad(
                    0,
                    format!(
                        "{key}: `{value}` is not a time such as 2026-11-30T02:00:00+01:00 ({e})"
                    ),
                ),
            },
            "GOAL" if value.is_empty() => bad(0, "the goal is empty".into()),
            "GOAL" => self.goal = Some(value.to_owned()),
            "FILE" | "PROJECT" => {
                let p = PathBuf::from(value);
                if !p.is_absolute() {
                    bad(0, format!("{key}: `{value}` is not an absolute path"));
                } else if key == "FILE" {
                    self.file = Some(p);
                } else {
                    self.project = Some(p);
                }
            }
            "FLAGS" => match split_words(value) {
                Ok(words) => self.flags = words,
                Err((at, message)) => bad(at, message),
            },
            "CATCH_UP" => match crate::duration::parse(value) {
                Ok(d) => self.catch_up = d,
                Err(e) => bad(0, format!("CATCH_UP: {e}")),
            },
            "PAUSED" => match value {
                "yes" => self.paused = true,
                "no" => self.paused = false,
                _ => bad(0, format!("PAUSED is yes or no, not `{value}`")),
            },
            _ => {}
        }
    }

    fn finish(self, entries: &mut Vec<Entry>, problems: &mut Vec<Problem>) {
        let mut missing = |what: &str| {
            problems.push(Problem {
                line: self.line,
                col: 1,
                message: format!("schedule {} has no {what}", self.id),
            });
        };
        let (Some(when), Some(goal), Some(file), Some(since)) = (
            self.when.clone(),
            self.goal.clone(),
            self.file.clone(),
            self.since,
        ) else {
            // A key given but wrong is reported where it is, not missed as well.
            let seen = |k: &str| self.seen.contains(&k);
            if self.when.is_none() && !seen("EVERY") && !seen("AT") {
                missing("EVERY (or AT)");
            }
            if self.goal.is_none() && !seen("GOAL") {
                missing("GOAL");
            }
            if self.file.is_none() && !seen("FILE") {
                missing("FILE");
            }
            if self.since.is_none() && !seen("SINCE") {
                missing("SINCE");
            }
            return;
        };
        let project = self.project.unwrap_or_else(|| {
            file.parent()
                .and_then(std::path::Path::parent)
                .map_or_else(|| PathBuf::from("/"), PathBuf::from)
        });
        entries.push(Entry {
            id: self.id,
            line: self.line,
            when,
            goal,
            file,
            project,
            flags: self.flags,
            catch_up: self.catch_up,
            paused: self.paused,
            since,
        });
    }
}

/// The lines of entry `id`: from its heading to the line before the next heading (or the
/// end), less the blank lines that end it.
fn block_lines(lines: &[&str], id: &str) -> Option<(usize, usize)> {
    let start = lines
        .iter()
        .position(|l| l.strip_prefix("## ").is_some_and(|i| i.trim() == id))?;
    let mut end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    while end > start + 1 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    Some((start, end))
}

fn join(lines: &[String], had_final_newline: bool) -> String {
    let mut out = lines.join("\n");
    if had_final_newline && !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The text with `KEY: value` of entry `id` set: the line changed in place, or added at the
/// end of the entry. `None` when there is no such entry.
#[must_use]
pub fn set_key(text: &str, id: &str, key: &str, value: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let (start, end) = block_lines(&lines, id)?;
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let own = (start + 1..end).find(|&i| {
        lines[i]
            .split_once(':')
            .is_some_and(|(k, _)| k.trim() == key)
    });
    match own {
        Some(i) => {
            let (k, _) = lines[i].split_once(':')?;
            out[i] = format!("{k}: {value}");
        }
        None => out.insert(end, format!("{key}: {value}")),
    }
    Some(join(&out, text.ends_with('\n') || text.is_empty()))
}

/// The text without entry `id` (and the blank lines after it). `None` when there is none.
#[must_use]
pub fn remove(text: &str, id: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let (start, mut end) = block_lines(&lines, id)?;
    while end < lines.len() && lines[end].trim().is_empty() {
        end += 1;
    }
    let mut out: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < start || *i >= end)
        .map(|(_, l)| (*l).to_owned())
        .collect();
    // The last entry gone: no blank lines left at the end.
    while end == lines.len() && out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    Some(join(&out, text.ends_with('\n')))
}

/// The text with `entry` added at its end.
#[must_use]
pub fn append(text: &str, entry: &Entry) -> String {
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
    out.push_str(&render(entry));
    out
}

/// An entry as the file holds it.
#[must_use]
pub fn render(e: &Entry) -> String {
    let mut lines = vec![format!("## {}", e.id)];
    lines.push(match &e.when {
        When::Every { text, .. } => format!("EVERY: {text}"),
        When::At(t) => format!("AT: {}", stamp(*t)),
    });
    lines.push(format!("GOAL: {}", e.goal));
    lines.push(format!("FILE: {}", e.file.display()));
    lines.push(format!("PROJECT: {}", e.project.display()));
    if !e.flags.is_empty() {
        lines.push(format!("FLAGS: {}", quote_words(&e.flags)));
    }
    if e.catch_up != DEFAULT_CATCH_UP {
        lines.push(format!("CATCH_UP: {}", crate::duration::exact(e.catch_up)));
    }
    lines.push(format!("PAUSED: {}", if e.paused { "yes" } else { "no" }));
    lines.push(format!("SINCE: {}", stamp(e.since)));
    lines.join("\n") + "\n"
}

/// A time as the file writes it.
#[must_use]
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Shell words: spaces separate, 'single' and "double" quotes group, a backslash escapes.
///
/// # Errors
/// An unclosed quote: where it opened, and what is wrong.
pub fn split_words(text: &str) -> Result<Vec<String>, (usize, String)> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                let mut closed = false;
                while let Some((_, d)) = chars.next() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    if d == '\\' && c == '"' {
                        if let Some((_, e)) = chars.next() {
                            w.push(e);
                        }
                        continue;
                    }
                    w.push(d);
                }
                if !closed {
                    return Err((i, format!("the quote {c} opened here is not closed")));
                }
            }
            '\\' => {
                let w = word.get_or_insert_with(String::new);
                if let Some((_, e)) = chars.next() {
                    w.push(e);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = word {
        words.push(w);
    }
    Ok(words)
}

/// Words as a shell reads them back ([`split_words`]).
#[must_use]
pub fn quote_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:@%+".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
