//! `claude-sim`: a stand-in for Claude Code's headless mode, so that `loop demo` and the tests
//! run the whole loop on a machine with no Claude account and no network.
//!
//! It takes the real CLI's flags and refuses what the real CLI refuses, emits realistic
//! stream-json, and follows a scenario file (`CLAUDE_SIM_SCENARIO`, see [`scenario`]). Every
//! call appends one JSON line to `CLAUDE_SIM_LOG` as it starts, so a test can see how the
//! runner called it even when the call is killed.
//!
//! It is a stand-in for the real CLI and so knows nothing of the loop: it shares no code with
//! `m1loop`, whose reader is tested against what it writes. The binary is m1loop's
//! `claude-sim` (`src/bin/claude-sim.rs`), built beside `loop`.

#![warn(unreachable_pub)]

mod act;
mod args;
mod codex;
mod emit;
mod gemini;
mod help;
mod hooks;
pub mod scenario;

use std::fs::OpenOptions;
use std::io::{IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use serde_json::{Value, json};

use self::scenario::Scenario;

/// Exit code for a broken simulation setup (bad scenario, unwritable log), distinct from the
/// CLI's own 1.
pub const SETUP_ERROR: i32 = 2;

/// The environment the simulation reads.
#[derive(Clone, Debug, Default)]
pub struct SimEnv {
    pub step: Option<String>,
    pub attempt: Option<String>,
    pub task_id: Option<String>,
    pub loop_file: Option<String>,
    /// The loop the call belongs to (`LOOP_ID`): its calls are counted apart from other loops'.
    pub loop_id: Option<String>,
    pub scenario: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub log: Option<PathBuf>,
    pub claudecode: bool,
    pub entrypoint: bool,
    pub startup_failure_results: Option<String>,
    /// The call is a reviewer's (`LOOP_REVIEW`), answered from the scenario's `review`.
    pub review: bool,
    /// The W3C trace context the call was started in (`TRACEPARENT`), which the real CLI
    /// parents its own spans to.
    pub traceparent: Option<String>,
    /// The names of every variable of the call's environment, sorted (names only: the values
    /// may be secrets), so a test sees what the agent could read.
    pub env_names: Vec<String>,
}

impl SimEnv {
    #[must_use]
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            step: var("LOOP_STEP"),
            attempt: var("LOOP_ATTEMPT"),
            task_id: var("LOOP_TASK_ID"),
            loop_file: var("LOOP_FILE"),
            loop_id: var("LOOP_ID"),
            scenario: var("CLAUDE_SIM_SCENARIO").map(PathBuf::from),
            state: var("CLAUDE_SIM_STATE").map(PathBuf::from),
            log: var("CLAUDE_SIM_LOG").map(PathBuf::from),
            claudecode: std::env::var_os("CLAUDECODE").is_some(),
            entrypoint: std::env::var_os("CLAUDE_CODE_ENTRYPOINT").is_some(),
            startup_failure_results: std::env::var("CLAUDE_CODE_STARTUP_FAILURE_RESULTS").ok(),
            review: std::env::var_os("LOOP_REVIEW").is_some(),
            traceparent: var("TRACEPARENT"),
            env_names: {
                let mut names: Vec<String> = std::env::vars_os()
                    .map(|(k, _)| k.to_string_lossy().into_owned())
                    .collect();
                names.sort();
                names
            },
        }
    }
}

/// Runs one simulated call with the process's arguments and environment; returns the exit code.
#[must_use]
pub fn main() -> i32 {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // Its version and help, as the real CLIs print theirs: no call, nothing logged.
    if let Some(text) = help::asked(&argv) {
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
        return 0;
    }
    run(&argv, &SimEnv::from_process())
}

/// Runs one simulated call.
#[must_use]
pub fn run(argv: &[String], env: &SimEnv) -> i32 {
    let (args, parse_error) = match argv.split_first() {
        Some((exec, rest)) if exec == "exec" => codex::parse(rest),
        _ if gemini::called_as(argv) => gemini::parse(argv),
        _ => args::parse(argv),
    };
    let step: Result<u32, String> = match env.step.as_deref() {
        None => Ok(1),
        Some(s) => s
            .parse()
            .map_err(|_| format!("LOOP_STEP must be a step number, not {s:?}")),
    };
    let state_dir = state_dir(env);
    let loaded = match &env.scenario {
        Some(path) => Scenario::load(path),
        None => Ok(Scenario::default()),
    };
    let call = match (&step, &state_dir, &loaded) {
        (Ok(step), Some(dir), Ok(scenario)) => {
            scenario::next_call(dir, &scenario.counter(*step, env.review))
                .map_err(|e| format!("cannot count calls in {}: {e}", dir.display()))
        }
        _ => Ok(1),
    };
    let stdin_open = stdin_tty_or_pipe();
    // Like the real CLI, read standard input to its end when it is not a terminal. A file (or
    // /dev/null) is read before the call is logged, so the log shows the whole prompt; a pipe
    // after, so that a never-closed one, which blocks the call as it would block Claude, still
    // leaves its line in the log.
    let mut piped = String::new();
    if !stdin_open {
        let _ = std::io::stdin().read_to_string(&mut piped);
    }
    if let Some(log) = &env.log {
        let line = log_line(
            argv,
            env,
            &args,
            (step.as_ref().ok(), call.as_ref().ok()),
            (stdin_open, &prompt_of(&args, &piped)),
        );
        if let Err(e) = append_line(log, &line) {
            eprintln!(
                "claude-sim: cannot write the call log {}: {e}",
                log.display()
            );
            return SETUP_ERROR;
        }
    }
    if let Some(refusal) = parse_error {
        eprintln!("{}", refusal.message);
        return refusal.code;
    }
    if let Err(refusal) = args::check(&args, env.claudecode) {
        eprintln!("{}", refusal.message);
        return refusal.code;
    }
    let (step, call, scenario) = match (step, call, loaded) {
        (Ok(step), Ok(call), Ok(scenario)) => (step, call, scenario),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("claude-sim: {e}");
            return SETUP_ERROR;
        }
    };
    if stdin_open && !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().read_to_string(&mut piped);
    }
    if let Err(code) = check_prompt(&args, &piped, state_dir.as_deref()) {
        return code;
    }
    let action = scenario.select(step, call, env.review);
    let action = act::limit_refusal(&args, &action).unwrap_or(action);
    let action = act::over_budget(&args, &action).unwrap_or(action);
    act::perform(
        &act::Call {
            args: &args,
            step,
            attempt: env.attempt.clone().unwrap_or_else(|| "1".to_owned()),
            review: env.review,
            base_dir: scenario.base_dir.clone(),
            state_dir,
            prompt: prompt_of(&args, &piped),
        },
        &action,
    )
}

