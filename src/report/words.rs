//! The report's facts in words, one function each, shared by the Markdown and the HTML: the
//! two say every fact the same way, so what one shows the other shows too.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{GateReport, Report, Span, SpanKind, StepReport};

/// What a step or a loop spent: `$0.42`, `2,100 tokens`, or `—` when nothing says.
#[must_use]
pub(super) fn cost(dollars: Option<f64>, tokens: Option<u64>) -> String {
    match (dollars, tokens) {
        (None, None) => "—".to_owned(),
        (d, t) => crate::text::spent(d.unwrap_or(0.0), t.unwrap_or(0)),
    }
}

/// `4.0s`, `12m03s`, or `—`.
#[must_use]
pub(super) fn duration(seconds: Option<f64>) -> String {
    seconds.map_or_else(
        || "—".to_owned(),
        |s| crate::duration::human(Duration::from_secs_f64(s.max(0.0))),
    )
}

/// `2026-11-27 02:53:53 UTC`.
#[must_use]
pub(super) fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `1 attempt`, `3 attempts`.
#[must_use]
pub(super) fn count(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The loop in one line: `DONE · 3 of 3 steps done · 5 attempts · 4 reviews · 1 retake ·
/// $0.09 · 4.0s`.
#[must_use]
pub(super) fn headline(r: &Report) -> String {
    let t = &r.totals;
    let mut parts = vec![
        r.status.as_str().to_owned(),
        format!("{} of {} steps done", t.done, t.steps),
    ];
    if t.skipped > 0 {
        parts.push(format!("{} skipped", t.skipped));
    }
    if t.failed > 0 {
        parts.push(format!("{} failed", t.failed));
    }
    parts.push(count(t.attempts, "attempt"));
    if t.reviews > 0 {
        parts.push(count(t.reviews, "review"));
    }
    if t.retakes > 0 {
        parts.push(count(t.retakes, "retake"));
    }
    if t.gates > 0 {
        parts.push(count(t.gates, "gate"));
    }
    parts.push(crate::text::spent(t.cost_usd, t.tokens));
    parts.push(duration(t.duration_s));
    parts.join(" · ")
}

/// What the loop's commits changed: `2 commits, 3 files changed, +12 −4`; `None` without one.
#[must_use]
pub(super) fn changes(r: &Report) -> Option<String> {
    let t = &r.totals;
    (t.commits > 0).then(|| {
        format!(
            "{}, {}, +{} −{}",
            count(t.commits, "commit"),
            count(t.files_changed, "file") + " changed",
            t.insertions,
            t.deletions
        )
    })
}

/// A gate and its decision: `G1 FAILED: skip by dj (shell) at 2026-11-27 02:53:55 UTC`, or
/// `G2 ASK: pending`.
#[must_use]
pub(super) fn gate(g: &GateReport) -> String {
    let mut s = format!("{} {}", g.id, g.kind);
    match &g.choice {
        Some(c) => {
            let _ = write!(s, ": {c}");
            if let Some(by) = &g.by {
                let _ = write!(s, " by {by}");
            }
            if let Some(at) = &g.at {
                let _ = write!(s, " at {}", time(at));
            }
        }
        None => s.push_str(": pending"),
    }
    s
}

/// How a gate was waited on: `waited 3m10s`, when known.
#[must_use]
pub(super) fn waited(g: &GateReport) -> Option<String> {
    let (from, to) = (g.opened_at?, g.at?);
    let ms = (to - from).num_milliseconds().max(0);
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of a wait")]
    let s = ms as f64 / 1000.0;
    Some(format!("waited {}", duration(Some(s))))
}

/// A step's commit: its hash, or `—`.
#[must_use]
pub(super) fn commit(s: &StepReport) -> String {
    s.commit.clone().unwrap_or_else(|| "—".to_owned())
}

/// A step's VERIFY: `passed`, `failed (exit 1)`, `none set`, or `—`.
#[must_use]
pub(super) fn verify(s: &StepReport) -> String {
    s.verify.clone().unwrap_or_else(|| "—".to_owned())
}

/// A step's status as the report says it (a step a person set DONE says so).
#[must_use]
pub(super) fn status(s: &StepReport) -> String {
    if s.by_hand {
        format!("{} (by hand)", s.status.as_str())
    } else {
        s.status.as_str().to_owned()
    }
}

/// A run in a few words: `A1 failed`, `R2 approved`, `VERIFY passed`, `merge merged`, `G1
/// decided`.
#[must_use]
pub(super) fn run(s: &Span) -> String {
    let name = match s.kind {
        SpanKind::Attempt => format!("A{}", s.n),
        SpanKind::Review => format!("R{}", s.n),
        SpanKind::Verify => "VERIFY".to_owned(),
        SpanKind::Merge => "merge".to_owned(),
        SpanKind::Gate => format!("G{}", s.n),
    };
    format!("{name} {}", s.outcome.word())
}

/// The runs of a step that say how it went (its VERIFY runs are in its attempts' words):
/// `A1 failed, A2 passed, R1 changes asked, A3 passed, R2 approved`.
#[must_use]
pub(super) fn runs(s: &StepReport) -> Vec<&Span> {
    s.spans
        .iter()
        .filter(|s| s.kind != SpanKind::Verify)
        .collect()
}

/// What the report's last time is: the loop's last activity, or for a loop still running, the
/// moment the report was made.
#[must_use]
pub(super) fn until(r: &Report) -> &'static str {
    if r.status == crate::m1::Status::Running {
        "as of"
    } else {
        "last activity"
    }
}
