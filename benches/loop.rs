//! The runner's cost, printed as figures (not asserted):
//! - overhead per step with an instant agent, against a plain shell loop that runs the same
//!   agent the same number of times, measured in the same run, for plans of 5, 20 and 80
//!   steps (`BENCH_STEPS=5,20,80`), with what one more step costs; with the CPU time of the runner
//!   (and the processes it waits for) and of every process of the loop (supervisors,
//!   guardians, agents: this process becomes their subreaper and reaps them), against the
//!   shell loop's, and the load average before and after;
//! - time from the stop file appearing to the step's group dead and STATUS written;
//! - how often every process of the loop (runner, starter, supervisor, guardian, permission
//!   host, hooks) is woken, and its CPU time, while a step sleeps (`BENCH_SLEEP_S`, default
//!   30), and the runner's memory;
//! - under a save of M1.md every 20 ms (by rename, by `>>`, by truncate and a write in two halves 5 ms apart), the time
//!   from one step's agent exiting to the next one's spawn (judging, recording, spawning),
//!   against the same loop with no saves;
//! - what the sandbox costs a step: the same loop with every run confined by bubblewrap, and
//!   unconfined (every other section runs unconfined);
//! - what a commit per step costs a step: the same loop in a git project, each step writing a
//!   file of its own, with each DONE step committed and with `--no-commit`;
//! - what traces cost a step: the same loop with `OTEL_EXPORTER_OTLP_ENDPOINT` unset and set
//!   to a loopback collector that answers every export (and counts them);
//! - the floor: what the guarantees the design binds cost a step by themselves, done by this
//!   bench with nothing else around them (a durable `M1.md` write, a durable task directory,
//!   a supervisor forked in a session of its own that runs the agent and records its exit
//!   durably), against the shell loop and the loop, in the same run.
//!
//! Run: `cargo bench --bench loop` (or name sections: `-- overhead stop idle storm sandbox
//! commit otel floor`).

#![expect(
    clippy::cast_precision_loss,
    reason = "counts and sizes become f64 only to be printed, far below where f64 loses precision"
)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
mod stats;
use common::{SIM, loop_cmd, ms};
use stats::median;

const STEPS: usize = 20;

fn fresh(scenario: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "loop-bench-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(dir.join("state")).unwrap();
    std::fs::write(dir.join("scenario.json"), scenario).unwrap();
    dir
}

/// The directories of finished rounds, removed once every section has run: on a filesystem
/// that looks through recently deleted inodes for each new one (ext4 without a journal), a
/// round's files deleted right away would slow the rounds after it, which a loop in a
/// project does not meet.
static DONE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn done_with(dir: PathBuf) {
    DONE.lock().unwrap().push(dir);
}

fn remove_finished_rounds() {
    for dir in DONE.lock().unwrap().drain(..) {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// CPU time (user + system) of this process's waited-for children so far.
fn children_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    tv(u.user_time()) + tv(u.system_time())
}

/// `loop start` of a STEPS-step loop.
fn start_args() -> Vec<String> {
    start_args_of(STEPS)
}

/// `loop start` of a loop of `steps` steps (`MAX_STEPS` raised to match).
fn start_args_of(steps: usize) -> Vec<String> {
    let mut args = vec![
        "start".to_string(),
        "bench".into(),
        "--max-steps".into(),
        steps.to_string(),
    ];
    for i in 1..=steps {
        args.push("--step".into());
        args.push(format!("step {i}"));
    }
    args
}

/// One plain shell loop running the agent `steps` times: its wall time and the CPU time of
/// the shell and the agents.
fn shell_round(steps: usize) -> (Duration, Duration) {
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let script = format!(
        "for i in $(seq {steps}); do LOOP_STEP=$i {SIM} -p 'do step' --output-format stream-json --verbose >/dev/null; done"
    );
    let cpu = children_cpu();
    let t = Instant::now();
    let ok = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&dir)
        .env("CLAUDE_SIM_SCENARIO", dir.join("scenario.json"))
        .status()
        .unwrap()
        .success();
    let took = t.elapsed();
    assert!(ok);
    reap_orphans();
    let cpu = children_cpu().saturating_sub(cpu);
    done_with(dir);
    (took, cpu)
}

/// Waits for every orphan re-parented to this process (a subreaper while `overhead` runs):
/// the supervisors and guardians of a loop outlive its runner by a moment. Gives up after
/// 10 s, saying so.
fn reap_orphans() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() > end {
                    println!("  (some processes of the loop still run after 10 s: not counted)");
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(_) => {}
            Err(_) => return, // no children left
        }
    }
}

