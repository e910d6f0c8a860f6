//! The runs of a loop by step, from the ledger of the tasks it started: each with its exit and
//! VERIFY records, in the lane of its step; for a loop that ran its steps at once, from each
//! step's own loop (its runs in the lane of its worktree) and the merge queue's lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::spans::{self, Event};
use super::{Span, SpanKind};
use crate::layout::Layout;
use crate::m1::M1;

/// What the records say of one step: its spans, the attempts its runs were made for, and how
/// many review runs the ledger holds.
#[derive(Debug, Default)]
pub(super) struct Runs {
    pub spans: Vec<Span>,
    /// The attempts the ledger's runs were made for: a run cut off and carried on (a usage
    /// limit, a transient error, the fallback backend) is the same attempt, counted once.
    pub attempts: u32,
    pub reviews: u32,
    /// Its lane (a worktree's name, when steps ran at once).
    pub lane: Option<String>,
}

/// The lane of step `n` (`plan` for the planning call); `worktree`: the worktree it ran in.
pub(super) fn lane(n: u32, worktree: Option<&str>) -> String {
    match (n, worktree) {
        (_, Some(w)) => w.to_owned(),
        (0, None) => "plan".to_owned(),
        (n, None) => format!("step {n}"),
    }
}

/// Whether the loop left step loops of its own (`parallel/<LOOP_ID>/`).
pub(super) fn layout_has_steps(layout: &Layout, m: &M1) -> bool {
    m.loop_id
        .as_deref()
        .is_some_and(|id| layout.parallel(id).is_dir())
}

/// The tasks of loop `loop_id` in `state_dir`, as spans and counts by step.
pub(super) fn tasks_of(
    state_dir: &Path,
    loop_id: &str,
    runs: &mut BTreeMap<u32, Runs>,
    lane_of: impl Fn(u32) -> String,
) {
    let mut made = std::collections::BTreeSet::new();
    for e in crate::runner::ledger_tasks(state_dir, loop_id) {
        let r = runs.entry(e.step).or_default();
        if e.review {
            r.reviews += 1;
        } else if made.insert((e.step, e.attempt)) {
            r.attempts += 1;
        }
        let lane = r.lane.clone().unwrap_or_else(|| lane_of(e.step));
        let mut found = spans::of_task(state_dir, &e, &lane);
        // A review's number in the ledger counts within one retake; here, within the step.
        if let Some(first) = found.first_mut().filter(|s| s.kind == SpanKind::Review) {
            first.n = r.reviews;
        }
        r.spans.extend(found);
    }
}

/// The steps a loop ran at once: each one's own loop (`step-N.loop`, `step-N.loop.K` for a
/// later start), whose tasks are its runs, in the lane of its worktree; then its merges.
pub(super) fn step_loops(
    layout: &Layout,
    loop_id: &str,
    events: &[Event<'_>],
    runs: &mut BTreeMap<u32, Runs>,
) {
    let Ok(dir) = std::fs::read_dir(layout.parallel(loop_id)) else {
        return;
    };
    let mut found: Vec<(u32, String, PathBuf)> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (n, k) = name.strip_prefix("step-")?.split_once(".loop")?;
            let worktree = format!("step-{n}{k}");
            Some((n.parse().ok()?, worktree, e.path()))
        })
        .collect();
    found.sort();
    for (n, worktree, dir) in found {
        let Ok(child) = crate::m1::load(&dir.join("M1.md")).map(|d| d.view()) else {
            continue;
        };
        let Some(child_id) = child.loop_id else {
            continue;
        };
        runs.entry(n).or_default().lane = Some(worktree.clone());
        let mut theirs = BTreeMap::new();
        tasks_of(&dir, &child_id, &mut theirs, |_| worktree.clone());
        let r = runs.entry(n).or_default();
        for (_, t) in theirs.into_iter().filter(|(s, _)| *s == n) {
            r.attempts += t.attempts;
            r.reviews += t.reviews;
            r.spans.extend(t.spans);
        }
    }
    let state_dir = layout.state_dir();
    for (n, r) in runs.iter_mut() {
        let done = r.spans.iter().filter_map(|s| s.ended_at).max();
        let merge = crate::runner::merge_task(loop_id, *n);
        for mut v in spans::verify_spans(state_dir, &merge, "merge queue") {
            v.detail = Some(format!("step {n} merged: VERIFY {}", v.outcome.word()));
            r.spans.push(v);
        }
        r.spans.extend(spans::merges(events, *n, done));
    }
}
