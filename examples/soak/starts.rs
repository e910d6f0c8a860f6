//! Which agent calls of a loop were one run started twice, from the simulated agent's log of
//! calls (in the order they started).
//!
//! A run is an attempt of a step, or a review run of one attempt: the reviewer's
//! `LOOP_ATTEMPT` is its review run's number, which starts again at 1 for each attempt that
//! reaches review (a step sent back by a merge conflict, or by a reviewer asking for changes,
//! is attempted again and reviewed afresh). So a review is known by the attempt it follows in
//! its step's loop, the last attempt of that step called before it.
//!
//! A loop whose steps run at once runs each in a loop of its own, under its own id
//! (`parallel/<LOOP_ID>/step-N.loop/M1.md`): a step started in two such loops of one parent is
//! started twice, and a second loop in the same directory counts afresh.

use std::collections::{HashMap, HashSet};

/// One run: the loop the person started (empty for a loop whose steps run one by one), the
/// step, the attempt, and the review run of that attempt for a reviewer's call.
pub type Run = (String, u64, u64, Option<u64>);

/// How many times each run of `calls` was started (a count above 1 is a double start).
pub fn starts(calls: &[serde_json::Value]) -> HashMap<Run, usize> {
    let mut seen: HashMap<Run, usize> = HashMap::new();
    let mut last_attempt: HashMap<(String, u64), u64> = HashMap::new();
    let mut step_loops: HashMap<(String, u64), HashSet<String>> = HashMap::new();
    for c in calls {
        let (Some(step), Some(number)) = (c["step"].as_u64(), c["attempt"].as_u64()) else {
            continue;
        };
        let file = c["loop_file"].as_str().unwrap_or_default();
        let parent = file
            .split("/parallel/")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_default()
            .to_owned();
        step_loops
            .entry((parent.clone(), step))
            .or_default()
            .insert(c["loop_id"].as_str().unwrap_or_default().to_owned());
        // A reviewer's call, whichever backend (the simulated agent logs `LOOP_REVIEW`).
        let run = if c["review"].as_bool() == Some(true) {
            let attempt = last_attempt
                .get(&(parent.clone(), step))
                .copied()
                .unwrap_or(0);
            (parent, step, attempt, Some(number))
        } else {
            last_attempt.insert((parent.clone(), step), number);
            (parent, step, number, None)
        };
        *seen.entry(run).or_default() += 1;
    }
    // A step of a parallel loop started in a second loop of its own.
    for ((parent, step), loops) in step_loops {
        if !parent.is_empty() && loops.len() > 1 {
            seen.insert(
                (format!("{parent} in another loop"), step, 0, None),
                loops.len(),
            );
        }
    }
    seen
}

/// The number of starts beyond the first of every run.
pub fn doubles(seen: &HashMap<Run, usize>) -> usize {
    seen.values().map(|n| n - 1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call of the simulated agent as its log has it, in the step loop of parent `p1`.
    fn call(step: u64, attempt: u64, review: bool) -> serde_json::Value {
        serde_json::json!({
            "step": step,
            "attempt": attempt,
            "review": review,
            "loop_id": format!("child{step}"),
            "loop_file": format!("/p/state/parallel/p1/step-{step}.loop/M1.md"),
        })
    }

    #[test]
    fn a_review_of_the_attempt_after_a_merge_conflict_is_not_a_double_start() {
        // Step 3 sent back twice by a conflict: each new attempt has its own first review.
        let calls = [
            call(3, 1, false),
            call(3, 1, true),
            call(3, 2, false),
            call(3, 1, true),
            call(3, 3, false),
            call(3, 1, true),
        ];
        assert_eq!(doubles(&starts(&calls)), 0, "{:?}", starts(&calls));
    }

    #[test]
    fn a_review_run_started_twice_for_one_attempt_is_a_double_start() {
        let calls = [
            call(2, 1, false),
            call(2, 1, true),
            call(2, 2, false),
            call(2, 1, true),
            call(2, 1, true),
        ];
        let seen = starts(&calls);
        assert_eq!(doubles(&seen), 1, "{seen:?}");
        assert_eq!(seen[&("p1".into(), 2, 2, Some(1))], 2);
    }

    #[test]
    fn an_attempt_started_twice_is_a_double_start_whatever_came_between() {
        let calls = [call(1, 1, false), call(1, 1, true), call(1, 1, false)];
        assert_eq!(doubles(&starts(&calls)), 1);
    }

    #[test]
    fn a_step_run_in_two_loops_of_one_parent_is_a_double_start() {
        let mut again = call(1, 2, false);
        again["loop_id"] = "another".into();
        let calls = [call(1, 1, false), again];
        assert_eq!(doubles(&starts(&calls)), 1);
    }
}
