//! `loop report`: what a loop did, gathered once from its records and rendered three ways
//! (Markdown for a pull request or a chat, JSON for a script, one self-contained HTML page with
//! a timeline for a person). A read-only view, as `loop status` is: it reads M1.md, the loop's
//! part of `loop.log`, the ledger of the tasks it started with their exit and VERIFY records,
//! and `git show --stat` of each step's commit; it writes nothing of the loop's.
//!
//! It sits beside the runner, whose ledger it reads and which writes the page beside M1.md
//! when a loop ends ([`write_beside`]), so that the end-of-loop line and the DONE message can
//! say where it is.
//!
//! The page and its pictures are `maud` templates (`html.rs`, `svg.rs`): written in Rust and
//! checked when the crate compiles, with every value put into them escaped unless it is marked
//! as markup already, so no call site can forget to escape a goal or an agent's words, and no
//! template file ships beside the binary. (askama would check its templates as well, but from
//! files of their own, in a language of their own.)

mod diff;
mod gather;
mod html;
mod markdown;
mod runs;
mod scale;
mod spans;
mod svg;
mod words;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::m1::{GateKind, GateState, Status, StepState};

pub(crate) use gather::gather;

/// What a loop did: its facts, each step's, and the spans of its timeline.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub goal: String,
    pub status: Status,
    pub loop_id: Option<String>,
    /// The loop's M1.md.
    pub file: String,
    /// The project the agent worked in.
    pub workdir: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    /// The last thing the records show (now, for a loop still running).
    pub ended_at: Option<DateTime<Utc>>,
    /// Steps ran at once, each in a worktree of its own.
    pub parallel: bool,
    pub verify: Option<String>,
    pub last_action: Option<String>,
    pub next_action: Option<String>,
    pub totals: Totals,
    pub steps: Vec<StepReport>,
    /// The planning call's runs (step 0), when the agent wrote the plan.
    pub planning: Vec<Span>,
    /// The gates about no one step (the plan's).
    pub gates: Vec<GateReport>,
    /// The GitHub issue the loop was started from (its URL, or `#N`).
    pub issue: Option<String>,
    /// The pull request it opened.
    pub pull_request: Option<String>,
}

/// The loop's totals.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Totals {
    pub steps: u32,
    pub done: u32,
    pub skipped: u32,
    pub failed: u32,
    /// Steps not finished (pending or running).
    pub open: u32,
    pub attempts: u32,
    pub reviews: u32,
    pub retakes: u32,
    pub cost_usd: f64,
    pub tokens: u64,
    /// From the loop's start to the last thing it did.
    pub duration_s: Option<f64>,
    pub gates: u32,
    pub commits: u32,
    pub files_changed: u32,
    pub insertions: u32,
    pub deletions: u32,
}

/// One step of the plan.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepReport {
    pub step: u32,
    pub text: String,
    pub status: StepState,
    /// The attempts the agent's runs of the step were made for, those before a person's `loop
    /// retry` included, each once ([`crate::engine::figures::attempts`]).
    pub attempts: u32,
    /// The reviewer's runs.
    pub reviews: u32,
    /// The times a review sent the step back.
    pub retakes: u32,
    pub cost_usd: Option<f64>,
    pub tokens: Option<u64>,
    /// From the step's first run to the end of its last one (gate waits left out).
    pub duration_s: Option<f64>,
    /// The agent's own time, as RESULTS says (`DURATION_S`).
    pub agent_s: Option<f64>,
    pub commit: Option<String>,
    /// What the commit changed (`git show --stat`).
    pub diff: Option<diff::DiffStat>,
    /// How its last VERIFY ended: `passed`, `failed (exit 1)`, …; `none set` without one.
    pub verify: Option<String>,
    pub summary: Option<String>,
    pub review: Option<String>,
    pub error: Option<String>,
    /// A person set it DONE; the loop did not run it.
    pub by_hand: bool,
    pub gates: Vec<GateReport>,
    pub spans: Vec<Span>,
}

/// A gate: what was asked, what was chosen, by whom and when.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GateReport {
    pub id: String,
    pub kind: GateKind,
    pub step: u32,
    pub state: GateState,
    pub question: Option<String>,
    pub choice: Option<String>,
    pub by: Option<String>,
    pub at: Option<DateTime<Utc>>,
    /// When the loop opened it (its `gate: … opened` line).
    pub opened_at: Option<DateTime<Utc>>,
}

