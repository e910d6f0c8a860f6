//! The report as one self-contained HTML page: its style inline, its pictures inline SVG, no
//! script, no font, image or link from anywhere else, so it opens the same from a disk, a mail
//! or an artifact store, offline.
//!
//! Written with `maud`: the page is a template in Rust, checked when the crate compiles, and
//! every value put into it is escaped unless it says it is markup already (`PreEscaped`: the
//! style sheet, and the pictures, which `maud` made too). No template file ships beside the
//! binary.

use maud::{Markup, PreEscaped, html};

use super::{Report, StepReport, svg, words};

/// The page's style.
const STYLE: &str = include_str!("report.css");

/// The HTML page.
#[must_use]
pub(super) fn render(r: &Report) -> String {
    let gates: Vec<Markup> = r
        .gates
        .iter()
        .chain(r.steps.iter().flat_map(|s| &s.gates))
        .map(|g| {
            html! {
                li {
                    (words::gate(g))
                    @if let Some(w) = words::waited(g) {
                        " " span.muted { "(" (w) ")" }
                    }
                }
            }
        })
        .collect();
    let page = html! {
        // As the page has always begun, in the lower case HTML's own specification writes.
        (PreEscaped("<!doctype html>\n"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Loop report: " (r.goal) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                main {
                    (header(r))
                    (timeline(r))
                    @if let Some(costs) = svg::costs(r) {
                        section { h2 { "Cost per step" } (costs) }
                    }
                    (table(r))
                    @if !gates.is_empty() {
                        section { h2 { "Gates" } ul.gates { @for g in &gates { (g) } } }
                    }
                    section {
                        h2 { "What each step did" }
                        @for s in &r.steps { (card(s)) }
                    }
                    footer {
                        "Written by " code { "loop report" } " at "
                        (words::time(&chrono::Utc::now()))
                        " from M1.md, loop.log, the loop's task ledger and its task records."
                    }
                }
            }
        }
    };
    page.into_string() + "\n"
}

/// The goal, the loop in one line, and where it is.
fn header(r: &Report) -> Markup {
    let status = r.status.as_str();
    let mut facts: Vec<(&str, String)> = Vec::new();
    if let Some(t) = &r.started_at {
        facts.push(("started", words::time(t)));
    }
    if let Some(t) = &r.ended_at {
        facts.push((words::until(r), words::time(t)));
    }
    if let Some(c) = words::changes(r) {
        facts.push(("changes", c));
    }
    if let Some(v) = &r.verify {
        facts.push(("VERIFY", v.clone()));
    }
    if let Some(id) = &r.loop_id {
        facts.push(("loop", id.clone()));
    }
    facts.push(("M1.md", r.file.clone()));
    if let Some(w) = &r.workdir {
        facts.push(("project", w.clone()));
    }
    if let Some(i) = &r.issue {
        facts.push(("issue", i.clone()));
    }
    if let Some(pr) = &r.pull_request {
        facts.push(("pull request", pr.clone()));
    }
    if r.totals.open > 0
        && let Some(n) = &r.next_action
    {
        facts.push(("next", n.clone()));
    }
    let headline = words::headline(r);
    html! {
        header {
            p.kicker { "loop report" }
            h1 { (r.goal) }
            p.headline {
                span class={ "badge s-" (status.to_ascii_lowercase()) } { (status) }
                " " (headline.trim_start_matches(status).trim_start_matches(" · "))
            }
            dl.facts {
                @for (name, value) in &facts {
                    div { dt { (name) } dd { (value) } }
                }
            }
        }
    }
}

