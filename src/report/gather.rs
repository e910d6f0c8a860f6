//! Gathering a [`Report`]: M1.md for the facts the loop keeps, the ledger and the task records
//! for its runs, `loop.log` for its gates and merges, git for what each commit changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::runs::{Runs, lane, layout_has_steps, step_loops, tasks_of};
use super::spans::{self, Event};
use super::{GateReport, Report, Span, SpanKind, StepReport, Totals, diff};
use crate::error::Error;
use crate::layout::Layout;
use crate::m1::{Gate, M1, StepState, Store, StoreError};

/// The report of the loop whose state file is `file`.
///
/// # Errors
/// No loop there, or an M1.md that does not read (bad input, with where it is wrong).
pub(crate) fn gather(file: &Path) -> crate::error::Result<Report> {
    let m = open(file)?;
    let layout = Layout::of(file);
    let state_dir = layout.state_dir();
    let log =
        String::from_utf8_lossy(&std::fs::read(layout.log()).unwrap_or_default()).into_owned();
    let part = &log[crate::decision_log::this_loops_part(&log, m.started_at)..];
    let events = spans::events(part);
    let parallel = m.parallel.branch.is_some() || layout_has_steps(&layout, &m);
    let mut runs: BTreeMap<u32, Runs> = BTreeMap::new();
    if let Some(id) = &m.loop_id {
        tasks_of(state_dir, id, &mut runs, |n| lane(n, None));
        if parallel {
            step_loops(&layout, id, &events, &mut runs);
        }
    }
    let (started, end) = bounds(&m, &runs, &events);
    let mut gates = Vec::new();
    for g in &m.gates {
        let r = runs.entry(g.step).or_default();
        let lane = r.lane.clone().unwrap_or_else(|| lane(g.step, None));
        let opened = spans::opened_at(&events, &g.id);
        let decided = spans::decided_at(&events, g);
        let at_end = end.unwrap_or_else(Utc::now);
        if let Some(span) = spans::gate_span(g, (opened, decided), &r.spans, &lane, at_end) {
            r.spans.push(span);
        }
        if g.step == 0 || !m.plan.steps.iter().any(|s| s.n == g.step) {
            gates.push(gate_report(g, opened, decided));
        }
    }
    let workdir = workdir(&m, state_dir);
    // What the loops of steps still running at once have spent so far.
    let own = crate::runner::step_loops(&m);
    let steps: Vec<StepReport> = m
        .plan
        .steps
        .iter()
        .map(|s| {
            let figures = crate::engine::figures::of_step_at_once(&m, s.n, &own);
            step(
                &m,
                (s.n, figures),
                runs.remove(&s.n).unwrap_or_default(),
                &events,
                &workdir,
            )
        })
        .collect();
    let mut planning = runs.remove(&0).map(|r| r.spans).unwrap_or_default();
    sort(&mut planning);
    let spent = crate::engine::figures::totals(&m, &own);
    let totals = totals(&spent, &steps, &gates, started, end);
    Ok(Report {
        goal: m.goal.clone(),
        status: m.status,
        loop_id: m.loop_id.clone(),
        file: std::path::absolute(file)
            .unwrap_or_else(|_| file.to_path_buf())
            .display()
            .to_string(),
        workdir: m.workdir.clone(),
        started_at: started,
        ended_at: end,
        parallel,
        verify: m.verify.clone(),
        last_action: m.last_action.clone(),
        next_action: m.next_action.clone(),
        totals,
        steps,
        planning,
        gates,
        issue: m
            .github
            .issue_url
            .clone()
            .or_else(|| m.github.issue.map(|n| format!("#{n}"))),
        pull_request: m.github.pr.clone(),
    })
}

/// When the loop began (`STARTED_AT`, to the millisecond where its first line or run says
/// within that second) and its last sign of life (now, while it runs).
fn bounds(
    m: &M1,
    runs: &BTreeMap<u32, Runs>,
    events: &[Event<'_>],
) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let spans = || runs.values().flat_map(|r| &r.spans);
    let end = if m.status == crate::m1::Status::Running {
        Some(chrono::SubsecRound::trunc_subsecs(Utc::now(), 3))
    } else {
        spans()
            .flat_map(|s| [Some(s.started_at), s.ended_at])
            .flatten()
            .chain(events.last().map(|(t, _)| *t))
            .max()
    };
    let first = spans()
        .map(|s| s.started_at)
        .chain(events.first().map(|(t, _)| *t))
        .min();
    let started = match (m.started_at, first) {
        (Some(s), Some(f)) if f >= s && f - s < chrono::TimeDelta::seconds(1) => Some(f),
        (s, f) => s.or(f),
    };
    (started, end)
}

/// M1.md, read-only.
fn open(file: &Path) -> crate::error::Result<M1> {
    if !file.exists() {
        let here = if file.is_relative() {
            " (here or in a parent directory)"
        } else {
            ""
        };
        return Err(Error::bad_input(format!(
            "no loop at {}{here}: nothing to report (start one with `loop start \"GOAL\"`, or \
             pass --file)",
            file.display()
        )));
    }
    match Store::open(file) {
        Ok((_, doc)) => Ok(doc.view()),
        Err(StoreError::DiskInvalid(errors)) => Err(Error::bad_input(errors.to_string())),
        Err(other) => Err(anyhow::Error::new(other).into()),
    }
}

