//! Answers of the simulated agent that tests of more than one file give: a step's agent that
//! writes `a.txt`, a reviewer's verdicts on it, and loops whose every step passes.

use claude_sim::scenario::{Action, Scenario};

/// Every step passes at once.
pub fn passing() -> Scenario {
    Scenario::new().otherwise(Action::done("ok"))
}

/// Every step works `ms`, then passes.
pub fn steady(ms: u64) -> Scenario {
    Scenario::new().otherwise(Action::done("ok").sleep_ms(ms))
}

/// A step's agent writes `text` into a.txt and says so.
pub fn work(text: &str) -> Action {
    Action::done(&format!("a.txt says {text}"))
        .write("a.txt", &format!("{text}\n"))
        .cost(0.10)
}

pub fn approve() -> Action {
    Action::approve("a.txt is right").cost(0.02)
}

pub fn changes() -> Action {
    Action::changes("a.txt must say whole").cost(0.02)
}
