//! What the tests of the README and the manual share: the pages a person reads, and a place
//! to run the built `loop` as an installed one runs, touching nothing of the person running the
//! tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::{LOOP, SIM, Temp, bwrap_here, run_within, stderr, stdout};

/// What a whole loop or a doctor run may take on a busy machine.
pub const WITHIN: Duration = Duration::from_secs(180);

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The chapters of the manual (`docs/*.md`), by path below the root, in order.
pub fn chapters() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names
}

/// The README, the manual and ARCHITECTURE.md: every page a person reads.
pub fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    pages.extend(chapters());
    pages
}

/// A place to run `loop` that touches nothing of the person running the tests: its own home,
/// per-user directories, temporary directory and stop file, no loop named, no Telegram; the
/// built `loop` and `claude-sim` first on `PATH`, as an install puts them.
pub struct Place {
    pub temp: Temp,
}

impl Place {
    pub fn new() -> Self {
        let temp = Temp::new();
        for dir in ["home", "xdg", "config", "tmp", "work"] {
            std::fs::create_dir_all(temp.join(dir)).unwrap();
        }
        Self { temp }
    }

    pub fn work(&self) -> PathBuf {
        self.temp.join("work")
    }

    pub fn stop_file(&self) -> PathBuf {
        self.temp.join("croppy-stop")
    }

    /// `program` run in `dir` of this place.
    pub fn cmd(&self, program: &str, dir: &Path) -> Command {
        let bin = Path::new(LOOP).parent().unwrap();
        assert_eq!(
            Path::new(SIM).parent(),
            Some(bin),
            "claude-sim is built beside loop"
        );
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new(program);
        c.current_dir(dir)
            .env("PATH", path)
            .env("HOME", self.temp.join("home"))
            .env("XDG_STATE_HOME", self.temp.join("xdg"))
            .env("XDG_CONFIG_HOME", self.temp.join("config"))
            .env("TMPDIR", self.temp.join("tmp"))
            .env("LOOP_STOP_FILE", self.stop_file())
            // A quick start's runner lives as long as its foreground command.
            .env("LOOP_REVIVE", "off")
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@example.invalid")
            .stdin(Stdio::null());
        for var in [
            "LOOP_FILE",
            "LOOP_AGENT",
            "LOOP_AGENT_CLAUDE",
            "LOOP_AGENT_CODEX",
            "LOOP_CRASH_AT",
            "LOOP_SANDBOX",
            "LOOP_SANDBOX_READ",
            "LOOP_SANDBOX_WRITE",
            "LOOP_SANDBOX_ENV",
            "CLAUDE_SIM_SCENARIO",
            "CLAUDE_SIM_STATE",
            "CLAUDE_SIM_LOG",
            "CLAUDECODE",
            "CLAUDE_CODE_ENTRYPOINT",
            "TELEGRAM_BOT_TOKEN",
            "TELEGRAM_CHAT_ID",
            "TELEGRAM_API_BASE",
        ] {
            c.env_remove(var);
        }
        if !bwrap_here() {
            c.env("LOOP_SANDBOX", "off");
        }
        c
    }

    pub fn loop_in(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = self.cmd(LOOP, dir);
        c.args(args);
        c
    }
}

pub fn said(out: &Output) -> String {
    format!("--- stdout\n{}--- stderr\n{}", stdout(out), stderr(out))
}

/// `loop --help`, and the commands it lists (but `help`).
pub fn help() -> (String, Vec<String>) {
    let place = Place::new();
    let out = run_within(place.loop_in(&place.work(), &["--help"]), WITHIN);
    let text = stdout(&out);
    let commands = text
        .split("Commands:\n")
        .nth(1)
        .expect("a list of commands")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect();
    (text, commands)
}
