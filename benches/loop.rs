//! The runner's cost, printed as figures (not asserted):
//! - overhead per step with an instant agent, against a plain shell loop that runs the same
//!   agent the same number of times, measured in the same run; with the CPU time of the runner
//!   (and the processes it waits for) and of every process of the loop (supervisors,
//!   guardians, agents: this process becomes their subreaper and reaps them), against the
//!   shell loop's, and the load average before and after;
//! - time from the stop file appearing to the step's group dead and STATUS written;
//! - the runner's CPU time and memory while a step sleeps (`BENCH_SLEEP_S`, default 30);
//! - under a save of M1.md every 20 ms (by rename, by `>>`, by truncate and a write in two halves 5 ms apart), the time
//!   from one step's agent exiting to the next one's spawn (judging, recording, spawning),
//!   against the same loop with no saves;
//! - what the sandbox costs a step: the same loop with every run confined by bubblewrap, and
//!   unconfined (every other section runs unconfined);
//! - what a commit per step costs a step: the same loop in a git project, each step writing a
//!   file of its own, with each DONE step committed and with `--no-commit`;
//! - what traces cost a step: the same loop with `OTEL_EXPORTER_OTLP_ENDPOINT` unset and set
//!   to a loopback collector that answers every export (and counts them).
//!
//! Run: `cargo bench --bench loop` (or name sections: `-- overhead stop idle storm sandbox
//! commit otel`).

#![expect(
    clippy::cast_precision_loss,
    reason = "counts and sizes become f64 only to be printed, far below where f64 loses precision"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{SIM, loop_cmd, ms};

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
    let mut args = vec![
        "start".to_string(),
        "bench".into(),
        "--max-steps".into(),
        STEPS.to_string(),
    ];
    for i in 1..=STEPS {
        args.push("--step".into());
        args.push(format!("step {i}"));
    }
    args
}

