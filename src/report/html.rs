//! The report as one self-contained HTML page: its style inline, its pictures inline SVG, no
//! script, no font, image or link from anywhere else, so it opens the same from a disk, a mail
//! or an artifact store, offline.

use std::fmt::Write as _;

use super::svg::{self, esc};
use super::{Report, StepReport, words};

/// The page's style.
const STYLE: &str = include_str!("report.css");

/// The HTML page.
#[must_use]
pub(super) fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Loop report: {}</title><style>{STYLE}</style></head>\n<body><main>",
        esc(&r.goal)
    );
    header(r, &mut out);
    timeline(r, &mut out);
    if let Some(costs) = svg::costs(r) {
        let _ = write!(out, "<section><h2>Cost per step</h2>{costs}</section>");
    }
    table(r, &mut out);
    let gates: Vec<String> = r
        .gates
        .iter()
        .chain(r.steps.iter().flat_map(|s| &s.gates))
        .map(|g| {
            let waited = words::waited(g).map_or_else(String::new, |w| {
                format!(" <span class=\"muted\">({w})</span>")
            });
            format!("<li>{}{waited}</li>", esc(&words::gate(g)))
        })
        .collect();
    if !gates.is_empty() {
        let _ = write!(
            out,
            "<section><h2>Gates</h2><ul class=\"gates\">{}</ul></section>",
            gates.concat()
        );
    }
    out.push_str("<section><h2>What each step did</h2>");
    for s in &r.steps {
        card(s, &mut out);
    }
    let _ = writeln!(
        out,
        "</section><footer>Written by <code>loop report</code> at {} from M1.md, loop.log, the \
         loop's task ledger and its task records.</footer></main></body></html>",
        esc(&words::time(&chrono::Utc::now()))
    );
    out
}

/// The goal, the loop in one line, and where it is.
fn header(r: &Report, out: &mut String) {
    let status = r.status.as_str();
    let _ = write!(
        out,
        "<header><p class=\"kicker\">loop report</p><h1>{}</h1>\
         <p class=\"headline\"><span class=\"badge s-{}\">{status}</span> {}</p><dl class=\"facts\">",
        esc(&r.goal),
        status.to_ascii_lowercase(),
        esc(words::headline(r)
            .trim_start_matches(status)
            .trim_start_matches(" · "))
    );
    let mut fact = |name: &str, value: &str| {
        let _ = write!(out, "<div><dt>{name}</dt><dd>{}</dd></div>", esc(value));
    };
    if let Some(t) = &r.started_at {
        fact("started", &words::time(t));
    }
    if let Some(t) = &r.ended_at {
        fact(words::until(r), &words::time(t));
    }
    if let Some(c) = words::changes(r) {
        fact("changes", &c);
    }
    if let Some(v) = &r.verify {
        fact("VERIFY", v);
    }
    if let Some(id) = &r.loop_id {
        fact("loop", id);
    }
    fact("M1.md", &r.file);
    if let Some(w) = &r.workdir {
        fact("project", w);
    }
    if r.totals.open > 0
        && let Some(n) = &r.next_action
    {
        fact("next", n);
    }
    out.push_str("</dl></header>");
}

/// The timeline with its legend.
fn timeline(r: &Report, out: &mut String) {
    out.push_str("<section><h2>Timeline</h2>");
    let Some(picture) = svg::timeline(r) else {
        out.push_str(
            "<p class=\"muted\">No run of this loop has a time on record yet.</p></section>",
        );
        return;
    };
    let lanes = if r.parallel {
        "a lane per worktree, and the merge queue"
    } else {
        "a lane per step"
    };
    let since = r
        .started_at
        .map_or_else(String::new, |t| format!(" (it began {})", words::time(&t)));
    let _ = write!(
        out,
        "<p class=\"muted\">Time since the loop began{since}; {lanes}. Tall bars are the agent's \
         attempts (A) and reviews (R), thin ones its VERIFY runs, hatched ones the waits on a \
         gate (G). Point at a bar for what it did.</p>{picture}<ul class=\"legend\">"
    );
    for (class, what) in [
        ("t-good", "passed, approved, merged"),
        ("t-bad", "failed"),
        ("t-warn", "changes asked, waited out, a question"),
        ("t-quiet", "stopped, new session, not judged"),
        ("t-live", "running"),
        ("t-gate", "gate wait"),
    ] {
        let _ = write!(out, "<li><span class=\"swatch {class}\"></span>{what}</li>");
    }
    out.push_str("</ul></section>");
}

