//! Parse + validate + render of M1.md files of growing size. Prints figures; asserts nothing.
//! Run with `cargo bench --bench m1`. The seed example should take well under 100 µs, and
//! µs per KB should stay flat as files grow (cost linear in size).
//!
//! Then what recording one step's result costs in a loop's file of 5 to 320 steps: the
//! edits of a passing step applied to the parsed file, rendered and parsed again, as each
//! write of the runner does (no I/O), against the 5-step file.

#![expect(
    clippy::cast_precision_loss,
    reason = "counts and sizes become f64 only to be printed, far below where f64 loses precision"
)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use m1loop::m1::keys::{PlanKey, ResultKey, Top};
use m1loop::m1::{Document, Edit, StepState};

const SEED: &str = include_str!("../examples/M1.md");

/// A valid file with `steps` steps, each with a RESULTS block, and `prose` lines of notes
/// between the blocks.
fn file(steps: usize, prose_lines: usize) -> String {
    let mut s = String::from(
        "# ループ\n\nSTATUS: RUNNING              # IDLE / RUNNING / WAITING / DONE / FAILED\nGOAL: 大きなファイルの性能を測る\n\n",
    );
    let _ = writeln!(
        s,
        "PLAN:\n  TOTAL_STEPS: {steps}\n  CURRENT_STEP: 1\n  STEPS:"
    );
    for n in 1..=steps {
        let _ = writeln!(s, "    {n}: [DONE] ステップ {n} を実装 → src/mod_{n}.rs");
    }
    s.push_str("\nRESULTS:\n");
    for n in 1..=steps {
        let _ = writeln!(
            s,
            "  STEP_{n}:\n    EXIT: 0\n    COMMIT: a690fb{n:x}\n    SUMMARY: \"完了 # {n}: 5つの修正案\"   # note\n    VERIFIED: true\n    ATTEMPTS: 1\n    COST_USD: 0.{n}"
        );
    }
    s.push_str("\n## Notes\n\n");
    for i in 0..prose_lines {
        let _ = writeln!(
            s,
            "- 観察 {i}: the agent edited a file and the tests passed 🚀"
        );
    }
    s.push_str("\nLAST_ACTION: Step 1 spawned\n");
    s
}

/// Mean time of `op`, run over enough rounds (at least 3) to fill about `budget`.
fn mean_time(budget: Duration, mut op: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut rounds = 0u32;
    while start.elapsed() < budget || rounds < 3 {
        op();
        rounds += 1;
    }
    start.elapsed() / rounds
}

/// Mean time of one parse + render, over enough rounds to fill about `budget`.
fn time(text: &str, budget: Duration) -> Duration {
    let doc = Document::parse(text).expect("benchmark input is valid");
    assert_eq!(doc.render(), text);
    mean_time(budget, || {
        let doc = Document::parse(black_box(text)).unwrap();
        black_box(doc.render());
    })
}

fn report(name: &str, text: &str) {
    let t = time(text, Duration::from_millis(300));
    let kb = text.len() as f64 / 1024.0;
    let us = t.as_secs_f64() * 1e6;
    println!(
        "{name:<28} {kb:>9.1} KB {us:>12.1} µs/op {:>8.2} µs/KB",
        us / kb
    );
}

/// A loop's file at its last step: `steps` steps, the first `steps - 1` DONE with their
/// results, the last one running.
fn at_last_step(steps: u32) -> String {
    let mut s = format!(
        "STATUS: RUNNING\nGOAL: the goal\nCONSTRAINTS: (none)\n\nPLAN:\n  TOTAL_STEPS: \
         {steps}\n  CURRENT_STEP: {steps}\n  STEPS:\n"
    );
    for n in 1..=steps {
        let state = if n < steps { "DONE" } else { "RUNNING" };
        let _ = writeln!(
            s,
            "    {n}: [{state}] step {n} of the plan → src/mod_{n}.rs"
        );
    }
    s.push_str("\nRESULTS:\n");
    for n in 1..steps {
        let _ = writeln!(
            s,
            "  STEP_{n}:\n    EXIT: 0\n    SESSION_ID: 5e0d0c2a-{n:04}\n    COST_USD: 0.0100\n    \
             DURATION_S: 4.2\n    SUMMARY: did step {n}\n    VERIFIED: true\n    ATTEMPTS: 1"
        );
    }
    s.push_str("\nLAST_ACTION: Step spawned\nNEXT_ACTION: Wait for the step\n");
    s
}

/// The edits a passing last step records.
fn step_record(n: u32) -> Vec<Edit> {
    vec![
        ResultKey::Exit.set(n, "0"),
        ResultKey::SessionId.set(n, "5e0d0c2a-last"),
        ResultKey::CostUsd.set(n, "0.0100"),
        ResultKey::DurationS.set(n, "4.2"),
        Edit::StepState(n, StepState::Done),
        ResultKey::Summary.set(n, "did the last step"),
        ResultKey::Verified.set(n, "true"),
        ResultKey::Attempts.set(n, "1"),
        PlanKey::CurrentStep.set(n.to_string()),
        Top::LastAction.set(format!("Step {n} passed")),
        Top::NextAction.set("Finish the loop"),
    ]
}

/// Mean time to record a step's result in `text` (parsed once, outside the timing).
fn record_time(text: &str, n: u32, budget: Duration) -> Duration {
    let doc = Document::parse(text).expect("benchmark input is valid");
    let edits = step_record(n);
    mean_time(budget, || {
        let mut d = black_box(&doc).clone();
        for e in &edits {
            d.apply(e);
        }
        let out = d.render();
        black_box(Document::parse(&out).expect("the record keeps the file valid"));
    })
}

fn records() {
    println!("a step's result recorded: edits applied, rendered, parsed again (mean per op)");
    let mut first = None;
    for steps in [5, 20, 80, 320] {
        let text = at_last_step(steps);
        let us = record_time(&text, steps, Duration::from_millis(300)).as_secs_f64() * 1e6;
        let base = *first.get_or_insert(us);
        println!(
            "{:<28} {:>9.1} KB {us:>12.1} µs/op {:>8.2}× the 5-step file",
            format!("{steps} steps"),
            text.len() as f64 / 1024.0,
            us / base
        );
    }
}

fn main() {
    records();
    println!("parse + validate + render (mean per op)");
    report("seed example", SEED);
    report("10 steps", &file(10, 0));
    for (steps, prose) in [(100, 500), (400, 2_000), (1_600, 8_000)] {
        let text = file(steps, prose);
        report(&format!("{steps} results + {prose} prose"), &text);
    }
    let mut big = file(2_000, 0);
    let mut prose = 0;
    while big.len() < 1 << 20 {
        big = file(2_000, prose);
        prose += 2_000;
    }
    report("~1 MB results + prose", &big);
}
