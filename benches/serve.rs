//! What `loop serve` costs, printed as figures (not asserted):
//! - `GET /api/loops` over 200 loops (`BENCH_LOOPS`), end to end over loopback, against the
//!   same request over 1 loop measured in the same run; the aim is under 50 ms;
//! - from a write of one loop's M1.md to its event on the live stream;
//! - how often the server is woken while nothing happens (`BENCH_IDLE_S`, default 5 s): its
//!   threads' context switches and its CPU time, with one client on the stream.
//!
//! The loops are copies of one loop the simulated agent ran (three steps, a gate decided),
//! each in a project of its own, noted in the bench's per-user directory as runners note them.
//!
//! Run: `cargo bench --bench serve`.

#![expect(
    clippy::cast_precision_loss,
    reason = "counts become f64 only to be printed, far below where f64 loses precision"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
mod stats;
use common::{LOOP, loop_cmd, ms};
use stats::median;

/// A loop that ran: three steps, the plan approved on its gate.
fn one_loop(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("state")).unwrap();
    std::fs::write(
        dir.join("scenario.json"),
        r#"{"default": [{"result": "did it\nSTEP_DONE: done"}]}"#,
    )
    .unwrap();
    let start = [
        "start",
        "measure the server",
        "--step",
        "one",
        "--step",
        "two",
        "--step",
        "three",
        "--approve-plan",
    ];
    let _ = loop_cmd(dir, &start).status().unwrap();
    let _ = loop_cmd(dir, &["approve"]).status().unwrap();
    dir.join("state/M1.md")
}

/// `n` loops under `root`, copies of `model`'s files, noted in `xdg`; their state files.
fn loops(root: &Path, model: &Path, n: usize, xdg: &Path) -> Vec<PathBuf> {
    let list_dir = xdg.join("m1loop");
    std::fs::create_dir_all(&list_dir).unwrap();
    let text = std::fs::read_to_string(model).unwrap();
    let log = std::fs::read(model.with_file_name("loop.log")).unwrap_or_default();
    let mut files = Vec::new();
    for i in 0..n {
        let state = root.join(format!("project-{i}/state"));
        std::fs::create_dir_all(&state).unwrap();
        let file = state.join("M1.md");
        std::fs::write(
            &file,
            text.replace("measure the server", &format!("measure the server #{i}")),
        )
        .unwrap();
        std::fs::write(state.join("loop.log"), &log).unwrap();
        files.push(file);
    }
    let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    std::fs::write(list_dir.join("loops"), list.join("\n") + "\n").unwrap();
    files
}

/// `loop serve` for the user of `xdg`, and its address and token.
fn serve(dir: &Path, xdg: &Path) -> (Child, SocketAddr, String) {
    let mut child = Command::new(LOOP)
        .arg("--file")
        .arg(dir.join("none/M1.md"))
        .arg("serve")
        .env("XDG_STATE_HOME", xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (base, token) = line.trim().split_once("/?token=").unwrap();
    let addr = base.trim_start_matches("http://").parse().unwrap();
    (child, addr, token.to_owned())
}

/// One `GET path`, read to its end: its time and its size.
fn get(addr: SocketAddr, token: &str, path: &str) -> (Duration, usize) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: \
         close\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    assert!(
        body.starts_with(b"HTTP/1.1 200"),
        "{path} answered otherwise"
    );
    (t.elapsed(), body.len())
}

fn listing(n: usize, root: &Path, model: &Path) -> (f64, f64, f64, usize) {
    let xdg = root.join(format!("xdg-{n}"));
    loops(&root.join(format!("loops-{n}")), model, n, &xdg);
    let (mut child, addr, token) = serve(root, &xdg);
    for _ in 0..3 {
        get(addr, &token, "/api/loops");
    }
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..30 {
        let (t, len) = get(addr, &token, "/api/loops");
        times.push(ms(t));
        size = len;
    }
    let _ = child.kill();
    let _ = child.wait();
    let (med, min, max) = median(times);
    (med, min, max, size)
}

/// Context switches of every thread of `pid`, and its CPU time in clock ticks.
fn wakes(pid: u32) -> (u64, u64) {
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for l in status.lines() {
            if let Some(v) = l
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime, fields 14 and 15 of stat (12 and 13 after the name).
    (switches, f[11] + f[12])
}

fn stream_and_idle(root: &Path, model: &Path, idle: Duration) {
    let xdg = root.join("xdg-stream");
    let files = loops(&root.join("loops-stream"), model, 20, &xdg);
    let (mut child, addr, token) = serve(root, &xdg);
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    // The head, up to the stream's first blank line after `retry:`.
    while !line.starts_with("retry:") {
        line.clear();
        r.read_line(&mut line).unwrap();
    }
    let mut latencies = Vec::new();
    for round in 0..20 {
        let file = &files[round % files.len()];
        let text = std::fs::read_to_string(file).unwrap();
        let goal = format!("edited {round}");
        let t = Instant::now();
        std::fs::write(file, text.replacen("GOAL: ", &format!("GOAL: {goal} "), 1)).unwrap();
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line.starts_with("data:") && line.contains(&goal) {
                break;
            }
        }
        latencies.push(ms(t.elapsed()));
    }
    let (med, min, max) = median(latencies);
    println!(
        "M1.md written → its event on the stream: median {med:.1} ms (min {min:.1}, max \
         {max:.1}; the server gathers the changes that come together for 100 ms first)"
    );
    std::thread::sleep(Duration::from_millis(500));
    let (s0, c0) = wakes(child.id());
    std::thread::sleep(idle);
    let (s1, c1) = wakes(child.id());
    println!(
        "idle {:.0} s, one client on the stream: {} context switches of all its threads, {} \
         clock ticks of CPU",
        idle.as_secs_f64(),
        s1 - s0,
        c1 - c0
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let n: usize = std::env::var("BENCH_LOOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let idle = Duration::from_secs(
        std::env::var("BENCH_IDLE_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5),
    );
    let root = std::env::temp_dir().join(format!("loop-bench-serve-{}", std::process::id()));
    let model = one_loop(&root.join("model"));
    let (one, ..) = listing(1, &root, &model);
    let (med, min, max, size) = listing(n, &root, &model);
    println!(
        "GET /api/loops, {n} loops: median {med:.1} ms (min {min:.1}, max {max:.1}; {} KB); \
         1 loop: {one:.2} ms; {:.2} ms a loop (aim: all {n} under 50 ms)",
        size / 1024,
        (med - one) / (n as f64 - 1.0).max(1.0)
    );
    stream_and_idle(&root, &model, idle);
    let _ = std::fs::remove_dir_all(&root);
}
