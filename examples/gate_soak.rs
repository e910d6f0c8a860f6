//! Fault injection against decisions from the phone, with real processes: loops started with
//! `--approve-plan` wait on their plan's gate, a person taps Approve on a loopback Bot API, and
//! at a random moment between the tap, the decision's write and the loop carrying on, one fault
//! hits: `loop telegram` killed with SIGKILL (and restarted), the runner the decision started
//! killed (and resumed, as `loop daemon` would), the decider killed right after its write
//! (`LOOP_CRASH_AT=after-decision-write` in the bot's children), the bot's offset file lost (the
//! tap is delivered again), or a shell `loop approve` racing the tap. The simulated person taps
//! again when the message has not changed for a while, as a person would. Counts, for every
//! loop: double decisions (more than one `decide:` line for the gate), lost gates (a loop not
//! DONE, or its gate not DECIDED approve), double starts (an attempt of a step started twice),
//! repeated taps, and "already answered" replies.
//!
//! Run: `cargo build --release && cargo run --release --example gate_soak -- --loops 100`
//! (`--seed N` for another sequence of faults).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[expect(dead_code, reason = "the tests' fake, of which the soak uses a part")]
#[path = "../tests/support/telegram_fake.rs"]
mod telegram_fake;

use telegram_fake::FakeTelegram;

mod common;

use common::{Rng, bin, kill9, wait_for};

const TOKEN: &str = "55555:AAgateSOAKtoken_for-the-loopback-api";
const CHAT: i64 = 4242;

#[derive(Default)]
struct Tally {
    loops: usize,
    faults: [usize; 5],
    taps: usize,
    repeated_taps: usize,
    already_answered: usize,
    double_decisions: usize,
    lost_gates: usize,
    double_starts: usize,
    orphans: usize,
    failures: Vec<String>,
}

const FAULTS: [&str; 5] = [
    "bot kill -9",
    "runner kill -9",
    "decider killed after its write",
    "offset lost",
    "shell approve racing the tap",
];

struct Loop {
    dir: PathBuf,
    file: PathBuf,
    api: String,
}

impl Loop {
    fn new(root: &Path, i: usize, api: &str, sleep_ms: u64) -> Self {
        let dir = root.join(format!("loop-{i:04}"));
        std::fs::create_dir_all(dir.join("project/state")).unwrap();
        std::fs::create_dir_all(dir.join("sim")).unwrap();
        std::fs::write(
            dir.join("sim/scenario.json"),
            format!(
                r#"{{"default": {{"sleep_ms": {sleep_ms}, "result": "worked\nSTEP_DONE: ok"}}}}"#
            ),
        )
        .unwrap();
        Loop {
            file: dir.join("project/state/M1.md"),
            dir,
            api: api.to_owned(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin("loop"));
        c.args(args)
            .current_dir(self.dir.join("project"))
            .env("LOOP_FILE", &self.file)
            .env("LOOP_AGENT", bin("claude-sim"))
            .env("LOOP_STOP_FILE", self.dir.join("stop"))
            .env("XDG_STATE_HOME", self.dir.join("xdg"))
            .env("LOOP_REVIVE", "off")
            .env("CLAUDE_SIM_SCENARIO", self.dir.join("sim/scenario.json"))
            .env("CLAUDE_SIM_LOG", self.dir.join("sim/calls.jsonl"))
            .env("LOOP_SANDBOX_WRITE", self.dir.join("sim"))
            .env("LOOP_SANDBOX_ENV", "CLAUDE_SIM_*")
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_CHAT_ID", CHAT.to_string())
            .env("TELEGRAM_API_BASE", &self.api)
            .env_remove("LOOP_CRASH_AT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn bot(&self, crash_decider: bool) -> Child {
        let mut c = self.cmd(&["telegram", "--poll-timeout", "1s"]);
        if crash_decider {
            c.env("LOOP_CRASH_AT", "after-decision-write");
        }
        c.spawn().expect("start loop telegram")
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap_or_default()
    }

    fn status(&self) -> String {
        self.text()
            .lines()
            .find_map(|l| l.strip_prefix("STATUS:"))
            .map(|v| v.split('#').next().unwrap_or_default().trim().to_owned())
            .unwrap_or_default()
    }

    /// Whether a runner holds the loop's lock.
    fn driven(&self) -> bool {
        self.runner_pids().next().is_some()
    }

    /// The runners of this loop (`loop … resume`, `approve`), by their command lines.
    fn runner_pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.processes().into_iter().filter_map(|(pid, cmd)| {
            let runs = cmd.contains(" resume") || cmd.contains(" approve");
            (runs && !cmd.contains(" telegram")).then_some(pid)
        })
    }

    /// The live processes whose command line or environment names the loop's directory.
    fn processes(&self) -> Vec<(u32, String)> {
        common::processes_of(&self.dir)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("project/state/loop.log")).unwrap_or_default()
    }

    /// How many times each step's first attempt started, from the simulated agent's log.
    fn first_attempts(&self) -> Vec<usize> {
        let calls = std::fs::read_to_string(self.dir.join("sim/calls.jsonl")).unwrap_or_default();
        let mut n = vec![0; 3];
        for c in calls
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        {
            if let (Some(s), Some(1)) = (c["step"].as_u64(), c["attempt"].as_u64())
                && let Some(slot) = usize::try_from(s).ok().and_then(|s| n.get_mut(s))
            {
                *slot += 1;
            }
        }
        n
    }
}