/// The filesystem the bench's loops keep their state on (the temporary directory: set
/// `TMPDIR` to measure another). Each step makes about a dozen files, and syncs some: what that
/// costs depends on it. On ext4 without a journal (`/proc/fs/jbd2` empty) each new file is
/// looked for among the inodes deleted in the last minutes of its block group, so the
/// figures there also depend on what else deleted files lately.
fn filesystem() -> String {
    use nix::sys::statfs::{EXT4_SUPER_MAGIC, TMPFS_MAGIC, statfs};
    let dir = std::env::temp_dir();
    let kind = match statfs(&dir).map(|s| s.filesystem_type()) {
        Ok(t) if t == TMPFS_MAGIC => "tmpfs (in memory, fsync does nothing)".to_owned(),
        Ok(t) if t == EXT4_SUPER_MAGIC => {
            let journals = std::fs::read_dir("/proc/fs/jbd2").map_or(0, Iterator::count);
            format!("ext4 ({journals} journalled filesystems mounted)")
        }
        Ok(t) => format!("filesystem type {t:?}"),
        Err(e) => format!("unknown ({e})"),
    };
    format!("{} on {kind}", dir.display())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// One loop of STEPS steps with the same agent: its wall time, the CPU time of the runner
/// (with the processes it waited for), and that of every process of the loop.
fn loop_round(steps: usize) -> (Duration, Duration, Duration) {
    loop_round_in(Sandbox::Off, steps)
}

/// Whether a bench's loop runs confined.
#[derive(Clone, Copy, PartialEq)]
enum Sandbox {
    Off,
    Bwrap,
}

/// [`loop_round`], its runs confined as `sandbox` says (the simulated agent's scenario, in
/// the bench's directory, readable).
fn loop_round_in(sandbox: Sandbox, steps: usize) -> (Duration, Duration, Duration) {
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let args = start_args_of(steps);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = loop_cmd(&dir, &args);
    if sandbox == Sandbox::Bwrap {
        cmd.env("LOOP_SANDBOX", "bwrap")
            .env("LOOP_SANDBOX_READ", &dir)
            .env("LOOP_SANDBOX_ENV", "CLAUDE_SIM_*");
    }
    let cpu = children_cpu();
    let t = Instant::now();
    let status = cmd.status().unwrap();
    let took = t.elapsed();
    let runner_cpu = children_cpu().saturating_sub(cpu); // never less: CPU time only grows
    assert!(status.success(), "loop failed: see {}", dir.display());
    reap_orphans();
    let all_cpu = children_cpu().saturating_sub(cpu);
    done_with(dir);
    (took, runner_cpu, all_cpu)
}

/// The plan lengths `overhead` sweeps: `BENCH_STEPS` (comma-separated), else 5, 20 and 80.
fn sweep_sizes() -> Vec<usize> {
    std::env::var("BENCH_STEPS")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect::<Vec<usize>>()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![5, 20, 80])
}

/// One plan length's samples: wall and CPU times of the shell loop and of the loop.
#[derive(Default)]
struct Sized {
    shell: Vec<Duration>,
    shell_cpu: Vec<Duration>,
    looped: Vec<Duration>,
    cpu: Vec<Duration>,
    all_cpu: Vec<Duration>,
}

/// Round by round, how many milliseconds per step of `steps` the times `a` took more than
/// the times `b`.
fn over_per_step(a: &[Duration], b: &[Duration], steps: usize) -> Vec<f64> {
    let per = |d: &Duration| ms(*d) / steps as f64;
    a.iter().zip(b).map(|(a, b)| per(a) - per(b)).collect()
}

