//! The loop's figures: one count of attempts and one sum of cost, which M1.md records and
//! `loop status`, the report, the chat's messages and the traces all show. Attempts are those
//! the agent's runs were made for, whatever became of the step; the cost is every agent run's
//! the loop paid for (its attempts', its reviews', the planning call's, and those cut off).
//! For a loop whose steps run in loops of their own, a step still there counts what its own
//! loop has recorded so far.

use std::collections::BTreeMap;

use super::run::RunKind;
use crate::m1::M1;

/// What a step took, or a whole loop.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Figures {
    pub attempts: u32,
    pub cost_usd: f64,
    pub tokens: u64,
}

impl Figures {
    /// Each figure, the larger of the two.
    fn max(self, other: Self) -> Self {
        Self {
            attempts: self.attempts.max(other.attempts),
            cost_usd: self.cost_usd.max(other.cost_usd),
            tokens: self.tokens.max(other.tokens),
        }
    }
}

/// Step `n`'s attempts: every attempt its agent's runs were made for, the one running now
/// included. Those before a person's `loop retry` count once: ATTEMPTS numbers on across it,
/// and RETRIED only says how many of them no longer count against `Caps::max_retries`. A run cut
/// off (a transient error, a usage limit, a fallback to another backend) and carried on is
/// the same attempt; reviews are counted apart (`REVIEW_RUNS`).
#[must_use]
pub(crate) fn attempts(m: &M1, n: u32) -> u32 {
    let recorded = m.results.get(&n).and_then(|r| r.attempts).unwrap_or(0);
    let running = super::runs_on_record(m)
        .into_iter()
        .filter(|r| r.step == n && r.kind != RunKind::Review)
        .map(|r| r.number)
        .max()
        .unwrap_or(0);
    recorded.max(running)
}

/// Step `n`'s figures as `m` records them.
#[must_use]
pub(crate) fn of_step(m: &M1, n: u32) -> Figures {
    let r = m.results.get(&n);
    Figures {
        attempts: attempts(m, n),
        cost_usd: r.and_then(|r| r.cost_usd).unwrap_or(0.0),
        tokens: r.and_then(|r| r.tokens).unwrap_or(0),
    }
}

/// Step `n`'s figures in a loop whose steps run in loops of their own (`own`: those loops'
/// M1.md by step): while it is there (not merged), what its loop has recorded so far, where
/// that is more than this loop's record of it; else this loop's record.
#[must_use]
pub(crate) fn of_step_at_once(m: &M1, n: u32, own: &BTreeMap<u32, M1>) -> Figures {
    let here = of_step(m, n);
    let there = m
        .parallel
        .runs
        .get(&n)
        .filter(|r| r.merged.is_none())
        .and(own.get(&n));
    there.map_or(here, |c| here.max(whole(c)))
}

/// Everything loop `m` recorded, by itself.
fn whole(m: &M1) -> Figures {
    let steps: u32 = m.results.keys().map(|n| attempts(m, *n)).sum();
    let running = super::runs_on_record(m)
        .into_iter()
        .filter(|r| r.kind != RunKind::Review && !m.results.contains_key(&r.step))
        .map(|r| r.number)
        .sum::<u32>();
    Figures {
        attempts: steps + running,
        // `+ 0.0`: an empty sum of f64 is -0.0, which would print as `$-0.00`.
        cost_usd: m.results.values().filter_map(|r| r.cost_usd).sum::<f64>() + 0.0,
        tokens: m.results.values().filter_map(|r| r.tokens).sum(),
    }
}

/// The loop's totals: the attempts of its steps (the planning call's apart), and the cost and
/// tokens of every run on record, with what the loops of its steps that run at once (`own`,
/// empty for a loop that runs one step at a time) have spent so far.
#[must_use]
pub(crate) fn totals(m: &M1, own: &BTreeMap<u32, M1>) -> Figures {
    let mut t = whole(m);
    t.attempts = t.attempts.saturating_sub(attempts(m, 0));
    for (n, c) in own {
        if m.parallel.runs.get(n).is_some_and(|r| r.merged.is_none()) {
            let (here, there) = (of_step(m, *n), whole(c));
            t.attempts += there.attempts.saturating_sub(here.attempts);
            t.cost_usd += (there.cost_usd - here.cost_usd).max(0.0);
            t.tokens += there.tokens.saturating_sub(here.tokens);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::m1::Document;

    fn view(text: &str) -> M1 {
        Document::parse(text).unwrap().view()
    }

    #[test]
    fn attempts_before_a_retry_count_once_and_the_running_one_counts() {
        let m = view(
            "STATUS: RUNNING\nGOAL: g\nPLAN:\n  CURRENT_STEP: 1\n  STEPS:\n    1: [RUNNING] a\n\
             CURRENT:\n  TASK_ID: t4\n  ATTEMPT: 4\nRESULTS:\n  STEP_1:\n    ATTEMPTS: 3\n    \
             RETRIED: 2\n    COST_USD: 0.15\n",
        );
        assert_eq!(attempts(&m, 1), 4);
        let t = totals(&m, &BTreeMap::new());
        assert_eq!(t.attempts, 4);
        assert!((t.cost_usd - 0.15).abs() < 1e-9);
    }

    #[test]
    fn a_step_running_in_its_own_loop_counts_what_that_loop_spent_so_far() {
        let m = view(
            "STATUS: RUNNING\nGOAL: g\nPLAN:\n  STEPS:\n    1: [DONE] a\n    2: [RUNNING] b\n\
             PARALLEL:\n  STEP_2:\n    LOOP: /p/step-2.loop/M1.md\nRESULTS:\n  STEP_1:\n    \
             ATTEMPTS: 1\n    COST_USD: 0.05\n",
        );
        let child = view(
            "STATUS: RUNNING\nGOAL: g\nPLAN:\n  CURRENT_STEP: 2\n  STEPS:\n    1: [SKIPPED] a\n    \
             2: [RUNNING] b\nCURRENT:\n  TASK_ID: t2\n  ATTEMPT: 2\nRESULTS:\n  STEP_2:\n    \
             ATTEMPTS: 1\n    COST_USD: 0.03\n",
        );
        let own = BTreeMap::from([(2, child)]);
        let t = totals(&m, &own);
        assert_eq!(t.attempts, 3);
        assert!((t.cost_usd - 0.08).abs() < 1e-9, "{t:?}");
        assert_eq!(of_step_at_once(&m, 2, &own).attempts, 2);
        assert_eq!(totals(&m, &BTreeMap::new()).attempts, 1);
    }
}
