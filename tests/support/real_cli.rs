//! The real Claude Code CLI, for the few tests that must hold against it and not only against
//! the simulation: installed from npm once per version under the target directory, and run
//! with the project's loopback mock of the Messages API (`scripts/mock-messages-api.py`), a
//! dummy key and a HOME of the test's own, inside a network namespace of its own (`unshare
//! -n`, loopback only) where the machine allows one. A test that cannot have the CLI (no npm,
//! no registry, no python3) says `skipped: …` on stderr and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The versions the captures in `tests/fixtures/claude-code/` come from.
pub const VERSIONS: [&str; 2] = ["2.1.330", "2.1.197"];

/// How long an install from npm may take (the package carries a native binary).
const INSTALL_WITHIN: Duration = Duration::from_secs(300);

/// `claude` of `version`, or `None` after saying on stderr why the test is skipped.
pub fn claude_or_skip(version: &str) -> Option<PathBuf> {
    let cli = Cli {
        package: "@anthropic-ai/claude-code",
        version,
        bin: "claude",
        dir: version,
        says: version,
    };
    installed_or_skip(&cli, &format!("Claude Code {version}"), "Messages API")
}

/// `env` whose agent is Claude Code of `version`, with an empty `$HOME` of its own (`home` in
/// the test's directory) so that no settings of this machine reach it; or `None` after saying
/// on stderr why the test is skipped.
pub fn claude_loop_or_skip(env: super::TestLoop, version: &str) -> Option<super::TestLoop> {
    let claude = claude_or_skip(version)?;
    let home = env.temp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Some(env.env("LOOP_AGENT", &claude).env("HOME", &home))
}

/// The Codex version the captures in `tests/fixtures/codex/` come from.
pub const CODEX_VERSION: &str = "0.169.0";

/// `codex` of [`CODEX_VERSION`], or `None` after saying on stderr why the test is skipped.
pub fn codex_or_skip() -> Option<PathBuf> {
    let dir = format!("codex-{CODEX_VERSION}");
    let says = format!("codex-cli {CODEX_VERSION}");
    let cli = Cli {
        package: "@openai/codex",
        version: CODEX_VERSION,
        bin: "codex",
        dir: &dir,
        says: &says,
    };
    installed_or_skip(
        &cli,
        &format!("the Codex CLI {CODEX_VERSION}"),
        "Responses API",
    )
}

/// `cli`'s program, installed, or `None` after saying on stderr why the test is skipped:
/// python3 is missing (for the mock of its `api`), or `what` could not be installed.
pub(super) fn installed_or_skip(cli: &Cli<'_>, what: &str, api: &str) -> Option<PathBuf> {
    if which("python3").is_none() {
        eprintln!("skipped: python3 (for the {api} mock) is not on PATH");
        return None;
    }
    match install(cli) {
        Ok(bin) => Some(bin),
        Err(why) => {
            eprintln!("skipped: {what} could not be installed: {why}");
            None
        }
    }
}

/// An agent CLI from npm: `package@version`, installed into `dir` under the target
/// directory, whose `bin --version` starts with `says`.
pub(super) struct Cli<'a> {
    pub package: &'a str,
    pub version: &'a str,
    pub bin: &'a str,
    pub dir: &'a str,
    pub says: &'a str,
}

/// Installs `cli` and returns its program (once; one install at a time, as two npm processes
/// filling one cache at once were seen to hang).
fn install(cli: &Cli<'_>) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-cli");
    let dir = root.join(cli.dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let lock = std::fs::File::create(root.join(".lock")).map_err(|e| e.to_string())?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", root.display()))?;
    let bin = dir.join("node_modules/.bin").join(cli.bin);
    if says_version(&bin, cli.says) {
        return Ok(bin);
    }
    which("npm").ok_or("npm is not on PATH")?;
    let log_path = dir.join("npm.log");
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let mut npm = Command::new("npm");
    npm.args([
        "install",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--prefix",
    ])
    .arg(&dir)
    .arg(format!("{}@{}", cli.package, cli.version))
    .stdin(Stdio::null())
    .stdout(log.try_clone().map_err(|e| e.to_string())?)
    .stderr(log);
    let said = || std::fs::read_to_string(&log_path).unwrap_or_default();
    match exited_within(&mut npm, INSTALL_WITHIN)? {
        Some(true) => {}
        Some(false) => return Err(format!("npm install failed: {}", said().trim())),
        None => {
            return Err(format!(
                "npm install did not end within {INSTALL_WITHIN:?}: {}",
                said().trim()
            ));
        }
    }
    if says_version(&bin, cli.says) {
        Ok(bin)
    } else {
        Err(format!(
            "{} --version does not say {}",
            bin.display(),
            cli.says
        ))
    }
}

fn says_version(bin: &Path, version: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with(version)
        })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// What the mock answers: a tool call of `tool` running `command` first (`-`: text only), and
