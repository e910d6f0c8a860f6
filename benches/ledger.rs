//! How long opening a loop takes as its state directory fills with task directories, printed
//! as figures (not asserted).
//!
//! A runner opening a loop reads the task ledger (what the loop started and how each start
//! was judged). The bench runs one real two-step loop with the simulated agent, then copies
//! its task directories (spec and judgement) into 0, 1,000 and 10,000 more task directories:
//! `OWN` of this loop, the rest of another loop of the same state directory (an older loop's,
//! as after many loops). Each figure is `loop resume` of the finished loop (the runner opens
//! it, sees it DONE and exits), run `RUNS` times: the first open, and the median and spread of
//! the others, against `loop --version` (starting the binary at all). The first open is that
//! of a state directory of a version before the ledger's index (none is there), or the first
//! after a reboot. Caches are warm (the copies were just written).
//!
//! Run: `cargo bench --bench ledger` (`LEDGER_BENCH_DIRS=0,1000,10000` sets the sizes).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{LOOP, loop_cmd, ms};

/// Task directories of the loop that is opened (when there are that many in all).
const OWN: usize = 50;
const RUNS: usize = 7;

/// A finished two-step loop in a new temporary directory.
fn finished_loop() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("scenario.json"),
        r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#,
    )
    .unwrap();
    let ok = loop_cmd(
        dir.path(),
        &["start", "bench", "--step", "a", "--step", "b"],
    )
    .status()
    .unwrap()
    .success();
    assert!(ok, "the loop did not finish: see {}", dir.path().display());
    dir
}

/// A task directory of the loop, to copy: its spec, its judgement, and the loop's id.
struct Template {
    spec: String,
    judged: String,
    loop_id: String,
}

fn template(state: &Path) -> Template {
    let task = std::fs::read_dir(state.join("tasks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("judged.json").exists())
        .expect("a judged task");
    let spec = std::fs::read_to_string(task.join("spec.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&spec).unwrap();
    let loop_id = v["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv[0] == "LOOP_ID")
        .map(|kv| kv[1].as_str().unwrap().to_owned())
        .unwrap();
    let id = v["id"].as_str().unwrap().to_owned();
    Template {
        // Every copy gets its own id; the template's id is replaced below.
        spec: spec.replace(&id, "{ID}"),
        judged: std::fs::read_to_string(task.join("judged.json")).unwrap(),
        loop_id,
    }
}

/// Fills `state/tasks` with `n` task directories besides the loop's own real ones: `OWN` of
/// the loop (at most `n`), the others of another loop. Ids sort before the real ones.
fn fill(state: &Path, t: &Template, n: usize) {
    let tasks = state.join("tasks");
    let other = "0123456789ab";
    for i in 0..n {
        let id = format!("task_20200101T000000_{i:06x}");
        let loop_id = if i < OWN { &t.loop_id } else { other };
        let spec = t
            .spec
            .replace("{ID}", &id)
            .replace(&format!("\"{}\"", t.loop_id), &format!("\"{loop_id}\""));
        let dir = tasks.join(&id);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("spec.json"), spec).unwrap();
        std::fs::write(dir.join("judged.json"), &t.judged).unwrap();
    }
}

fn timed(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// Median, min and max of the samples, in milliseconds.
fn spread(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    (ms(v[v.len() / 2]), ms(v[0]), ms(v[v.len() - 1]))
}

fn sizes() -> Vec<usize> {
    std::env::var("LEDGER_BENCH_DIRS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| vec![0, 1000, 10_000])
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let base = spread(
        (0..RUNS)
            .map(|_| {
                timed(|| {
                    assert!(
                        Command::new(LOOP)
                            .arg("--version")
                            .stdout(Stdio::null())
                            .status()
                            .unwrap()
                            .success()
                    );
                })
            })
            .collect(),
    );
    println!(
        "ledger: opening a finished loop (`loop resume`), {OWN} of the task directories its own"
    );
    println!(
        "  loop --version           : median {:6.1} ms (min {:.1}, max {:.1})",
        base.0, base.1, base.2
    );
    for n in sizes() {
        let dir = finished_loop();
        let state: PathBuf = dir.path().join("state");
        let t = template(&state);
        fill(&state, &t, n);
        // As a state directory of a version before the ledger's index, or at the first open
        // after a reboot: the index is rebuilt from the task directories then (if there is one).
        let _ = std::fs::remove_dir_all(state.join("tasks/.ledger"));
        let mut opens: Vec<Duration> = (0..RUNS)
            .map(|_| {
                timed(|| {
                    let ok = loop_cmd(dir.path(), &["resume"])
                        .status()
                        .unwrap()
                        .success();
                    assert!(ok, "resume failed: see {}", dir.path().display());
                })
            })
            .collect();
        let first = opens.remove(0);
        let (median, min, max) = spread(opens);
        println!(
            "  {n:>6} more task directories: first open {:7.1} ms; then median {median:6.1} ms (min {min:.1}, max {max:.1})",
            ms(first)
        );
    }
}
