//! A commit per DONE step, decided: which runs mark their step's work to be committed, which
//! DONE step is owed its commit, what the commit says, and how what came of it is recorded.
//! Git is the runner's to run; nothing here reads the work tree.
//!
//! The mark is `COMMIT: (pending)` in the step's RESULTS, written with the write-ahead record
//! of each attempt. A DONE step still marked so is committed before anything else runs, so
//! the next step starts from a clean tree; the record replaces the mark. A runner that dies
//! between the commit and its record finds the commit again by its trailers ([`is_commit_of`])
//! instead of making a second one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Caps;
use super::run::RunKind;
use super::transitions::{Effect, Outcome, Transition, Write, results, results_remove};
use crate::m1::keys::ResultKey;
use crate::m1::{M1, StepState};
use crate::text::one_line;

/// Whether a run about to start marks its step's work to be committed: an attempt of a step
/// (not the planning call, not a review), in a git work tree, of a loop that commits its steps
/// and is not the loop of one step of a loop that runs its steps at once (that loop's merge
/// queue commits the step in its branch).
#[must_use]
pub(crate) fn wanted(m: &M1, caps: &Caps, kind: RunKind, step: u32, in_git: bool) -> bool {
    kind == RunKind::Attempt && step > 0 && caps.commit_steps && in_git && m.parent_step.is_none()
}

/// What a DONE step marked `COMMIT: (pending)` is owed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Due {
    /// Its work is committed (the runner finds or makes the commit).
    Commit(u32),
    /// No commit is made, for this reason; the mark goes.
    Drop { step: u32, why: String },
}

/// The first DONE step still marked to be committed, and what it is owed: a step a person set
/// DONE is theirs to commit, and so is every step once `COMMIT_STEPS` is off. A step skipped
/// loses its mark: nothing of it is committed (what it left stays in the tree, and a later
/// run of it, by `loop retry`, begins a run of its own).
#[must_use]
pub(crate) fn due(m: &M1, caps: &Caps) -> Option<Due> {
    let step = m.plan.steps.iter().find(|s| {
        matches!(s.state, StepState::Done | StepState::Skipped) && m.result(s.n).commit_pending
    })?;
    let n = step.n;
    if step.state == StepState::Skipped {
        return Some(Due::Drop {
            step: n,
            why: format!("step {n} was skipped: nothing of it is committed"),
        });
    }
    if super::by_hand::done_by_hand(m, n) {
        return Some(Due::Drop {
            step: n,
            why: format!("step {n} was set DONE by hand: its work is yours to commit"),
        });
    }
    if !caps.commit_steps {
        return Some(Due::Drop {
            step: n,
            why: format!("COMMIT_STEPS is off: step {n}'s work is left for you to commit"),
        });
    }
    Some(Due::Commit(n))
}

/// The trailer lines that tie a commit to its loop, its step and the run of the step it
/// closes (`run`: the attempt that began it).
fn trailers(loop_id: &str, step: u32, run: Option<&str>) -> String {
    let mut t = format!("Loop-Id: {loop_id}\nLoop-Step: {step}\n");
    if let Some(run) = run {
        let _ = writeln!(t, "Loop-Run: {run}");
    }
    t
}

/// The message of step `step`'s commit: a subject naming the step by its own text (what the
/// plan asked, however many fixes it took), a body of what the agent said it did (`summary`,
/// else its RESULTS' summary; after a retake, the last run's), the step's whole text when the
/// subject had to cut it, the goal, and the trailers that name the loop. `run`: the run of the
/// step it closes, by which a runner after a crash finds it again.
#[must_use]
pub(crate) fn message(m: &M1, step: u32, summary: Option<&str>, run: Option<&str>) -> String {
    const SUBJECT: usize = 90;
    let text = m
        .plan
        .steps
        .iter()
        .find(|s| s.n == step)
        .map(|s| s.text.clone())
        .unwrap_or_default();
    let subject = one_line(&text, SUBJECT);
    let mut body = String::new();
    let summary = summary
        .map(str::to_owned)
        .or_else(|| m.result(step).summary.clone())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && *s != text.trim());
    if let Some(s) = summary {
        let _ = write!(body, "{s}\n\n");
    }
    if subject != one_line(&text, usize::MAX) {
        let _ = writeln!(body, "Step {step}: {}", one_line(&text, 300));
    }
    let total = m.plan.steps.len();
    format!(
        "loop: step {step}/{total}: {subject}\n\n{body}Goal: {}\n\n{}",
        one_line(&m.goal, 300),
        trailers(m.loop_id.as_deref().unwrap_or_default(), step, run)
    )
}

/// Whether commit message `text` is the commit of run `run` of step `step` of loop `loop_id`.
#[must_use]
pub(crate) fn is_commit_of(text: &str, loop_id: &str, step: u32, run: &str) -> bool {
    let want = trailers(loop_id, step, Some(run));
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    want.lines().all(|w| lines.contains(&w))
}

/// Whose the paths are that `git status` lists once a step is DONE, told from what it listed
/// as the step began (each path with a hash of its content).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Attribution {
    /// The step's work: listed now and not before. Its commit.
    pub step: Vec<String>,
    /// Listed before and changed since: the person's changes and the step's in one file,
    /// which no commit can take apart. Left as they are, and named.
    pub left_out: Vec<String>,
    /// Listed before and not now: committed by the agent itself, or undone.
    pub gone: Vec<String>,
}

