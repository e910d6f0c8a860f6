//! What the loop adds to each run of the real Claude Code CLI, printed, not asserted: the
//! same `claude -p` call against the project's loopback mock of the Messages API
//! (`scripts/mock-messages-api.py`, answering at once), bare, with the loop's permission host
//! (`--mcp-config` naming `loop hook permission-host`, `--permission-prompt-tool`), with the
//! host named as an MCP server only (not as the permission tool: what any MCP server costs
//! the CLI), and with a `SessionStart` hook that runs `loop hook session-start` as the session starts (what every
//! run of a loop carried before the hook was kept for compactions). The three alternate, round
//! after round, in one run; each line gives the median time per call, and the differences
//! with the bare call, paired round by round.
//!
//! The CLI is the one `BENCH_CLAUDE` names, else the one the real-CLI tests installed under
//! the target directory's `tmp/real-cli/2.1.330`; without either it says so and measures
//! nothing. It runs with a dummy key and a HOME of its own, and in a network namespace with
//! only loopback where the machine allows one (`unshare -n`).
//!
//! Run: `cargo bench --bench agent_run` (`BENCH_ROUNDS`, default 15).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod stats;
use stats::median;

const LOOP: &str = env!("CARGO_BIN_EXE_loop");
const PORT: u16 = 18_791;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(claude) = claude() else {
        println!(
            "agent_run: skipped: no Claude Code CLI (set BENCH_CLAUDE, or run the real-CLI \
             tests once: they install it under target/tmp/real-cli)"
        );
        return;
    };
    if in_namespace_or_reexec() {
        return;
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let dir = tempfile::tempdir().expect("temp dir");
    let setup = Setup::new(dir.path(), claude);
    let mut mock = mock();
    let variants = [
        Variant::Bare,
        Variant::Host,
        Variant::ServerOnly,
        Variant::HookAtStart,
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    // One call of each first, not counted: the CLI's first start reads more from disk.
    for v in variants {
        setup.call(v);
    }
    for _ in 0..rounds {
        for (i, v) in variants.into_iter().enumerate() {
            times[i].push(setup.call(v));
        }
    }
    let _ = mock.kill();
    let _ = mock.wait();
    println!(
        "agent_run: the real Claude Code CLI ({}), {rounds} rounds, alternating; median \
         (min..max); {}",
        setup.version(),
        if std::env::var_os("BENCH_IN_NS").is_some() {
            "in a network namespace of its own"
        } else {
            "no network namespace here: dummy key and loopback base URL only"
        }
    );
    for (i, v) in variants.into_iter().enumerate() {
        let (mid, lo, hi) = median(times[i].clone());
        print!(
            "  {:<35}: {mid:7.1} ms per call ({lo:.1}..{hi:.1})",
            v.label()
        );
        if i > 0 {
            let diffs: Vec<f64> = times[i].iter().zip(&times[0]).map(|(a, b)| a - b).collect();
            let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(a, b)| a / b).collect();
            let (d, dlo, dhi) = median(diffs);
            print!(
                "; {d:+.1} ms ({dlo:+.1}..{dhi:+.1}) over the bare call, ratio {:.3}",
                median(ratios).0
            );
        }
        println!();
    }
}

#[derive(Clone, Copy)]
enum Variant {
    Bare,
    Host,
    ServerOnly,
    HookAtStart,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Bare => "bare",
            Variant::Host => "with the permission host",
            Variant::ServerOnly => "with the host as an MCP server only",
            Variant::HookAtStart => "with a SessionStart hook at start",
        }
    }
}

/// The CLI, its HOME, the hook's settings and a running loop's `M1.md` for the hook to read.
struct Setup {
    claude: PathBuf,
    home: PathBuf,
    settings: PathBuf,
    m1: PathBuf,
    work: PathBuf,
}

impl Setup {
    fn new(dir: &Path, claude: PathBuf) -> Self {
        let home = dir.join("home");
        let work = dir.join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let m1 = dir.join("M1.md");
        std::fs::write(&m1, include_str!("../examples/M1.md")).unwrap();
        let settings = dir.join("settings.json");
        let hook = format!("{LOOP} hook session-start");
        let json = serde_json::json!({"hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": hook}]}]}});
        std::fs::write(&settings, json.to_string()).unwrap();
        Self {
            claude,
            home,
            settings,
            m1,
            work,
        }
    }

    fn version(&self) -> String {
        let out = Command::new(&self.claude).arg("--version").output();
        out.map_or_else(
            |e| format!("unknown: {e}"),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
    }

    /// One call: its wall time in milliseconds.
    fn call(&self, v: Variant) -> f64 {
        let mut c = Command::new(&self.claude);
        c.args([
            "-p",
            "do the step",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .current_dir(&self.work)
        .env("HOME", &self.home)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{PORT}"))
        .env("ANTHROPIC_API_KEY", "dummy")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("LOOP_FILE", &self.m1)
        .env("LOOP_STEP", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        match v {
            Variant::Bare => {}
            Variant::Host | Variant::ServerOnly => {
                let host = serde_json::json!({"mcpServers": {"loop": {"type": "stdio",
                    "command": LOOP, "args": ["hook", "permission-host"]}}});
                c.args(["--mcp-config", &host.to_string()]);
                if matches!(v, Variant::Host) {
                    c.args(["--permission-prompt-tool", "mcp__loop__permit"]);
                }
            }
            Variant::HookAtStart => {
                c.arg("--settings").arg(&self.settings);
            }
        }
        let t = Instant::now();
        let status = c.status().expect("the Claude Code CLI");
        let took = t.elapsed();
        assert!(status.success(), "{} failed: {status}", v.label());
        took.as_secs_f64() * 1000.0
    }
}

/// The mock on loopback, answering every request with text (no tool call), once it listens.
fn mock() -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mock-messages-api.py");
    let child = Command::new("python3")
        .arg(script)
        .arg(PORT.to_string())
        .arg("-")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 for the mock");
    let end = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", PORT)).is_err() {
        assert!(Instant::now() < end, "the mock never listened on {PORT}");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// `BENCH_CLAUDE`, else the CLI the real-CLI tests installed.
fn claude() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCH_CLAUDE") {
        return Some(PathBuf::from(p));
    }
    // This bench runs from TARGET/release/deps/, whatever CARGO_TARGET_DIR said.
    let exe = std::env::current_exe().ok()?;
    let installed = exe
        .ancestors()
        .nth(3)?
        .join("tmp/real-cli/2.1.330/node_modules/.bin/claude");
    installed.exists().then_some(installed)
}

/// Runs this bench again inside a network namespace with only loopback (up), where the
/// machine allows one; returns whether it did (then this process has nothing more to do).
fn in_namespace_or_reexec() -> bool {
    if std::env::var_os("BENCH_IN_NS").is_some() {
        return false;
    }
    let me = std::env::current_exe().expect("the bench's own path");
    let works = Command::new("unshare")
        .args(["-n", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        return false;
    }
    let status = Command::new("unshare")
        .args(["-n", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(me)
        .args(std::env::args_os().skip(1))
        .env("BENCH_IN_NS", "1")
        .status()
        .expect("unshare");
    assert!(
        status.success(),
        "the bench in its namespace failed: {status}"
    );
    true
}