/// Prints one plan length's figures; returns the loop's extra wall time over the shell's,
/// whole, per round, and the median overhead per step.
fn print_size(n: usize, s: &Sized) -> (Vec<f64>, f64) {
    let per = |d: &Duration| ms(*d) / n as f64;
    let paired = |a: &[Duration], b: &[Duration]| over_per_step(a, b, n);
    let whole: Vec<f64> = s
        .looped
        .iter()
        .zip(&s.shell)
        .map(|(a, b)| ms(*a) - ms(*b))
        .collect();
    let shell = median(s.shell.iter().map(per).collect());
    let looped = median(s.looped.iter().map(per).collect());
    let over = median(paired(&s.looped, &s.shell));
    let cpu = median(s.cpu.iter().map(per).collect());
    let all = median(s.all_cpu.iter().map(per).collect());
    let shell_cpu = median(s.shell_cpu.iter().map(per).collect());
    let extra_cpu = median(paired(&s.all_cpu, &s.shell_cpu));
    println!("  {n} steps:");
    println!(
        "    plain shell loop : {:6.2} ms per call ({:.2}..{:.2})",
        shell.0, shell.1, shell.2
    );
    println!(
        "    loop             : {:6.2} ms per step ({:.2}..{:.2})",
        looped.0, looped.1, looped.2
    );
    println!(
        "    runner overhead  : {:6.2} ms per step ({:.2}..{:.2}); ratio loop/shell {:.2}",
        over.0,
        over.1,
        over.2,
        looped.0 / shell.0
    );
    println!(
        "    runner CPU       : {:6.2} ms per step ({:.2}..{:.2}): the runner and what it \
         waited for",
        cpu.0, cpu.1, cpu.2
    );
    println!(
        "    all CPU          : {:6.2} ms per step ({:.2}..{:.2}): every process of the \
         loop; the shell loop's {:.2} ms per call; extra {:.2} ms per step ({:.2}..{:.2})",
        all.0, all.1, all.2, shell_cpu.0, extra_cpu.0, extra_cpu.1, extra_cpu.2
    );
    (whole, over.0)
}

/// Overhead per step against a plain shell loop running the same agent, for each plan length
/// of [`sweep_sizes`], the lengths and the two loops alternating in one run; then what the
/// loop costs once (start, end) and what each added step costs, from the paired differences.
fn overhead() {
    const ROUNDS: usize = 5;
    let sizes = sweep_sizes();
    let load_before = load_average();
    // The loop's supervisors and guardians are re-parented here, so their CPU time counts.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let mut by: Vec<Sized> = sizes.iter().map(|_| Sized::default()).collect();
    for _ in 0..ROUNDS {
        for (n, s) in sizes.iter().zip(&mut by) {
            let (w, c) = shell_round(*n);
            s.shell.push(w);
            s.shell_cpu.push(c);
            let (w, c, a) = loop_round(*n);
            s.looped.push(w);
            s.cpu.push(c);
            s.all_cpu.push(a);
        }
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    println!(
        "overhead: an instant agent, plans of {sizes:?} steps, {ROUNDS} rounds each, \
         alternating; median (min..max); load average {load_before} before, {} after; state \
         in {}",
        load_average(),
        filesystem()
    );
    // The loop's extra wall time over the shell's, whole, per round.
    let mut extra: Vec<Vec<f64>> = Vec::new();
    let mut per_step = Vec::new();
    for (n, s) in sizes.iter().zip(&by) {
        let (whole, over) = print_size(*n, s);
        extra.push(whole);
        per_step.push(over);
    }
    // What each added step costs, from one plan length to the next (medians of the whole
    // extra times, so the loop's cost at start and end cancels out).
    let mids: Vec<f64> = extra.iter().map(|e| median(e.clone()).0).collect();
    let mut slopes = Vec::new();
    for i in 1..sizes.len() {
        let slope = (mids[i] - mids[i - 1]) / (sizes[i] - sizes[i - 1]) as f64;
        slopes.push(slope);
        println!(
            "  each added step, {} → {} steps: {slope:6.2} ms over the shell loop",
            sizes[i - 1],
            sizes[i]
        );
    }
    if let (Some(first), Some(last)) = (per_step.first(), per_step.last()) {
        println!(
            "  runner overhead per step, {} steps against {}: ratio {:.2}",
            sizes[sizes.len() - 1],
            sizes[0],
            last / first
        );
    }
    if let (Some(first), Some(last)) = (slopes.first(), slopes.last()) {
        let fixed = mids[0] - first * sizes[0] as f64;
        println!(
            "  once per loop (start, end): {fixed:6.1} ms; added step at the longest plans \
             against the shortest: ratio {:.2}",
            last / first
        );
    }
}

/// What the sandbox costs a step: the same loop of an instant agent with every run confined
/// by bubblewrap and unconfined, alternating, measured in the same run.
fn sandbox_cost() {
    const ROUNDS: usize = 5;
    let probe = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--unshare-pid", "--", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("sandbox: bubblewrap cannot start here (install `bubblewrap`): not measured");
        return;
    }
    let p = Paired::run(ROUNDS, |on| {
        let (wall, _, cpu) = loop_round_in(if on { Sandbox::Bwrap } else { Sandbox::Off }, STEPS);
        (wall, cpu)
    });
    let (mid, last) = (ROUNDS / 2, ROUNDS - 1);
    println!(
        "sandbox: {STEPS} steps with an instant agent, {ROUNDS} rounds each, alternating; median \
         (min..max)"
    );
    p.print_sides(["unconfined", "bubblewrap"], 11);
    let extra = &p.extra;
    println!(
        "  the sandbox : {:+6.1} ms per step ({:+.1}..{:+.1}); ratio confined/unconfined {:.2}",
        extra[mid],
        extra[0],
        extra[last],
        per(p.on[mid]) / per(p.off[mid])
    );
}

