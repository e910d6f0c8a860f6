//! A person closes the running step by hand: an editor's save (by rename) that sets it
//! `[SKIPPED]` or `[DONE]` while its attempt or its review runs, half the time followed at once
//! by kill -9 of the runner and a resume. The step must keep the person's state at its run's
//! end (the next decision), whoever concludes the run, and its attempt must not run again.
//!
//! What counts is read from the loop's log: the runner says when it reads a step closed while
//! it runs, and when it concludes such a run. A save that lands once the run has ended is not
//! such a close (the step is no longer RUNNING in the file): it is a stale save like the
//! others.

use std::process::Child;
use std::time::Duration;

use super::{Loop, STEPS, Tally, save_by_rename};
use crate::common::{Rng, kill9, wait_for};

/// Closes a step of `l` while it runs, as said above.
pub fn close_running_step(l: &Loop, runner: &mut Child, rng: &mut Rng, t: &mut Tally) {
    let k = 1 + rng.below(STEPS);
    if !wait_for(Duration::from_secs(30), || l.step_running(k)) {
        return;
    }
    std::thread::sleep(Duration::from_millis(rng.below(300)));
    let state = if rng.below(2) == 0 { "SKIPPED" } else { "DONE" };
    let text = l.text();
    let line = format!("{k}: [RUNNING] ");
    if !text.contains(&line) {
        return;
    }
    save_by_rename(
        &l.file,
        &text.replacen(&line, &format!("{k}: [{state}] "), 1),
    );
    t.hand_closes += 1;
    if rng.below(2) == 0 {
        kill9(runner.id());
        let _ = runner.wait();
        t.runner_kills += 1;
        *runner = l.carry_on(t).spawn().unwrap();
    }
}

/// The steps the loop's runners read as closed by hand while they ran, with the state set:
/// from the line that reads the edit, or from the one that concludes the run (a runner killed
/// between reading the save and saying so leaves only the second, said by the next runner).
pub fn closed(l: &Loop) -> Vec<(u64, String)> {
    let log = std::fs::read_to_string(l.state().join("loop.log")).unwrap_or_default();
    let read = |line: &str| -> Option<(u64, String)> {
        let rest = line.split("edit: step ").nth(1)?;
        let (k, rest) = rest.split_once(" set ")?;
        let (state, _) = rest.split_once(" by hand while it runs")?;
        Some((k.parse().ok()?, state.to_owned()))
    };
    let concluded = |line: &str| -> Option<(u64, String)> {
        let rest = line.split("by hand: ").nth(1)?;
        let rest = rest
            .strip_prefix("Step ")
            .or_else(|| rest.strip_prefix("the review of step "))?;
        let (k, rest) = rest.split_once(' ')?;
        let (_, rest) = rest.split_once("; the step stays ")?;
        let (state, _) = rest.split_once(", as set by hand")?;
        Some((k.parse().ok()?, state.to_owned()))
    };
    let mut closed: Vec<(u64, String)> = log
        .lines()
        .filter_map(|line| read(line).or_else(|| concluded(line)))
        .collect();
    closed.sort();
    closed.dedup();
    closed
}

/// Whether each step closed by hand while it ran kept that state, and ran one attempt.
pub fn assess(l: &Loop, t: &mut Tally) -> Vec<String> {
    let mut bad = Vec::new();
    let text = l.text();
    let attempts = |k: u64| {
        l.calls()
            .iter()
            .filter(|c| c["step"].as_u64() == Some(k) && c["review"].as_bool() != Some(true))
            .count()
    };
    for (k, state) in closed(l) {
        t.hand_closes_taken += 1;
        if !text.contains(&format!("{k}: [{state}] ")) {
            t.hand_closes_lost += 1;
            bad.push(format!(
                "step {k} set {state} by hand while it ran was overwritten"
            ));
        }
        let n = attempts(k);
        if n != 1 {
            t.hand_closes_rerun += 1;
            bad.push(format!(
                "step {k} closed by hand while it ran had {n} attempts"
            ));
        }
    }
    bad
}

/// The figures of the closes by hand.
pub fn report(t: &Tally) {
    println!(
        "  the running step set SKIPPED or DONE by hand: {} saves, {} read while the step ran; \
         overwritten {}, run again {}",
        t.hand_closes, t.hand_closes_taken, t.hand_closes_lost, t.hand_closes_rerun
    );
}
