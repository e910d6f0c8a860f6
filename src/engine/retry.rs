//! `loop retry [N]`: a person gives a step a fresh attempt budget, or runs a passed step
//! again. The one deliberate way to re-run a step: it is recorded as such (`RETRIED` in the
//! step's RESULTS, and a mark on the pass in the task ledger), so that neither an old text nor
//! the ledger takes it for a lost record.

use super::transitions::{Transition, actions, name, results, results_remove, step_state};
use crate::m1::keys::{PlanKey, ResultKey, Top, clear_current};
use crate::m1::{Edit, M1, Status, StepState};

/// Which step a `loop retry` without a number means: the FAILED one, else (the loop waiting)
/// the one it stopped at, else none.
#[must_use]
pub(crate) fn retry_target(m: &M1) -> Option<u32> {
    if m.plan.steps.is_empty() {
        // Planning is what failed or waits.
        return matches!(m.status, Status::Failed | Status::Waiting).then_some(0);
    }
    if let Some(s) = m.plan.steps.iter().find(|s| s.state == StepState::Failed) {
        return Some(s.n);
    }
    if m.status != Status::Waiting {
        return None;
    }
    let current = m.plan.current_step;
    m.plan
        .steps
        .iter()
        .find(|s| s.n == current && !matches!(s.state, StepState::Done))
        .or_else(|| super::open_step(m, 0))
        .map(|s| s.n)
}

/// Step `n` gets a fresh budget (the attempts so far no longer count against `Caps::max_retries`,
/// and the review's retakes start again), goes back to PENDING, and the loop runs on. A step
/// that was DONE runs again; its old record stays until the new run replaces it, but for what
/// would say it passed.
#[must_use]
pub(crate) fn retried(m: &M1, n: u32) -> Transition {
    let r = m.results.get(&n);
    let attempts = r.and_then(|r| r.attempts).unwrap_or(0);
    let was = m
        .plan
        .steps
        .iter()
        .find(|s| s.n == n)
        .map_or(StepState::Pending, |s| s.state);
    let mut edits: Vec<Edit> = step_state(n, StepState::Pending).into_iter().collect();
    if attempts > 0 {
        edits.push(results(n, ResultKey::Retried, attempts.to_string()));
    }
    for key in [
        ResultKey::Retakes,
        ResultKey::ReviewRuns,
        ResultKey::Transient,
        ResultKey::Restarts,
    ] {
        edits.push(results_remove(n, key));
    }
    if was == StepState::Done {
        edits.push(results(n, ResultKey::Verified, "false"));
        edits.push(results_remove(n, ResultKey::Review));
    }
    edits.push(clear_current());
    edits.push(PlanKey::CurrentStep.set(n.to_string()));
    edits.push(Edit::Status(Status::Running));
    let who = name(n);
    let what = if was == StepState::Done {
        format!("{who} was DONE; it runs again")
    } else if n == 0 {
        format!("{who} gets a fresh budget of attempts")
    } else {
        format!("{who} ({}) gets a fresh budget of attempts", was.as_str())
    };
    edits.extend(actions(
        &format!("{what} (`loop retry`, a person's decision)"),
        &format!("Run {}", who.to_lowercase()),
    ));
    let prior = if attempts > 0 {
        format!("; its {attempts} earlier attempt(s) no longer count")
    } else {
        String::new()
    };
    Transition::now(
        edits,
        format!(
            "retry: {} by a person (`loop retry`): {what}{prior}",
            who.to_lowercase()
        ),
    )
}

/// [`retried`], with the gates that asked about step `n` answered `retry` (`by` deciding
/// them), and `why` for its agent when there is a reason (a merge that failed). The way a
/// person's `loop retry` runs a step again, and the way a loop that runs steps at once tells
/// a step's own loop to.
#[must_use]
pub(crate) fn retried_by(
    m: &M1,
    n: u32,
    why: Option<&str>,
    by: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Transition {
    let mut t = retried(m, n);
    for g in m
        .pending_gates()
        .filter(|g| g.step == n && g.kind != crate::m1::GateKind::Plan)
    {
        t.edits.extend(crate::m1::gates::decided(
            &g.id,
            crate::m1::GateOption::Retry.as_str(),
            by,
            now,
        ));
    }
    if let Some(why) = why {
        t.edits.push(results(
            n,
            ResultKey::Error,
            crate::text::one_line(why, 600),
        ));
        t.edits.push(Top::NextAction.set(crate::text::one_line(
            &format!("Run step {n} again: {why}"),
            300,
        )));
        t.log = format!(
            "retry: step {n} runs again: {}",
            crate::text::one_line(why, 200)
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::Document;

    const FAILED: &str = "STATUS: FAILED\nGOAL: g\nPLAN:\n  CURRENT_STEP: 2\n  STEPS:\n    1: [DONE] a\n    2: [FAILED] b\n    3: [PENDING] c\nRESULTS:\n  STEP_1:\n    ATTEMPTS: 1\n    SUMMARY: s\n  STEP_2:\n    ATTEMPTS: 3\n    RETAKES: 1\n    ERROR: no\n";

    fn view(text: &str) -> M1 {
        Document::parse(text).unwrap().view()
    }

    fn applied(text: &str, t: &Transition) -> M1 {
        let mut d = Document::parse(text).unwrap();
        for e in &t.edits {
            d.apply(e);
        }
        d.view()
    }

    #[test]
    fn a_failed_step_gets_a_fresh_budget_and_keeps_its_error_for_the_fix() {
        let m = view(FAILED);
        assert_eq!(retry_target(&m), Some(2));
        let after = applied(FAILED, &retried(&m, 2));
        assert_eq!(after.status, Status::Running);
        assert_eq!(after.plan.steps[1].state, StepState::Pending);
        assert_eq!(super::super::uncounted(&after, 2), 3);
        assert_eq!(after.results[&2].error.as_deref(), Some("no"));
        assert_eq!(after.results[&2].attempts, Some(3), "numbers go on");
    }

    #[test]
    fn a_done_step_runs_again_and_no_longer_reads_verified() {
        let m = view(FAILED);
        let after = applied(FAILED, &retried(&m, 1));
        assert_eq!(after.plan.steps[0].state, StepState::Pending);
        assert_eq!(after.results[&1].verified, Some(false));
        assert_eq!(after.plan.current_step, 1);
        assert!(retried(&m, 1).log.contains("a person"));
    }

    #[test]
    fn without_a_failed_step_retry_means_the_step_a_waiting_loop_stopped_at() {
        let waiting = FAILED
            .replace("STATUS: FAILED", "STATUS: WAITING")
            .replace("[FAILED] b", "[PENDING] b");
        assert_eq!(retry_target(&view(&waiting)), Some(2));
        let done = "STATUS: DONE\nGOAL: g\nPLAN:\n  STEPS:\n    1: [DONE] a\n";
        assert_eq!(retry_target(&view(done)), None);
    }
}