/// One loop of STEPS steps in a git project, each step writing a file of its own, committed
/// as each step is DONE (`commit`) or not (`--no-commit`): its wall time, and the CPU time of
/// every process of the loop (git's included).
fn commit_round(commit: bool) -> (Duration, Duration) {
    let dir = fresh(
        r#"{"default": {"write": [{"path": "step-{step}.txt", "text": "{step}\n"}], "result": "ok\nSTEP_DONE: ok"}}"#,
    );
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let mut args = start_args();
    if !commit {
        args.push("--no-commit".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cpu = children_cpu();
    let t = Instant::now();
    let status = loop_cmd(&dir, &args).status().unwrap();
    let took = t.elapsed();
    assert!(status.success(), "loop failed: see {}", dir.display());
    reap_orphans();
    let all_cpu = children_cpu().saturating_sub(cpu);
    let log = Command::new("git")
        .args(["rev-list", "--count", "HEAD"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let commits: usize = String::from_utf8_lossy(&log.stdout).trim().parse().unwrap();
    let want = if commit { STEPS + 1 } else { 1 };
    assert_eq!(commits, want, "commits in {}", dir.display());
    done_with(dir);
    (took, all_cpu)
}

/// What a commit per step costs a step: the same loop with commits and with `--no-commit`,
/// alternating, measured in the same run.
fn commit_cost() {
    const ROUNDS: usize = 5;
    let p = Paired::run(ROUNDS, commit_round);
    println!(
        "commit: {STEPS} steps writing a file each in a git project, {ROUNDS} rounds each, \
         alternating; median (min..max)"
    );
    p.print(["--no-commit", "committed"], 11, "the commit  ", "ratio ");
}

/// A loopback OTLP/HTTP collector that answers each request 200 with an empty body (an empty
/// `ExportTraceServiceResponse`), counting the requests: its endpoint, and the count.
fn collector() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = header.trim().to_ascii_lowercase();
                        if lower.is_empty() {
                            break;
                        }
                        if let Some(n) = lower.strip_prefix("content-length:") {
                            length = n.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    counted.fetch_add(1, Ordering::Relaxed);
                    let ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
                    if out.write_all(ok).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    (endpoint, count)
}

/// One loop of STEPS steps of an instant agent, its spans sent to `endpoint` (none when
/// `None`): its wall time, and the CPU time of every process of the loop.
fn otel_round(endpoint: Option<&str>) -> (Duration, Duration) {
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let args = start_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = loop_cmd(&dir, &args);
    if let Some(endpoint) = endpoint {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    }
    let cpu = children_cpu();
    let t = Instant::now();
    let status = cmd.status().unwrap();
    let took = t.elapsed();
    assert!(status.success(), "loop failed: see {}", dir.display());
    reap_orphans();
    let all_cpu = children_cpu().saturating_sub(cpu);
    done_with(dir);
    (took, all_cpu)
}

/// What traces cost a step: the same loop with the variable unset and set, alternating,
/// measured in the same run.
fn otel_cost() {
    const ROUNDS: usize = 9;
    let (endpoint, exports) = collector();
    let p = Paired::run(ROUNDS, |on| otel_round(on.then_some(endpoint.as_str())));
    let exports = exports.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "otel: {STEPS} steps with an instant agent, {ROUNDS} rounds each, alternating; \
         median (min..max); {exports} export(s) received in all"
    );
    p.print(["unset", "set"], 6, "traces", "ratio set/unset ");
}

/// The same loop without and with one thing (`round(false)`, `round(true)`: its wall and CPU
/// time), run in turn in the same run: each side's times sorted, and the per-step differences
/// (with − without) sorted.
struct Paired {
    off: Vec<Duration>,
    on: Vec<Duration>,
    off_cpu: Vec<Duration>,
    on_cpu: Vec<Duration>,
    extra: Vec<f64>,
    extra_cpu: Vec<f64>,
}

impl Paired {
    fn run(rounds: usize, mut round: impl FnMut(bool) -> (Duration, Duration)) -> Self {
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let (mut off, mut on) = (Vec::new(), Vec::new());
        let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (w, c) = round(false);
            off.push(w);
            off_cpu.push(c);
            let (w, c) = round(true);
            on.push(w);
            on_cpu.push(c);
        }
        nix::sys::prctl::set_child_subreaper(false).unwrap();
        let diff = |a: &[Duration], b: &[Duration]| {
            let mut v = over_per_step(a, b, STEPS);
            v.sort_by(f64::total_cmp);
            v
        };
        let (extra, extra_cpu) = (diff(&on, &off), diff(&on_cpu, &off_cpu));
        for v in [&mut off, &mut on, &mut off_cpu, &mut on_cpu] {
            v.sort();
        }
        Self {
            off,
            on,
            off_cpu,
            on_cpu,
            extra,
            extra_cpu,
        }
    }

    /// A line per side (`labels`: without, with; padded to `width`), then the difference
    /// (`extra`) and the ratio of the medians (after `ratio`).
    fn print(&self, labels: [&str; 2], width: usize, extra: &str, ratio: &str) {
        self.print_sides(labels, width);
        let (mid, last) = (self.off.len() / 2, self.off.len() - 1);
        println!(
            "  {extra}: {:+6.1} ms per step ({:+.1}..{:+.1}), CPU {:+.2} ms; {ratio}{:.2}",
            self.extra[mid],
            self.extra[0],
            self.extra[last],
            self.extra_cpu[mid],
            per(self.on[mid]) / per(self.off[mid])
        );
    }

    /// A line per side: its median wall time per step (min..max) and its CPU time per step.
    fn print_sides(&self, labels: [&str; 2], width: usize) {
        let (mid, last) = (self.off.len() / 2, self.off.len() - 1);
        for (name, wall, cpu) in [
            (labels[0], &self.off, &self.off_cpu),
            (labels[1], &self.on, &self.on_cpu),
        ] {
            println!(
                "  {name:<width$}: {:6.1} ms per step ({:.1}..{:.1}), all CPU {:.2} ms per step",
                per(wall[mid]),
                per(wall[0]),
                per(wall[last]),
                per(cpu[mid])
            );
        }
    }
}

/// What a floor round keeps durable (fsyncs a file and its directory before going on).
#[derive(Clone, Copy, PartialEq)]
enum Durable {
    /// What the crash protocol needs after a machine's crash: `M1.md`, the task directory
    /// before its spawn, the exit record (6 fsyncs a step).
    All,
    /// `M1.md` only, as every write of it is made durable (2 fsyncs a step).
    M1Only,
    /// Nothing: atomic renames, no fsync.
    Nothing,
}

impl Durable {
    fn label(self) -> &'static str {
        match self {
            Durable::All => "floor, 6 fsyncs",
            Durable::M1Only => "floor, M1.md's 2",
            Durable::Nothing => "floor, no fsync",
        }
    }
}

/// Replaces `path` with `bytes` atomically: a temporary file renamed over it; when `durable`,
/// as every write of `M1.md` must be: the file fsynced before the rename, its directory
/// after.
fn replace(path: &Path, bytes: &[u8], durable: bool) {
    use std::io::Write;
    let dir = path.parent().unwrap();
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    let mut f = std::fs::File::create(&tmp).unwrap();
    f.write_all(bytes).unwrap();
    if durable {
        f.sync_all().unwrap();
    }
    std::fs::rename(&tmp, path).unwrap();
    if durable {
        std::fs::File::open(dir).unwrap().sync_all().unwrap();
    }
}

/// One round of the floor: `steps` steps, each with only what the design binds. The runner's
/// part: the write-ahead record of the step in `M1.md`, its task directory with its spec
/// (renamed into place), a supervisor forked in a session of its own, then the exit record
/// and the agent's output read. The supervisor's part: the agent started in its own process
/// group with its output to the task's file, waited for, its exit record written. What is
/// fsynced: as `durable` says. (The runner here waits for its supervisor as a parent does, a
/// lower bound of noticing an exit record.) Its wall time and the CPU time of all its
/// processes.
fn floor_round(steps: usize, durable: Durable) -> (Duration, Duration) {
    use nix::sys::wait::waitpid;
    use nix::unistd::{ForkResult, fork, setsid};
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let state = dir.join("state");
    let tasks = state.join("tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    let all = durable == Durable::All;
    // As large as a loop's M1.md of that many steps, about 200 bytes a step.
    let mut m1 = "x".repeat(1000 + 200 * steps);
    m1.push('\n');
    let cpu = children_cpu();
    let t = Instant::now();
    for i in 1..=steps {
        replace(
            &state.join("M1.md"),
            m1.as_bytes(),
            durable != Durable::Nothing,
        );
        let task = tasks.join(format!("t{i}"));
        let staging = tasks.join(format!(".t{i}.tmp"));
        std::fs::create_dir(&staging).unwrap();
        replace(
            &staging.join("spec.json"),
            br#"{"command": ["agent"]}"#,
            all,
        );
        std::fs::rename(&staging, &task).unwrap();
        if all {
            std::fs::File::open(&tasks).unwrap().sync_all().unwrap();
        }
        // SAFETY: this process has a single thread (checked by the caller), so its fork may
        // run any code.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let code = (|| {
                    setsid().ok()?;
                    let out = std::fs::File::create(task.join("stdout")).ok()?;
                    let status = Command::new(SIM)
                        .args([
                            "-p",
                            "do step",
                            "--output-format",
                            "stream-json",
                            "--verbose",
                        ])
                        .env("LOOP_STEP", i.to_string())
                        .env("CLAUDE_SIM_SCENARIO", dir.join("scenario.json"))
                        .current_dir(&dir)
                        .stdout(out)
                        .process_group(0)
                        .status()
                        .ok()?;
                    let rec = format!("{{\"exit_code\": {}}}", status.code().unwrap_or(-1));
                    replace(&task.join("exit.json"), rec.as_bytes(), all);
                    Some(())
                })();
                // SAFETY: ends the fork without running the parent's destructors again.
                unsafe { nix::libc::_exit(i32::from(code.is_none())) }
            }
            ForkResult::Parent { child } => {
                waitpid(child, None).unwrap();
            }
        }
        let exit = std::fs::read_to_string(task.join("exit.json")).unwrap();
        assert!(exit.contains("\"exit_code\": 0"), "{exit}");
        let out = std::fs::read_to_string(task.join("stdout")).unwrap();
        assert!(out.contains("STEP_DONE"), "{out}");
    }
    let took = t.elapsed();
    let cpu = children_cpu().saturating_sub(cpu);
    done_with(dir);
    (took, cpu)
}

