//! The report as Markdown, for a pull request or a chat: the loop in one line, a table of its
//! steps, its gates, then each step's summary, review and diff stat.

use std::fmt::Write as _;

use super::{Report, StepReport, words};

/// The Markdown report.
#[must_use]
pub(super) fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Loop report: {}\n", cell(&r.goal));
    let _ = writeln!(out, "**{}**\n", words::headline(r));
    let mut about = Vec::new();
    if let Some(t) = &r.started_at {
        about.push(format!("started {}", words::time(t)));
    }
    if let Some(t) = &r.ended_at {
        about.push(format!("{} {}", words::until(r), words::time(t)));
    }
    if let Some(id) = &r.loop_id {
        about.push(format!("loop `{id}`"));
    }
    about.push(format!("M1.md `{}`", r.file));
    let _ = writeln!(out, "{}", about.join(" · "));
    if let Some(issue) = &r.issue {
        let _ = writeln!(out, "\nIssue: {}", cell(issue));
    }
    if let Some(pr) = &r.pull_request {
        let _ = writeln!(out, "\nPull request: {}", cell(pr));
    }
    if let Some(c) = words::changes(r) {
        let _ = writeln!(out, "\nChanges: {c}");
    }
    if let Some(next) = r.next_action.as_deref().filter(|_| r.totals.open > 0) {
        let _ = writeln!(out, "\nNext: {}", cell(next));
    }
    table(r, &mut out);
    let gates: Vec<String> = r
        .gates
        .iter()
        .chain(r.steps.iter().flat_map(|s| &s.gates))
        .map(|g| {
            let waited = words::waited(g).map_or_else(String::new, |w| format!(" ({w})"));
            format!("- {}{waited}", words::gate(g))
        })
        .collect();
    if !gates.is_empty() {
        let _ = writeln!(out, "\n### Gates\n\n{}", gates.join("\n"));
    }
    let _ = writeln!(out, "\n### Steps");
    for s in &r.steps {
        step(s, &mut out);
    }
    out
}

/// One row per step.
fn table(r: &Report, out: &mut String) {
    let _ = writeln!(
        out,
        "\n| # | Step | Status | Attempts | Reviews | Retakes | Cost | Time | VERIFY | Commit |\n\
         |--:|------|--------|--:|--:|--:|--:|--:|--------|--------|"
    );
    for s in &r.steps {
        let commit = s
            .commit
            .as_deref()
            .map_or_else(|| words::commit(s), |c| format!("`{c}`"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.step,
            cell(&s.text),
            words::status(s),
            s.attempts,
            s.reviews,
            s.retakes,
            words::cost(s.cost_usd, s.tokens),
            words::duration(s.duration_s),
            cell(&words::verify(s)),
            commit
        );
    }
}

/// A step's own lines: what it said, what its review said, what went wrong, what it changed.
fn step(s: &StepReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\n**{}. {}**: {}",
        s.step,
        cell(&s.text),
        words::status(s)
    );
    for (what, v) in [
        ("Summary", &s.summary),
        ("Review", &s.review),
        ("Error", &s.error),
    ] {
        if let Some(v) = v {
            let _ = writeln!(out, "- {what}: {}", cell(v));
        }
    }
    let runs: Vec<String> = words::runs(s).into_iter().map(words::run).collect();
    if !runs.is_empty() {
        let _ = writeln!(out, "- Runs: {}", runs.join(", "));
    }
    for g in &s.gates {
        let _ = writeln!(out, "- Gate {}", words::gate(g));
    }
    match (&s.commit, &s.diff) {
        (Some(c), Some(d)) => {
            let _ = writeln!(
                out,
                "- Commit `{c}`: {} changed, +{} −{}",
                words::count(d.files_changed, "file"),
                d.insertions,
                d.deletions
            );
            if !d.files.is_empty() {
                let _ = writeln!(out, "  ```\n  {}\n  ```", d.files.join("\n  "));
            }
        }
        (Some(c), None) => {
            let _ = writeln!(out, "- Commit `{c}`");
        }
        _ => {}
    }
}

/// Text for one line of a table: no line break, no `|` that would end the cell, and no `<`
/// that a pull request would take for HTML (an agent's words are text, never markup).
fn cell(text: &str) -> String {
    crate::text::one_line(text, 300)
        .replace('|', "\\|")
        .replace('<', "\\<")
}
