//! `--parallel`: what the soak adds for loops that run their steps at once, under the same
//! faults as every loop (runner kills, stale saves, save storms, a supervisor killed). Each
//! loop is one of these:
//!
//! - **plain**: three independent steps, each writing a file of its own;
//! - **conflict**: every step also writes `shared.txt`, so merges conflict and steps go back
//!   to their sessions;
//! - **red on merge**: a VERIFY that each step passes alone and fails once two steps' work
//!   meet (until a step's later run adds `ok.txt`), so merges are sent back red;
//! - **decided**: step 2 fails (`--max-retries 1`) and waits on its gate, which is decided in
//!   the loop the person started: `loop retry 2` or `loop skip 2` from the shell, or a tap
//!   on Retry or Skip in the chat (a loopback Bot API and `loop telegram`);
//! - **twice**: a second loop, with other steps, started in the same project once the first
//!   is DONE.
//!
//! Counted for every loop: false DONE (a DONE step whose agent never ran, or whose work is
//! not in the project; a DONE loop whose end was not done), lost commits (a step's work
//! missing from the result), double decisions (a gate decided more than once here or in its
//! step's loop), and what the loop left of its git (worktrees, `loop/*` branches, merge
//! worktrees).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::telegram_fake::FakeTelegram;
use super::{Loop, Tally, git};
use crate::common::wait_for;

/// The chat every loop of the soak talks to (its `TELEGRAM_CHAT_ID`).
pub const CHAT: i64 = 1;

/// How a step's decision is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider {
    ShellRetry,
    ShellSkip,
    TapRetry,
    TapSkip,
}

/// What a parallel loop of the soak is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Plain,
    Conflict,
    RedOnMerge,
    Decided(Decider),
    Twice,
}

/// The variants, in turn.
pub const VARIANTS: [Variant; 8] = [
    Variant::Plain,
    Variant::Conflict,
    Variant::RedOnMerge,
    Variant::Decided(Decider::ShellRetry),
    Variant::Decided(Decider::ShellSkip),
    Variant::Decided(Decider::TapRetry),
    Variant::Decided(Decider::TapSkip),
    Variant::Twice,
];