/// What a directory hashes as: a repository nested in the work tree, whose files are its own.
const NESTED: &str = "dir";

/// Attributes each path `now` lists, against `before`. A path both list with the same
/// content is the person's, untouched: it stays out, unnamed. A nested repository is no file
/// of this one.
#[must_use]
pub(crate) fn attribute(
    before: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Attribution {
    let mut a = Attribution::default();
    for (path, hash) in now {
        match before.get(path) {
            _ if hash == NESTED => {}
            None => a.step.push(path.clone()),
            Some(was) if was == hash => {}
            Some(_) => a.left_out.push(path.clone()),
        }
    }
    a.gone = before
        .keys()
        .filter(|p| !now.contains_key(*p))
        .cloned()
        .collect();
    a
}

/// What came of a DONE step's commit, as the runner found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Made {
    /// The commit the loop made of the step's work, or found made before a crash.
    pub commit: Option<String>,
    /// The commit was made before a runner died, and found by its trailers.
    pub found: bool,
    /// How many files it holds.
    pub files: usize,
    /// The commits the agent made itself during the step, oldest first.
    pub agent_commits: Vec<String>,
    /// Paths the step changed that held a person's uncommitted changes from before it: left
    /// out of the commit, and as they are.
    pub left_out: Vec<String>,
    /// Paths that held a person's uncommitted changes before the step and hold none now (the
    /// agent committed or undid them).
    pub gone: Vec<String>,
    /// Why no commit could be made (git failed, no record of the tree as the step began).
    pub failed: Option<String>,
}

/// The list `paths` in a line: the first few, and how many more.
fn listed(paths: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = paths
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        let _ = write!(s, " and {} more", paths.len() - SHOWN);
    }
    s
}

/// Step `step`'s commit, recorded: `COMMIT` (the loop's commit, else the agent's last, else
/// none), `AGENT_COMMITS`, and `UNCOMMITTED` when something of its work is left out. Held for
/// the next spawn's write (a runner that dies first finds the commit again).
#[must_use]
pub(crate) fn recorded(step: u32, made: &Made) -> Transition {
    let s = step;
    let mut edits = Vec::new();
    let tip = made
        .commit
        .clone()
        .or_else(|| made.agent_commits.last().cloned());
    edits.push(match &tip {
        Some(c) => results(s, ResultKey::Commit, c.clone()),
        None => results_remove(s, ResultKey::Commit),
    });
    edits.push(if made.agent_commits.is_empty() {
        results_remove(s, ResultKey::AgentCommits)
    } else {
        results(s, ResultKey::AgentCommits, made.agent_commits.join(" "))
    });
    let mut effects = Vec::new();
    let uncommitted = match (&made.failed, made.left_out.is_empty()) {
        (Some(why), _) => Some(format!("all of it: {why}")),
        (None, false) => Some(format!(
            "{}: they had uncommitted changes of yours from before the step",
            listed(&made.left_out)
        )),
        (None, true) => None,
    };
    edits.push(match &uncommitted {
        Some(u) => results(s, ResultKey::Uncommitted, one_line(u, 300)),
        None => results_remove(s, ResultKey::Uncommitted),
    });
    let mut log = match (&made.commit, made.found, &made.failed) {
        (_, _, Some(why)) => {
            format!("commit: step {s}: no commit: {why}; its work is left in the work tree")
        }
        (Some(c), true, _) => format!(
            "commit: step {s} was committed as {c} before the runner died; recorded, not made again"
        ),
        (Some(c), false, _) => format!("commit: step {s} as {c} ({} file(s))", made.files),
        (None, _, _) if !made.agent_commits.is_empty() => format!(
            "commit: step {s}: the agent committed its work itself ({})",
            made.agent_commits.join(" ")
        ),
        (None, _, _) => format!("commit: step {s} changed no file: nothing to commit"),
    };
    if made.commit.is_some() && !made.agent_commits.is_empty() {
        let _ = write!(
            log,
            ", after the agent's own commit(s) {}",
            made.agent_commits.join(" ")
        );
    }
    if let Some(u) = &uncommitted {
        let _ = write!(log, "; left uncommitted: {u}");
    }
    // A commit that could not be made is told: the person commits by hand.
    if let Some(why) = &made.failed {
        effects.push(Effect::Said(format!(
            "Step {s}'s work could not be committed ({why}): it is in the work tree; commit it \
             yourself."
        )));
    }
    if !made.gone.is_empty() {
        let what = format!(
            "{} had uncommitted changes of yours before step {s} and have none now: the \
             agent's own commit took them in, or the agent undid them",
            listed(&made.gone)
        );
        let _ = write!(log, "; {what}");
        effects.push(Effect::Said(format!("{what}.")));
    }
    Transition {
        edits,
        log,
        outcome: Outcome::Continue,
        write: Write::WithNextSpawn,
        effects,
    }
}

/// Step `step` gets no commit, for `why`: its mark goes.
#[must_use]
pub(crate) fn dropped(step: u32, why: &str) -> Transition {
    Transition {
        write: Write::WithNextSpawn,
        ..Transition::now(
            vec![results_remove(step, ResultKey::Commit)],
            format!("commit: none: {why}"),
        )
    }
}

#[cfg(test)]
mod tests;
