//! Named crash points, for the crash-safety tests: `LOOP_CRASH_AT=NAME` (or `NAME@K` for the
//! K-th time that point is reached) makes the runner kill itself with SIGKILL there, exactly
//! as a power cut or `kill -9` would. Unset, each point costs one cached string comparison.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The crash points a step's attempt passes, in order (with its commit, and the loop's DONE
/// write).
pub const STEP_POINTS: &[&str] = &[
    "before-spawn-write",
    "after-spawn-write",
    "before-fire",
    "after-publish",
    "after-fire",
    "after-pid-write",
    "after-work-noted",
    "before-verify",
    "before-record-write",
    "after-record-write",
    "after-step-commit",
    "before-done-write",
    "after-done-write",
];

/// The crash points besides a step's: a review's (see [`crate::engine::RunKind::crash_points`]),
/// after a `STEP_RESTART` is recorded, after a revived runner took its loop over, and between
/// the pushing and the opening of a pull request, and before a FAILED loop's comment on its
/// issue (`runner/pull_request.rs`).
const OTHER_POINTS: &[&str] = &[
    "before-review-spawn-write",
    "after-review-spawn-write",
    "after-review-fire",
    "before-review-record-write",
    "after-review-record-write",
    "after-restart",
    "after-revival",
    "after-decision-write",
    "pr-after-intent",
    "pr-after-push",
    "pr-after-create",
    "before-issue-comment",
];

/// The crash points of a parallel loop ([`super::parallel`]), in the order a step passes them:
/// its record written, its worktree made, its loop written, its runner started, its work
/// committed, merged, verified, the integration branch moved, the merge recorded, cleaned up.
pub const PARALLEL_POINTS: &[&str] = &[
    "parallel-after-record",
    "parallel-after-worktree",
    "parallel-after-step-loop",
    "parallel-after-spawn",
    "parallel-after-commit",
    "parallel-after-merge",
    "parallel-after-verify",
    "parallel-after-ref-move",
    "parallel-after-merged-write",
    "parallel-after-cleanup",
    "parallel-before-finish",
    "parallel-after-finish",
];

/// Every crash point: [`STEP_POINTS`], then the others. A test holds this list to the points
/// the code has, and each to a test that crashes there.
pub(super) fn points() -> impl Iterator<Item = &'static str> {
    STEP_POINTS
        .iter()
        .chain(OTHER_POINTS)
        .chain(PARALLEL_POINTS)
        .copied()
}

static TARGET: OnceLock<Option<(String, u32)>> = OnceLock::new();
static HITS: AtomicU32 = AtomicU32::new(0);

fn target() -> Option<&'static (String, u32)> {
    TARGET
        .get_or_init(|| {
            let raw = std::env::var("LOOP_CRASH_AT")
                .ok()
                .filter(|s| !s.is_empty())?;
            let (name, nth) = match raw.split_once('@') {
                Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
                None => (raw, 1),
            };
            Some((name, nth))
        })
        .as_ref()
}

/// Dies here if `LOOP_CRASH_AT` names this point (and this is its K-th passage).
pub(super) fn point(name: &str) {
    debug_assert!(
        points().any(|p| p == name),
        "crash point {name} is not listed in runner::crash"
    );
    let Some((want, nth)) = target() else { return };
    if want != name {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::{PARALLEL_POINTS, STEP_POINTS, points};

    fn sources(dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(std::fs::read_to_string(&p).unwrap());
            }
        }
    }

    /// The quoted names in `text` after each `marker`.
    fn names_after(text: &str, marker: &str) -> Vec<String> {
        text.match_indices(marker)
            .filter_map(|(at, _)| {
                let rest = &text[at + marker.len()..];
                let rest = rest.strip_prefix('"')?;
                Some(rest[..rest.find('"')?].to_owned())
            })
            // A point's name is words joined by hyphens (this test's own text is not one).
            .filter(|n| n.contains('-') && n.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .collect()
    }

    #[test]
    fn every_crash_point_of_the_code_is_listed_and_every_listed_one_is_in_the_code() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut src = Vec::new();
        sources(&root.join("src"), &mut src);
        let mut found: Vec<String> = Vec::new();
        for text in &src {
            found.extend(names_after(text, "crash::point("));
            // The points of each kind of run (engine::run's `crash_points`).
            for field in [
                "before_spawn_write: ",
                "after_spawn_write: ",
                "after_fire: Some(",
                "before_record_write: ",
                "after_record_write: ",
            ] {
                found.extend(names_after(text, field));
            }
        }
        found.sort();
        found.dedup();
        let mut listed: Vec<String> = points().map(str::to_owned).collect();
        listed.sort();
        assert_eq!(found, listed, "crash points in the code vs. points()");
    }

    #[test]
    fn every_crash_point_has_a_test_that_crashes_there() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut tests = Vec::new();
        sources(&root.join("tests"), &mut tests);
        let all = tests.join("\n");
        // The crash test walks through every point of a step.
        assert!(all.contains("for point in CRASH_POINTS"));
        for p in points() {
            assert!(
                STEP_POINTS.contains(&p)
                    || (PARALLEL_POINTS.contains(&p)
                        && all.contains("for point in PARALLEL_POINTS"))
                    || all.contains(&format!("\"{p}")),
                "no test crashes at {p}"
            );
        }
    }
}
