//! Fault injection against whole loops, with real processes and the simulated agent: kill -9
//! of the runner at random moments, stale saves of M1.md (an old text saved over newer
//! records, with the runner alive, dead, or after another runner took the loop over: revived
//! by itself or resumed by hand), kill -9 of a step's supervisor and guardian together, an
//! agent that leaves a `setsid` process and a grandchild behind, saves of M1.md every 20 ms
//! (by rename, by append, and in place in two chunks), a save in place in the first
//! milliseconds of `loop start`, `>>` appends around the loop's final write (see
//! `soak/saves.rs`), and the running step set SKIPPED or DONE by hand, half the time with the
//! runner killed right after (see `soak/by_hand.rs`); every other group of eleven loops runs
//! `--review`, so the faults also hit review runs. Counts, for every loop: double starts
//! (an attempt of a step, or a run of its review, started twice), re-runs of passed steps (an
//! attempt started after one of the same step was judged a pass), lost results (a loop not
//! DONE, a step without its result or, when reviewed, its approval), lost edits (a save of the
//! storm whose line is not in the final text; in-place saves that landed in the file a
//! runner's write displaced are counted apart), orphans (a process of the loop alive after it
//! ended), and the time from an agent's exit to the next spawn. Every loop works in a git
//! project, each step writing a file of its own: each DONE step must be one commit of it,
//! found by the trailers that name its loop and step (none lost, none made twice, whatever
//! was killed when), and no step's file left out of git.
//!
//! Beside the loop (`soak/beside.rs`): the state directory read-only (as full) for 3 s during a
//! step, the runner killed the moment its first task is published, and, in every reviewed loop
//! (a git project then), a process appending to `loop.out` in the project all along, so during
//! every review. Counts runners that died of the full disk, attempts counted for nothing (a run
//! whose agent never ran, a full disk), and reviews halted on a change not the reviewer's.
//!
//! Every loop notifies a Telegram of its own (the loopback fake) that accepts each request and
//! never answers until the loop's last runner has exited, as a hung proxy would; then it answers
//! again. Counts loops slowed by it (a runner that exited with no request held open: it had
//! waited for Telegram itself), messages lost (queued, and not delivered once Telegram answers
//! again), loops whose DONE was never told, and messages that arrived twice.
//!
//! Run: `cargo build --release && cargo run --release --example soak -- --loops 100`
//! (`--seed N` for another sequence of faults; `--keep` keeps the directories of failures;
//! `--only-in-place-storms` runs nothing but dense storms of in-place saves (every 5–15 ms, open,
//! truncate, write in two parts) against loops of ten 0.3 s steps, four loops at a time
//! (`--at-once N`), to meet the rare save caught half written or landing in a file a runner's
//! write displaced; `--busy N` spins N threads for the whole run (a loaded machine);
//! `--only-beside` runs nothing but the faults beside the loop (a full state directory and a
//! kill right after the first spawn, in turn; every other pair reviewed, with `loop.out`
//! written meanwhile); `--at-once N` runs any soak N loops at a time; `--backend codex` (or
//! `gemini`) runs every loop on the Codex (or Gemini CLI) backend, the simulated agent speaking
//! that CLI's events;
//! `--parallel` runs the three steps of every loop at once (`--parallel 3`) in a git project,
//! each writing a file of its own, and adds what parallel steps meet: conflicts, a VERIFY red
//! only on the merged result, a failed step decided from the loop the person started (by the
//! shell and by a tap), and a second loop in the same project; see `soak/parallel.rs`).

#![expect(
    clippy::cast_precision_loss,
    reason = "counts and sizes become f64 only to be printed, far below where f64 loses precision"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "soak/beside.rs"]
mod beside;
#[path = "soak/by_hand.rs"]
mod by_hand;
mod common;
#[path = "soak/parallel.rs"]
mod parallel;
#[path = "soak/saves.rs"]
mod saves;
#[path = "soak/starts.rs"]
mod starts;

#[path = "../tests/support/telegram_fake.rs"]
#[expect(
    dead_code,
    reason = "the soak uses the fake's hung mode, not every reply the tests script"
)]
mod telegram_fake;

use common::{Rng, bin, kill9, wait_for};
use telegram_fake::FakeTelegram;

#[derive(Default)]
struct Tally {
    loops: usize,
    runner_kills: usize,
    stale_saves: usize,
    stale_saves_dead_runner: usize,
    stale_saves_after_takeover: usize,
    takeovers_revived: usize,
    storm_saves: usize,
    in_place_saves: usize,
    displaced_saves: usize,
    reruns: usize,
    lost_edits: usize,
    own_writes_as_hand_edits: usize,
    supervisor_guardian_kills: usize,
    setsid_escapes: usize,
    storms: usize,
    reviewed: usize,
    double_starts: usize,
    lost_results: usize,
    orphans: usize,
    slowed_by_telegram: usize,
    messages_lost: usize,
    done_never_told: usize,
    messages_twice: usize,
    messages_sent: usize,
    gaps_ms: Vec<f64>,
    storm_gaps_ms: Vec<f64>,
    failures: Vec<String>,
    // Beside the loop (see `soak/beside.rs`).
    full_disks: usize,
    full_disk_runner_deaths: usize,
    full_disk_attempts: usize,
    full_disk_waits: usize,
    early_kills: usize,
    taken_back: usize,
    attempts_without_agent: usize,
    review_halts: usize,
    review_outside_changes: usize,
    // A commit per DONE step (the loops of one step at a time).
    step_commits: usize,
    step_commits_lost: usize,
    step_commits_twice: usize,
    step_files_left: usize,
    // `--parallel` (see `soak/parallel.rs`).
    false_done: usize,
    lost_commits: usize,
    git_left: usize,
    double_decisions: usize,
    decisions_by_shell: usize,
    decisions_by_tap: usize,
    conflicts: usize,
    red_merges: usize,
    second_loops: usize,
    lost_tasks_retried: usize,
    done_with_writes_refused: usize,
    starts_killed_before_the_loop: usize,
    merge_gates_retried: usize,
    // Saves racing the runner's writes (see `soak/saves.rs`).
    saves_at_start: usize,
    start_refused: usize,
    appends_at_end: usize,
    // The running step closed by hand (see `soak/by_hand.rs`).
    hand_closes: usize,
    hand_closes_taken: usize,
    hand_closes_lost: usize,
    hand_closes_rerun: usize,
}

