//! Fault injection against scheduled starts, with real processes, real time and the simulated
//! agent: each round queues loops (`loop start --at`) due a few hundred milliseconds apart,
//! then kills `loop daemon` with SIGKILL at random moments around those due times (and so,
//! now and then, in the middle of a start: after its intent is written, while `loop start`
//! runs, before its outcome is), starting it again each time, as a service manager would.
//! Then one daemon runs until every due time has its outcome. Counts, for every due time:
//! lost (no loop started), started twice (a second loop written in its project, which archives
//! the first as `M1.<time>.md`, or more than one `started` line in the ledger), and loops not
//! DONE.
//!
//! Run: `cargo build --release && cargo run --release --example schedule_soak -- --rounds 20`
//! (`--seed N` for another sequence of kills; `--loops N` due times per round, default 6).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{Rng, bin, number_after, wait_for};

/// One round's directory: its per-user state (schedules, ledger), its projects, its agent.
struct Round {
    dir: PathBuf,
}

impl Round {
    fn new(root: &Path, i: u64) -> Self {
        let dir = root.join(format!("round-{i:04}"));
        std::fs::create_dir_all(dir.join("sim")).unwrap();
        std::fs::write(
            dir.join("sim/scenario.json"),
            r#"{"default": {"sleep_ms": 20, "result": "worked\nSTEP_DONE: ok"}}"#,
        )
        .unwrap();
        Round { dir }
    }

    fn file(&self, n: u64) -> PathBuf {
        self.dir.join(format!("p{n}/state/M1.md"))
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin("loop"));
        c.args(args)
            .current_dir(&self.dir)
            .env("LOOP_AGENT", bin("claude-sim"))
            .env("LOOP_STOP_FILE", self.dir.join("stop"))
            .env("XDG_STATE_HOME", self.dir.join("xdg"))
            .env("LOOP_REVIVE", "off")
            .env("CLAUDE_SIM_SCENARIO", self.dir.join("sim/scenario.json"))
            .env("CLAUDE_SIM_LOG", self.dir.join("sim/calls.jsonl"))
            .env("LOOP_SANDBOX_WRITE", self.dir.join("sim"))
            .env("LOOP_SANDBOX_ENV", "CLAUDE_SIM_*")
            .env_remove("LOOP_FILE")
            .env_remove("LOOP_CRASH_AT")
            .env_remove("TELEGRAM_BOT_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn daemon(&self) -> Child {
        self.cmd(&["daemon", "--every", "1s"])
            .spawn()
            .expect("start loop daemon")
    }

    /// The ledger's lines: (schedule id, what).
    fn ledger(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(self.dir.join("xdg/m1loop/schedules.ledger.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| {
                (
                    v["id"].as_str().unwrap_or_default().to_owned(),
                    v["what"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// How many due times have their outcome.
    fn closed(&self) -> usize {
        self.ledger().iter().filter(|(_, w)| w != "intent").count()
    }
}

#[derive(Default, Debug)]
struct Counts {
    due: u64,
    started_once: u64,
    lost: u64,
    twice: u64,
    not_done: u64,
    kills: u64,
    /// Due times whose start was begun again after a daemon was killed between its intent and
    /// its loop (more than one intent in the ledger).
    begun_again: u64,
}

/// How many loops were written in the loop file's directory: its M1.md, and each archive
/// (`M1.<time>.md`) a second start would have made of the first.
fn loops_in(file: &Path) -> usize {
    std::fs::read_dir(file.parent().unwrap())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("M1.") && path.extension().is_some_and(|x| x == "md")
        })
        .count()
}

fn round(root: &Path, i: u64, loops: u64, rng: &mut Rng, counts: &mut Counts) {
    let r = Round::new(root, i);
    let start = chrono::Utc::now() + chrono::Duration::milliseconds(600);
    for n in 0..loops {
        let file = r.file(n);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let at = start + chrono::Duration::milliseconds(i64::try_from(n * 300).unwrap_or(0));
        let file_arg = file.display().to_string();
        let status = r
            .cmd(&[
                "--file",
                &file_arg,
                "start",
                "g",
                "--step",
                "a",
                "--at",
                &at.to_rfc3339(),
            ])
            .status()
            .expect("loop start --at");
        assert!(
            status.success(),
            "loop start --at failed in {}",
            r.dir.display()
        );
    }
    counts.due += loops;
    // Killed at random around the due times, and started again.
    let until = Instant::now() + Duration::from_millis(900 + 300 * loops);
    while Instant::now() < until {
        let mut d = r.daemon();
        std::thread::sleep(Duration::from_millis(50 + rng.below(500)));
        let _ = d.kill();
        let _ = d.wait();
        counts.kills += 1;
    }
    let mut d = r.daemon();
    let all = usize::try_from(loops).unwrap_or(0);
    let closed = wait_for(Duration::from_secs(120), || r.closed() >= all);
    let done = wait_for(Duration::from_secs(120), || {
        (0..loops)
            .all(|n| std::fs::read_to_string(r.file(n)).is_ok_and(|t| t.contains("STATUS: DONE")))
    });
    let _ = d.kill();
    let _ = d.wait();
    let ledger = r.ledger();
    for n in 0..loops {
        let id = format!("S{}", n + 1);
        let starts = loops_in(&r.file(n));
        let recorded = ledger
            .iter()
            .filter(|(i, w)| *i == id && w == "started")
            .count();
        let intents = ledger
            .iter()
            .filter(|(i, w)| *i == id && w == "intent")
            .count();
        if intents > 1 {
            counts.begun_again += 1;
        }
        match (starts, recorded) {
            (1, 1) => counts.started_once += 1,
            (0, _) => {
                counts.lost += 1;
                eprintln!("lost: {id} of {} ({:?})", r.dir.display(), ledger);
            }
            _ => {
                counts.twice += 1;
                eprintln!(
                    "twice: {id} of {}: {starts} starts, {recorded} in the ledger",
                    r.dir.display()
                );
            }
        }
    }
    if !closed || !done {
        counts.not_done += 1;
        eprintln!("round {i}: not every loop DONE in {}", r.dir.display());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = number_after(&args, "--rounds").unwrap_or(10);
    let loops = number_after(&args, "--loops").unwrap_or(6);
    let mut rng = Rng(number_after(&args, "--seed").unwrap_or(0x5eed_cafe) | 1);
    let root = tempfile::tempdir().expect("a temporary directory");
    let mut counts = Counts::default();
    for i in 0..rounds {
        round(root.path(), i, loops, &mut rng, &mut counts);
        println!(
            "round {}: {} due, {} started once, {} lost, {} twice, {} daemon kills",
            i + 1,
            counts.due,
            counts.started_once,
            counts.lost,
            counts.twice,
            counts.kills
        );
    }
    println!(
        "due times {}, started once {}, lost {}, started twice {}, rounds not all DONE {}, \
         daemon kills {}, starts begun again after a kill mid-start {}",
        counts.due,
        counts.started_once,
        counts.lost,
        counts.twice,
        counts.not_done,
        counts.kills,
        counts.begun_again
    );
    if counts.lost + counts.twice + counts.not_done > 0 {
        eprintln!("kept for a look: {}", root.keep().display());
        std::process::exit(1);
    }
}
