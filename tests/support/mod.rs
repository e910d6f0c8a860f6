//! What the tests share: the binaries, one temporary directory ([`Temp`]) and a temporary loop
//! built on it ([`TestLoop`]), one guard for a process a test starts ([`Guard`]), one way to
//! wait ([`wait_until`]) and to run a command to its end ([`run`]), and a look at `/proc`
//! through the library's own reader ([`procs`]); for tests of more than one file, the answers
//! of a step that writes `a.txt` and of its reviewer ([`answers`]), `loop telegram` with its
//! child commands recorded ([`bot`]), and the pages of the manual with the Markdown as their
//! tests read it ([`manual`], [`markdown`]).

pub mod answers;
pub mod bot;
pub mod github_fake;
pub mod manual;
pub mod markdown;
pub mod otlp;
pub mod procs;
pub mod real_cli;
pub mod real_gemini;
pub mod served;
pub mod telegram_fake;
mod test_loop;

use std::borrow::BorrowMut;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use m1loop::agent::{ExitInfo, StreamReader, StreamSummary};
use serde_json::Value;

pub use test_loop::{TestLoop, argv, flag_value, is_review, review_text};

/// The `loop` binary.
pub const LOOP: &str = env!("CARGO_BIN_EXE_loop");

/// The simulated agent, built beside `loop`.
pub const SIM: &str = env!("CARGO_BIN_EXE_claude-sim");

/// Generous: the machine may be busy. Only failing tests ever wait this long.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The seed example of M1.md.
pub const SEED: &str = include_str!("../fixtures/m1/seed.md");

/// Polls `cond` every 10 ms until it holds; false if `within` passes first.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process a test started, killed with SIGKILL (and reaped, when it is the test's child) as
/// the guard is dropped, however the test ends.
pub struct Guard {
    pid: u32,
    /// The child until it is waited for; `None` for a process the test did not spawn itself.
    child: Option<Child>,
    ended: bool,
}

impl Guard {
    pub fn new(child: Child) -> Self {
        Self {
            pid: child.id(),
            child: Some(child),
            ended: false,
        }
    }

    pub fn spawn(cmd: &mut Command) -> Self {
        Self::new(cmd.spawn().unwrap())
    }

    /// A process the test did not spawn itself (a grandchild), killed by its pid.
    pub fn of_pid(pid: i32) -> Self {
        Self {
            pid: pid.cast_unsigned(),
            child: None,
            ended: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The child's exit status if it has exited, as [`Child::try_wait`] says.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let child = self.child.as_mut().expect("child already waited");
        let status = child.try_wait();
        if matches!(status, Ok(Some(_))) {
            self.child = None;
            self.ended = true;
        }
        status
    }

    /// Waits for the exit with a deadline; panics (after killing it) if it does not come.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= deadline {
                self.kill9();
                panic!("process {} did not exit within {within:?}", self.pid);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        } else if !self.ended {
            procs::sigkill(self.pid.cast_signed());
        }
        self.ended = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs `cmd` to its end with stdout and stderr captured (stdin as `cmd` says); panics, after
/// killing it, if that takes over a minute.
pub fn run(cmd: impl BorrowMut<Command>) -> Output {
    run_within(cmd, Duration::from_secs(60))
}

/// [`run`] with a deadline of `within`.
pub fn run_within(mut cmd: impl BorrowMut<Command>, within: Duration) -> Output {
    let cmd = cmd.borrow_mut();
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    output_within(child, within).unwrap_or_else(|| {
        let args: Vec<_> = cmd.get_args().collect();
        panic!(
            "{} {args:?} did not finish within {within:?}",
            cmd.get_program().display()
        )
    })
}

/// What `child` printed, once it has ended; `None`, after killing it, if that takes longer
/// than `within`.
pub fn output_within(child: std::process::Child, within: Duration) -> Option<Output> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(within) else {
        procs::sigkill(pid.cast_signed());
        return None;
    };
    Some(out.unwrap())
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The first line of `text` that holds `part`; panics showing `text` where none does.
#[track_caller]
pub fn line_with<'a>(text: &'a str, part: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(part))
        .unwrap_or_else(|| panic!("no line holds {part:?} in\n{text}"))
}