impl Tally {
    /// Adds the counts of loops run on another thread.
    fn absorb(&mut self, o: Tally) {
        let sums = [
            (&mut self.loops, o.loops),
            (&mut self.runner_kills, o.runner_kills),
            (&mut self.stale_saves, o.stale_saves),
            (&mut self.stale_saves_dead_runner, o.stale_saves_dead_runner),
            (
                &mut self.stale_saves_after_takeover,
                o.stale_saves_after_takeover,
            ),
            (&mut self.takeovers_revived, o.takeovers_revived),
            (&mut self.storm_saves, o.storm_saves),
            (&mut self.in_place_saves, o.in_place_saves),
            (&mut self.displaced_saves, o.displaced_saves),
            (&mut self.reruns, o.reruns),
            (&mut self.lost_edits, o.lost_edits),
            (
                &mut self.own_writes_as_hand_edits,
                o.own_writes_as_hand_edits,
            ),
            (
                &mut self.supervisor_guardian_kills,
                o.supervisor_guardian_kills,
            ),
            (&mut self.setsid_escapes, o.setsid_escapes),
            (&mut self.storms, o.storms),
            (&mut self.reviewed, o.reviewed),
            (&mut self.double_starts, o.double_starts),
            (&mut self.lost_results, o.lost_results),
            (&mut self.orphans, o.orphans),
            (&mut self.slowed_by_telegram, o.slowed_by_telegram),
            (&mut self.messages_lost, o.messages_lost),
            (&mut self.done_never_told, o.done_never_told),
            (&mut self.messages_twice, o.messages_twice),
            (&mut self.messages_sent, o.messages_sent),
            (&mut self.false_done, o.false_done),
            (&mut self.lost_commits, o.lost_commits),
            (&mut self.git_left, o.git_left),
            (&mut self.double_decisions, o.double_decisions),
            (&mut self.decisions_by_shell, o.decisions_by_shell),
            (&mut self.decisions_by_tap, o.decisions_by_tap),
            (&mut self.conflicts, o.conflicts),
            (&mut self.red_merges, o.red_merges),
            (&mut self.second_loops, o.second_loops),
            (&mut self.lost_tasks_retried, o.lost_tasks_retried),
            (
                &mut self.done_with_writes_refused,
                o.done_with_writes_refused,
            ),
            (&mut self.saves_at_start, o.saves_at_start),
            (&mut self.start_refused, o.start_refused),
            (&mut self.appends_at_end, o.appends_at_end),
            (&mut self.full_disks, o.full_disks),
            (&mut self.full_disk_runner_deaths, o.full_disk_runner_deaths),
            (&mut self.full_disk_attempts, o.full_disk_attempts),
            (&mut self.full_disk_waits, o.full_disk_waits),
            (&mut self.early_kills, o.early_kills),
            (&mut self.taken_back, o.taken_back),
            (&mut self.attempts_without_agent, o.attempts_without_agent),
            (&mut self.review_halts, o.review_halts),
            (&mut self.review_outside_changes, o.review_outside_changes),
            (&mut self.step_commits, o.step_commits),
            (&mut self.step_commits_lost, o.step_commits_lost),
            (&mut self.step_commits_twice, o.step_commits_twice),
            (&mut self.step_files_left, o.step_files_left),
            (&mut self.hand_closes, o.hand_closes),
            (&mut self.hand_closes_taken, o.hand_closes_taken),
            (&mut self.hand_closes_lost, o.hand_closes_lost),
            (&mut self.hand_closes_rerun, o.hand_closes_rerun),
        ];
        for (mine, theirs) in sums {
            *mine += theirs;
        }
        self.gaps_ms.extend(o.gaps_ms);
        self.storm_gaps_ms.extend(o.storm_gaps_ms);
        self.failures.extend(o.failures);
    }
}

struct Loop {
    dir: PathBuf,
    file: PathBuf,
    sim_log: PathBuf,
    /// Whether a killed runner comes back by itself (the step's end revives it).
    revive: bool,
    /// `TELEGRAM_API_BASE` of the loop's own Telegram.
    telegram: String,
    /// How many steps its plan has.
    steps: u64,
    /// Its `loop start` arguments.
    start: Vec<&'static str>,
}