/// Whether this process has a single thread (it may then fork and go on in the child).
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.split_whitespace().eq(["Threads:", "1"]))
    })
}

/// The floor (each of [`Durable`]) against the shell loop and the loop, `STEPS` steps,
/// alternating: what the guarantees cost by themselves, what each relaxation of them would
/// save, and what the loop adds beyond them.
fn floor() {
    const ROUNDS: usize = 7;
    const KINDS: [Durable; 3] = [Durable::All, Durable::M1Only, Durable::Nothing];
    if !single_threaded() {
        println!("floor: this process has threads by now (run the section alone): not measured");
        return;
    }
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let (mut shell, mut shell_cpu) = (Vec::new(), Vec::new());
    let mut floors: Vec<(Vec<Duration>, Vec<Duration>)> =
        vec![(Vec::new(), Vec::new()); KINDS.len()];
    let (mut looped, mut loop_cpu) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (w, c) = shell_round(STEPS);
        shell.push(w);
        shell_cpu.push(c);
        for (kind, (wall, cpu)) in KINDS.iter().zip(&mut floors) {
            let (w, c) = floor_round(STEPS, *kind);
            wall.push(w);
            cpu.push(c);
        }
        let (w, _, c) = loop_round(STEPS);
        looped.push(w);
        loop_cpu.push(c);
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    let over = |a: &[Duration], b: &[Duration]| median(over_per_step(a, b, STEPS));
    println!(
        "floor: {STEPS} steps of an instant agent, {ROUNDS} rounds, alternating; median \
         (min..max); state in {}",
        filesystem()
    );
    println!(
        "  the guarantees alone, per step: an M1.md write, a task directory, a supervisor \
         in a session of its own, the agent, an exit record; fsynced as each line says"
    );
    let shell_ms = median(shell.iter().map(|d| per(*d)).collect()).0;
    let mut lines: Vec<(&str, &[Duration], &[Duration])> = KINDS
        .iter()
        .zip(&floors)
        .map(|(k, (w, c))| (k.label(), w.as_slice(), c.as_slice()))
        .collect();
    lines.push(("loop", &looped, &loop_cpu));
    for (name, wall, cpu) in lines {
        let o = over(wall, &shell);
        let c = over(cpu, &shell_cpu);
        println!(
            "  {name:<17}: {:6.2} ms per step over the shell loop's {shell_ms:.2} \
             ({:.2}..{:.2}), extra CPU {:.2} ms per step",
            o.0, o.1, o.2, c.0
        );
    }
    let f = over(&floors[0].0, &shell).0;
    let l = over(&looped, &shell).0;
    println!(
        "  the loop beyond the floor with its 6 fsyncs: {:+.2} ms per step; floor/loop \
         overhead ratio {:.2}",
        l - f,
        f / l
    );
}