/// `loop doctor` exited 0 with an `ok` line for each of `checks`; returns what it printed.
#[track_caller]
pub fn assert_doctor_passed(out: &Output, checks: &[&str]) -> String {
    let text = stdout(out);
    assert_eq!(code(out), 0, "{text}");
    for check in checks {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}: {text}"
        );
    }
    text
}

/// A temporary directory, removed with all it holds when dropped: what every test that writes
/// files stands on. The simulated agent run here ([`Temp::sim`]) finds its scenario
/// ([`Temp::scenario`]) here and logs its calls here ([`Temp::calls`]).
pub struct Temp(tempfile::TempDir);

impl Temp {
    pub fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join(&self, path: impl AsRef<Path>) -> PathBuf {
        self.path().join(path)
    }

    /// Writes `contents` to `name`, its directories created; returns its path.
    pub fn write(&self, name: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// The simulated agent's directory: its scenario, its log, its counts of calls. A loop's
    /// sandbox lets its runs write here (`LOOP_SANDBOX_WRITE`), and nowhere else of the test's.
    pub fn sim_dir(&self) -> PathBuf {
        self.join("sim")
    }

    /// Writes the simulated agent's scenario (JSON); returns its path.
    pub fn scenario(&self, json: &str) -> PathBuf {
        self.write("sim/scenario.json", json)
    }

    /// Where the simulated agent logs its calls.
    pub fn sim_log(&self) -> PathBuf {
        self.join("sim/calls.jsonl")
    }

    /// Every agent call, as the simulated agent logged it when it started. A line is taken once
    /// its newline is there: a call starting now may be halfway through writing its own (one
    /// `write` with `O_APPEND`, but a reader can see its first page before the rest).
    pub fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.sim_log())
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n') && !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A call of the simulated agent for `step` with the headless flags the runner uses, then
    /// `extra`.
    pub fn sim(&self, step: u32, extra: &[&str]) -> Command {
        let mut cmd = self.sim_raw(
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

    /// A call of the simulated agent with exactly `args`, run in this directory with its log
    /// and scenario (if written), no inherited `CLAUDECODE` (the test itself may run inside
    /// Claude Code) and stdin from /dev/null.
    pub fn sim_raw(&self, step: u32, args: &[&str]) -> Command {
        std::fs::create_dir_all(self.sim_dir()).unwrap();
        let mut cmd = Command::new(SIM);
        cmd.args(args)
            .current_dir(self.path())
            .env_remove("CLAUDECODE")
            .env_remove("CLAUDE_CODE_ENTRYPOINT")
            .env_remove("CLAUDE_SIM_STATE")
            .env_remove("LOOP_ATTEMPT")
            .env_remove("LOOP_TASK_ID")
            .env_remove("LOOP_FILE")
            .env("CLAUDE_SIM_LOG", self.sim_log())
            .env("LOOP_STEP", step.to_string())
            .stdin(Stdio::null());
        let scenario = self.join("sim/scenario.json");
        if scenario.exists() {
            cmd.env("CLAUDE_SIM_SCENARIO", scenario);
        } else {
            cmd.env_remove("CLAUDE_SIM_SCENARIO");
        }
        cmd
    }
}

/// Whether bubblewrap can confine a run on this machine (looked at once). Where it cannot,
/// says `skipped:` for the sandbox, once.
pub fn bwrap_here() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(|| {
        let ok = Command::new("bwrap")
            .args(["--ro-bind", "/", "/", "--unshare-pid", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            println!(
                "skipped: the sandbox: bubblewrap (`bwrap`) is not installed here or cannot \
                 start, so loops run unconfined (LOOP_SANDBOX=off) in these tests"
            );
        }
        ok
    })
}

/// An M1.md with the given bytes in a temporary directory of its own.
pub struct Case {
    pub dir: Temp,
    pub file: PathBuf,
}

pub fn case(bytes: impl AsRef<[u8]>) -> Case {
    let dir = Temp::new();
    let file = dir.write("M1.md", bytes);
    Case { dir, file }
}

/// The errors `text` is refused with, each as `line:column: what`; panics if it is accepted.
pub fn parse_errors(text: &str) -> Vec<String> {
    match m1loop::m1::Document::parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.errors().iter().map(ToString::to_string).collect(),
    }
}

/// The seed with line `n` (1-based) replaced.
pub fn seed_with(n: usize, line: &str) -> String {
    let mut lines: Vec<&str> = SEED.lines().collect();
    lines[n - 1] = line;
    lines.join("\n") + "\n"
}

/// `loop --file FILE ARGS`, for an M1.md outside any loop: no `LOOP_FILE` or Telegram
/// settings of the test's environment, and the stop file, per-user directory and agent in the
/// file's directory.
pub fn loop_on_file(args: &[&str], file: &Path) -> Command {
    let dir = file.parent().unwrap();
    let mut cmd = Command::new(LOOP);
    cmd.arg("--file")
        .arg(file)
        .args(args)
        .env_remove("LOOP_FILE")
        .env("LOOP_STOP_FILE", dir.join("no-stop-file"))
        .env("XDG_STATE_HOME", dir.join("xdg"))
        .env("LOOP_AGENT", dir.join("no-agent"))
        .env_remove("TELEGRAM_BOT_TOKEN")
        .env_remove("TELEGRAM_CHAT_ID")
        .env_remove("TELEGRAM_API_BASE")
        .stdin(Stdio::null());
    cmd
}

/// [`loop_on_file`] run to its end.
pub fn loop_with_file(args: &[&str], file: &Path) -> Output {
    run(loop_on_file(args, file))
}

/// Where the captures of the real CLI are.
pub fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code")
}