impl Loop {
    fn new(
        root: &Path,
        i: usize,
        sleep_ms: u64,
        (leave_behind, review): (bool, bool),
        variant: Option<parallel::Variant>,
    ) -> Self {
        let dir = root.join(format!("loop-{i:04}"));
        let project = dir.join("project");
        std::fs::create_dir_all(project.join("state")).unwrap();
        std::fs::create_dir_all(dir.join("sim")).unwrap();
        let scenario = dir.join("sim/scenario.json");
        let grandchild = if leave_behind {
            r#", "grandchild_sleep_s": 600"#
        } else {
            ""
        };
        let work = format!(r#""sleep_ms": {sleep_ms}, "heartbeat_ms": 50{grandchild}"#);
        let reviewer = if review {
            format!(r#", "review": {{{work}, "result": "checked\nREVIEW_APPROVE: fine"}}"#)
        } else {
            String::new()
        };
        let text = match variant {
            Some(v) => {
                parallel::project(&project);
                v.scenario(&work, &reviewer)
            }
            // Each step writes a file of its own, which its commit must hold, once.
            None => format!(
                r#"{{"default": {{{work}, "write": [{{"path": "step-{{step}}.txt", "text": "{{step}}\n"}}], "result": "worked\nSTEP_DONE: ok"}}{reviewer}}}"#
            ),
        };
        std::fs::write(&scenario, text).unwrap();
        // The agent: a process that leaves the group with setsid, then the simulated agent.
        let agent = dir.join("agent.sh");
        let escape = if leave_behind {
            "setsid sleep 600 </dev/null >/dev/null 2>&1 &\n"
        } else {
            ""
        };
        std::fs::write(
            &agent,
            format!(
                "#!/bin/sh\n{escape}exec '{}' \"$@\"\n",
                bin("claude-sim").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Loop {
            file: project.join("state/M1.md"),
            sim_log: dir.join("sim/calls.jsonl"),
            dir,
            revive: false,
            telegram: String::new(),
            steps: STEPS,
            start: Vec::new(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin("loop"));
        c.args(args)
            .current_dir(self.dir.join("project"))
            .env("LOOP_FILE", &self.file)
            .env("LOOP_AGENT", self.dir.join("agent.sh"))
            .env("LOOP_STOP_FILE", self.dir.join("stop"))
            .env("XDG_STATE_HOME", self.dir.join("xdg"))
            // The soak resumes every runner it kills itself, and counts what that does, but
            // for the loops left to revive themselves.
            .env("LOOP_REVIVE", if self.revive { "on" } else { "off" })
            .env("CLAUDE_SIM_SCENARIO", self.dir.join("sim/scenario.json"))
            .env("CLAUDE_SIM_LOG", &self.sim_log)
            // The simulated agent's scenario, log and counts: what its runs, confined, may
            // write, and nothing else of the soak's.
            .env("LOOP_SANDBOX_WRITE", self.dir.join("sim"))
            .env("LOOP_SANDBOX_ENV", "CLAUDE_SIM_*")
            .env("TELEGRAM_BOT_TOKEN", "1:AAsoakTOKEN")
            .env("TELEGRAM_CHAT_ID", parallel::CHAT.to_string())
            .env("TELEGRAM_API_BASE", &self.telegram)
            .env_remove("LOOP_NOTIFY_BACKOFF_MS")
            .env_remove("LOOP_CRASH_AT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.stderr());
        c
    }

    /// Where the loop's commands write their errors: `stderr.txt` beside the project, appended
    /// by every command, so that a failure kept with `--keep` says what the runner said.
    fn stderr(&self) -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stderr.txt"))
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    /// What the loop's commands said of its file (`M1.md:LINE:COLUMN: …`, the first such line)
    /// in their errors, else the last line they wrote there.
    fn file_error(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default();
        let mut lines = text.lines();
        lines
            .clone()
            .find(|l| l.contains("M1.md:"))
            .or_else(|| lines.next_back())
            .unwrap_or_default()
            .to_owned()
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap_or_default()
    }

    /// What a person runs after the loop's runner died: `loop resume`, or `loop start` again
    /// where the start was killed before it made the loop (`loop resume` then says there is
    /// no loop, and to start one).
    fn carry_on(&self, t: &mut Tally) -> Command {
        if self.file.exists() {
            self.cmd(&["resume"])
        } else {
            t.starts_killed_before_the_loop += 1;
            self.cmd(&self.start)
        }
    }

    fn calls(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.sim_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn started(&self, step: u64) -> bool {
        self.calls()
            .iter()
            .any(|c| c["step"].as_u64() == Some(step))
    }

    fn step_running(&self, step: u64) -> bool {
        self.started(step) && self.text().contains(&format!("{step}: [RUNNING]"))
    }

    fn done(&self) -> bool {
        self.text().starts_with("STATUS: DONE")
    }

    fn state(&self) -> PathBuf {
        self.dir.join("project/state")
    }

    /// Whether a runner holds the loop (its lock, probed shared).
    fn runner_alive(&self) -> bool {
        std::fs::File::open(self.state().join("M1.md.lock"))
            .is_ok_and(|f| f.try_lock_shared().is_err())
    }

    /// Messages in the outbox not settled (sent or rejected).
    fn pending_messages(&self) -> usize {
        let text = std::fs::read_to_string(self.state().join("outbox.jsonl")).unwrap_or_default();
        let records: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let settled: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["kind"] != "message")
            .map(|r| &r["id"])
            .collect();
        records
            .iter()
            .filter(|r| r["kind"] == "message" && !settled.contains(&&r["id"]))
            .count()
    }

    /// Live processes of this loop: the loop's directory in their environment or command.
    fn processes(&self) -> Vec<String> {
        common::processes_of(&self.dir)
            .into_iter()
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect()
    }

    fn task_dirs(&self) -> Vec<PathBuf> {
        // A parallel loop's steps are loops of their own (`parallel/<LOOP_ID>/step-N.loop/`),
        // with their tasks beside their M1.md.
        let mut roots = vec![self.dir.join("project/state/tasks")];
        roots.extend(
            std::fs::read_dir(self.dir.join("project/state/parallel"))
                .into_iter()
                .flatten()
                .flatten()
                .flat_map(|l| std::fs::read_dir(l.path()).into_iter().flatten().flatten())
                .map(|e| e.path().join("tasks")),
        );
        roots
            .iter()
            .flat_map(std::fs::read_dir)
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect()
    }

    /// Attempts started after an attempt of the same step was judged a pass, from the task
    /// ledger (each task's spec and judgement).
    fn reruns(&self) -> usize {
        let json = |p: PathBuf| -> Option<serde_json::Value> {
            serde_json::from_slice(&std::fs::read(p).ok()?).ok()
        };
        let mut tasks: Vec<(String, String, u64, bool, bool)> = self
            .task_dirs()
            .into_iter()
            .filter_map(|d| {
                let spec = json(d.join("spec.json"))?;
                let env = spec["env"].as_array()?.clone();
                let var = |k: &str| {
                    env.iter()
                        .rev()
                        .find(|p| p[0] == k)
                        .and_then(|p| p[1].as_str().map(String::from))
                };
                // The agent's runs only (they carry the loop's id; VERIFY runs do not).
                let loop_id = var("LOOP_ID")?;
                let step = var("LOOP_STEP")?.parse().ok()?;
                let review = var("LOOP_REVIEW").as_deref() == Some("1");
                // A pass that a decision ran again (`loop retry`, a merge sent back) is
                // marked so in the ledger: a run after it is no re-run.
                let pass = json(d.join("judged.json")).is_some_and(|j| j["verdict"] == "pass")
                    && !d.join("retried.json").exists();
                Some((
                    spec["created_at"].as_str()?.to_string(),
                    loop_id,
                    step,
                    review,
                    pass,
                ))
            })
            .filter(|(_, _, step, review, _)| *step > 0 && !review)
            .collect();
        tasks.sort();
        let mut passed = std::collections::HashSet::new();
        let mut reruns = 0;
        for (_, loop_id, step, _, pass) in tasks {
            if passed.contains(&(loop_id.clone(), step)) {
                reruns += 1;
            }
            if pass {
                passed.insert((loop_id, step));
            }
        }
        reruns
    }

    /// The gaps between one agent's exit and the next spawn, in ms.
    fn gaps(&self) -> Vec<f64> {
        let time = |p: PathBuf, k: &str| -> Option<chrono::DateTime<chrono::Utc>> {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
            Some(
                chrono::DateTime::parse_from_rfc3339(v[k].as_str()?)
                    .ok()?
                    .into(),
            )
        };
        let mut t: Vec<_> = self
            .task_dirs()
            .into_iter()
            .filter_map(|d| {
                Some((
                    time(d.join("spec.json"), "created_at")?,
                    time(d.join("exit.json"), "ended_at"),
                ))
            })
            .collect();
        t.sort();
        t.windows(2)
            .filter_map(|w| Some((w[1].0 - w[0].1?).num_microseconds()? as f64 / 1000.0))
            .collect()
    }
}

fn reap(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + timeout;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn save_by_rename(file: &Path, text: &str) {
    let tmp = file.with_extension("md.swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// Kills the supervisor of the running task and its guardian at once.
fn kill_supervisor_and_guardian(l: &Loop) -> bool {
    for d in l.task_dirs() {
        if d.join("exit.json").exists() {
            continue;
        }
        let Some(sup) = std::fs::read(d.join("supervisor.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["pid"].as_u64())
        else {
            continue;
        };
        let agent = std::fs::read(d.join("pid.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["pid"].as_u64());
        // The guardian: the supervisor's child that is not the agent.
        let guardian = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse::<u64>().ok())
            .find(|pid| {
                Some(*pid) != agent
                    && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .ok()
                        .and_then(|s| {
                            s.rsplit_once(')')?
                                .1
                                .split_whitespace()
                                .nth(1)?
                                .parse::<u64>()
                                .ok()
                        })
                        == Some(sup)
            });
        kill9(u32::try_from(sup).unwrap_or(0));
        if let Some(g) = guardian {
            kill9(u32::try_from(g).unwrap_or(0));
        }
        return true;
    }
    false
}

const STEPS: u64 = 3;

const KINDS: usize = 11;

/// The fault kind of a state directory full (read-only) for 3 s during a step.
const FULL_DISK: usize = 6;

/// The fault kind of a runner killed the moment its first task is published.
const EARLY_KILL: usize = 7;

/// The fault kind of a save in place in the first milliseconds of `loop start`.
const SAVE_AT_START: usize = 8;

/// The fault kind of the running step set SKIPPED or DONE by hand (`soak/by_hand.rs`).
const HAND_CLOSE: usize = 10;

/// What a run of the soak does: every fault in turn, only storms of in-place saves, or only
/// the faults beside the loop.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    All,
    InPlaceStorms,
    Beside,
}

/// `--parallel`: every loop runs its steps at once, in a git project.
fn on_parallel() -> bool {
    std::env::args().any(|a| a == "--parallel")
}

/// `git ARGS` in `dir` with a throwaway identity.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=soak", "-c", "user.email=soak@localhost"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?} in {}", dir.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--backend codex` or `--backend gemini`: every loop runs on that backend (`claude`
/// unless one is named).
fn backend() -> &'static str {
    let args: Vec<String> = std::env::args().collect();
    let named = args
        .windows(2)
        .find(|w| w[0] == "--backend")
        .map(|w| w[1].clone());
    match named.as_deref() {
        Some("codex") => "codex",
        Some("gemini") => "gemini",
        _ => "claude",
    }
}

/// The fault of loop `i`, its variant when its steps run at once, and whether it is reviewed.
/// Every fault with and without a review of each step, on a sequence of faults that does not
/// depend on it; in parallel, every fault with every variant, then the same reviewed.
fn fault_of(i: usize, mode: Mode) -> (usize, Option<parallel::Variant>, bool) {
    let kind = match mode {
        Mode::InPlaceStorms => 4,
        Mode::Beside => FULL_DISK + i % 2,
        Mode::All => i % KINDS,
    };
    let variants = parallel::VARIANTS.len();
    if on_parallel() {
        (
            kind,
            Some(parallel::VARIANTS[i % variants]),
            (i / (KINDS * variants)) % 2 == 1,
        )
    } else if mode == Mode::Beside {
        (kind, None, (i / 2) % 2 == 1)
    } else {
        (kind, None, (i / KINDS) % 2 == 1)
    }
}

/// Whether a loop of fault `kind` has its agent leave processes behind, how long its steps work
/// and how many it has.
fn shape(kind: usize, mode: Mode, rng: &mut Rng) -> (bool, u64, u64) {
    let leave_behind = rng.below(2) == 0 || kind == 3;
    if mode == Mode::InPlaceStorms {
        return (leave_behind, saves::DENSE_STEP_MS, saves::DENSE_STEPS);
    }
    (leave_behind, 200 + rng.below(300), STEPS)
}

fn run_one(root: &Path, i: usize, rng: &mut Rng, t: &mut Tally, mode: Mode) {
    let (kind, variant, review) = fault_of(i, mode);
    let (leave_behind, sleep_ms, steps) = shape(kind, mode, rng);
    let mut l = Loop::new(root, i, sleep_ms, (leave_behind, review), variant);
    l.steps = steps;
    // A reviewed loop works in a git project (so its reviews look at the work tree), where a
    // process writes all along, as `loop start … --review > loop.out` does.
    let appender = (review && variant.is_none()).then(|| beside::Appender::in_git(&l));
    // Every loop works in a git project, where each DONE step must become one commit.
    if variant.is_none() && !review {
        parallel::project(&l.dir.join("project"));
    }
    // Telegram holds every request unanswered, but for a loop decided by a tap in the chat.
    let taps = variant.is_some_and(parallel::Variant::taps);
    let tg = FakeTelegram::start();
    if !taps {
        tg.hang();
    }
    l.telegram = tg.base_url();
    // Half the takeovers are revivals by the step's end, half a `loop resume` by hand.
    l.revive = kind == 5 && (i / KINDS) % 4 < 2;
    if leave_behind {
        t.setsid_escapes += 1;
    }
    if review {
        t.reviewed += 1;
    }
    l.start = start_args(l.steps, variant, review);
    let mut runner = l.cmd(&l.start).spawn().unwrap();
    let saves = inject((kind, mode), &l, &mut runner, rng, t);
    if let Some(v) = variant {
        parallel::after_faults(i, &l, v, taps.then_some(&tg), t);
    }
    if l.revive {
        // A revived runner is not ours to reap: its loop ends by itself.
        wait_for(Duration::from_secs(120), || l.done());
    }
    let status = reap(&mut runner, Duration::from_secs(120));
    // A runner killed last, or a loop that halted: one more resume, as a person would.
    if !l.done() {
        let mut again = l.carry_on(t).spawn().unwrap();
        reap(&mut again, Duration::from_secs(120));
    }
    if variant.is_some() {
        parallel::answer_merge_gates(&l, t);
    }
    drop(appender);
    // The saves went into this loop's M1.md, which a second loop's start archives.
    let saves_lost = lost_saves(&l.text(), saves, t);
    let second = if variant == Some(parallel::Variant::Twice) && l.done() {
        t.second_loops += 1;
        Some(parallel::second_loop(&l))
    } else {
        None
    };
    t.loops += 1;
    let mut bad = if taps {
        Vec::new()
    } else {
        telegram_assess(&l, &tg, t)
    };
    bad.extend(saves_lost);
    bad.extend(assess(&l, (review, second.is_some()), status, t));
    if variant.is_none() {
        bad.extend(beside::assess(&l, kind, review, status, t));
        bad.extend(assess_commits(&l, t));
        bad.extend(by_hand::assess(&l, t));
    }
    if let Some(v) = variant {
        bad.extend(parallel::assess(&l, v, second, t));
    }
    match kind {
        4 => t.storm_gaps_ms.extend(l.gaps()),
        1 => t.gaps_ms.extend(l.gaps()),
        _ => {}
    }
    if bad.is_empty() {
        let _ = std::fs::remove_dir_all(&l.dir);
    } else {
        let failure = format!(
            "loop {i} (fault {kind}) in {}: {}",
            l.dir.display(),
            bad.join("; ")
        );
        // Said as it happens too, for a long run watched as it goes.
        eprintln!("soak: FAIL {failure}");
        t.failures.push(failure);
    }
}

/// `loop start` for a loop of the soak: `steps` steps (3 but for the dense storm), on the
/// backend asked for, reviewed or not, and at once (with a variant's own flags) in parallel.
fn start_args(steps: u64, variant: Option<parallel::Variant>, review: bool) -> Vec<&'static str> {
    const NAMES: [&str; 10] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let mut start = vec!["start", "soak"];
    for name in NAMES.iter().take(usize::try_from(steps).unwrap_or(3)) {
        start.extend(["--step", name]);
    }
    if backend() != "claude" {
        start.extend(["--backend", backend()]);
    }
    if let Some(v) = variant {
        start.extend(["--parallel", "3"]);
        start.extend(v.start_args());
    }
    if review {
        start.push("--review");
    }
    start
}

/// Saves M1.md every 20 ms until the runner exits, `how`: by rename, by append, or in place in
/// two chunks 5 ms apart (an editor writing in chunks). Each save adds a line `# save N`; the
/// number of saves.
fn storm(l: &Loop, runner: &mut Child, how: u64, t: &mut Tally) -> usize {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    wait_for(Duration::from_secs(30), || l.started(1));
    while runner.try_wait().ok().flatten().is_none() {
        let text = l.text();
        if text.is_empty() {
            continue;
        }
        n += 1;
        match how {
            0 => save_by_rename(&l.file, &format!("{text}# save {n}\n")),
            1 => {
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&l.file) {
                    let _ = writeln!(f, "# save {n}");
                }
            }
            _ => {
                let text = format!("{text}# save {n}\n");
                let cut = text.len() / 2;
                if let Ok(mut f) = std::fs::File::create(&l.file) {
                    let _ = f.write_all(&text.as_bytes()[..cut]);
                    std::thread::sleep(Duration::from_millis(5));
                    let _ = f.write_all(&text.as_bytes()[cut..]);
                    t.in_place_saves += 1;
                    // Written into a file the runner's swap had already displaced?
                    let ours = f.metadata().map(|m| m.ino()).ok();
                    if ours != std::fs::metadata(&l.file).map(|m| m.ino()).ok() {
                        t.displaced_saves += 1;
                    }
                }
            }
        }
        t.storm_saves += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}

/// Injects the fault of `kind` into the loop whose runner is `runner` (which a fault may
/// replace); the number of saves of a storm.
fn inject(
    (kind, mode): (usize, Mode),
    l: &Loop,
    runner: &mut Child,
    rng: &mut Rng,
    t: &mut Tally,
) -> usize {
    let mut saves = 0;
    match kind {
        // kill -9 of the runner at random moments, then resume, until DONE.
        0 => {
            for _ in 0..6 {
                std::thread::sleep(Duration::from_millis(50 + rng.below(500)));
                if runner.try_wait().ok().flatten().is_some() {
                    break;
                }
                kill9(runner.id());
                let _ = runner.wait();
                t.runner_kills += 1;
                *runner = l.carry_on(t).spawn().unwrap();
            }
        }
        // A stale save with the runner alive: a text read during step k, saved once k+1 runs.
        1 | 2 => {
            let k = 1 + rng.below(STEPS - 1);
            let ok = wait_for(Duration::from_secs(30), || l.step_running(k));
            let old = l.text();
            if ok && wait_for(Duration::from_secs(30), || l.started(k + 1)) {
                if kind == 2 {
                    kill9(runner.id());
                    let _ = runner.wait();
                    t.runner_kills += 1;
                    save_by_rename(&l.file, &old);
                    t.stale_saves_dead_runner += 1;
                    *runner = l.cmd(&["resume"]).spawn().unwrap();
                } else {
                    save_by_rename(&l.file, &old);
                }
                t.stale_saves += 1;
            }
        }
        // Supervisor and guardian killed together mid-step.
        3 => {
            let k = 1 + rng.below(STEPS);
            if wait_for(Duration::from_secs(30), || l.step_running(k)) {
                std::thread::sleep(Duration::from_millis(50 + rng.below(100)));
                if kill_supervisor_and_guardian(l) {
                    t.supervisor_guardian_kills += 1;
                }
            }
        }
        // A stale save once another runner took the loop over: a text read during step 1,
        // the runner killed during step 2 and revived (by itself, or by hand), the text saved
        // once step 3 runs.
        5 => {
            let ok = wait_for(Duration::from_secs(30), || l.step_running(1));
            let old = l.text();
            if ok && wait_for(Duration::from_secs(30), || l.step_running(2)) {
                kill9(runner.id());
                let _ = runner.wait();
                t.runner_kills += 1;
                if l.revive {
                    t.takeovers_revived += 1;
                } else {
                    *runner = l.cmd(&["resume"]).spawn().unwrap();
                }
                if wait_for(Duration::from_secs(30), || l.started(3)) {
                    save_by_rename(&l.file, &old);
                    t.stale_saves += 1;
                    t.stale_saves_after_takeover += 1;
                }
            }
        }
        FULL_DISK => beside::full_state_dir(l, rng, t),
        EARLY_KILL => beside::kill_after_first_spawn(l, runner, rng, t),
        // In place every 5–15 ms from the first moment, several loops at a time.
        4 if mode == Mode::InPlaceStorms => saves = saves::dense_storm(l, runner, rng, t),
        // A save every 20 ms until the loop ends.
        4 => {
            t.storms += 1;
            saves = storm(l, runner, rng.below(3), t);
        }
        SAVE_AT_START => saves = saves::save_at_start(l, rng, t),
        // Its loop is one step at a time: a step closed by hand while steps run at once is
        // dropped or merged by the loop that runs them (`tests/regression/parallel.rs`).
        HAND_CLOSE if !on_parallel() => by_hand::close_running_step(l, runner, rng, t),
        // Appends held open a moment, from the last step until the runner's last write.
        _ => saves = saves::appends_at_the_end(l, runner, l.steps, rng, t),
    }
    saves
}

/// What a Telegram that never answered did to a loop that ended: whether a runner waited for
/// it, then, once it answers again, whether every message arrives, once.
fn telegram_assess(l: &Loop, tg: &FakeTelegram, t: &mut Tally) -> Vec<String> {
    let mut bad = Vec::new();
    // A revived runner is not the soak's child: wait for the loop's lock to be let go.
    wait_for(Duration::from_secs(30), || !l.runner_alive());
    // A runner that sent a message itself waited for it until its client gave up; one that
    // only queued it left the request held open by a delivery process. That process is started
    // beside the runner and may connect after the runner has exited (a loaded machine): it is
    // given a few seconds to.
    if !wait_for(Duration::from_secs(15), || tg.held() > 0) {
        t.slowed_by_telegram += 1;
        bad.push(format!(
            "no request held open once the runner exited (abandoned {}): a runner waited for \
             Telegram",
            tg.abandoned()
        ));
    }
    tg.answer_again();
    let drained = wait_for(Duration::from_secs(60), || {
        l.pending_messages() == 0 && !l.processes().iter().any(|p| p.contains("__deliver"))
    });
    let texts: Vec<String> = tg.sent().into_iter().map(|m| m.text).collect();
    t.messages_sent += texts.len();
    if !drained {
        let left = l.pending_messages();
        t.messages_lost += left;
        bad.push(format!(
            "{left} message(s) still queued a minute after Telegram answered again"
        ));
    }
    if l.done() && !texts.iter().any(|m| m.contains("<b>DONE:</b>")) {
        t.done_never_told += 1;
        bad.push(format!("DONE never told: {texts:?}"));
    }
    let mut seen = std::collections::HashSet::new();
    let twice = texts.iter().filter(|m| !seen.insert(*m)).count();
    if twice > 0 {
        t.messages_twice += twice;
        bad.push(format!("{twice} message(s) arrived twice: {texts:?}"));
    }
    bad
}

/// Exit 2 is for a person's bad input: a runner that says so of a valid loop refused its own
/// file (or a save caught half written). What it said of the file.
fn refused_own_file(
    l: &Loop,
    status: Option<std::process::ExitStatus>,
    t: &mut Tally,
) -> Option<String> {
    if status.and_then(|s| s.code()) != Some(2) {
        return None;
    }
    t.start_refused += 1;
    Some(format!(
        "the runner exited 2 (bad input) on the loop's own file: {}",
        l.file_error()
    ))
}

/// What went wrong with a loop that ended: each finding counted in `t`, and said.
fn assess(
    l: &Loop,
    (review, second): (bool, bool),
    status: Option<std::process::ExitStatus>,
    t: &mut Tally,
) -> Vec<String> {
    let mut bad = Vec::new();
    bad.extend(refused_own_file(l, status, t));
    let seen = starts::starts(&l.calls());
    let doubles = starts::doubles(&seen);
    if doubles > 0 {
        t.double_starts += doubles;
        bad.push(format!("{doubles} double start(s): {seen:?}"));
    }
    let reruns = l.reruns();
    if reruns > 0 {
        t.reruns += reruns;
        bad.push(format!("{reruns} re-run(s) of a passed step"));
    }
    let own = own_writes_as_hand_edits(l);
    if !own.is_empty() {
        t.own_writes_as_hand_edits += own.len();
        bad.push(format!("runner writes logged as hand edits: {own:?}"));
    }
    let text = l.text();
    let approved = text.matches("REVIEW: approved").count() as u64;
    // A second loop has two steps of its own, unreviewed; a step skipped by a decision has no
    // result to lose, and no review.
    let (steps, reviewed) = if second {
        (2, false)
    } else {
        (l.steps, review)
    };
    // Which step may end SKIPPED is the parallel assessment's to say.
    let closed = |s: u64| {
        text.contains(&format!("{s}: [DONE]")) || text.contains(&format!("{s}: [SKIPPED]"))
    };
    let skipped = (1..=steps)
        .filter(|s| text.contains(&format!("{s}: [SKIPPED]")))
        .count() as u64;
    // A step a person set DONE while it ran is not approved by a review either.
    let done_by_hand = by_hand::closed(l)
        .iter()
        .filter(|(_, state)| state == "DONE")
        .count() as u64;
    let results_ok = (1..=steps).all(|s| closed(s) && text.contains(&format!("STEP_{s}:")))
        && approved
            == if reviewed {
                steps - skipped - done_by_hand
            } else {
                0
            };
    if !l.done() || !results_ok {
        t.lost_results += 1;
        bad.push(format!("not DONE with every result (runner {status:?})"));
    }
    let left = if wait_for(Duration::from_secs(10), || l.processes().is_empty()) {
        Vec::new()
    } else {
        l.processes()
    };
    if !left.is_empty() {
        t.orphans += left.len();
        bad.push(format!("orphans: {left:?}"));
        for p in &left {
            if let Some(pid) = p.split_whitespace().next().and_then(|s| s.parse().ok()) {
                kill9(pid);
            }
        }
    }
    bad
}

/// The lines of the loop's log that take a runner's own write for a hand edit: "changed by
/// hand while no runner ran" naming a key only runners write (a person of the soak edits
/// step states and adds comment lines, never these).
fn own_writes_as_hand_edits(l: &Loop) -> Vec<String> {
    const RUNNERS_ONLY: [&str; 6] = [
        "PARALLEL.",
        "CURRENT.",
        "RESULTS.",
        "LAST_ACTION",
        "NEXT_ACTION",
        "LOOP_ID",
    ];
    std::fs::read_to_string(l.state().join("loop.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once("changed by hand while no runner ran: "))
        .filter(|(_, changes)| RUNNERS_ONLY.iter().any(|k| changes.contains(k)))
        .map(|(_, changes)| changes.to_owned())
        .collect()
}

/// The saves of a storm (each a line `# save N`) missing from the loop's final text.
fn lost_saves(text: &str, saves: usize, t: &mut Tally) -> Option<String> {
    let lost: Vec<usize> = (1..=saves)
        .filter(|n| !text.contains(&format!("# save {n}\n")))
        .collect();
    if lost.is_empty() {
        return None;
    }
    t.lost_edits += lost.len();
    Some(format!("saves lost: {lost:?}"))
}

/// Whether each DONE step of a loop of one step at a time is one commit of its own file,
/// found by the trailers that name its loop and its step: none lost, none made twice, and no
/// step's file left out of git.
fn assess_commits(l: &Loop, t: &mut Tally) -> Vec<String> {
    let mut bad = Vec::new();
    let project = l.dir.join("project");
    let Ok(m) = m1loop::m1::Document::parse(&l.text()).map(|d| d.view()) else {
        return bad;
    };
    let id = m.loop_id.clone().unwrap_or_default();
    let log = git(&project, &["log", "--format=%x1e%B%x1f", "--name-only"]);
    // A step a person closed while it ran is theirs to commit (or the loop's, when its attempt
    // had passed: closed during its review): at most one commit, and its file may be left.
    let by_hand: Vec<u64> = by_hand::closed(l).into_iter().map(|(k, _)| k).collect();
    for s in 1..=STEPS {
        let n = u32::try_from(s).unwrap_or(0);
        let state = m.plan.steps.iter().find(|x| x.n == n).map(|x| x.state);
        if state != Some(m1loop::m1::StepState::Done) {
            continue;
        }
        let file = format!("step-{s}.txt");
        let commits: Vec<&str> = log
            .split('\x1e')
            .filter(|c| c.contains(&format!("Loop-Id: {id}\nLoop-Step: {s}\n")))
            .collect();
        t.step_commits += commits.len();
        if by_hand.contains(&s) {
            if commits.len() > 1 {
                t.step_commits_twice += commits.len() - 1;
                bad.push(format!("step {s} committed {} times", commits.len()));
            }
            continue;
        }
        match commits.as_slice() {
            [one] if one.lines().any(|l| l == file) => {}
            [] => {
                t.step_commits_lost += 1;
                bad.push(format!("step {s} DONE without its commit"));
            }
            [one] => {
                t.step_commits_lost += 1;
                bad.push(format!("step {s}'s commit lacks {file}: {one:?}"));
            }
            many => {
                t.step_commits_twice += many.len() - 1;
                bad.push(format!("step {s} committed {} times", many.len()));
            }
        }
        let recorded = m.results.get(&n).and_then(|r| r.commit.clone());
        if recorded.is_none() {
            t.step_commits_lost += 1;
            bad.push(format!("step {s}'s COMMIT not recorded"));
        }
    }
    let left: Vec<String> = git(
        &project,
        &["status", "--porcelain", "--untracked-files=all"],
    )
    .lines()
    .filter(|l| l.contains("step-"))
    .filter(|l| !by_hand.iter().any(|s| l.contains(&format!("step-{s}.txt"))))
    .map(str::to_owned)
    .collect();
    if !left.is_empty() {
        t.step_files_left += left.len();
        bad.push(format!("steps' files left out of git: {left:?}"));
    }
    bad
}

/// The figures of the commits per step.
fn report_commits(t: &Tally) {
    println!(
        "  a commit per DONE step: {} commits found by their trailers; steps without theirs {}, \
         steps committed twice {}, steps' files left out of git {}",
        t.step_commits, t.step_commits_lost, t.step_commits_twice, t.step_files_left
    );
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "p is a fraction in 0..=1, so the rounded index is in 0..len"
    )]
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i]
}

/// Runs `loops` loops, `at_once` at a time, each on a thread with a sequence of faults of its
/// own (from `seed` and its number); their counts added up.
fn run_all(root: &Path, loops: usize, at_once: usize, seed: u64, mode: Mode) -> Tally {
    let mut t = Tally::default();
    let mut next = 0;
    while next < loops {
        let batch: Vec<usize> = (next..loops.min(next + at_once)).collect();
        next += batch.len();
        let done: Vec<Tally> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|&i| {
                    s.spawn(move || {
                        let mut rng =
                            Rng((seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
                        let mut mine = Tally::default();
                        run_one(root, i, &mut rng, &mut mine, mode);
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for d in done {
            t.absorb(d);
        }
        if next % 10 < at_once {
            eprintln!("soak: {next} loops, {} failures", t.failures.len());
        }
    }
    t
}

/// The machine's load average over 1, 5 and 15 minutes, as `/proc/loadavg` says it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints what the soak did and found.
fn report(t: &mut Tally, seed: u64, (at_once, busy_threads): (usize, usize), began: Instant) {
    println!(
        "soak: {} loops in {:.0} s (seed {seed}, backend {}{}, {at_once} at a time, {busy_threads} busy threads; load average {})",
        t.loops,
        began.elapsed().as_secs_f64(),
        backend(),
        if on_parallel() {
            ", 3 steps at once"
        } else {
            ""
        },
        load_average()
    );
    println!(
        "  faults: runner kill -9 {}, stale saves {} ({} with the runner dead, {} after another runner took over: {} revived by itself), supervisor+guardian kill -9 {}, setsid escapes tried {}, save storms {} ({} saves, {} in place, {} of them into a displaced file); {} loops reviewed; {} starts killed before they made their loop (started again)",
        t.runner_kills,
        t.stale_saves,
        t.stale_saves_dead_runner,
        t.stale_saves_after_takeover,
        t.takeovers_revived,
        t.supervisor_guardian_kills,
        t.setsid_escapes,
        t.storms,
        t.storm_saves,
        t.in_place_saves,
        t.displaced_saves,
        t.reviewed,
        t.starts_killed_before_the_loop
    );
    println!(
        "  saves racing the runner's writes: {} in place in the first milliseconds of `loop start`, {} `>>` appends held open around the final write; runners that exited 2 on their own file {}",
        t.saves_at_start, t.appends_at_end, t.start_refused
    );
    println!(
        "  double starts {}, re-runs of passed steps {}, lost results {}, lost edits {}, orphans {}, runner writes taken for hand edits {}",
        t.double_starts,
        t.reruns,
        t.lost_results,
        t.lost_edits,
        t.orphans,
        t.own_writes_as_hand_edits
    );
    beside::report(t);
    if !on_parallel() {
        by_hand::report(t);
    }
    println!(
        "  Telegram held every request until the loop ended: loops slowed by it {}, messages lost {}, DONE never told {}, messages twice {} ({} delivered once it answered again)",
        t.slowed_by_telegram, t.messages_lost, t.done_never_told, t.messages_twice, t.messages_sent
    );
    if on_parallel() {
        parallel::report(t);
        // Steps overlap: one agent's exit is not followed by the next one's spawn.
        println!("  agent exit → next spawn: not measured (steps run at once)");
    } else {
        report_commits(t);
        println!(
            "  agent exit → next spawn: loops with a stale save median {:.1} ms; under a storm of saves median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            pct(&mut t.gaps_ms, 0.5),
            pct(&mut t.storm_gaps_ms, 0.5),
            pct(&mut t.storm_gaps_ms, 0.99),
            pct(&mut t.storm_gaps_ms, 1.0)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| common::number_after(&args, flag);
    let loops = usize::try_from(value("--loops").unwrap_or(20)).unwrap_or(20);
    let seed = value("--seed").unwrap_or(0x5eed_1234);
    let keep = args.iter().any(|a| a == "--keep");
    let mode = if args.iter().any(|a| a == "--only-in-place-storms") {
        Mode::InPlaceStorms
    } else if args.iter().any(|a| a == "--only-beside") {
        Mode::Beside
    } else {
        Mode::All
    };
    // Loops run this many at a time (the dense in-place storm's editors then meet several
    // runners), each with a sequence of faults of its own.
    let at_once = usize::try_from(
        value("--at-once").unwrap_or(if mode == Mode::InPlaceStorms { 4 } else { 1 }),
    )
    .unwrap_or(1)
    .max(1);
    let busy_threads = usize::try_from(value("--busy").unwrap_or(0)).unwrap_or(0);
    let _busy = saves::Busy::start(busy_threads);
    let root = std::env::temp_dir().join(format!("loop-soak-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let began = Instant::now();
    let mut t = run_all(&root, loops, at_once, seed, mode);
    report(&mut t, seed, (at_once, busy_threads), began);
    for f in &t.failures {
        println!("  FAIL {f}");
    }
    if !keep || t.failures.is_empty() {
        let _ = std::fs::remove_dir_all(&root);
    }
    if !t.failures.is_empty() {
        std::process::exit(1);
    }
}
