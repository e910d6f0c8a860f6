//! Parallel steps, printed as figures (not asserted): the wall time of a plan of three
//! independent steps plus one that needs them (`PLAN.AFTER`), with an agent that sleeps
//! (`BENCH_STEP_MS` per step, default 2000), at `LIMITS.PARALLEL` 1 and 3, measured in the same
//! run, and their ratio. Three steps at once, then the fourth: the ratio approaches
//! (3 + 1) / (1 + 1) = 2 as the loop's own overhead (worktrees, merges, VERIFY) shrinks
//! against the agent's time.
//!
//! Run: `cargo bench --bench parallel`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{loop_cmd, ms};

fn fresh(tag: &str, step_ms: u64) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("loop-bench-parallel-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(ok.status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let step = |n: u32, file: &str| serde_json::json!({"sleep_ms": step_ms, "write": [{"path": file, "text": format!("{n}\n")}]});
    let scenario = serde_json::json!({"steps": {
        "1": step(1, "api.txt"), "2": step(2, "ui.txt"), "3": step(3, "docs.txt"),
        "4": {"sleep_ms": step_ms}
    }});
    std::fs::write(dir.join("scenario.json"), scenario.to_string()).unwrap();
    dir
}

/// The wall time of the whole plan at `parallel`, from `loop resume` to DONE.
fn run(parallel: u32, step_ms: u64) -> Duration {
    let dir = fresh(&parallel.to_string(), step_ms);
    let p = parallel.to_string();
    let ok = loop_cmd(
        &dir,
        &[
            "start",
            "g",
            "--step",
            "api",
            "--step",
            "ui",
            "--step",
            "docs",
            "--step",
            "e2e",
            "--parallel",
            &p,
            "--plan-only",
            "--verify",
            "true",
        ],
    )
    .status()
    .unwrap();
    assert!(ok.success());
    let file = dir.join("state/M1.md");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "    4: [PENDING] e2e\n",
        "    4: [PENDING] e2e\n  AFTER:\n    4: 1, 2, 3\n",
    );
    std::fs::write(&file, text).unwrap();
    let began = Instant::now();
    let ok = loop_cmd(&dir, &["resume"])
        .env("LOOP_REVIVE", "off")
        .status()
        .unwrap();
    let took = began.elapsed();
    let done = std::fs::read_to_string(&file)
        .unwrap()
        .starts_with("STATUS: DONE");
    assert!(
        ok.success() && done,
        "the loop at {} did not end DONE",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
    took
}

fn main() {
    let step_ms: u64 = std::env::var("BENCH_STEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let one = run(1, step_ms);
    let three = run(3, step_ms);
    println!(
        "parallel: 3 independent steps + 1 after them, {step_ms} ms of agent each: PARALLEL 1 \
         {:.0} ms, PARALLEL 3 {:.0} ms, ratio {:.2}x (ideal 2.00x)",
        ms(one),
        ms(three),
        one.as_secs_f64() / three.as_secs_f64()
    );
}