/// One bar of the timeline: an attempt, a review, a VERIFY, a merge or a gate wait.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Span {
    pub kind: SpanKind,
    /// The attempt's or review's number, the gate's (`G2`: 2); 0 for a VERIFY or a merge.
    pub n: u32,
    pub task: Option<String>,
    /// Its lane: `step 2`, or in a loop that ran its steps at once the worktree (`step-2`)
    /// and the `merge queue`.
    pub lane: String,
    pub started_at: DateTime<Utc>,
    /// `None`: still going.
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Outcome,
    /// What it said, in a few words.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SpanKind {
    Attempt,
    Review,
    Verify,
    Merge,
    Gate,
}

/// How a span ended, which colours its bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Passed,
    Failed,
    Approved,
    Changes,
    /// A stop ended it; not counted.
    Stopped,
    /// An API error or a usage limit cut it off; waited out, not counted.
    Waited,
    /// The agent asked a question.
    Blocked,
    /// A fresh session, or a session resumed; not counted.
    Restarted,
    /// The loop could not go on without a person (a denied tool, a halt).
    Halted,
    Running,
    /// Ended, and never judged (a runner that died, and none took it up yet).
    Unjudged,
    Merged,
    Decided,
    Pending,
}

/// Which colour an outcome is drawn in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    Good,
    Bad,
    Warn,
    Quiet,
    Live,
    Gate,
}

impl Outcome {
    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Approved => "approved",
            Outcome::Changes => "changes asked",
            Outcome::Stopped => "stopped",
            Outcome::Waited => "waited out",
            Outcome::Blocked => "asked a question",
            Outcome::Restarted => "new session",
            Outcome::Halted => "halted",
            Outcome::Running => "running",
            Outcome::Unjudged => "not judged",
            Outcome::Merged => "merged",
            Outcome::Decided => "decided",
            Outcome::Pending => "pending",
        }
    }

    #[must_use]
    pub(crate) fn tone(self) -> Tone {
        match self {
            Outcome::Passed | Outcome::Approved | Outcome::Merged => Tone::Good,
            Outcome::Failed | Outcome::Halted => Tone::Bad,
            Outcome::Changes | Outcome::Waited | Outcome::Blocked => Tone::Warn,
            Outcome::Stopped | Outcome::Restarted | Outcome::Unjudged => Tone::Quiet,
            Outcome::Running => Tone::Live,
            Outcome::Decided | Outcome::Pending => Tone::Gate,
        }
    }
}

/// A format `loop report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Markdown, for a pull request or a chat.
    Md,
    /// One JSON object: each step, and the loop's totals.
    Json,
    /// One self-contained page with the loop's timeline.
    Html,
}

/// The report in `format`.
#[must_use]
pub(crate) fn render(r: &Report, format: Format) -> String {
    let text = match format {
        Format::Md => markdown::render(r),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(r).expect("a report serializes");
            s.push('\n');
            s
        }
        Format::Html => html::render(r),
    };
    // What an agent wrote (a summary, a question, a verdict, a line of `loop.log`) holds no
    // control character nor bidirectional override in any of them: each is an escape, JSON's
    // own in JSON, which reads back as the same text.
    crate::text::shown(&text).into_owned()
}

/// Where the page of the loop whose state file is `m1` goes by default: beside it, named after
/// it (`M1.report.html`). Not a name the loop takes for its own: no `.md` (as its archives,
/// `M1.<time>.md`), and in the state directory that git and a review leave aside.
#[must_use]
pub(crate) fn default_path(m1: &Path) -> PathBuf {
    let stem = m1
        .file_stem()
        .map_or_else(|| "M1".into(), |s| s.to_string_lossy().into_owned());
    m1.with_file_name(format!("{stem}.report.html"))
}

/// Writes `text` to `path` whole or not at all (a browser open on it never sees half a page).
///
/// # Errors
/// When the file cannot be written.
pub(crate) fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let mut f = atomic_write_file::AtomicWriteFile::open(path)
        .with_context(|| format!("while creating {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.commit())
        .with_context(|| format!("while writing {}", path.display()))
}

/// The page of the loop whose state file is `m1`, written at [`default_path`]: its path.
///
/// # Errors
/// When the loop cannot be read or the page written.
pub(crate) fn write_beside(m1: &Path) -> anyhow::Result<PathBuf> {
    let report = gather(m1).map_err(crate::error::Error::into_anyhow)?;
    let path = default_path(m1);
    write(&path, &render(&report, Format::Html))?;
    Ok(std::path::absolute(&path).unwrap_or(path))
}

/// The Markdown report of the loop whose state file is `m1`, as it reads once the loop is
/// `status`: the body of its pull request, written just before DONE is, or of its comment on
/// its issue.
///
/// # Errors
/// When the loop cannot be read.
pub(crate) fn markdown_as(m1: &Path, status: crate::m1::Status) -> anyhow::Result<String> {
    let mut report = gather(m1).map_err(crate::error::Error::into_anyhow)?;
    report.status = status;
    Ok(render(&report, Format::Md))
}