/// One row per step.
fn table(r: &Report, out: &mut String) {
    out.push_str(
        "<section><h2>Steps</h2><table><thead><tr><th>#</th><th>Step</th><th>Status</th>\
         <th class=\"n\">Attempts</th><th class=\"n\">Reviews</th><th class=\"n\">Retakes</th>\
         <th class=\"n\">Cost</th><th class=\"n\">Time</th><th>VERIFY</th><th>Commit</th></tr>\
         </thead><tbody>",
    );
    for s in &r.steps {
        let _ = write!(
            out,
            "<tr id=\"step-{n}\"><td class=\"n\">{n}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&s.text),
            badge(s),
            s.attempts,
            s.reviews,
            s.retakes,
            esc(&words::cost(s.cost_usd, s.tokens)),
            esc(&words::duration(s.duration_s)),
            esc(&words::verify(s)),
            esc(&words::commit(s)),
            n = s.step,
        );
    }
    out.push_str("</tbody></table></section>");
}

/// A step's status as a badge.
fn badge(s: &StepReport) -> String {
    format!(
        "<span class=\"badge s-{}\">{}</span>",
        s.status.as_str().to_ascii_lowercase(),
        esc(&words::status(s))
    )
}

/// A step's card: what it said, its review, what went wrong, its gates, what it changed.
fn card(s: &StepReport, out: &mut String) {
    let _ = write!(
        out,
        "<article class=\"step\"><h3><span class=\"num\">{}</span> {} {}</h3><dl>",
        s.step,
        esc(&s.text),
        badge(s)
    );
    for (what, v) in [
        ("Summary", &s.summary),
        ("Review", &s.review),
        ("Error", &s.error),
    ] {
        if let Some(v) = v {
            let _ = write!(out, "<dt>{what}</dt><dd>{}</dd>", esc(v));
        }
    }
    for g in &s.gates {
        let _ = write!(out, "<dt>Gate</dt><dd>{}</dd>", esc(&words::gate(g)));
    }
    let runs = words::runs(s);
    if !runs.is_empty() {
        out.push_str("<dt>Runs</dt><dd><ol class=\"runs\">");
        for r in runs {
            let took = r.ended_at.map(|e| {
                #[expect(clippy::cast_precision_loss, reason = "milliseconds of a run")]
                let s = (e - r.started_at).num_milliseconds().max(0) as f64 / 1000.0;
                words::duration(Some(s))
            });
            let _ = write!(
                out,
                "<li><span class=\"swatch {}\"></span> <b>{}</b>{}{}</li>",
                svg::tone_class(r.outcome.tone()),
                esc(&words::run(r)),
                took.map_or_else(String::new, |t| format!(
                    " <span class=\"muted\">({t})</span>"
                )),
                r.detail
                    .as_deref()
                    .map_or_else(String::new, |d| format!(": {}", esc(d)))
            );
        }
        out.push_str("</ol></dd>");
    }
    out.push_str("</dl>");
    match (&s.commit, &s.diff) {
        (Some(c), Some(d)) => {
            let _ = write!(
                out,
                "<p class=\"commit\"><code>{}</code> {} changed, <span class=\"add\">+{}</span> \
                 <span class=\"del\">−{}</span></p>",
                esc(c),
                words::count(d.files_changed, "file"),
                d.insertions,
                d.deletions
            );
            if !d.commits.is_empty() {
                let _ = write!(
                    out,
                    "<p class=\"muted\">{}</p>",
                    esc(&d.commits.join(" · "))
                );
            }
            if !d.files.is_empty() {
                let _ = write!(
                    out,
                    "<pre class=\"stat\">{}</pre>",
                    esc(&d.files.join("\n"))
                );
            }
        }
        (Some(c), None) => {
            let _ = write!(out, "<p class=\"commit\"><code>{}</code></p>", esc(c));
        }
        _ => out.push_str("<p class=\"muted\">No commit recorded.</p>"),
    }
    out.push_str("</article>");
}