/// One plain shell loop running the agent STEPS times: its wall time and the CPU time of the
/// shell and the agents.
fn shell_round() -> (Duration, Duration) {
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let script = format!(
        "for i in $(seq {STEPS}); do LOOP_STEP=$i {SIM} -p 'do step' --output-format stream-json --verbose >/dev/null; done"
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
    let _ = std::fs::remove_dir_all(&dir);
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

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// One loop of STEPS steps with the same agent: its wall time, the CPU time of the runner
/// (with the processes it waited for), and that of every process of the loop.
fn loop_round() -> (Duration, Duration, Duration) {
    loop_round_in(Sandbox::Off)
}

/// Whether a bench's loop runs confined.
#[derive(Clone, Copy, PartialEq)]
enum Sandbox {
    Off,
    Bwrap,
}

/// [`loop_round`], its runs confined as `sandbox` says (the simulated agent's scenario, in
/// the bench's directory, readable).
fn loop_round_in(sandbox: Sandbox) -> (Duration, Duration, Duration) {
    let dir = fresh(r#"{"default": {"result": "ok\nSTEP_DONE: ok"}}"#);
    let args = start_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = loop_cmd(&dir, &args);
    if sandbox == Sandbox::Bwrap {
        cmd.env("LOOP_SANDBOX", "bwrap")
            .env("LOOP_SANDBOX_READ", &dir);
    }
    let cpu = children_cpu();
    let t = Instant::now();
    let status = cmd.status().unwrap();
    let took = t.elapsed();
    let runner_cpu = children_cpu().saturating_sub(cpu); // never less: CPU time only grows
    assert!(status.success(), "loop failed: see {}", dir.display());
    reap_orphans();
    let all_cpu = children_cpu().saturating_sub(cpu);
    let _ = std::fs::remove_dir_all(&dir);
    (took, runner_cpu, all_cpu)
}

fn overhead() {
    const ROUNDS: usize = 5;
    let load_before = load_average();
    // The loop's supervisors and guardians are re-parented here, so their CPU time counts.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let (mut shell, mut shell_cpu) = (Vec::new(), Vec::new());
    let (mut looped, mut cpu, mut all_cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (w, c) = shell_round();
        shell.push(w);
        shell_cpu.push(c);
        let (w, c, a) = loop_round();
        looped.push(w);
        cpu.push(c);
        all_cpu.push(a);
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    let per = |d: Duration| ms(d) / STEPS as f64;
    let diffs = |a: &[Duration], b: &[Duration]| {
        let mut v: Vec<f64> = a.iter().zip(b).map(|(a, b)| per(*a) - per(*b)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let over = diffs(&looped, &shell);
    let extra_cpu = diffs(&all_cpu, &shell_cpu);
    for v in [
        &mut shell,
        &mut looped,
        &mut cpu,
        &mut all_cpu,
        &mut shell_cpu,
    ] {
        v.sort();
    }
    let mid = ROUNDS / 2;
    let last = ROUNDS - 1;
    println!(
        "overhead: {STEPS} steps with an instant agent, {ROUNDS} rounds each, alternating; \
         median (min..max); load average {load_before} before, {} after",
        load_average()
    );
    println!(
        "  plain shell loop : {:6.1} ms per call ({:.1}..{:.1})",
        per(shell[mid]),
        per(shell[0]),
        per(shell[last])
    );
    println!(
        "  loop             : {:6.1} ms per step ({:.1}..{:.1})",
        per(looped[mid]),
        per(looped[0]),
        per(looped[last])
    );
    println!(
        "  runner overhead  : {:6.1} ms per step ({:.1}..{:.1}); ratio loop/shell {:.2}",
        over[mid],
        over[0],
        over[last],
        per(looped[mid]) / per(shell[mid])
    );
    println!(
        "  runner CPU       : {:6.2} ms per step ({:.2}..{:.2}): the runner and what it waited for",
        per(cpu[mid]),
        per(cpu[0]),
        per(cpu[last])
    );
    println!(
        "  all CPU          : {:6.2} ms per step ({:.2}..{:.2}): every process of the loop; \
         the shell loop's {:.2} ms per call; extra {:.2} ms per step ({:.2}..{:.2})",
        per(all_cpu[mid]),
        per(all_cpu[0]),
        per(all_cpu[last]),
        per(shell_cpu[mid]),
        extra_cpu[mid],
        extra_cpu[0],
        extra_cpu[last]
    );
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
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (w, _, c) = loop_round_in(Sandbox::Off);
        off.push(w);
        off_cpu.push(c);
        let (w, _, c) = loop_round_in(Sandbox::Bwrap);
        on.push(w);
        on_cpu.push(c);
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    let per = |d: Duration| ms(d) / STEPS as f64;
    let mut extra: Vec<f64> = on
        .iter()
        .zip(&off)
        .map(|(a, b)| per(*a) - per(*b))
        .collect();
    extra.sort_by(f64::total_cmp);
    for v in [&mut off, &mut on, &mut off_cpu, &mut on_cpu] {
        v.sort();
    }
    let (mid, last) = (ROUNDS / 2, ROUNDS - 1);
    println!(
        "sandbox: {STEPS} steps with an instant agent, {ROUNDS} rounds each, alternating; median \
         (min..max)"
    );
    for (name, wall, cpu) in [("unconfined", &off, &off_cpu), ("bubblewrap", &on, &on_cpu)] {
        println!(
            "  {name:<11}: {:6.1} ms per step ({:.1}..{:.1}), all CPU {:.2} ms per step",
            per(wall[mid]),
            per(wall[0]),
            per(wall[last]),
            per(cpu[mid])
        );
    }
    println!(
        "  the sandbox : {:+6.1} ms per step ({:+.1}..{:+.1}); ratio confined/unconfined {:.2}",
        extra[mid],
        extra[0],
        extra[last],
        per(on[mid]) / per(off[mid])
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
    let _ = std::fs::remove_dir_all(&dir);
    (took, all_cpu)
}

/// What a commit per step costs a step: the same loop with commits and with `--no-commit`,
/// alternating, measured in the same run.
fn commit_cost() {
    const ROUNDS: usize = 5;
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (w, c) = commit_round(false);
        off.push(w);
        off_cpu.push(c);
        let (w, c) = commit_round(true);
        on.push(w);
        on_cpu.push(c);
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    let per = |d: Duration| ms(d) / STEPS as f64;
    let diff = |a: &[Duration], b: &[Duration]| {
        let mut v: Vec<f64> = a.iter().zip(b).map(|(a, b)| per(*a) - per(*b)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (extra, extra_cpu) = (diff(&on, &off), diff(&on_cpu, &off_cpu));
    for v in [&mut off, &mut on, &mut off_cpu, &mut on_cpu] {
        v.sort();
    }
    let (mid, last) = (ROUNDS / 2, ROUNDS - 1);
    println!(
        "commit: {STEPS} steps writing a file each in a git project, {ROUNDS} rounds each, \
         alternating; median (min..max)"
    );
    for (name, wall, cpu) in [("--no-commit", &off, &off_cpu), ("committed", &on, &on_cpu)] {
        println!(
            "  {name:<11}: {:6.1} ms per step ({:.1}..{:.1}), all CPU {:.2} ms per step",
            per(wall[mid]),
            per(wall[0]),
            per(wall[last]),
            per(cpu[mid])
        );
    }
    println!(
        "  the commit  : {:+6.1} ms per step ({:+.1}..{:+.1}), CPU {:+.2} ms; ratio {:.2}",
        extra[mid],
        extra[0],
        extra[last],
        extra_cpu[mid],
        per(on[mid]) / per(off[mid])
    );
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
    let _ = std::fs::remove_dir_all(&dir);
    (took, all_cpu)
}

/// What traces cost a step: the same loop with the variable unset and set, alternating,
/// measured in the same run.
fn otel_cost() {
    const ROUNDS: usize = 9;
    let (endpoint, exports) = collector();
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (w, c) = otel_round(None);
        off.push(w);
        off_cpu.push(c);
        let (w, c) = otel_round(Some(&endpoint));
        on.push(w);
        on_cpu.push(c);
    }
    nix::sys::prctl::set_child_subreaper(false).unwrap();
    let per = |d: Duration| ms(d) / STEPS as f64;
    let diff = |a: &[Duration], b: &[Duration]| {
        let mut v: Vec<f64> = a.iter().zip(b).map(|(a, b)| per(*a) - per(*b)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (extra, extra_cpu) = (diff(&on, &off), diff(&on_cpu, &off_cpu));
    for v in [&mut off, &mut on, &mut off_cpu, &mut on_cpu] {
        v.sort();
    }
    let (mid, last) = (ROUNDS / 2, ROUNDS - 1);
    let exports = exports.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "otel: {STEPS} steps with an instant agent, {ROUNDS} rounds each, alternating; \
         median (min..max); {exports} export(s) received in all"
    );
    for (name, wall, cpu) in [("unset", &off, &off_cpu), ("set", &on, &on_cpu)] {
        println!(
            "  {name:<6}: {:6.1} ms per step ({:.1}..{:.1}), all CPU {:.2} ms per step",
            per(wall[mid]),
            per(wall[0]),
            per(wall[last]),
            per(cpu[mid])
        );
    }
    println!(
        "  traces: {:+6.1} ms per step ({:+.1}..{:+.1}), CPU {:+.2} ms; ratio set/unset {:.2}",
        extra[mid],
        extra[0],
        extra[last],
        extra_cpu[mid],
        per(on[mid]) / per(off[mid])
    );
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
        let _ = std::fs::remove_dir_all(&dir);
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
    let before = proc_cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(secs));
    let after = proc_cpu_ticks(pid);
    let rss = proc_kb(pid, "VmRSS:");
    let hwm = proc_kb(pid, "VmHWM:");
    let _ = std::fs::write(dir.join("stop"), "");
    let _ = child.wait();
    let tick_ms = 10.0; // USER_HZ is 100 on Linux
    println!("idle: the runner while a step sleeps {secs} s");
    println!(
        "  CPU {:.0} ms over {secs} s ({:.3} % of a core)",
        (after - before) as f64 * tick_ms,
        (after - before) as f64 * tick_ms / (secs as f64 * 10.0)
    );
    println!(
        "  memory: RSS {:.1} MB, peak {:.1} MB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
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
    let _ = std::fs::remove_dir_all(&dir);
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
}