/// Where the project's git is: WORKDIR, else the directory that holds the state directory.
fn workdir(m: &M1, state_dir: &Path) -> PathBuf {
    m.workdir.as_deref().map_or_else(
        || {
            let abs = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
            abs.parent().map_or(abs.clone(), Path::to_path_buf)
        },
        PathBuf::from,
    )
}

/// Gate `g`, with when it was opened and decided (to the millisecond where the log says).
fn gate_report(
    g: &Gate,
    opened_at: Option<DateTime<Utc>>,
    decided_at: Option<DateTime<Utc>>,
) -> GateReport {
    GateReport {
        id: g.id.clone(),
        kind: g.kind,
        step: g.step,
        state: g.state,
        question: g.question.clone(),
        choice: g.choice.clone(),
        by: g.by.clone(),
        at: decided_at.or(g.at),
        opened_at,
    }
}

fn sort(spans: &mut [Span]) {
    spans.sort_by_key(|s| s.started_at);
}

/// Step `n`'s report, from its RESULTS, its `figures` (what it attempted and spent, with its
/// own loop's while it runs at once) and its runs.
fn step(
    m: &M1,
    (n, figures): (u32, crate::engine::figures::Figures),
    mut runs: Runs,
    events: &[Event<'_>],
    workdir: &Path,
) -> StepReport {
    sort(&mut runs.spans);
    let result = m.result(n);
    let line = m.plan.steps.iter().find(|s| s.n == n);
    let work: Vec<&Span> = runs
        .spans
        .iter()
        .filter(|s| s.kind != SpanKind::Gate)
        .collect();
    let from = work.iter().map(|s| s.started_at).min();
    let to = work.iter().filter_map(|s| s.ended_at).max();
    let gates = m
        .gates
        .iter()
        .filter(|g| g.step == n)
        .map(|g| {
            let (opened, decided) = (
                spans::opened_at(events, &g.id),
                spans::decided_at(events, g),
            );
            gate_report(g, opened, decided)
        })
        .collect();
    StepReport {
        step: n,
        text: line.map(|s| s.text.clone()).unwrap_or_default(),
        status: line.map_or(StepState::Pending, |s| s.state),
        attempts: runs.attempts.max(figures.attempts),
        reviews: runs.reviews.max(result.review_runs),
        retakes: result.retakes,
        cost_usd: (result.cost_usd.is_some() || figures.cost_usd > 0.0).then_some(figures.cost_usd),
        tokens: (result.tokens.is_some() || figures.tokens > 0).then_some(figures.tokens),
        duration_s: from.zip(to).map(|(a, b)| seconds(b - a)),
        agent_s: result.duration_s,
        diff: result.commit.as_deref().and_then(|c| diff::of(workdir, c)),
        commit: result.commit.clone(),
        verify: verify_words(m, &runs.spans),
        summary: result.summary.clone(),
        review: result.review.as_ref().map(ToString::to_string),
        error: result.error.clone(),
        by_hand: crate::engine::by_hand::done_by_hand(m, n),
        gates,
        spans: runs.spans,
    }
}

/// How the step's last VERIFY ended (`passed`, `failed (exit 1)`); `none set` without one.
fn verify_words(m: &M1, spans: &[Span]) -> Option<String> {
    spans
        .iter()
        .rev()
        .find(|s| s.kind == SpanKind::Verify && s.lane != "merge queue")
        .map(|v| match &v.detail {
            Some(why) if v.outcome != super::Outcome::Passed => {
                format!("{} ({why})", v.outcome.word())
            }
            _ => v.outcome.word().to_owned(),
        })
        .or_else(|| m.verify.is_none().then(|| "none set".to_owned()))
}

/// Seconds, to the millisecond.
fn seconds(d: chrono::TimeDelta) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of a loop's life")]
    let ms = d.num_milliseconds().max(0) as f64;
    ms / 1000.0
}

fn totals(
    spent: &crate::engine::figures::Figures,
    steps: &[StepReport],
    gates: &[GateReport],
    started: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
) -> Totals {
    let count = |st: StepState| u32::try_from(steps.iter().filter(|s| s.status == st).count());
    let mut t = Totals {
        steps: u32::try_from(steps.len()).unwrap_or(u32::MAX),
        done: count(StepState::Done).unwrap_or(0),
        skipped: count(StepState::Skipped).unwrap_or(0),
        failed: count(StepState::Failed).unwrap_or(0),
        cost_usd: (spent.cost_usd * 10_000.0).round() / 10_000.0,
        tokens: spent.tokens,
        duration_s: started.zip(end).map(|(a, b)| seconds(b - a)),
        gates: u32::try_from(gates.len()).unwrap_or(0),
        ..Totals::default()
    };
    t.open = t.steps - t.done - t.skipped - t.failed;
    for s in steps {
        t.attempts += s.attempts;
        t.reviews += s.reviews;
        t.retakes += s.retakes;
        t.gates += u32::try_from(s.gates.len()).unwrap_or(0);
        if let Some(d) = &s.diff {
            t.commits += u32::try_from(d.commits.len()).unwrap_or(0);
            t.files_changed += d.files_changed;
            t.insertions += d.insertions;
            t.deletions += d.deletions;
        }
    }
    t
}
