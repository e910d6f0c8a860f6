//! What a person's hand edit of M1.md means beyond its text, decided when the runner reads it:
//! the step count follows the step list (a person adds a step, not a number), a step set DONE
//! by hand is said to be one the loop never ran, and `STATUS: WAITING` is a pause that says how
//! to carry on.

use super::order::open_step;
use super::transitions::Transition;
use crate::exit::Status as Exit;
use crate::m1::keys::{PlanKey, Top};
use crate::m1::{Edit, M1, Status, StepState};

/// What the runner does about a hand edit it has just read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HandEdit {
    /// What the runner writes for the person (with its next write).
    pub edits: Vec<Edit>,
    /// Lines for the decision log.
    pub said: Vec<String>,
    /// The person paused the loop (`STATUS: RUNNING` → `WAITING`).
    pub paused: bool,
}

/// The hand edit from `before` (the loop as the runner knew it) to `after` (as the person left
/// it). `running`: the step whose run is on record, which its run's end decides.
#[must_use]
pub(crate) fn read(before: &M1, after: &M1, running: Option<u32>) -> HandEdit {
    let mut h = HandEdit {
        paused: before.status == Status::Running && after.status == Status::Waiting,
        ..HandEdit::default()
    };
    let count = after.plan.steps.len();
    if let Some(edit) = step_count(after) {
        h.said.push(format!(
            "edit: TOTAL_STEPS set to {count}, the steps PLAN.STEPS lists (it said {})",
            after.plan.total_steps
        ));
        h.edits.push(edit);
    }
    for s in &after.plan.steps {
        let was = before
            .plan
            .steps
            .iter()
            .find(|b| b.n == s.n)
            .map(|b| b.state);
        if running == Some(s.n)
            && was == Some(StepState::Running)
            && matches!(s.state, StepState::Skipped | StepState::Done)
        {
            let state = s.state.as_str();
            h.said.push(format!(
                "edit: step {} set {state} by hand while it runs: its run goes on to its end, \
                 which is recorded, not retried, and leaves the step {state} (`loop stop` ends \
                 the run now)",
                s.n
            ));
        }
        if s.state == StepState::Done
            && was != Some(StepState::Done)
            && running != Some(s.n)
            && done_by_hand(after, s.n)
        {
            h.said.push(format!(
                "edit: step {} set DONE by hand: the loop does not run it, and tells it as done \
                 by hand",
                s.n
            ));
        }
    }
    h
}

/// The state a person gave step `n` while its run was on record, when it closes the step:
/// SKIPPED or DONE. The run's end keeps it: the run is recorded, not retried, and the loop
/// goes on.
#[must_use]
pub(crate) fn closed_while_running(m: &M1, n: u32) -> Option<StepState> {
    m.plan
        .steps
        .iter()
        .find(|s| s.n == n)
        .map(|s| s.state)
        .filter(|s| matches!(s, StepState::Skipped | StepState::Done))
}

/// `TOTAL_STEPS` as the step list counts, when the file says another number of a plan that
/// has steps (with none, a count above 0 says the steps went missing, which validation
/// reports).
#[must_use]
pub(crate) fn step_count(m: &M1) -> Option<Edit> {
    let count = u32::try_from(m.plan.steps.len()).unwrap_or(u32::MAX);
    (count > 0 && m.plan.total_steps != count).then(|| PlanKey::TotalSteps.set(count.to_string()))
}

/// Whether step `n` is DONE without the loop having passed it: every step the loop passes is
/// recorded `VERIFIED: true` (its checks, and a person's acceptance of a review, come after
/// that), so a DONE step without it was set so by a person (by hand, or ticked in the
/// checklist it was imported from).
#[must_use]
pub(crate) fn done_by_hand(m: &M1, n: u32) -> bool {
    m.plan
        .steps
        .iter()
        .any(|s| s.n == n && s.state == StepState::Done)
        && m.results.get(&n).and_then(|r| r.verified) != Some(true)
}