/// A prompt is required, but for a resumed session whose last call a hook deferred: it goes on
/// without one. Any other resume without one is refused (capture
/// `resume-without-prompt-nothing-deferred`).
fn check_prompt(
    args: &args::SimArgs,
    piped: &str,
    state_dir: Option<&std::path::Path>,
) -> Result<(), i32> {
    let deferred = args
        .resume
        .as_deref()
        .is_some_and(|sid| act::deferred_file(state_dir, sid).is_some_and(|p| p.is_file()));
    if args.prompt.is_some() || !piped.trim().is_empty() || deferred {
        return Ok(());
    }
    if args.codex {
        eprintln!("No prompt provided via stdin.");
        return Err(1);
    }
    if args.gemini {
        eprintln!(
            "No input provided via stdin. Input can be provided by piping data into gemini or \
             using the --prompt option."
        );
        return Err(42);
    }
    if args.resume.is_some() {
        eprintln!(
            "Error: No deferred tool marker found in the resumed session. Either the session \
             was not deferred, the marker is stale (tool already ran), or it exceeds the \
             tail-scan window. Provide a prompt to continue the conversation."
        );
    } else {
        eprintln!(
            "Error: Input must be provided either through stdin or as a prompt argument when using --print"
        );
    }
    Err(1)
}

/// Where this call is counted: `CLAUDE_SIM_STATE`, else `<scenario>.state/`; within it, one
/// directory per loop (`LOOP_ID`). Counted per scenario alone, a second loop run with the same
/// scenario found its scripted failures used up and silently passed.
fn state_dir(env: &SimEnv) -> Option<PathBuf> {
    let base = env.state.clone().or_else(|| {
        env.scenario.as_ref().map(|p| {
            let mut s = p.clone().into_os_string();
            s.push(".state");
            PathBuf::from(s)
        })
    })?;
    Some(
        match env.loop_id.as_deref().filter(|id| is_plain_name(id)) {
            Some(id) => base.join(format!("loop-{id}")),
            None => base,
        },
    )
}

/// Whether `name` can be a directory name of its own (no separator, no `.` or `..`).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The prompt as the real CLI takes it: the argument, then what standard input held, on the
/// next line (as 2.1.330 does when it is given both).
fn prompt_of(args: &args::SimArgs, stdin: &str) -> Option<String> {
    match (&args.prompt, stdin.is_empty()) {
        (Some(p), true) => Some(p.clone()),
        (Some(p), false) => Some(format!("{p}\n{stdin}")),
        (None, false) => Some(stdin.to_owned()),
        (None, true) => None,
    }
}

fn log_line(
    argv: &[String],
    env: &SimEnv,
    args: &args::SimArgs,
    (step, call): (Option<&u32>, Option<&u32>),
    (stdin_open, prompt): (bool, &Option<String>),
) -> Value {
    let number_or_text = |v: &Option<String>| match v.as_deref().map(str::parse::<u64>) {
        Some(Ok(n)) => json!(n),
        _ => json!(v),
    };
    json!({
        "argv": argv,
        "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
        "pid": std::process::id(),
        "step": step.map_or_else(|| number_or_text(&env.step), |s| json!(s)),
        "attempt": number_or_text(&env.attempt),
        "task_id": env.task_id,
        "loop_file": env.loop_file,
        "loop_id": env.loop_id,
        "review": env.review,
        "traceparent": env.traceparent,
        "session_id": args.session_id,
        "resume": args.resume,
        "settings": args.settings,
        "tools": args.tools,
        "claudecode_env": env.claudecode,
        "entrypoint_env": env.entrypoint,
        "startup_failure_results": env.startup_failure_results,
        "env_names": env.env_names,
        "stdin_tty_or_pipe": stdin_open,
        "prompt": prompt,
        "call": call,
    })
}

/// One write per line with `O_APPEND`, so concurrent calls never interleave lines.
fn append_line(path: &std::path::Path, line: &Value) -> std::io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// Whether standard input is a terminal, a pipe or a socket: an input that may never end,
/// which the runner must not give the agent.
fn stdin_tty_or_pipe() -> bool {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return true;
    }
    let Ok(fd) = stdin.as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}