impl Variant {
    /// Its scenario, where each step's work takes `work` (sleep and heartbeat).
    pub fn scenario(self, work: &str, reviewer: &str) -> String {
        let write = |files: &[&str]| {
            let w: Vec<String> = files
                .iter()
                .map(|f| format!(r#"{{"path": "{f}", "text": "{{step}}\n"}}"#))
                .collect();
            format!(r#""write": [{}]"#, w.join(", "))
        };
        let done = |files: &[&str]| {
            format!(
                r#"{{{work}, {}, "result": "worked\nSTEP_DONE: ok"}}"#,
                write(files)
            )
        };
        let failed = format!(r#"{{{work}, "result": "no build\nSTEP_FAILED: it does not build"}}"#);
        let own = "step-{step}.txt";
        let (default, steps) = match self {
            Variant::Plain | Variant::Twice => (done(&[own]), String::new()),
            Variant::Conflict => (done(&[own, "shared.txt"]), String::new()),
            Variant::RedOnMerge => {
                let later = format!("[{}, {}]", done(&[own]), done(&[own, "ok.txt"]));
                (
                    done(&[own]),
                    format!(r#", "steps": {{"1": {later}, "2": {later}, "3": {later}}}"#),
                )
            }
            Variant::Decided(_) => (
                done(&[own]),
                format!(r#", "steps": {{"2": [{failed}, {}]}}"#, done(&[own])),
            ),
        };
        format!(r#"{{"default": {default}{steps}{reviewer}}}"#)
    }

    /// What `loop start` gets besides the steps.
    pub fn start_args(self) -> Vec<&'static str> {
        match self {
            Variant::RedOnMerge => vec![
                "--verify",
                r#"[ "$(ls step-*.txt 2>/dev/null | wc -l)" -lt 2 ] || test -f ok.txt"#,
            ],
            Variant::Decided(_) => vec!["--max-retries", "1"],
            _ => Vec::new(),
        }
    }

    /// Whether its loop is decided by a tap in the chat.
    pub fn taps(self) -> bool {
        matches!(self, Variant::Decided(Decider::TapRetry | Decider::TapSkip))
    }

    /// Whether step 2 ends SKIPPED.
    fn skips(self) -> bool {
        matches!(
            self,
            Variant::Decided(Decider::ShellSkip | Decider::TapSkip)
        )
    }
}

/// A running `loop telegram` for a loop, killed when dropped.
pub struct Bot(std::process::Child);

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pending gate of step 2 in the loop the person started, once shown there.
fn gate_of_step_two(l: &Loop) -> Option<String> {
    pending_gate(l, |keys| keys.iter().any(|k| k == "STEP: 2")).map(|(id, _)| id)
}

/// The last pending gate of the loop the person started whose keys satisfy `which`: its id
/// and its keys (`STEP: 2`, `QUESTION: …`).
fn pending_gate(l: &Loop, which: impl Fn(&[String]) -> bool) -> Option<(String, Vec<String>)> {
    let text = l.text();
    let doc = text.split("\nGATES:\n").nth(1)?;
    // `  G4:` blocks, their keys in any order.
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    for line in doc.lines() {
        if let Some(g) = line.strip_prefix("  G").and_then(|r| r.strip_suffix(':')) {
            blocks.push((format!("G{g}"), Vec::new()));
        } else if line.starts_with("    ")
            && let Some((_, keys)) = blocks.last_mut()
        {
            keys.push(line.trim().to_owned());
        } else if !line.starts_with(' ') {
            break;
        }
    }
    blocks
        .into_iter()
        .rev()
        .find(|(_, keys)| keys.iter().any(|k| k == "STATE: PENDING") && which(keys))
}

/// The step of a pending gate that asks about a task lost to a kill of its supervisor (a
/// failed attempt, as a lost task is, past `--max-retries 1`).
fn gate_of_a_lost_task(l: &Loop) -> Option<String> {
    let (_, keys) = pending_gate(l, |keys| {
        keys.iter()
            .any(|k| k.starts_with("QUESTION: ") && k.contains("task was lost"))
    })?;
    keys.iter()
        .find_map(|k| k.strip_prefix("STEP: "))
        .map(str::to_owned)
}

/// Takes the decision of a `Decided` loop once step 2's gate is shown in the loop the person
/// started (the runner may be dead at that moment: a decision on a waiting loop carries it on,
/// the daemon's part a person plays here otherwise); whether it was taken.
pub fn decide(l: &Loop, how: Decider, tg: Option<&FakeTelegram>, t: &mut Tally) -> bool {
    let Some(id) = wait_until_some(Duration::from_secs(60), || gate_of_step_two(l)) else {
        return false;
    };
    match how {
        Decider::ShellRetry | Decider::ShellSkip => {
            // In the foreground, as a person types it: it returns once the loop waits or
            // ends, or at once when the loop's runner carries the decision out.
            let args = if how == Decider::ShellRetry {
                ["retry", "2"]
            } else {
                ["skip", "2"]
            };
            let _ = l.cmd(&args).status();
            t.decisions_by_shell += 1;
            true
        }
        Decider::TapRetry | Decider::TapSkip => {
            let Some(tg) = tg else { return false };
            let Some((n, buttons)) = wait_until_some(Duration::from_secs(30), || {
                let sent = tg.sent();
                let i = sent
                    .iter()
                    .rposition(|s| s.buttons().iter().any(|b| b.starts_with(&format!("{id} "))))?;
                Some((i + 1, sent[i].buttons()))
            }) else {
                return false;
            };
            // Retry is the first button, Skip the second.
            let button = usize::from(how != Decider::TapRetry);
            let _bot = Bot(l
                .cmd(&["telegram", "--poll-timeout", "1s"])
                .spawn()
                .expect("loop telegram"));
            tg.push_tap(CHAT, CHAT, n, &buttons[button]);
            t.decisions_by_tap += 1;
            // The bot takes the tap and starts the decision; the loop carries on by itself.
            wait_for(Duration::from_secs(30), || {
                gate_of_step_two(l).as_deref() != Some(id.as_str())
            })
        }
    }
}

fn wait_until_some<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let mut got = None;
    wait_for(within, || {
        got = f();
        got.is_some()
    });
    got
}

/// The second loop of a `Twice` loop: other steps, in the same project, once the first is
/// DONE; the number of agent calls before it started.
pub fn second_loop(l: &Loop) -> usize {
    let before = l.calls().len();
    let scenario = l.dir.join("sim/scenario.json");
    std::fs::write(
        &scenario,
        r#"{"default": {"write": [{"path": "other-{step}.txt", "text": "{step}\n"}], "result": "worked\nSTEP_DONE: ok"}}"#,
    )
    .unwrap();
    let _ = l
        .cmd(&[
            "start",
            "a completely different goal",
            "--step",
            "delete everything",
            "--step",
            "rewrite in rust",
            "--parallel",
            "2",
        ])
        .status();
    before
}

/// What went wrong with a parallel loop that ended, each finding counted in `t`.
pub fn assess(
    l: &Loop,
    variant: Variant,
    second_from: Option<usize>,
    t: &mut Tally,
) -> Vec<String> {
    let mut bad = Vec::new();
    let project = l.dir.join("project");
    let text = l.text();
    let calls = l.calls();
    let (steps, from): (Vec<(u64, String)>, usize) = match second_from {
        Some(from) => (
            (1..=2).map(|s| (s, format!("other-{s}.txt"))).collect(),
            from,
        ),
        None => ((1..=3).map(|s| (s, format!("step-{s}.txt"))).collect(), 0),
    };
    for (s, file) in &steps {
        let skipped = second_from.is_none() && *s == 2 && variant.skips();
        let ran = calls[from.min(calls.len())..]
            .iter()
            .any(|c| c["step"].as_u64() == Some(*s) && c["review"].as_bool() != Some(true));
        let done = text.contains(&format!("{s}: [DONE]"));
        if skipped {
            if !text.contains(&format!("{s}: [SKIPPED]")) || project.join(file).exists() {
                t.false_done += 1;
                bad.push(format!(
                    "step {s} was to be SKIPPED, with none of its work merged"
                ));
            }
            continue;
        }
        if done && !ran {
            t.false_done += 1;
            bad.push(format!("step {s} DONE, but its agent never ran"));
        }
        if done && !project.join(file).exists() {
            if refused_write(l, *s, file) {
                // The read-only state directory (where the step's worktree is) refused its
                // agent's write, and the agent said done all the same: the loop can only
                // record that the step made no commit.
                t.done_with_writes_refused += 1;
                if step_commit(&text, *s).is_some() {
                    t.false_done += 1;
                    bad.push(format!(
                        "step {s} wrote nothing (its write was refused), but has a COMMIT"
                    ));
                }
            } else {
                t.lost_commits += 1;
                bad.push(format!("step {s} DONE, but {file} is not in the project"));
            }
        }
    }
    if second_from.is_some() && !project.join("step-1.txt").exists() {
        t.lost_commits += 1;
        bad.push("the first loop's work is gone".into());
    }
    let worktrees = git(&project, &["worktree", "list"]).lines().count() - 1;
    let branches = git(&project, &["branch", "--list", "loop/*"]);
    let merges = merge_worktrees(&project.join("state/parallel"));
    let left = worktrees + branches.lines().count() + merges.len();
    if left > 0 {
        t.git_left += left;
        bad.push(format!(
            "left behind: {worktrees} worktree(s), branches [{}], merge worktrees {merges:?}",
            branches.trim()
        ));
        if text.starts_with("STATUS: DONE") {
            t.false_done += 1;
        }
    }
    let doubles = double_decisions(l);
    if doubles > 0 {
        t.double_decisions += doubles;
        bad.push(format!("{doubles} gate(s) decided more than once"));
    }
    let log = std::fs::read_to_string(project.join("state/loop.log")).unwrap_or_default();
    t.conflicts += log.matches("conflicted in").count();
    t.red_merges += log.matches("VERIFY failed on step").count();
    bad
}

/// Merge worktrees left under `root` (`<LOOP_ID>/merge`).
fn merge_worktrees(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("merge"))
        .filter(|p| p.exists())
        .collect()
}

/// Gates decided more than once: in the loop the person started, and in each step's loop.
fn double_decisions(l: &Loop) -> usize {
    let mut logs = vec![l.dir.join("project/state/loop.log")];
    for e in std::fs::read_dir(l.dir.join("project/state/parallel"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for s in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
            logs.push(s.path().join("loop.log"));
        }
    }
    let mut doubles = 0;
    for log in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut seen = std::collections::HashMap::new();
        for line in text.lines() {
            if let Some(rest) = line.split("decide: gate ").nth(1)
                && let Some(id) = rest.split_whitespace().next()
                && !rest.contains("carried to")
            {
                *seen
                    .entry(id.trim_end_matches(['\'', 's']).to_owned())
                    .or_insert(0) += 1;
            }
        }
        doubles += seen.values().filter(|n| **n > 1).count();
    }
    doubles
}

/// A git project with a first commit, for a loop's steps to branch from.
pub fn project(dir: &Path) {
    git(dir, &["init", "-q"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", "start"]);
}

/// After a loop's faults: the decision of a `Decided` loop, taken as a person would, and the
/// loop then left to its end.
pub fn after_faults(
    i: usize,
    l: &Loop,
    variant: Variant,
    tg: Option<&FakeTelegram>,
    t: &mut Tally,
) {
    let Variant::Decided(how) = variant else {
        return;
    };
    if decide(l, how, tg, t) {
        // Whoever carries the decision out (the loop's runner, the decider, the runner a tap
        // started) drives the loop to its end. A step whose task the soak's kill of its
        // supervisor lost failed its one allowed attempt: a person retries it from here.
        wait_for(Duration::from_secs(120), || {
            if let Some(step) = gate_of_a_lost_task(l) {
                let _ = l.cmd(&["retry", &step]).status();
                t.lost_tasks_retried += 1;
            }
            l.done()
        });
    } else {
        t.failures.push(format!(
            "loop {i}: step 2's gate was never shown, or the tap never taken"
        ));
    }
}

/// Answers, as a person would, each MERGE gate the loop waits on once its runner has let go:
/// steps whose later runs all add `ok.txt` (red on merge) can conflict past `MAX_RETRIES` when
/// the merges meet in one order, and the loop then asks a person, as it should. `retry` gives
/// the step a fresh budget of merges; the loop carries on in the foreground.
pub fn answer_merge_gates(l: &Loop, t: &mut Tally) {
    for _ in 0..3 {
        if l.done() {
            return;
        }
        let Some((id, _)) = pending_gate(l, |keys| keys.iter().any(|k| k == "KIND: MERGE")) else {
            return;
        };
        let _ = l.cmd(&["answer", &id, "retry"]).status();
        t.merge_gates_retried += 1;
    }
}

/// Whether the agent of step `step` was refused the write of `file` by the system (the
/// simulated agent notes each such write beside its log of calls).
fn refused_write(l: &Loop, step: u64, file: &str) -> bool {
    let mut log = l.sim_log.clone().into_os_string();
    log.push(".refused.jsonl");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .any(|r| {
            r["step"].as_str() == Some(step.to_string().as_str())
                && r["path"].as_str().is_some_and(|p| p.ends_with(file))
        })
}

/// The `COMMIT:` of step `step` in the loop's RESULTS.
fn step_commit(text: &str, step: u64) -> Option<String> {
    let results = text.split("\nRESULTS:\n").nth(1)?;
    let block = results.split(&format!("  STEP_{step}:\n")).nth(1)?;
    block
        .lines()
        .take_while(|l| l.starts_with("    "))
        .find_map(|l| l.trim().strip_prefix("COMMIT: "))
        .map(str::to_owned)
}

/// The parallel counts, as the soak's summary prints them.
pub fn report(t: &Tally) {
    println!(
        "  parallel: false DONE {}, lost commits {}, worktrees/branches/merge worktrees left {}, \
         double decisions {}; decided {} by the shell and {} by a tap; {} conflicts and {} red \
         merges sent back; {} second loops in the same project; {} steps retried from here after \
         the soak lost their task; {} steps done with their agent's writes refused (no commit \
         recorded); {} MERGE gates retried from here",
        t.false_done,
        t.lost_commits,
        t.git_left,
        t.double_decisions,
        t.decisions_by_shell,
        t.decisions_by_tap,
        t.conflicts,
        t.red_merges,
        t.second_loops,
        t.lost_tasks_retried,
        t.done_with_writes_refused,
        t.merge_gates_retried
    );
}
