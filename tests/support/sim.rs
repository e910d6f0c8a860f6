//! Running the simulated agent as a real process, in its own temp dir, with a clean
//! environment, and making sure whatever it starts is ended.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use m1loop::agent::{StreamReader, StreamSummary};
use serde_json::Value;

pub const SIM: &str = env!("CARGO_BIN_EXE_claude-sim");

/// A temp dir holding the scenario, the call log and the sim's state.
pub struct SimDir {
    pub dir: tempfile::TempDir,
}

impl SimDir {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> PathBuf {
        self.path().join("calls.jsonl")
    }

    pub fn scenario(&self, json: &str) -> PathBuf {
        let path = self.path().join("scenario.json");
        std::fs::write(&path, json).unwrap();
        path
    }

    /// A call with the headless flags the runner uses, cwd in the temp dir, no inherited
    /// `CLAUDECODE` (the test itself may run inside Claude Code), and the log and scenario set.
    pub fn cmd(&self, step: u32, extra: &[&str]) -> Command {
        let mut cmd = self.cmd_raw(
            step,
            &[
                "-p",
                "do the step",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
        );
        cmd.args(extra);
        cmd
    }

    /// Like [`cmd`](Self::cmd) with exactly `args`.
    pub fn cmd_raw(&self, step: u32, args: &[&str]) -> Command {
        let mut cmd = Command::new(SIM);
        cmd.args(args)
            .current_dir(self.path())
            .env_remove("CLAUDECODE")
            .env_remove("CLAUDE_CODE_ENTRYPOINT")
            .env_remove("CLAUDE_SIM_STATE")
            .env_remove("LOOP_ATTEMPT")
            .env_remove("LOOP_TASK_ID")
            .env_remove("LOOP_FILE")
            .env("CLAUDE_SIM_LOG", self.log())
            .env("LOOP_STEP", step.to_string())
            .stdin(Stdio::null());
        let scenario = self.path().join("scenario.json");
        if scenario.exists() {
            cmd.env("CLAUDE_SIM_SCENARIO", scenario);
        } else {
            cmd.env_remove("CLAUDE_SIM_SCENARIO");
        }
        cmd
    }

    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub fn run(mut cmd: Command) -> Output {
    cmd.output().unwrap()
}

pub fn summary(out: &Output) -> StreamSummary {
    let mut r = StreamReader::new();
    r.feed(&out.stdout);
    r.finish()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every stdout line as JSON (the sim writes nothing else in stream-json mode).
pub fn events(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A child that is killed and reaped when the test ends, pass or fail.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process the test did not spawn directly (a grandchild), killed by pid at the end.
pub struct KillPid(pub i32);

impl Drop for KillPid {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Polls `cond` until it holds or a generous deadline passes.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