/// The timeline with its legend.
fn timeline(r: &Report) -> Markup {
    let Some(picture) = svg::timeline(r) else {
        return html! {
            section {
                h2 { "Timeline" }
                p.muted { "No run of this loop has a time on record yet." }
            }
        };
    };
    let lanes = if r.parallel {
        "a lane per worktree, and the merge queue"
    } else {
        "a lane per step"
    };
    html! {
        section {
            h2 { "Timeline" }
            p.muted {
                "Time since the loop began"
                @if let Some(t) = &r.started_at { " (it began " (words::time(t)) ")" }
                "; " (lanes) ". Tall bars are the agent's attempts (A) and reviews (R), thin ones \
                 its VERIFY runs, hatched ones the waits on a gate (G). Point at a bar for what \
                 it did."
            }
            (picture)
            ul.legend {
                @for (class, what) in [
                    ("t-good", "passed, approved, merged"),
                    ("t-bad", "failed"),
                    ("t-warn", "changes asked, waited out, a question"),
                    ("t-quiet", "stopped, new session, not judged"),
                    ("t-live", "running"),
                    ("t-gate", "gate wait"),
                ] {
                    li { span class={ "swatch " (class) } {} (what) }
                }
            }
        }
    }
}

/// One row per step.
fn table(r: &Report) -> Markup {
    html! {
        section {
            h2 { "Steps" }
            table {
                thead {
                    tr {
                        th { "#" } th { "Step" } th { "Status" } th.n { "Attempts" }
                        th.n { "Reviews" } th.n { "Retakes" } th.n { "Cost" } th.n { "Time" }
                        th { "VERIFY" } th { "Commit" }
                    }
                }
                tbody {
                    @for s in &r.steps {
                        tr id={ "step-" (s.step) } {
                            td.n { (s.step) }
                            td { (s.text) }
                            td { (badge(s)) }
                            td.n { (s.attempts) }
                            td.n { (s.reviews) }
                            td.n { (s.retakes) }
                            td.n { (words::cost(s.cost_usd, s.tokens)) }
                            td.n { (words::duration(s.duration_s)) }
                            td { (words::verify(s)) }
                            td { code { (words::commit(s)) } }
                        }
                    }
                }
            }
        }
    }
}

/// A step's status as a badge.
fn badge(s: &StepReport) -> Markup {
    html! {
        span class={ "badge s-" (s.status.as_str().to_ascii_lowercase()) } { (words::status(s)) }
    }
}

/// A step's card: what it said, its review, what went wrong, its gates, what it changed.
fn card(s: &StepReport) -> Markup {
    let said = [
        ("Summary", &s.summary),
        ("Review", &s.review),
        ("Error", &s.error),
    ];
    let runs = words::runs(s);
    html! {
        article.step {
            h3 { span.num { (s.step) } " " (s.text) " " (badge(s)) }
            dl {
                @for (what, v) in said {
                    @if let Some(v) = v { dt { (what) } dd { (v) } }
                }
                @for g in &s.gates { dt { "Gate" } dd { (words::gate(g)) } }
                @if !runs.is_empty() {
                    dt { "Runs" }
                    dd {
                        ol.runs {
                            @for r in &runs {
                                li {
                                    span class={ "swatch " (svg::tone_class(r.outcome.tone())) } {}
                                    " " b { (words::run(r)) }
                                    @if let Some(e) = r.ended_at {
                                        " " span.muted { "(" (took(e - r.started_at)) ")" }
                                    }
                                    @if let Some(d) = &r.detail { ": " (d) }
                                }
                            }
                        }
                    }
                }
            }
            @match (&s.commit, &s.diff) {
                (Some(c), Some(d)) => {
                    p.commit {
                        code { (c) } " " (words::count(d.files_changed, "file")) " changed, "
                        span.add { "+" (d.insertions) } " " span.del { "−" (d.deletions) }
                    }
                    @if !d.commits.is_empty() { p.muted { (d.commits.join(" · ")) } }
                    @if !d.files.is_empty() { pre.stat { (d.files.join("\n")) } }
                }
                (Some(c), None) => { p.commit { code { (c) } } }
                _ => { p.muted { "No commit recorded." } }
            }
        }
    }
}

/// How long a run took, in words.
fn took(d: chrono::TimeDelta) -> String {
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of a run")]
    let s = d.num_milliseconds().max(0) as f64 / 1000.0;
    words::duration(Some(s))
}
