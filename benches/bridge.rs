//! Figures for the exec bridge, printed, not asserted:
//! - how long `loop fire` takes to return (against `loop --version`, the cost of starting
//!   the binary at all);
//! - the delay from a command's exit to its exit record on disk (which includes the one
//!   look through `/proc` for processes of the task outside its group);
//! - one such look: `bridge::survivors`, reading every process's stat and environ;
//! - the supervisor's (and guardian's) memory, and their CPU time and wakeups while a
//!   long command runs, with no timeout and with both timeouts set.
//!
//! `cargo bench --bench bridge` (`BRIDGE_BENCH_SECS` sets the long command's length, 30 s).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LOOP: &str = env!("CARGO_BIN_EXE_loop");
const RUNS: usize = 20;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bench = Bench {
        dir: dir.path(),
        state: dir.path().join("state"),
    };
    bench.fire_returns();
    bench.exit_is_recorded();
    survivors_scan();
    bench.long_command();
}

/// A state directory the figures are taken in.
struct Bench<'a> {
    dir: &'a Path,
    state: std::path::PathBuf,
}

impl Bench<'_> {
    /// Runs `loop` with `args`, asserts it succeeded, returns its output.
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(LOOP)
            .args(args)
            .current_dir(self.dir)
            .env("LOOP_FILE", self.state.join("M1.md"))
            .env("LOOP_STOP_FILE", self.dir.join("stop"))
            .output()
            .expect("run loop");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn exit_record(&self, id: &str) -> std::path::PathBuf {
        self.state.join("tasks").join(id).join("exit.json")
    }

    /// How long `loop fire` takes to return, against starting the binary at all.
    fn fire_returns(&self) {
        let baseline = timed(RUNS, || {
            self.run(&["--version"]);
        });
        report("loop --version (process start baseline)", &baseline);
        let mut ids = Vec::new();
        let fire = timed(RUNS, || ids.push(self.run(&["fire", "--", "true"])));
        report("loop fire -- true, until it returns", &fire);
        for id in &ids {
            wait_for(&self.exit_record(id), Duration::from_secs(30));
        }
    }

    /// The delay from a command's exit to its exit record on disk.
    fn exit_is_recorded(&self) {
        let mut delays = Vec::new();
        for i in 0..RUNS {
            let mark = self.dir.join(format!("mark{i}"));
            let script = format!("sleep 0.1; date +%s%N > '{}'", mark.display());
            let id = self.run(&["fire", "--", "sh", "-c", &script]);
            let seen = wait_for(&self.exit_record(&id), Duration::from_secs(30));
            let exited: u128 = fs::read_to_string(&mark).unwrap().trim().parse().unwrap();
            delays.push(Duration::from_nanos(
                u64::try_from(seen.saturating_sub(exited)).unwrap(),
            ));
        }
        report(
            "command exit -> exit.json visible (incl. sh exit, 0.2 ms poll)",
            &delays,
        );
    }

    /// The supervisor's and guardian's memory, CPU time and wakeups while a long command
    /// runs, with no timeout and with both timeouts set.
    fn long_command(&self) {
        let secs: u64 = std::env::var("BRIDGE_BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(30);
        let length = secs.to_string();
        let quiet = self.run(&["fire", "--", "sleep", &length]);
        let timed_out = self.run(&[
            "fire",
            "--timeout",
            "1h",
            "--idle-timeout",
            "1h",
            "--",
            "sleep",
            &length,
        ]);
        std::thread::sleep(Duration::from_secs(1));
        let watched: Vec<(&str, Vec<(String, u32)>)> = [
            ("no timeout", &quiet),
            ("--timeout + --idle-timeout", &timed_out),
        ]
        .into_iter()
        .map(|(label, id)| {
            let task = self.state.join("tasks").join(id);
            (label, supervisor_and_guardian(&task))
        })
        .collect();
        let before: Vec<Vec<Usage>> = watched
            .iter()
            .map(|(_, ps)| ps.iter().map(|(_, p)| usage(*p)).collect())
            .collect();
        let window = Duration::from_secs(secs.saturating_sub(2).max(1));
        std::thread::sleep(window);
        println!(
            "\nwhile `sleep {secs}` runs, over {:.0} s:",
            window.as_secs_f64()
        );
        for ((label, procs), before) in watched.iter().zip(&before) {
            for ((role, pid), b) in procs.iter().zip(before) {
                let a = usage(*pid);
                println!(
                    "  {label:28} {role:10} RSS {:>6} kB  CPU {:>4} ms  context switches {}",
                    a.rss_kb,
                    (a.cpu_ticks - b.cpu_ticks) * 1000 / clock_ticks(),
                    a.switches - b.switches,
                );
            }
        }
        for id in [&quiet, &timed_out] {
            wait_for(&self.exit_record(id), Duration::from_secs(secs + 30));
        }
    }
}

/// One look through `/proc` for a task's processes outside its group.
fn survivors_scan() {
    let procs = fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        })
        .count();
    let scans = timed(RUNS * 5, || {
        assert!(m1loop::bridge::survivors("task_bench_none").is_empty());
    });
    report(
        &format!("bridge::survivors, a /proc environ scan of {procs} processes"),
        &scans,
    );
}

fn timed(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn report(what: &str, samples: &[Duration]) {
    let mut s = samples.to_vec();
    s.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}: median {:.2} ms, p90 {:.2} ms, max {:.2} ms (n={})",
        ms(s[s.len() / 2]),
        ms(s[s.len() * 9 / 10]),
        ms(s[s.len() - 1]),
        s.len()
    );
}

/// Waits for `path` to appear, polling every 0.2 ms; the wall-clock time it was seen, in ns.
fn wait_for(path: &Path, within: Duration) -> u128 {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn supervisor_and_guardian(task: &Path) -> Vec<(String, u32)> {
    let rec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(task.join("supervisor.json")).unwrap()).unwrap();
    let sup = u32::try_from(rec["pid"].as_u64().unwrap()).unwrap();
    let leader: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(task.join("pid.json")).unwrap()).unwrap();
    let leader = leader["pid"].as_u64().unwrap().to_string();
    let children =
        fs::read_to_string(format!("/proc/{sup}/task/{sup}/children")).unwrap_or_default();
    let mut out = vec![("supervisor".to_owned(), sup)];
    out.extend(
        children
            .split_whitespace()
            .filter(|c| *c != leader)
            .map(|c| ("guardian".to_owned(), c.parse().unwrap())),
    );
    out
}

struct Usage {
    rss_kb: u64,
    cpu_ticks: u64,
    switches: u64,
}

fn usage(pid: u32) -> Usage {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat[stat.rfind(')').map_or(0, |i| i + 1)..]
        .split_whitespace()
        .collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Usage {
        rss_kb: field("VmRSS:"),
        // utime and stime: fields 14 and 15, counted after the name.
        cpu_ticks: num(11) + num(12),
        switches: field("voluntary_ctxt_switches:") + field("nonvoluntary_ctxt_switches:"),
    }
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }).unwrap_or(100)
}
