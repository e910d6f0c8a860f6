//! The report's pictures, as inline SVG: the loop's timeline (a lane per step, or per
//! worktree when steps ran at once, a bar per attempt, review, VERIFY, merge and gate wait,
//! coloured by how it ended, time across) and the cost of each step. Styled by the page's
//! classes; no script, no outside resource. A long stretch when nothing ran (a night waiting
//! on a gate) is drawn narrow and marked, so the runs around it keep their width.
//!
//! Written with `maud`, as the page is: every text put into a picture (a step's words, a
//! run's detail) is escaped by it. An element with no content is written with an end tag
//! (`<rect …></rect>`), which HTML's parser reads inside `<svg>` as XML would.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::scale::{Scale, tenths};
use super::{Report, Span, SpanKind, Tone, words};

/// The drawing's width, in its own units (the page scales it).
pub(super) const WIDTH: f64 = 1100.0;
/// Where the lanes' bars begin: the labels are left of it.
const LEFT: f64 = 210.0;
const RIGHT: f64 = 24.0;
const LANE: f64 = 34.0;
const AXIS: f64 = 26.0;

/// A lane: its name, the label it shows, and its spans.
struct Lane<'a> {
    label: String,
    title: String,
    spans: Vec<&'a Span>,
}

/// Adds span `s` to the lane `name`, making the lane first when it is new.
fn add<'a>(
    lanes: &mut Vec<(String, Lane<'a>)>,
    name: &str,
    (label, title): (String, String),
    s: Option<&'a Span>,
) {
    if let Some((_, l)) = lanes.iter_mut().find(|(n, _)| n == name) {
        l.spans.extend(s);
    } else {
        let spans = s.into_iter().collect();
        lanes.push((
            name.to_owned(),
            Lane {
                label,
                title,
                spans,
            },
        ));
    }
}

/// The lanes in order: the plan, each step (or each of its worktrees), the merge queue.
fn lanes(r: &Report) -> Vec<Lane<'_>> {
    let mut lanes: Vec<(String, Lane<'_>)> = Vec::new();
    for s in &r.planning {
        let named = ("plan".to_owned(), "the planning call".to_owned());
        add(&mut lanes, &s.lane, named, Some(s));
    }
    let mut merges = Vec::new();
    for step in &r.steps {
        let label = |lane: &str| {
            let text = crate::text::cut(&step.text, 27);
            if lane.starts_with("step-") {
                format!("{lane} · {text}")
            } else {
                format!("{}. {text}", step.step)
            }
        };
        let title = format!("{}. {} ({})", step.step, step.text, words::status(step));
        let own = format!("step {}", step.step);
        if step.spans.iter().all(|s| s.lane == "merge queue") {
            add(&mut lanes, &own, (label(&own), title.clone()), None);
        }
        for s in &step.spans {
            if s.lane == "merge queue" {
                merges.push(s);
            } else {
                add(
                    &mut lanes,
                    &s.lane,
                    (label(&s.lane), title.clone()),
                    Some(s),
                );
            }
        }
    }
    for s in merges {
        let named = ("merge queue".to_owned(), "merges, one at a time".to_owned());
        add(&mut lanes, &s.lane, named, Some(s));
    }
    lanes.into_iter().map(|(_, l)| l).collect()
}

/// The timeline; `None` when nothing ran that has a time.
#[must_use]
pub(super) fn timeline(r: &Report) -> Option<Markup> {
    let lanes = lanes(r);
    let all: Vec<&Span> = lanes.iter().flat_map(|l| l.spans.iter().copied()).collect();
    let end = r
        .ended_at
        .or_else(|| all.iter().filter_map(|s| s.ended_at).max())?;
    let start = r
        .started_at
        .into_iter()
        .chain(all.iter().map(|s| s.started_at))
        .min()?;
    let busy: Vec<(DateTime<Utc>, DateTime<Utc>)> = all
        .iter()
        .filter(|s| s.kind != SpanKind::Gate)
        .map(|s| (s.started_at, s.ended_at.unwrap_or(end)))
        .collect();
    let scale = Scale::new(start, end, &busy, LEFT, WIDTH - RIGHT);
    #[expect(clippy::cast_precision_loss, reason = "a handful of lanes")]
    let height = AXIS + LANE * lanes.len() as f64 + 8.0;
    #[expect(clippy::cast_precision_loss, reason = "a handful of lanes")]
    let lane_y = |i: usize| AXIS + LANE * i as f64;
    Some(html! {
        svg.timeline viewBox={ "0 0 " (WIDTH) " " (height) } role="img" {
            title { "Timeline of the loop" }
            defs {
                pattern #wait width="6" height="6" patternUnits="userSpaceOnUse"
                    patternTransform="rotate(45)" {
                    rect width="3" height="6" class="t-gate" {}
                }
            }
            @for (i, lane) in lanes.iter().enumerate() {
                rect class=(if i % 2 == 0 { "lane" } else { "lane alt" }) x="0" y=(lane_y(i))
                    width=(WIDTH) height=(LANE) {}
                text.label x="10" y=(tenths(lane_y(i) + LANE / 2.0 + 4.0)) {
                    title { (lane.title) } (lane.label)
                }
            }
            (scale.axis(AXIS, height - 4.0))
            @for (i, lane) in lanes.iter().enumerate() {
                @for s in &lane.spans { (bar(&scale, s, lane_y(i), end)) }
            }
            (scale.breaks(AXIS, height - 4.0))
        }
    })
}