/// its `MOCK_*` environment (usage, an API error to give).
pub struct Mock<'a> {
    pub tool: &'a str,
    pub command: &'a str,
    pub env: &'a [(&'a str, &'a str)],
}

/// Starts the mock on a free loopback port, then `cmd` with `ANTHROPIC_BASE_URL` pointing at it
/// and `ANTHROPIC_API_KEY=dummy`, in a network namespace of its own when the machine allows;
/// ends the mock once `cmd` exited. `cmd`'s program, arguments, environment and directory are
/// kept; its standard input is `input` (else /dev/null), its output is captured. Panics if it
/// takes longer than `within`.
pub fn run_with_mock(
    cmd: &Command,
    mock: &Mock<'_>,
    input: Option<&Path>,
    within: Duration,
) -> Output {
    let port = free_port();
    let mut run = wrapped(cmd, port, "mock-messages-api.py", [mock.tool, mock.command]);
    run.env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "dummy")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(input.map_or_else(Stdio::null, |p| {
            std::fs::File::open(p).map_or_else(|e| panic!("{}: {e}", p.display()), Stdio::from)
        }));
    keep_own_env(&mut run, mock.env, cmd);
    super::run_within(run, within)
}

/// Starts the project's Responses API mock (`scripts/mock-responses-api.py`) on a free
/// loopback port, answering a first request of each turn with an `exec_command` call of
/// `command`; then `cmd` with `CODEX_HOME` (`home`, given a `config.toml` whose provider is
/// the mock) and a dummy `OPENAI_API_KEY`, in a network namespace of its own where the
/// machine allows. As [`run_with_mock`] otherwise.
pub fn run_with_codex_mock(
    cmd: &Command,
    home: &Path,
    command: &str,
    env: &[(&str, &str)],
    within: Duration,
) -> Output {
    let port = free_port();
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
             name = \"mock\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \
             \"responses\"\nsupports_websockets = false\n"
        ),
    )
    .unwrap();
    let mut run = wrapped(cmd, port, "mock-responses-api.py", [command, ""]);
    run.env("CODEX_HOME", home)
        .env("OPENAI_API_KEY", "dummy")
        .stdin(Stdio::null());
    keep_own_env(&mut run, env, cmd);
    super::run_within(run, within)
}

/// `cmd` run by [`WRAPPER`] after the mock `script` (of `scripts/`) with its two arguments on
/// `port`, in a network namespace of its own where the machine allows one.
pub(super) fn wrapped(cmd: &Command, port: u16, script: &str, args: [&str; 2]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let mut run = match namespace() {
        Some(unshare) => {
            let mut c = Command::new("unshare");
            c.args(unshare).arg("sh");
            c
        }
        None => Command::new("sh"),
    };
    run.arg("-c")
        .arg(WRAPPER)
        .arg("sh")
        .arg(port.to_string())
        .arg(&script)
        .args(args)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    run
}

/// The mock's `env`, then `cmd`'s own environment changes and directory, on `run`.
pub(super) fn keep_own_env(run: &mut Command, env: &[(&str, &str)], cmd: &Command) {
    for (k, v) in env {
        run.env(k, v);
    }
    super::take_env_and_dir(run, cmd);
}

/// Brings loopback up (in a fresh namespace it is down), starts the mock, waits until it
/// listens, runs the command, ends the mock: `sh -c WRAPPER sh PORT MOCK TOOL COMMAND CMD...`.
const WRAPPER: &str = r#"
port=$1 mock=$2 tool=$3 command=$4
shift 4
ip link set lo up 2>/dev/null
python3 "$mock" "$port" "$tool" "$command" 2>/dev/null &
m=$!
python3 -c 'import socket,sys,time
for _ in range(500):
    try: socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close(); break
    except OSError: time.sleep(0.01)' "$port"
"$@"
rc=$?
kill $m
wait $m 2>/dev/null
exit $rc
"#;

/// `unshare` arguments that give a process a network namespace of its own here, if any do.
pub(super) fn namespace() -> Option<&'static [&'static str]> {
    static FOUND: OnceLock<Option<&'static [&'static str]>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let tries: [&'static [&'static str]; 2] = [&["-n"], &["-r", "-n"]];
        tries.into_iter().find(|args| {
            Command::new("unshare")
                .args(*args)
                .arg("true")
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    })
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// Runs `cmd` to its end: whether it succeeded, or `None` when it was ended after `within`.
fn exited_within(cmd: &mut Command, within: Duration) -> Result<Option<bool>, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{}: {e}", cmd.get_program().display()))?;
    if !super::wait_until(within, || !matches!(child.try_wait(), Ok(None))) {
        let _ = child.kill();
        let _ = child.wait();
        return Ok(None);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok(Some(status.success()))
}
