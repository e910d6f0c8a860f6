//! The real Gemini CLI, for the tests that must hold against it: installed from npm once
//! under the target directory (as [`super::real_cli`] installs Claude Code and Codex), and run
//! only inside a network namespace of its own (`unshare -n`, loopback only) with the project's
//! loopback Gemini API (`scripts/mock-gemini-api.py`), a dummy key and a HOME of the test's own
//! whose settings choose the API key, trust every folder and send no usage statistics. Where
//! the machine gives no such namespace, or npm, the registry or python3 is missing, a test
//! says `skipped: …` on stderr and passes: the CLI is never run where it could reach the
//! network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::real_cli::{Cli, free_port, installed_or_skip, keep_own_env, namespace, wrapped};

/// The version the captures in `tests/fixtures/gemini/` come from.
pub const GEMINI_VERSION: &str = "0.61.0";

/// `gemini` of [`GEMINI_VERSION`], or `None` after saying on stderr why the test is skipped.
pub fn gemini_or_skip() -> Option<PathBuf> {
    if namespace().is_none() {
        eprintln!(
            "skipped: no network namespace of its own here (`unshare -n`): Gemini CLI is only \
             run where it cannot reach the network"
        );
        return None;
    }
    let dir = format!("gemini-{GEMINI_VERSION}");
    let cli = Cli {
        package: "@google/gemini-cli",
        version: GEMINI_VERSION,
        bin: "gemini",
        dir: &dir,
        says: GEMINI_VERSION,
    };
    installed_or_skip(&cli, &format!("Gemini CLI {GEMINI_VERSION}"), "Gemini API")
}

/// Writes `home/.gemini/settings.json` as a person who chose the API key would have it, with
/// folder trust off (the loop passes `--skip-trust` anyway) and no usage statistics.
pub fn gemini_home(home: &Path) {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},"privacy":{"usageStatisticsEnabled":false}}"#,
    )
    .unwrap();
}

/// Starts the Gemini API mock on a free loopback port, answering each prompt with a tool call
/// (`write_file`, or `run_shell_command` of `command` when it is not empty), then `cmd` with
/// `GOOGLE_GEMINI_BASE_URL` pointing at it, `GEMINI_API_KEY=dummy` and `HOME` `home` (given
/// [`gemini_home`]'s settings), in its own network namespace; ends the mock once `cmd`
/// exited. `cmd`'s program, arguments, environment and directory are kept; its output is
/// captured. Panics if it takes longer than `within`, or where no namespace can be had.
pub fn run_with_gemini_mock(
    cmd: &Command,
    home: &Path,
    command: &str,
    env: &[(&str, &str)],
    within: Duration,
) -> Output {
    assert!(namespace().is_some(), "Gemini CLI runs in a namespace only");
    gemini_home(home);
    let port = free_port();
    let mut run = wrapped(cmd, port, "mock-gemini-api.py", [command, ""]);
    run.env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("GEMINI_API_KEY", "dummy")
        .env("HOME", home)
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("GOOGLE_GENAI_USE_VERTEXAI")
        .env_remove("GOOGLE_GENAI_USE_GCA")
        .env_remove("GOOGLE_CLOUD_PROJECT")
        .stdin(Stdio::null());
    keep_own_env(&mut run, env, cmd);
    super::run_within(run, within)
}

/// The mock's log (`MOCK_LOG`): one JSON object per request.
pub fn mock_requests(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