/// What step `n` set DONE by hand is, in words: "done by hand, not run by the loop", or, for a
/// step a person closed while the loop ran it, "done by hand after N run(s) of the loop".
/// `None` when it is not done by hand.
#[must_use]
pub(crate) fn done_by_hand_words(m: &M1, n: u32) -> Option<String> {
    if !done_by_hand(m, n) {
        return None;
    }
    Some(match m.results.get(&n).and_then(|r| r.attempts) {
        None | Some(0) => "done by hand, not run by the loop".to_owned(),
        Some(1) => "done by hand after 1 run of the loop".to_owned(),
        Some(k) => format!("done by hand after {k} runs of the loop"),
    })
}

/// The loop stops at a pause a person asked for (`STATUS: WAITING` while it ran):
/// `NEXT_ACTION` says so and how to carry on, not the step that would have come next.
#[must_use]
pub(crate) fn paused(m: &M1) -> Transition {
    let how = match open_step(m, 0) {
        Some(s) => format!("`loop resume` carries on with step {}: {}", s.n, s.text),
        None => "`loop resume` carries on".to_owned(),
    };
    Transition::exit(
        vec![Top::NextAction.set(crate::text::one_line(
            &format!("Paused by hand (STATUS: WAITING): {how}"),
            300,
        ))],
        format!("waiting: paused by hand (STATUS: WAITING); {how}"),
        Exit::Waiting,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m1(text: &str) -> M1 {
        crate::m1::Document::parse(text).unwrap().view()
    }

    const TWO: &str = "STATUS: RUNNING\nGOAL: g\nPLAN:\n  TOTAL_STEPS: 2\n  CURRENT_STEP: 1\n  \
                       STEPS:\n    1: [RUNNING] a\n    2: [PENDING] b\n";

    #[test]
    fn a_step_added_by_hand_sets_the_count() {
        let after = m1(&format!("{TWO}    3: [PENDING] c\n"));
        let h = read(&m1(TWO), &after, Some(1));
        assert_eq!(h.edits, vec![PlanKey::TotalSteps.set("3")]);
        assert!(h.said[0].contains("TOTAL_STEPS set to 3"), "{:?}", h.said);
        assert!(!h.paused);
    }

    #[test]
    fn a_step_set_done_by_hand_is_said_and_the_running_one_is_left_to_its_runs_end() {
        let after = m1(&TWO.replace("[PENDING] b", "[DONE] b"));
        let h = read(&m1(TWO), &after, Some(1));
        assert!(h.edits.is_empty());
        assert_eq!(h.said.len(), 1, "{:?}", h.said);
        assert!(
            h.said[0].contains("step 2 set DONE by hand"),
            "{:?}",
            h.said
        );
        assert!(done_by_hand(&after, 2));
        let running = m1(&TWO.replace("[RUNNING] a", "[DONE] a"));
        let said = read(&m1(TWO), &running, Some(1)).said;
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("step 1 set DONE by hand while it runs: its run goes on to its end"),
            "{said:?}"
        );
        assert_eq!(closed_while_running(&running, 1), Some(StepState::Done));
        assert_eq!(closed_while_running(&m1(TWO), 1), None);
    }

    #[test]
    fn a_step_the_loop_passed_is_not_done_by_hand() {
        let passed = m1(&format!(
            "{}RESULTS:\n  STEP_1:\n    EXIT: 0\n    VERIFIED: true\n",
            TWO.replace("[RUNNING] a", "[DONE] a")
        ));
        assert!(!done_by_hand(&passed, 1));
    }

    #[test]
    fn a_pause_by_hand_says_how_to_carry_on() {
        let after = m1(&TWO
            .replace("STATUS: RUNNING", "STATUS: WAITING")
            .replace("[RUNNING] a", "[DONE] a"));
        assert!(read(&m1(TWO), &after, None).paused);
        let t = paused(&after);
        assert_eq!(
            t.edits,
            vec![
                Top::NextAction.set(
                    "Paused by hand (STATUS: WAITING): `loop resume` carries on with step 2: b"
                )
            ]
        );
        assert_eq!(t.outcome, super::super::Outcome::Exit(Exit::Waiting));
    }
}