/// One span's bar in the lane at `y`.
fn bar(scale: &Scale, s: &Span, y: f64, end: DateTime<Utc>) -> Markup {
    let until = s.ended_at.unwrap_or(end);
    let x0 = scale.x(s.started_at);
    let w = (scale.x(until) - x0).max(3.0);
    let (top, h) = match s.kind {
        SpanKind::Attempt | SpanKind::Review | SpanKind::Merge => (y + 5.0, 15.0),
        SpanKind::Verify => (y + 23.0, 6.0),
        SpanKind::Gate => (y + 3.0, LANE - 6.0),
    };
    let tone = tone_class(s.outcome.tone());
    let kind = match s.kind {
        SpanKind::Attempt => "attempt",
        SpanKind::Review => "review",
        SpanKind::Verify => "verify",
        SpanKind::Merge => "merge",
        SpanKind::Gate => "gate",
    };
    let short = match s.kind {
        SpanKind::Attempt => format!("A{}", s.n),
        SpanKind::Review => format!("R{}", s.n),
        SpanKind::Verify => String::new(),
        SpanKind::Merge => "M".to_owned(),
        SpanKind::Gate => format!("G{}", s.n),
    };
    let took = words::duration(Some(seconds(until - s.started_at)));
    let mut title = format!("{}: {kind}", s.lane);
    if s.n > 0 && s.kind != SpanKind::Gate {
        let _ = write!(title, " {}", s.n);
    }
    let _ = write!(title, ", {} ({took})", s.outcome.word());
    if let Some(d) = &s.detail {
        let _ = write!(title, ": {d}");
    }
    let ty = if s.kind == SpanKind::Gate {
        top + 11.0
    } else {
        top + 11.5
    };
    html! {
        g class={ "bar k-" (kind) } {
            title { (title) }
            rect class=(tone) x=(tenths(x0)) y=(tenths(top)) width=(tenths(w)) height=(tenths(h))
                rx="2" {}
            @if !short.is_empty() && w >= 22.0 {
                text.in x=(tenths(x0 + 4.0)) y=(tenths(ty)) { (short) }
            }
        }
    }
}

/// The page's class for a tone.
#[must_use]
pub(super) fn tone_class(t: Tone) -> &'static str {
    match t {
        Tone::Good => "t-good",
        Tone::Bad => "t-bad",
        Tone::Warn => "t-warn",
        Tone::Quiet => "t-quiet",
        Tone::Live => "t-live",
        Tone::Gate => "t-gate",
    }
}

/// The cost of each step, as bars; `None` when no step has one.
#[must_use]
pub(super) fn costs(r: &Report) -> Option<Markup> {
    let dollars = r.steps.iter().any(|s| s.cost_usd.is_some_and(|c| c > 0.0));
    #[expect(clippy::cast_precision_loss, reason = "a count of tokens, drawn")]
    let amount = |s: &super::StepReport| {
        if dollars {
            s.cost_usd.unwrap_or(0.0)
        } else {
            s.tokens.unwrap_or(0) as f64
        }
    };
    let max = r.steps.iter().map(amount).fold(0.0_f64, f64::max);
    if max <= 0.0 {
        return None;
    }
    let row = 24.0;
    #[expect(clippy::cast_precision_loss, reason = "a handful of steps")]
    let height = row * r.steps.len() as f64 + 8.0;
    let room = WIDTH - LEFT - RIGHT - 90.0;
    #[expect(clippy::cast_precision_loss, reason = "a handful of steps")]
    let row_y = |i: usize| 4.0 + row * i as f64;
    Some(html! {
        svg.costs viewBox={ "0 0 " (WIDTH) " " (height) } role="img" {
            title { "Cost per step" }
            @for (i, s) in r.steps.iter().enumerate() {
                @let y = row_y(i);
                @let w = (amount(s) / max * room).max(if amount(s) > 0.0 { 2.0 } else { 0.0 });
                text.label x="10" y=(tenths(y + 15.0)) {
                    (s.step) ". " (crate::text::cut(&s.text, 26))
                }
                rect.cost x=(LEFT) y=(tenths(y + 3.0)) width=(tenths(w)) height=(tenths(row - 8.0))
                    rx="2" {}
                text.value x=(tenths(LEFT + w + 8.0)) y=(tenths(y + 15.0)) {
                    (words::cost(s.cost_usd, s.tokens))
                }
            }
        }
    })
}

/// Seconds of a span, to the millisecond.
fn seconds(d: chrono::TimeDelta) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of a run")]
    let ms = d.num_milliseconds().max(0) as f64;
    ms / 1000.0
}