fn end(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The message number of the gate's message with buttons, and its Approve button's data.
fn approve_button(tg: &FakeTelegram) -> Option<(usize, String)> {
    let sent = tg.sent();
    let i = sent.iter().rposition(|s| !s.buttons().is_empty())?;
    Some((i + 1, sent[i].buttons().first()?.clone()))
}

#[expect(
    clippy::too_many_lines,
    reason = "one round of the soak, read top to bottom"
)]
fn run_one(root: &Path, i: usize, rng: &mut Rng, t: &mut Tally) {
    let tg = FakeTelegram::start();
    let l = Loop::new(root, i, &tg.base_url(), 20 + rng.below(150));
    let started = l
        .cmd(&[
            "start",
            "soak",
            "--step",
            "one",
            "--step",
            "two",
            "--approve-plan",
        ])
        .status()
        .expect("loop start");
    let fail = |t: &mut Tally, why: String| t.failures.push(format!("loop {i}: {why}"));
    if started.code() != Some(3) {
        return fail(t, format!("start exited {started:?}, not 3 (waiting)"));
    }
    let Some((msg, button)) = approve_button(&tg) else {
        return fail(t, "no gate message with buttons".into());
    };
    let fault = usize::try_from(rng.below(FAULTS.len() as u64)).unwrap_or(0);
    t.faults[fault] += 1;
    let mut bot = l.bot(fault == 2);
    tg.push_tap(CHAT, CHAT, msg, &button);
    t.taps += 1;
    // A bot handles a tap within milliseconds: its kill lands in the first 80 ms, the others
    // anywhere in the first 400.
    let after = Duration::from_millis(rng.below(if fault == 0 { 80 } else { 400 }));
    std::thread::sleep(after);
    match fault {
        0 => {
            kill9(bot.id());
            let _ = bot.wait();
            bot = l.bot(false);
        }
        1 => {
            let _ = wait_for(Duration::from_secs(2), || l.driven());
            for pid in l.runner_pids().collect::<Vec<_>>() {
                kill9(pid);
            }
        }
        2 => {
            // The decider dies right after its write: the bot is restarted without the crash.
            let _ = wait_for(Duration::from_secs(3), || l.text().contains("CHOICE:"));
            end(&mut bot);
            bot = l.bot(false);
        }
        3 => {
            end(&mut bot);
            let _ = std::fs::remove_file(l.dir.join("project/state/telegram.offset"));
            bot = l.bot(false);
        }
        _ => {
            let _ = l.cmd(&["approve", "--detach"]).status();
        }
    }
    // The person: taps again when nothing happened for a while; a daemon: resumes a RUNNING
    // loop nobody drives.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last_tap = Instant::now();
    let mut undriven_since: Option<Instant> = None;
    while Instant::now() < deadline && l.status() != "DONE" {
        let edited = tg
            .bodies("editMessageText")
            .iter()
            .any(|e| e["message_id"] == msg);
        if !edited && last_tap.elapsed() > Duration::from_secs(3) {
            tg.push_tap(CHAT, CHAT, msg, &button);
            t.taps += 1;
            t.repeated_taps += 1;
            last_tap = Instant::now();
        }
        if l.status() == "RUNNING" && !l.driven() {
            let since = *undriven_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(1) {
                let _ = l.cmd(&["resume", "--detach"]).status();
                undriven_since = None;
            }
        } else {
            undriven_since = None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the bot settle its last answers, then end it.
    std::thread::sleep(Duration::from_millis(300));
    end(&mut bot);
    t.already_answered += tg
        .bodies("answerCallbackQuery")
        .iter()
        .filter(|a| a["text"].as_str().is_some_and(|s| s.contains("already")))
        .count();
    let decisions = l
        .log()
        .lines()
        .filter(|line| line.contains("decide: gate G1"))
        .count();
    if decisions > 1 {
        t.double_decisions += 1;
        fail(t, format!("{decisions} decisions of gate G1"));
    }
    let text = l.text();
    if l.status() != "DONE" || !text.contains("CHOICE: approve") {
        t.lost_gates += 1;
        fail(
            t,
            format!(
                "not DONE with G1 approved ({}, {})",
                l.status(),
                FAULTS[fault]
            ),
        );
    }
    let starts = l.first_attempts();
    if starts[1..].iter().any(|n| *n > 1) {
        t.double_starts += 1;
        fail(t, format!("first attempts started {starts:?} times"));
    }
    if !wait_for(Duration::from_secs(5), || l.processes().is_empty()) {
        t.orphans += 1;
        fail(t, format!("left behind: {:?}", l.processes()));
        for (pid, _) in l.processes() {
            kill9(pid);
        }
    }
    t.loops += 1;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| common::number_after(&args, flag);
    let loops = usize::try_from(value("--loops").unwrap_or(20)).unwrap_or(20);
    let seed = value("--seed").unwrap_or(0x5eed_9a7e);
    let root = std::env::temp_dir().join(format!("m1loop-gate-soak-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let mut rng = Rng(seed | 1);
    let mut t = Tally::default();
    let began = Instant::now();
    for i in 0..loops {
        run_one(&root, i, &mut rng, &mut t);
    }
    println!(
        "gate soak: {} loops in {:.0}s (seed {seed})",
        t.loops,
        began.elapsed().as_secs_f64()
    );
    for (name, n) in FAULTS.iter().zip(t.faults) {
        println!("  fault {name}: {n}");
    }
    println!(
        "  taps {}, repeated by the person {}, answered \"already answered\" {}",
        t.taps, t.repeated_taps, t.already_answered
    );
    println!(
        "  double decisions {}, lost gates {}, double starts {}, orphans {}",
        t.double_decisions, t.lost_gates, t.double_starts, t.orphans
    );
    for f in &t.failures {
        println!("  FAILURE {f}");
    }
    if t.failures.is_empty() {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        println!("  kept {}", root.display());
        std::process::exit(1);
    }
}