/// What the stream-json reader makes of `bytes`.
pub fn summary(bytes: &[u8]) -> StreamSummary {
    let mut r = StreamReader::new();
    r.feed(bytes);
    r.finish()
}

/// What the stream-json reader makes of these lines.
pub fn stream(lines: &[&str]) -> StreamSummary {
    summary(format!("{}\n", lines.join("\n")).as_bytes())
}

/// An agent that exited with `code`.
pub fn exited(code: i32) -> ExitInfo {
    ExitInfo {
        code: Some(code),
        ..ExitInfo::default()
    }
}

/// Every file under `dir`, recursively.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Writes an executable script. A child process writes it, so that no thread of this process
/// holds it open for writing while another thread forks: the fork's child would keep it open
/// until it execs, and running the script meanwhile fails with "text file busy".
pub fn write_executable(path: &Path, text: &str) {
    let ok = Command::new("sh")
        .args([
            "-c",
            "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
            "sh",
            text,
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "could not write {}", path.display());
}

/// How most editors save: the new text to a temporary file beside it, then a rename over it.
pub fn save_by_rename(path: &Path, text: &str) {
    let tmp = path.with_extension("md.swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Shell lines for a script whose runner runs in the background as `$r`: wait (up to
/// `tenths` tenths of a second) until a process whose command line begins with `marker` runs,
/// else say so, end the runner and exit 9.
#[must_use]
pub fn once_running(marker: &str, tenths: u32) -> String {
    format!(
        "for _ in $(seq 1 {tenths}); do pgrep -f '^{marker}' >/dev/null && break; sleep 0.1; done\n\
         pgrep -f '^{marker}' >/dev/null || {{ echo \"the command never ran\" >&2; kill $r; exit 9; }}\n"
    )
}

/// Makes on `to` what `from` changes of the environment it inherits (each variable it sets or
/// removes) and the directory it runs in, if it names one.
pub fn take_env_and_dir(to: &mut Command, from: &Command) {
    for (k, v) in from.get_envs() {
        match v {
            Some(v) => to.env(k, v),
            None => to.env_remove(k),
        };
    }
    if let Some(dir) = from.get_current_dir() {
        to.current_dir(dir);
    }
}

/// `per_backend! { [NAME = BACKEND, …] fn CASE(b: &Type) { … } }`: the case written once, as a
/// module `CASE` holding a test `NAME` per backend that runs it on `BACKEND` (so a failure
/// names both, `CASE::NAME`).
macro_rules! per_backend {
    (
        [$($name:ident = $backend:expr),+ $(,)?]
        $(#[$doc:meta])* fn $case:ident($b:ident: &$ty:ty) $body:block
    ) => {
        $(#[$doc])*
        mod $case {
            use super::*;

            fn case($b: &$ty) $body

            $(
                #[test]
                fn $name() {
                    case(&$backend);
                }
            )+
        }
    };
}
pub(crate) use per_backend;