/// Milliseconds per step of a loop of `STEPS` steps.
fn per(d: Duration) -> f64 {
    ms(d) / STEPS as f64
}

fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

fn agent_started(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("state/tasks")).is_ok_and(|mut d| {
        d.any(|e| {
            e.is_ok_and(|e| {
                e.path()
                    .join("stdout")
                    .metadata()
                    .is_ok_and(|m| m.len() > 0)
            })
        })
    })
}

fn stop_latency() {
    let mut samples = Vec::new();
    for _ in 0..5 {
        let dir = fresh(
            r#"{"default": {"sleep_ms": 60000, "heartbeat_ms": 1000, "result": "ok\nSTEP_DONE: ok"}}"#,
        );
        let mut child = loop_cmd(&dir, &["start", "bench", "--step", "sleep"])
            .spawn()
            .unwrap();
        assert!(wait_for(Duration::from_secs(20), || agent_started(&dir)));
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        std::fs::write(dir.join("stop"), "").unwrap();
        let status = child.wait().unwrap();
        samples.push(t.elapsed());
        assert_eq!(status.code(), Some(3));
        let m1 = std::fs::read_to_string(dir.join("state/M1.md")).unwrap();
        assert!(m1.contains("STATUS: WAITING"));
        done_with(dir);
    }
    samples.sort();
    println!("stop: stop file → step's group dead, STATUS WAITING written, runner exited (5 runs)");
    println!(
        "  min {:.1} ms, median {:.1} ms, max {:.1} ms",
        ms(samples[0]),
        ms(samples[2]),
        ms(samples[4])
    );
}

