//! A loop in a temporary project: the real `loop` binary, the simulated agent as `claude`, a
//! private stop file, and helpers to read M1.md, the agent's call log, and leftover processes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use m1loop::m1::{Document, M1};

pub fn loop_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loop"))
}

pub fn sim_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_claude-sim"))
}

/// Polls `cond` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process that is killed when the test ends, however it ends.
pub struct Guard(pub Option<Child>);

impl Guard {
    pub fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Waits for the exit with a deadline; panics (after killing it) if it does not come.
    pub fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let child = self.0.as_mut().expect("child already waited");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.0 = None;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.0 = None;
                panic!("process did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub project: PathBuf,
    pub file: PathBuf,
    pub stop: PathBuf,
    pub scenario: PathBuf,
    pub sim_log: PathBuf,
    pub extra_env: Vec<(String, String)>,
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join("state")).unwrap();
        Self {
            file: project.join("state").join("M1.md"),
            stop: dir.path().join("croppy-stop"),
            scenario: dir.path().join("scenario.json"),
            sim_log: dir.path().join("sim-calls.jsonl"),
            project,
            dir,
            extra_env: Vec::new(),
        }
    }

    /// The per-user state directory's parent (`XDG_STATE_HOME`) of this test's processes.
    pub fn xdg(&self) -> PathBuf {
        self.dir.path().join("xdg")
    }

    pub fn state(&self) -> PathBuf {
        self.project.join("state")
    }

    pub fn scenario(&self, json: &serde_json::Value) -> &Self {
        std::fs::write(&self.scenario, serde_json::to_string_pretty(json).unwrap()).unwrap();
        self
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(loop_bin());
        c.args(args)
            .current_dir(&self.project)
            .env("LOOP_FILE", &self.file)
            .env("LOOP_AGENT", sim_bin())
            .env("LOOP_STOP_FILE", &self.stop)
            .env("XDG_STATE_HOME", self.xdg())
            .env("CLAUDE_SIM_SCENARIO", &self.scenario)
            .env("CLAUDE_SIM_LOG", &self.sim_log)
            .env("LOOP_NOTIFY_BACKOFF_MS", "10")
            // A test that kills a runner resumes it itself; tests of revival turn it on.
            .env("LOOP_REVIVE", "off")
            .env_remove("TELEGRAM_BOT_TOKEN")
            .env_remove("TELEGRAM_CHAT_ID")
            .env_remove("TELEGRAM_API_BASE")
            .env_remove("LOOP_CRASH_AT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        c
    }

    /// Runs `loop ARGS` to its end (at most `timeout`).
    pub fn run_for(&self, args: &[&str], timeout: Duration) -> Output {
        let mut c = self.cmd(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(timeout) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                panic!("loop {args:?} did not finish within {timeout:?}");
            }
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_for(args, Duration::from_secs(60))
    }

    pub fn spawn(&self, args: &[&str]) -> Guard {
        let mut c = self.cmd(args);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        Guard(Some(c.spawn().unwrap()))
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap()
    }

    pub fn m1(&self) -> M1 {
        let text = self.text();
        Document::parse(&text)
            .unwrap_or_else(|e| panic!("M1.md invalid: {e}\n{text}"))
            .view()
    }

    /// Every agent call, as the simulated agent logged it when it started.
    pub fn calls(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.sim_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn calls_for(&self, step: u32) -> usize {
        let want = step.to_string();
        self.calls()
            .iter()
            .filter(|c| {
                c["step"].as_str() == Some(want.as_str())
                    || c["step"].as_u64() == Some(u64::from(step))
            })
            .count()
    }

    /// Live processes started for this test: their working directory or command line is
    /// inside its temporary directory.
    pub fn processes(&self) -> Vec<String> {
        live_processes_under(self.dir.path())
    }

    pub fn assert_no_processes(&self) {
        let ok = wait_until(Duration::from_secs(10), || self.processes().is_empty());
        assert!(ok, "processes left running: {:?}", self.processes());
    }

    /// Runs git in the project directory with a throwaway identity, asserting that it
    /// succeeded; returns its stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&self.project)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state().join("loop.log")).unwrap_or_default()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Nothing a test started may outlive it.
        for line in live_processes_under(self.dir.path()) {
            if let Some(pid) = line.split_whitespace().next() {
                let _ = Command::new("kill").arg("-9").arg(pid).status();
            }
        }
    }
}

pub fn live_processes_under(dir: &Path) -> Vec<String> {
    let me = std::process::id();
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cwd.starts_with(&needle) || cmdline.contains(&needle) {
            out.push(format!("{pid} {}", cmdline.trim()));
        }
    }
    out
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
