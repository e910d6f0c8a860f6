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

/// The message of step `step`'s commit: a subject naming the step and what it did (`summary`,
/// else its text), then the step, the goal and the trailers that name the loop. `run`: the run
/// of the step it closes, by which a runner after a crash finds it again.
#[must_use]
pub(crate) fn message(m: &M1, step: u32, summary: Option<&str>, run: Option<&str>) -> String {
    let text = m
        .plan
        .steps
        .iter()
        .find(|s| s.n == step)
        .map(|s| s.text.clone())
        .unwrap_or_default();
    let summary = summary
        .map(str::to_owned)
        .or_else(|| m.result(step).summary.clone())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| text.clone());
    let total = m.plan.steps.len();
    format!(
        "loop: step {step}/{total}: {}\n\nStep {step}: {}\nGoal: {}\n\n{}",
        one_line(&summary, 90),
        one_line(&text, 300),
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
mod tests {
    use super::*;
    use crate::m1::Document;

    const DONE_2: &str = "STATUS: RUNNING
GOAL: fix the bug
LOOP_ID: 4f2a9c1d0b3e
PLAN:
  TOTAL_STEPS: 3
  CURRENT_STEP: 3
  STEPS:
    1: [DONE] investigate
    2: [DONE] fix the handler
    3: [PENDING] test
RESULTS:
  STEP_1:
    COMMIT: a690fb3
    VERIFIED: true
  STEP_2:
    COMMIT: (pending)
    SUMMARY: handler fixed
    VERIFIED: true
";

    fn view(text: &str) -> M1 {
        Document::parse(text).unwrap().view()
    }

    #[test]
    fn an_attempt_of_a_step_in_git_marks_its_work_and_nothing_else_does() {
        let m = view(DONE_2);
        let on = Caps::default();
        assert!(wanted(&m, &on, RunKind::Attempt, 3, true));
        assert!(!wanted(&m, &on, RunKind::Attempt, 3, false), "not in git");
        assert!(!wanted(&m, &on, RunKind::Plan, 0, true));
        assert!(!wanted(&m, &on, RunKind::Review, 3, true));
        let off = Caps {
            commit_steps: false,
            ..Caps::default()
        };
        assert!(!wanted(&m, &off, RunKind::Attempt, 3, true));
        let child = view(&format!("{DONE_2}PARENT_STEP: 3\n"));
        assert!(
            !wanted(&child, &on, RunKind::Attempt, 3, true),
            "a parallel step's own loop: its merge queue commits it"
        );
    }

    #[test]
    fn a_done_step_still_marked_is_owed_its_commit_unless_a_person_set_it_done() {
        let m = view(DONE_2);
        assert_eq!(m.results[&2].commit, None, "(pending) is no commit");
        assert!(m.results[&2].commit_pending);
        assert_eq!(due(&m, &Caps::default()), Some(Due::Commit(2)));
        let by_hand = view(&DONE_2.replace(
            "    SUMMARY: handler fixed\n    VERIFIED: true\n",
            "    SUMMARY: handler fixed\n",
        ));
        assert!(matches!(
            due(&by_hand, &Caps::default()),
            Some(Due::Drop { step: 2, why }) if why.contains("by hand")
        ));
        let off = Caps {
            commit_steps: false,
            ..Caps::default()
        };
        assert!(matches!(due(&m, &off), Some(Due::Drop { step: 2, .. })));
        let running = view(&DONE_2.replace("2: [DONE]", "2: [RUNNING]"));
        assert_eq!(due(&running, &Caps::default()), None, "not DONE yet");
        let skipped = view(&DONE_2.replace("2: [DONE]", "2: [SKIPPED]"));
        assert!(matches!(
            due(&skipped, &Caps::default()),
            Some(Due::Drop { step: 2, why }) if why.contains("skipped")
        ));
    }

    #[test]
    fn the_message_names_the_loop_the_step_and_its_summary_and_is_found_again() {
        let m = view(DONE_2);
        let msg = message(&m, 2, None, Some("task_1"));
        assert!(
            msg.starts_with(
                "loop: step 2/3: handler fixed\n\nStep 2: fix the handler\nGoal: fix the bug\n"
            ),
            "{msg}"
        );
        assert!(msg.ends_with("Loop-Id: 4f2a9c1d0b3e\nLoop-Step: 2\nLoop-Run: task_1\n"));
        assert!(is_commit_of(&msg, "4f2a9c1d0b3e", 2, "task_1"));
        assert!(
            !is_commit_of(&msg, "4f2a9c1d0b3e", 2, "task_2"),
            "another run of it"
        );
        assert!(!is_commit_of(&msg, "4f2a9c1d0b3e", 1, "task_1"));
        assert!(!is_commit_of(&msg, "ffffffffffff", 2, "task_1"));
    }

    fn applied(t: &Transition) -> M1 {
        let mut d = Document::parse(DONE_2).unwrap();
        for e in &t.edits {
            d.apply(e);
        }
        d.view()
    }

    #[test]
    fn the_record_names_the_commit_the_agents_own_and_what_was_left_out() {
        let made = Made {
            commit: Some("b1c2d3e".into()),
            files: 2,
            agent_commits: vec!["1111111".into()],
            left_out: vec!["notes.txt".into()],
            ..Made::default()
        };
        let t = recorded(2, &made);
        let r = applied(&t).results[&2].clone();
        assert_eq!(r.commit.as_deref(), Some("b1c2d3e"));
        assert!(!r.commit_pending);
        assert_eq!(r.agent_commits.as_deref(), Some("1111111"));
        assert!(r.uncommitted.unwrap().starts_with("notes.txt: "));
        assert_eq!(t.write, Write::WithNextSpawn);
        assert!(
            t.log
                .contains("as b1c2d3e (2 file(s)), after the agent's own"),
            "{}",
            t.log
        );
        assert!(
            t.effects.is_empty(),
            "left out is in the log and in RESULTS, not a message"
        );

        // The agent committed everything itself: its last commit is the step's.
        let own = recorded(
            2,
            &Made {
                agent_commits: vec!["1111111".into(), "2222222".into()],
                ..Made::default()
            },
        );
        let r = applied(&own).results[&2].clone();
        assert_eq!(r.commit.as_deref(), Some("2222222"));
        assert_eq!(r.uncommitted, None);
        assert!(own.effects.is_empty());

        // A change of the person's the agent's own commit took: said, and told.
        let took = recorded(
            2,
            &Made {
                agent_commits: vec!["1111111".into()],
                gone: vec!["notes.txt".into()],
                ..Made::default()
            },
        );
        assert!(
            took.log
                .contains("notes.txt had uncommitted changes of yours"),
            "{}",
            took.log
        );
        assert!(matches!(&took.effects[..], [Effect::Said(s)] if s.contains("notes.txt")));

        // Nothing changed: no commit, and the mark is gone.
        let none = applied(&recorded(2, &Made::default())).results[&2].clone();
        assert_eq!((none.commit, none.commit_pending), (None, false));
    }

    #[test]
    fn only_what_the_step_changed_is_its_own_and_a_file_both_changed_is_left_out() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(p, h)| ((*p).to_owned(), (*h).to_owned()))
                .collect()
        };
        let before = map(&[
            ("yours.txt", "h1"),
            ("both.txt", "h2"),
            ("committed.txt", "h3"),
            ("staged.txt", "h4"),
        ]);
        let now = map(&[
            ("yours.txt", "h1"),
            ("both.txt", "h9"),
            ("staged.txt", "h4"),
            ("new.txt", "h5"),
            ("deleted.txt", "-"),
            ("nested", "dir"),
        ]);
        let a = attribute(&before, &now);
        assert_eq!(a.step, ["deleted.txt", "new.txt"]);
        assert_eq!(a.left_out, ["both.txt"]);
        assert_eq!(a.gone, ["committed.txt"]);
    }

    #[test]
    fn a_commit_that_could_not_be_made_says_why_and_the_loop_goes_on() {
        let t = recorded(
            2,
            &Made {
                failed: Some("git update-ref failed".into()),
                ..Made::default()
            },
        );
        assert_eq!(t.outcome, Outcome::Continue);
        assert!(matches!(&t.effects[..], [Effect::Said(s)] if s.contains("git update-ref failed")));
        let r = applied(&t).results[&2].clone();
        assert_eq!(
            r.uncommitted.as_deref(),
            Some("all of it: git update-ref failed")
        );
        assert!(!r.commit_pending);
    }
}