/// A process's CPU time so far (user + system), in clock ticks.
fn proc_cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is [0]; utime [11], stime [12].
    f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn proc_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// How often a process was woken so far: the voluntary and involuntary context switches of
/// all its threads.
fn proc_wakeups(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("status"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Every process of the loop in `dir`, with its command line: each carries the bench's
/// environment (`XDG_STATE_HOME` inside `dir`), whatever its parent (the supervisors run in
/// sessions of their own).
fn loop_processes(dir: &Path) -> Vec<(u32, String)> {
    let mark = format!("XDG_STATE_HOME={}", dir.join("xdg").display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<(u32, String)> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == mark.as_bytes()))
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd: Vec<String> = cmd
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .take(3)
                .map(|a| {
                    let a = String::from_utf8_lossy(a);
                    let a = a.rsplit('/').next().unwrap_or(&a).to_string();
                    a.chars().take(24).collect()
                })
                .collect();
            (pid, cmd.join(" "))
        })
        .collect();
    found.sort();
    found
}

/// The runner and every process of the loop while a step's agent sleeps `BENCH_SLEEP_S`
/// (default 30): how often each is woken and what CPU it uses, and the runner's memory.
fn idle_cost() {
    let secs: u64 = std::env::var("BENCH_SLEEP_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let dir = fresh(&format!(
        r#"{{"default": {{"sleep_ms": {}, "result": "ok\nSTEP_DONE: ok"}}}}"#,
        (secs + 5) * 1000
    ));
    let mut child = loop_cmd(&dir, &["start", "bench", "--step", "sleep"])
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(wait_for(Duration::from_secs(20), || agent_started(&dir)));
    // Past the step's start (its pid recorded after 100 ms): what is left is the sleep.
    std::thread::sleep(Duration::from_millis(500));
    let procs = loop_processes(&dir);
    let before: Vec<(u64, u64)> = procs
        .iter()
        .map(|(p, _)| (proc_wakeups(*p), proc_cpu_ticks(*p)))
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    let after: Vec<(u64, u64)> = procs
        .iter()
        .map(|(p, _)| (proc_wakeups(*p), proc_cpu_ticks(*p)))
        .collect();
    let rss = proc_kb(pid, "VmRSS:");
    let hwm = proc_kb(pid, "VmHWM:");
    let _ = std::fs::write(dir.join("stop"), "");
    let _ = child.wait();
    let tick_ms = 10.0; // USER_HZ is 100 on Linux
    println!("idle: every process of the loop while a step sleeps {secs} s");
    let (mut wakes, mut ticks) = (0, 0);
    for (((p, cmd), b), a) in procs.iter().zip(&before).zip(&after) {
        let agent = cmd.starts_with("claude-sim");
        let (w, t) = (a.0.saturating_sub(b.0), a.1.saturating_sub(b.1));
        if !agent {
            wakes += w;
            ticks += t;
        }
        println!(
            "  {:<7} {cmd:<52}: {w:4} wakeups, CPU {:4.0} ms{}",
            p,
            t as f64 * tick_ms,
            if agent {
                " (the agent: not the loop's)"
            } else {
                ""
            }
        );
    }
    println!(
        "  the loop's processes: {wakes} wakeups ({:.2} a second), CPU {:.0} ms over {secs} s \
         ({:.3} % of a core)",
        wakes as f64 / secs as f64,
        ticks as f64 * tick_ms,
        ticks as f64 * tick_ms / (secs as f64 * 10.0)
    );
    println!(
        "  the runner's memory: RSS {:.1} MB, peak {:.1} MB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    done_with(dir);
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Save {
    None,
    Rename,
    Append,
    InPlace,
}

fn save_once(file: &Path, how: Save, n: usize) {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    match how {
        Save::None => {}
        Save::Rename => {
            let tmp = file.with_extension("md.swp");
            std::fs::write(&tmp, format!("{text}# save {n}\n")).unwrap();
            std::fs::rename(&tmp, file).unwrap();
        }
        Save::Append => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
            writeln!(f, "# save {n}").unwrap();
        }
        Save::InPlace => {
            // Truncate, half, 5 ms, the rest: an editor writing in chunks.
            use std::io::Write;
            let text = format!("{text}# save {n}\n");
            let cut = text.len() / 2;
            let cut = (cut..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(cut);
            let mut f = std::fs::File::create(file).unwrap();
            f.write_all(&text.as_bytes()[..cut]).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            f.write_all(&text.as_bytes()[cut..]).unwrap();
        }
    }
}

fn json_time(path: &Path, key: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    chrono::DateTime::parse_from_rfc3339(v[key].as_str()?)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// One loop of STEPS steps under `how`: the gaps from each agent's exit to the next spawn.
fn storm_round(how: Save) -> Vec<f64> {
    let dir = fresh(r#"{"default": {"sleep_ms": 30, "result": "ok\nSTEP_DONE: ok"}}"#);
    let args = start_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = loop_cmd(&dir, &args).spawn().unwrap();
    let file = dir.join("state/M1.md");
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        n += 1;
        if file.exists() {
            save_once(&file, how, n);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "loop failed under {how:?}: see {}",
        dir.display()
    );
    let mut tasks: Vec<(
        chrono::DateTime<chrono::Utc>,
        Option<chrono::DateTime<chrono::Utc>>,
    )> = std::fs::read_dir(dir.join("state/tasks"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let created = json_time(&e.path().join("spec.json"), "created_at")?;
            Some((created, json_time(&e.path().join("exit.json"), "ended_at")))
        })
        .collect();
    tasks.sort();
    let gaps = tasks
        .windows(2)
        .filter_map(|w| Some((w[1].0 - w[0].1?).num_microseconds()? as f64 / 1000.0))
        .collect();
    done_with(dir);
    gaps
}

fn save_storm() {
    println!("save storm: a save every 20 ms; agent exit → next spawn, {STEPS} steps each");
    let mut base = 0.0;
    for how in [Save::None, Save::Rename, Save::Append, Save::InPlace] {
        let mut gaps = storm_round(how);
        gaps.sort_by(f64::total_cmp);
        let median = gaps[gaps.len() / 2];
        let max = gaps[gaps.len() - 1];
        if how == Save::None {
            base = median;
        }
        println!(
            "  {:<8}: median {median:7.1} ms, max {max:7.1} ms; median/no-saves {:.2}",
            format!("{how:?}"),
            median / base
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let picked: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let run = |name: &str| picked.is_empty() || picked.contains(&name);
    if run("overhead") {
        overhead();
    }
    if run("stop") {
        stop_latency();
    }
    if run("idle") {
        idle_cost();
    }
    if run("storm") {
        save_storm();
    }
    if run("sandbox") {
        sandbox_cost();
    }
    if run("commit") {
        commit_cost();
    }
    if run("otel") {
        otel_cost();
    }
    if run("floor") {
        floor();
    }
    remove_finished_rounds();
}
