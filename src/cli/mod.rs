//! The command line: parsing, and turning each command's outcome into an exit code.

pub(crate) mod bridge;
mod clean;
pub(crate) mod daemon;
pub mod demo;
mod doctor;
pub(crate) mod hook;
mod hook_install;
mod install_docs;
mod list;
pub(crate) mod logs;
mod loops;
pub(crate) mod notify;
mod report;
mod schedule;
mod serve;
pub(crate) mod service;
pub(crate) mod status;
mod status_view;
pub(crate) mod telegram;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::exit::{self, Status};
use crate::m1::settings::{Beside, SETTINGS};

/// Drives Claude Code autonomously toward a goal, one verified step at a time.
///
/// All state lives in one human-editable Markdown file, M1.md.
#[derive(Debug, Parser)]
#[command(name = "loop", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The loop's state file; its directory holds the loop's tasks, log and outbox.
    #[arg(long, global = true, env = "LOOP_FILE", default_value = "state/M1.md")]
    pub file: PathBuf,

    /// Whether `--file` or `LOOP_FILE` named the loop (rather than the default): `fire`,
    /// `check`, `kill` and `notify` then use its state directory even before it exists.
    #[arg(skip)]
    pub file_given: bool,

    /// Whether the loop was found in a parent of the current directory (`state/M1.md` there,
    /// as git finds `.git`), neither `--file` nor `LOOP_FILE` naming one.
    #[arg(skip)]
    pub found_above: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write a new M1.md for GOAL and run the loop (in the foreground, or --detach).
    // The usage clap makes after a mistyped flag names the flag it suggests as if it were
    // required (`loop start --step <TEXT> <GOAL>`): said as it is instead.
    #[command(override_usage = "loop start [OPTIONS] <GOAL>")]
    Start(Box<StartArgs>),
    /// Carry on from M1.md alone: re-adopt a running step, judge a finished one, respawn a lost one.
    Resume {
        /// Run in the background and return at once.
        #[arg(long)]
        detach: bool,
        /// Print decisions only, not the live line of what the agent is doing.
        #[arg(long, short)]
        quiet: bool,
        /// Internal: this runner revives a loop whose runner died (who revived it).
        #[arg(long, hide = true, value_name = "WHO")]
        revived_by: Option<String>,
    },
    /// Try a step again: a fresh budget of attempts for the FAILED or waiting step (or step N),
    /// then run the loop on. On a DONE step, run it again.
    ///
    /// The deliberate way to re-run a step: loop.log records it as a person's decision, and no
    /// stale text or task record takes it back.
    Retry {
        /// The step (default: the FAILED one, or the one a WAITING loop stopped at).
        step: Option<u32>,
        /// Run in the background and return at once.
        #[arg(long)]
        detach: bool,
        /// Print decisions only, not the live line of what the agent is doing.
        #[arg(long, short)]
        quiet: bool,
    },
    /// List the loop's gates: the decisions it waits for (with how to make each), and those
    /// made.
    Gates {
        /// One JSON object instead of the human view.
        #[arg(long)]
        json: bool,
    },
    /// Approve the plan a PLAN gate waits on (the only one pending, or gate ID), then run the
    /// loop on.
    Approve {
        /// The gate, e.g. G1 (default: the only plan waiting for approval).
        id: Option<String>,
        #[command(flatten)]
        decide: DecideArgs,
    },
    /// Reject the plan a PLAN gate waits on: no step runs; edit the plan, then `loop resume`
    /// asks again.
    Reject {
        /// The gate, e.g. G1 (default: the only plan waiting for approval).
        id: Option<String>,
        #[command(flatten)]
        decide: DecideArgs,
    },
    /// Answer a gate's question (a step's `STEP_BLOCKED`, or one of the options a gate offers),
    /// then run the loop on: the step resumes in its own session with the answer.
    Answer {
        /// `[ID] TEXT`: the gate (e.g. G2; default: the only question waiting), then the answer.
        #[arg(required = true, num_args = 1.., value_name = "[ID] TEXT")]
        words: Vec<String>,
        #[command(flatten)]
        decide: DecideArgs,
    },
    /// Skip the step a gate waits on (a denied tool, a failed step): it is left SKIPPED and the
    /// loop goes on with the next one. The same as `loop answer ID skip`.
    Skip {
        /// The step (default: the only one a gate offers to skip).
        step: Option<u32>,
        #[command(flatten)]
        decide: DecideArgs,
    },
    /// Stop this loop: its step ends, the attempt is not counted, it goes WAITING.
    ///
    /// Returns once its runner has exited (at most 10s); `loop resume` then carries on at once.
    /// With --all, creates the stop file that every loop on this machine obeys (the emergency
    /// brake), waits for this user's runners, and names the loops that stopped; no loop may
    /// run until the file is removed.
    Stop {
        /// Stop every loop on this machine: create the stop file (`LOOP_STOP_FILE`).
        #[arg(long)]
        all: bool,
    },
    #[expect(clippy::doc_markdown, reason = "`--help` text, shown as written")]
    /// Run a whole 3-step loop with the bundled simulated agent in a temporary directory.
    ///
    /// With --file, the demo's M1.md goes there (a RUNNING loop there is refused, as by
    /// `start`); the simulated project stays in the temporary directory. LOOP_FILE is not
    /// read: the demo never touches the loop a shell has exported.
    Demo {
        /// Where the demo's M1.md goes (default: a new temporary directory, whatever
        /// LOOP_FILE says).
        // Shadows the global --file, whose default and LOOP_FILE do not apply here: `parse_from`
        // keeps it only when given on the command line.
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// Print decisions only, not the live line of what the agent is doing.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check that a loop will work here: each agent backend in use (its program and version,
    /// every flag the loop passes, its permission modes or sandboxes, and one contract call
    /// against a loopback stand-in of its API, with no account and no network), the stop
    /// file, the state directory, Telegram (getMe, nothing sent) and the daemon. Exit 0 when
    /// all is well, 1 otherwise.
    Doctor {
        /// The backends to check (repeat for both); default: those the loop uses.
        #[arg(long, value_name = "BACKEND")]
        backend: Vec<crate::m1::settings::AgentKind>,
        /// Also run this VERIFY command in this project, confined as the loop's runs are, and
        /// say what it reached for that the sandbox hid (default: the loop's own VERIFY).
        #[arg(long, value_name = "CMD")]
        verify: Option<String>,
        /// One JSON array of the checks instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Check M1.md; errors are printed as file:line:column. Exit 2 when invalid.
    #[expect(clippy::doc_markdown, reason = "`--help` text, shown as written")]
    Validate,
    /// Print this loop's decisions from its loop.log (every runner's, detached ones too).
    ///
    /// The log is shared by the loops that ran in its directory: this one's part starts at
    /// its `start:` line.
    Logs {
        /// Keep printing new lines until no runner drives the loop.
        #[arg(long, short)]
        follow: bool,
    },
    /// Report what the loop did: each step's attempts, reviews, cost, time, VERIFY, commit and
    /// gates, with the loop's totals.
    ///
    /// HTML (the default) is one self-contained page with a timeline of every run and the cost
    /// of each step; it goes beside M1.md (`M1.report.html`) and its path is printed. Markdown
    /// (for a pull request or a chat) and JSON go to standard output. A loop writes its page by
    /// itself when it ends.
    Report {
        /// What to write.
        #[arg(long, value_enum, default_value = "html")]
        format: crate::report::Format,
        /// Where to write it (`-`: standard output).
        #[arg(long, short, value_name = "PATH")]
        output: Option<PathBuf>,
    },
    /// List this user's loops on this machine, from any directory: running, waiting and
    /// finished, each with its M1.md, STATUS, goal, step, cost and last activity. Never writes.
    List {
        /// One JSON array instead of the table.
        #[arg(long)]
        json: bool,
        /// Also the archives `loop start` made of earlier loops (`M1.<time>.md`).
        #[arg(long)]
        all: bool,
        /// Only the loops of this project (the one `--file` finds here, else those under the
        /// current directory).
        #[arg(long)]
        here: bool,
    },
    /// Remove what finished loops left: archived M1.<time>.md files beyond the newest few of
    /// each loop, and the task directories, task ledgers, parallel steps' leftovers and commit
    /// notes of loops that are neither a loop file nor a kept archive.
    ///
    /// As `git clean`: without -f it only lists what it would remove. Never a loop file, a
    /// running task, a git worktree, or a file of the project.
    Clean {
        /// Remove them (without it, only list them).
        #[arg(long, short)]
        force: bool,
        /// Only list what would be removed (the default).
        #[arg(long, short = 'n', conflicts_with = "force")]
        dry_run: bool,
        /// Archived loops kept whole per loop file, the newest.
        #[arg(long, value_name = "N", default_value_t = clean::KEEP)]
        keep: usize,
        /// Every loop of yours, wherever its project is (default: this project's loops only).
        #[arg(long)]
        all_projects: bool,
    },
    /// Serve every loop of yours on this machine as one live page in the browser, with a JSON
    /// API: their gates decided with a click, through the same commands as from the shell.
    ///
    /// Prints the page's address with a token first (`http://127.0.0.1:PORT/?token=…`); every
    /// request needs the token. Holds no state: stop it at any time.
    Serve(serve::ServeArgs),
    /// Show what M1.md says, plus whether the step's process is alive. Never writes.
    Status {
        /// One JSON object instead of the human view.
        #[arg(long)]
        json: bool,
    },
    /// Start a command as a supervised, detached task; print its id and return at once.
    Fire(FireArgs),
    /// Report a task: RUNNING, DONE, FAILED, TIMEOUT, KILLED or LOST; the exit status says
    /// which (0 DONE, 10 RUNNING, 11 FAILED, 12 TIMEOUT, 13 KILLED, 14 LOST).
    Check {
        /// The task id printed by `loop fire`.
        id: String,
        /// One JSON object instead of the human line.
        #[arg(long)]
        json: bool,
    },
    /// End a task's whole process group and wait until it is dead.
    Kill {
        /// The task id printed by `loop fire`.
        id: String,
    },
    /// Send one message to the configured Telegram chat (to the log when none is set up).
    Notify {
        /// The text to send.
        #[arg(required_unless_present = "flush")]
        message: Option<String>,
        /// Send the messages still waiting in the outbox.
        #[arg(long)]
        flush: bool,
    },
    /// Run a Telegram bot: the configured chat may /loop, /issue, /status, /stop, /resume,
    /// /gates, /approve, /reject, /answer, /retry, /skip, /at and /schedule (and /help).
    Telegram {
        /// How long one getUpdates long poll waits for a message (e.g. 50s).
        #[arg(long, value_parser = parse_duration, default_value = "50s")]
        poll_timeout: Duration,
    },
    /// Keep loops running: revive each loop given (and each one `loop service install` named)
    /// that is RUNNING with no runner, at once or when its wait ends; and start the loops of
    /// `loop schedule` and `loop start --at` at their times, each once.
    ///
    /// Meant to run under systemd, tmux or cron (`loop service install` sets it up); costs
    /// nothing while the loops run.
    Daemon(DaemonArgs),
    /// Start loops at their times, again and again (`loop daemon` starts each due time once):
    /// add, list, pause, resume, rm.
    Schedule {
        #[command(subcommand)]
        action: schedule::ScheduleAction,
    },
    /// Install, inspect or remove the per-user service that runs `loop daemon`.
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Print the completions of `loop` for a shell (bash, zsh, fish, elvish, powershell).
    ///
    /// bash: `loop completions bash > ~/.local/share/bash-completion/completions/loop`;
    /// zsh: `loop completions zsh > ~/.zfunc/_loop` (with `fpath+=~/.zfunc` before
    /// `compinit`); fish: `loop completions fish > ~/.config/fish/completions/loop.fish`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
        /// Write them where that shell loads them (bash, zsh, fish), and say what it still
        /// needs, instead of printing them.
        #[arg(long)]
        install: bool,
    },
    /// Print the manual page of `loop` (roff); `--install` writes it and a page for each
    /// command where `man` finds them, then `man loop`.
    Man {
        /// Write `loop.1` and `loop-start.1` … beside the `loop` binary (`../share/man/man1`),
        /// else into ~/.local/share/man/man1, and say whether `man` finds them.
        #[arg(long)]
        install: bool,
    },
    /// Claude Code hooks that keep an agent inside its loop (see docs/08-backends.md).
    Hook {
        #[command(subcommand)]
        action: HookAction,
    },
    /// Internal: revive the loop if its runner died (started by a step's supervisor).
    #[command(name = "__revive", hide = true)]
    Revive {
        /// Who asks, for the log.
        #[arg(long)]
        by: String,
    },
    /// Internal: the supervisor of one task (by hand: `fire` starts supervisors through its
    /// starter).
    #[command(name = "__supervise", hide = true)]
    Supervise {
        /// The task directory to supervise.
        task_dir: PathBuf,
    },
    /// Internal: sends what an outbox holds, beside the loop that queued it (started by
    /// whoever queues a message; see `docs/05-telegram.md`).
    #[command(name = "__deliver", hide = true)]
    Deliver {
        /// The state directory whose `outbox.jsonl` to deliver.
        state_dir: PathBuf,
    },
    /// Internal: starts the supervisors of the process that started it (`fire`).
    #[command(name = "__starter", hide = true)]
    Starter {
        /// Room for the command line of the supervisors it starts.
        #[arg(hide = true)]
        room: Option<String>,
    },
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "each flag is one of `loop start`'s, set independently of the others"
)]
#[derive(Debug, Args)]
pub(crate) struct StartArgs {
    /// What the loop should achieve, in one line (with --issue: the issue's title).
    #[arg(required_unless_present = "issue", conflicts_with = "issue")]
    pub goal: Option<String>,
    /// Start from a GitHub issue (its number, or its URL): the goal is its title, its text is
    /// shown to every run, the loop works on the branch loop/issue-N, and opens a pull request
    /// at DONE (read with `gh`, as you are logged in).
    #[arg(long, value_name = "URL|NUMBER")]
    pub issue: Option<String>,
    /// At DONE, push the loop's branch to origin and open a pull request with `gh pr create`
    /// (implied by --issue).
    #[arg(long)]
    pub pr: bool,
    /// A loop started from an issue that ends FAILED says nothing on the issue (by default it
    /// comments its report there).
    #[arg(long, requires = "issue")]
    pub no_comment: bool,
    /// A step of the plan (repeat for each); without steps or --plan the agent plans.
    #[arg(long = "step", value_name = "TEXT")]
    pub steps: Vec<String>,
    /// Import the steps from a Markdown checklist (`- [ ] item`); DONE steps tick their box.
    #[arg(long, value_name = "FILE.md", conflicts_with = "steps")]
    pub plan: Option<PathBuf>,
    /// What the agent must respect (files not to touch, say).
    #[arg(long, value_name = "TEXT")]
    pub constraints: Option<String>,
    // The flags of settings, which a new loop is written with.
    #[command(flatten)]
    pub settings: crate::runner::settings::Overrides,
    /// Replace a RUNNING or WAITING loop (the old M1.md is archived, never overwritten).
    #[arg(long)]
    pub force: bool,
    /// Plan (or take the steps given), write M1.md, print the steps and run none; `loop
    /// resume` runs them.
    #[arg(long)]
    pub plan_only: bool,
    /// Run in the background and return at once.
    #[arg(long)]
    pub detach: bool,
    /// Print decisions only, not the live line of what the agent is doing.
    #[arg(long, short)]
    pub quiet: bool,
    /// Start at this time instead of now, by `loop daemon`: 02:00 (today, or tomorrow once
    /// it has passed), 2026-12-01 02:00 (local time), or 2026-12-01T02:00:00+01:00.
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
}

/// What every decision of a gate takes.
#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// Carry the loop on in the background and return at once.
    #[arg(long)]
    pub detach: bool,
    /// Print decisions only, not the live line of what the agent is doing.
    #[arg(long, short)]
    pub quiet: bool,
    /// One JSON object saying what became of the decision.
    #[arg(long)]
    pub json: bool,
    /// Internal: the fingerprint of what the decider was shown (a chat button carries it); a
    /// decision on anything else is refused.
    #[arg(long, hide = true, value_name = "FINGERPRINT")]
    pub shown: Option<String>,
    /// Internal: who decides, for M1.md and loop.log (default: this user, from the shell).
    #[arg(long, hide = true, value_name = "WHO")]
    pub by: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    #[expect(clippy::doc_markdown, reason = "`--help` text, shown as written")]
    /// A loop to keep running, as --loop is (or LOOP_FILE); not state/M1.md by default.
    // Shadows the global --file, whose default is no loop to keep: `parse_from` keeps it only
    // when it was given, on the command line or in LOOP_FILE.
    #[arg(long, value_name = "M1.md")]
    pub file: Option<PathBuf>,
    /// A loop to keep running (repeat for more). The daemon keeps these, --file's, and the
    /// loops `loop service install` named, all alike.
    #[arg(long = "loop", value_name = "M1.md")]
    pub loops: Vec<PathBuf>,
    /// Also run the Telegram bot (`loop telegram`) for the first loop, and restart it if it ends.
    #[arg(long)]
    pub telegram: bool,
    /// Look at the loops at least this often (a runner's death between steps is seen within it).
    #[arg(long, value_parser = parse_limit, default_value = "5s")]
    pub every: Duration,
}

#[expect(
    clippy::doc_markdown,
    reason = "these doc comments are `--help` text, where backticks would show"
)]
#[derive(Debug, Subcommand)]
pub(crate) enum HookAction {
    /// Print the loop's state as a SessionStart hook's additionalContext (nothing when there
    /// is no RUNNING or WAITING loop, or M1.md cannot be read).
    SessionStart,
    /// Note a compaction of a step's context (the PreCompact hook).
    PreCompact,
    /// The PreToolUse hook of a step's `AskUserQuestion`: defer the question (the run ends,
    /// the loop asks the person on a gate), or, once the gate is decided, allow it with the
    /// person's answer.
    Ask,
    /// A stdio MCP server whose one tool answers the CLI's permission prompts as a headless
    /// run would (deny); naming it lets `-p` offer `AskUserQuestion`.
    PermissionHost,
    /// Add the SessionStart hook to this project's .claude/settings.local.json.
    Install,
    /// Remove it again, leaving everything else in the file as it was.
    Uninstall,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ServiceAction {
    /// Write and enable a systemd user unit running `loop daemon` for --file (and the loops
    /// installed before); where there is no systemd, print a tmux and a cron line instead.
    Install {
        /// Also run the Telegram bot under the daemon.
        #[arg(long)]
        telegram: bool,
    },
    /// Say whether the service runs, and how each of its loops stands.
    Status,
    /// Disable and remove the unit; forget the loops.
    Uninstall,
}

#[derive(Debug, Args)]
pub(crate) struct FireArgs {
    /// Kill the task's process group after this long, with its unit: 90s, 5m, 1h30m.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Kill the task's process group after this long without output (90s, 5m).
    #[arg(long, value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// Working directory of the command (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// File to feed to the command's standard input (default: /dev/null).
    #[arg(long)]
    pub stdin: Option<PathBuf>,
    /// Set a variable in the command's environment (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Remove a variable from the command's environment (repeatable).
    #[arg(long = "unset-env", value_name = "KEY")]
    pub env_remove: Vec<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// A duration with its unit (`90s`, `5m`); a bare number is refused with the units it could
/// mean.
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s)
}

/// A limit's duration: like [`parse_duration`], and above zero.
fn parse_limit(s: &str) -> Result<Duration, String> {
    crate::m1::typed::duration(s)
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// A foreground runner's output: every decision, and unless `quiet` the live line of what
/// the agent does (in place on a terminal, a line per change elsewhere).
fn echo(quiet: bool) -> crate::runner::RunOptions {
    crate::runner::RunOptions {
        echo: true,
        progress: if quiet {
            crate::runner::ProgressMode::Off
        } else {
            crate::runner::ProgressMode::for_stdout()
        },
    }
}

/// The environment variables `loop` reads, as `loop --help` shows them.
/// The environment variables `loop` reads that are not settings of a loop, and what each
/// says; those that are come from the settings table ([`SETTINGS`]).
const OTHER_VARIABLES: &[(&str, &str)] = &[
    (
        "LOOP_FILE",
        "the loop's M1.md, as --file (default state/M1.md)",
    ),
    (
        "LOOP_STOP_FILE",
        "the stop file that halts every loop, `loop stop --all` (default /tmp/croppy-stop); \
         a STOP file beside M1.md halts that loop only",
    ),
    (
        "LOOP_REVIVE",
        "off: the steps of a runner started with it do not revive it should it die \
         (`loop daemon` still revives the loops it keeps)",
    ),
    (
        "TELEGRAM_BOT_TOKEN",
        "the Telegram bot that sends notifications (unset: they go to loop.log)",
    ),
    ("TELEGRAM_CHAT_ID", "the chat it sends them to"),
    (
        "TELEGRAM_API_BASE",
        "the Bot API address (default https://api.telegram.org)",
    ),
    (
        "XDG_STATE_HOME",
        "outside a loop, fire/check/kill/notify keep their files in $XDG_STATE_HOME/m1loop \
         (default ~/.local/state/m1loop), and runners register there so that `loop stop` can \
         wait for them",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "set: each loop is one trace, sent over OTLP/HTTP to this collector (unset: no \
         traces, nothing started for them); the other OTEL_* of \
         docs/11-reports-and-traces.md are honoured",
    ),
];

/// `loop --help`'s list of the environment variables: first those of the settings table, each
/// with where else its setting is given, then [`OTHER_VARIABLES`].
fn env_help() -> String {
    const NAME: usize = 20;
    const WIDTH: usize = 92;
    let settings = SETTINGS.iter().filter_map(|s| {
        let v = s.env?;
        Some((v.name, format!("{} [{}]", v.means, s.homes(Beside::Env))))
    });
    let others = OTHER_VARIABLES.iter().map(|(n, t)| (*n, (*t).to_owned()));
    let mut out = String::from("Environment:");
    for (name, text) in settings.chain(others) {
        let _ = write!(out, "\n  {name:NAME$}");
        if name.len() >= NAME {
            let _ = write!(out, "\n  {:NAME$}", "");
        }
        let mut column = NAME + 2;
        for (i, word) in text.split_whitespace().enumerate() {
            if i > 0 && column + 1 + word.len() > WIDTH {
                let _ = write!(out, "\n  {:NAME$}", "");
                column = NAME + 2;
            } else if i > 0 {
                out.push(' ');
                column += 1;
            }
            out.push_str(word);
            column += word.len();
        }
    }
    out
}

/// The command line as clap sees it, with the environment and the exit codes after the help.
#[must_use]
pub(crate) fn command() -> clap::Command {
    Cli::command()
        .after_help(format!("{}\n\n{}", env_help(), exit::HELP))
        .mut_subcommand("start", with_setting_homes)
}

/// Prints what is generated from the command line's definition: the completions for `shell`,
/// or (`None`) the manual page.
fn generated(shell: Option<clap_complete::Shell>) -> crate::error::Result<Status> {
    let mut out = Vec::new();
    match shell {
        Some(shell) => clap_complete::generate(shell, &mut public_command(), "loop", &mut out),
        None => clap_mangen::Man::new(command()).render(&mut out)?,
    }
    crate::outln!("{}", String::from_utf8_lossy(&out).trim_end());
    Ok(Status::Ok)
}

/// [`command`] without its internal subcommands (`__starter`, …), which completions would
/// offer although `--help` hides them.
fn public_command() -> clap::Command {
    let full = command();
    let mut public = clap::Command::new("loop")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .subcommand_required(true);
    for arg in full.get_arguments() {
        public = public.arg(arg.clone());
    }
    public.subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// `loop start`'s help of each setting's flag says where else the setting is given and kept
/// (M1.md's key, the environment, `loop.yaml`'s key), from the one table of settings.
fn with_setting_homes(start: clap::Command) -> clap::Command {
    SETTINGS.iter().fold(start, |start, s| {
        let Some(flag) = s.flag else { return start };
        let homes = s.homes(Beside::Flag);
        start.mut_arg(flag.replace('-', "_"), |arg| {
            let said = |h: Option<&clap::builder::StyledStr>| {
                h.map_or_else(String::new, |h| format!("{h} "))
            };
            let help = format!("{}[{homes}]", said(arg.get_help()));
            match arg
                .get_long_help()
                .map(|h| format!("{}[{homes}]", said(Some(h))))
            {
                Some(long) => arg.help(help).long_help(long),
                None => arg.help(help),
            }
        })
    })
}

/// Parses `args` (program name first), as [`main`] does.
///
/// # Errors
/// What clap reports: a bad flag, `--help`, `--version`.
pub(crate) fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command()
        .try_get_matches_from(args)
        .map_err(without_internal_suggestions)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    cli.file_given = !matches!(
        matches.value_source("file"),
        None | Some(ValueSource::DefaultValue)
    );
    match &mut cli.command {
        // The global --file's default and LOOP_FILE reach the demo's own flag too; only a
        // --file on the command line moves the demo.
        Command::Demo { file, .. }
            if matches.value_source("file") != Some(ValueSource::CommandLine) =>
        {
            *file = None;
        }
        // The daemon keeps a loop --file or LOOP_FILE names, never the default.
        Command::Daemon(args) if !cli.file_given => args.file = None,
        _ => {}
    }
    if !cli.file_given
        && !cli.file.exists()
        && let Some(found) = find_upward(&cli.file)
    {
        cli.file = found;
        cli.found_above = true;
    }
    Ok(cli)
}

/// A mistyped command's error without the internal commands clap suggests beside the others
/// (it suggests hidden ones too: `loop strat` was told to try `__starter`).
fn without_internal_suggestions(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    if let Some(ContextValue::Strings(names)) = e.get(ContextKind::SuggestedSubcommand) {
        let hidden: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|c| c.is_hide_set())
            .map(|c| c.get_name().to_owned())
            .collect();
        let shown: Vec<String> = names
            .iter()
            .filter(|n| !hidden.contains(n))
            .cloned()
            .collect();
        if shown.is_empty() {
            e.remove(ContextKind::SuggestedSubcommand);
        } else {
            e.insert(
                ContextKind::SuggestedSubcommand,
                ContextValue::Strings(shown),
            );
        }
    }
    e
}

/// The loop of the nearest parent of the current directory that has `default` (`state/M1.md`),
/// as git finds `.git`: so every command run below a project's directory is about its loop.
fn find_upward(default: &std::path::Path) -> Option<PathBuf> {
    let here = std::env::current_dir().ok()?;
    here.ancestors()
        .skip(1)
        .map(|dir| dir.join(default))
        .find(|f| f.is_file())
}

/// What `loop start` was given, for the runner.
fn start_request(a: StartArgs) -> crate::runner::StartRequest {
    crate::runner::StartRequest {
        goal: a.goal.unwrap_or_default(),
        steps: a.steps,
        plan: a.plan,
        constraints: a.constraints,
        overrides: a.settings,
        detach: a.detach,
        force: a.force,
        plan_only: a.plan_only,
        workdir: None,
        github: crate::runner::pull_request::GithubRequest {
            issue: a.issue,
            pr: a.pr,
            no_comment: a.no_comment,
        },
    }
}

/// `loop start`; `found_above`: the loop of `file` was found in a parent of the current
/// directory, whose project the new loop works in.
fn start(file: &std::path::Path, found_above: bool, a: StartArgs) -> crate::error::Result<Status> {
    if let Some(at) = &a.at {
        // The goal is what the schedules file keeps; an issue's title is read when it starts.
        let Some(goal) = &a.goal else {
            return Err(crate::error::Error::bad_input(
                "--at takes a goal; a loop of an --issue cannot be queued for a time",
            ));
        };
        let argv: Vec<String> = std::env::args().collect();
        return schedule::queue_at(file, found_above, at, goal, &argv);
    }
    let quiet = a.quiet;
    let mut req = start_request(a);
    if found_above {
        // The project is the directory that holds the loop's `state/`.
        req.workdir = file.parent().and_then(|s| s.parent()).map(PathBuf::from);
        crate::errln!(
            "loop: this directory is inside the project of {}",
            file.display()
        );
    }
    crate::runner::start(file, &req, &echo(quiet))
}

/// `loop fire`: starts the command as a task of the exec bridge and prints its id.
fn fire(state_dir: &std::path::Path, args: FireArgs) -> crate::error::Result<Status> {
    let req = crate::bridge::FireRequest {
        env_keep: None,
        confined: false,
        hand_back: false,
        command: args.command,
        timeout: args.timeout,
        idle_timeout: args.idle_timeout,
        idle_exempt_marker: None,
        cwd: args.cwd,
        stdin: args.stdin,
        input: None,
        env: args.env,
        env_remove: args.env_remove,
        on_exit: Vec::new(),
        on_exit_unless_held: None,
    };
    // A loop's state directory made by something else is kept out of git here too; a fire
    // goes on whatever that finds.
    let _ = crate::dirs::keep_out_of_git(state_dir);
    let id = crate::bridge::fire(state_dir, &req)?;
    crate::outln!("{id}");
    Ok(Status::Ok)
}

/// `loop approve | reject | answer`.
fn gate_decision(
    file: &std::path::Path,
    id: Option<String>,
    step: Option<u32>,
    answer: crate::engine::gate::Answer,
    a: DecideArgs,
) -> crate::error::Result<Status> {
    let by = a.by.unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_default();
        if user.is_empty() {
            "shell".to_owned()
        } else {
            format!("{user} (shell)")
        }
    });
    let req = crate::engine::gate::Request {
        id,
        step,
        answer,
        shown: a.shown,
        by,
    };
    let how = crate::runner::gates::DecideOptions {
        detach: a.detach,
        json: a.json,
    };
    crate::runner::gates::decide(file, &req, how, &echo(a.quiet))
}

/// `loop approve | reject | answer | skip`: the gate, step and answer each names.
fn gate_command(file: &std::path::Path, command: Command) -> crate::error::Result<Status> {
    use crate::engine::gate::Answer;
    let (id, step, answer, decide) = match command {
        Command::Approve { id, decide } => (id, None, Answer::Approve, decide),
        Command::Reject { id, decide } => (id, None, Answer::Reject, decide),
        Command::Skip { step, decide } => (
            None,
            step,
            Answer::Text(crate::m1::GateOption::Skip.as_str().into()),
            decide,
        ),
        Command::Answer { words, decide } => {
            let (id, text) = match words.split_first() {
                Some((first, rest)) if !rest.is_empty() => match crate::m1::gates::id_of(first) {
                    Some(id) => (Some(id), rest.join(" ")),
                    None => (None, words.join(" ")),
                },
                _ => (None, words.join(" ")),
            };
            (id, None, Answer::Text(text), decide)
        }
        _ => unreachable!("only the verbs that decide a gate come here"),
    };
    gate_decision(file, id, step, answer, decide)
}

/// Runs one parsed command line.
///
/// # Errors
/// Any failure of the command; its variant picks the exit status ([`Error::code`](crate::error::Error::code)).
#[expect(
    clippy::too_many_lines,
    reason = "one arm per command: the dispatch table grows with the commands, and says no more \
              split up"
)]
pub(crate) fn run(cli: Cli) -> crate::error::Result<Status> {
    let state = crate::layout::Layout::of(&cli.file)
        .state_dir()
        .to_path_buf();
    // Files of the exec bridge and notify: never a new `state/` wherever they are run.
    let m1_name = cli.file.file_name().unwrap_or_default().to_owned();
    let bridge_state = || crate::dirs::bridge_state_dir(&state, &m1_name, cli.file_given);
    match cli.command {
        Command::Start(a) => start(&cli.file, cli.found_above, *a),
        Command::Resume {
            detach,
            quiet,
            revived_by,
        } => crate::runner::resume_as(
            &cli.file,
            detach,
            crate::runner::settings::Overrides::default(),
            &echo(quiet),
            revived_by.as_deref(),
        ),
        Command::Daemon(args) => crate::cli::daemon::run(&args),
        Command::Schedule { action } => schedule::run(&cli.file, cli.found_above, action),
        Command::Service { action } => crate::cli::service::run(&cli.file, &action),
        Command::Hook { action } => match action {
            HookAction::SessionStart => Ok(crate::cli::hook::session_start(&cli.file)),
            HookAction::PreCompact => Ok(crate::cli::hook::pre_compact(&cli.file)),
            HookAction::Ask => Ok(crate::cli::hook::ask(&cli.file)),
            HookAction::PermissionHost => Ok(crate::cli::hook::permission_host()),
            HookAction::Install => hook_install::install(&std::env::current_dir()?),
            HookAction::Uninstall => hook_install::uninstall(&std::env::current_dir()?),
        },
        Command::Revive { by } => crate::runner::revive::command(&cli.file, &by),
        Command::Retry {
            step,
            detach,
            quiet,
        } => crate::runner::retry(&cli.file, step, detach, &echo(quiet)),
        Command::Gates { json } => crate::runner::gates::list(&cli.file, json),
        c @ (Command::Approve { .. }
        | Command::Reject { .. }
        | Command::Answer { .. }
        | Command::Skip { .. }) => gate_command(&cli.file, c),
        Command::Stop { all } => {
            // A start queued for this loop (`loop start --at`) is cancelled; a loop that is
            // only queued has nothing else to stop.
            if !all && !schedule::cancel_queued(&cli.file)?.is_empty() && !cli.file.exists() {
                return Ok(Status::Ok);
            }
            let status = crate::runner::stop(&cli.file, all);
            // A command a person runs by hand is a good moment to deliver a backlog: beside
            // it, by a delivery process, so that a Telegram that does not answer never holds
            // `stop` up.
            if state.is_dir()
                && let Ok(exe) = std::env::current_exe()
            {
                crate::notifier::deliver(&state, &exe);
            }
            status
        }
        Command::Demo { file, quiet } => crate::cli::demo::demo(file.as_deref(), &echo(quiet)),
        Command::Logs { follow } => crate::cli::logs::logs(&cli.file, follow),
        Command::Validate => crate::cli::status::validate(&cli.file),
        Command::Doctor {
            backend,
            verify,
            json,
        } => crate::cli::doctor::doctor(&cli.file, &backend, verify.as_deref(), json),
        Command::Status { json } => {
            // A loop queued with `loop start --at` waits with its time.
            if !json && schedule::say_queued(Some(&cli.file)) && !cli.file.exists() {
                return Ok(Status::Ok);
            }
            crate::cli::status::status(&cli.file, json)
        }
        Command::Report { format, output } => {
            crate::cli::report::run(&cli.file, format, output.as_deref())
        }
        Command::List { json, all, here } => {
            if !json {
                schedule::say_queued(None);
            }
            crate::cli::list::list(&cli.file, json, all, here)
        }
        Command::Serve(args) => serve::run(&cli.file, &args),
        Command::Clean {
            force,
            keep,
            all_projects,
            ..
        } => crate::cli::clean::clean(&cli.file, force, keep, all_projects),
        Command::Fire(args) => fire(&bridge_state()?, args),
        Command::Check { id, json } => crate::cli::bridge::check(&bridge_state()?, &id, json),
        Command::Kill { id } => crate::cli::bridge::kill(&bridge_state()?, &id),
        // Without a message, clap has made sure --flush was given; with one, the backlog is
        // flushed before it anyway.
        Command::Notify { message, .. } => {
            crate::cli::notify::notify(&bridge_state()?, message.as_deref())
        }
        // The bot's own files (offset, lock, replies) go where the bridge's do: never a new
        // `state/` where no loop is; a `/loop` that starts one makes it.
        Command::Telegram { poll_timeout } => {
            crate::cli::telegram::run(&cli.file, &bridge_state()?, poll_timeout)
        }
        Command::Completions {
            shell,
            install: true,
        } => install_docs::completions(shell, &mut public_command()),
        Command::Completions { shell, .. } => generated(Some(shell)),
        Command::Man { install: true } => install_docs::man(&command(), &public_command()),
        Command::Man { .. } => generated(None),
        Command::Supervise { task_dir } => Ok(crate::bridge::supervise(&task_dir)?),
        Command::Deliver { state_dir } => {
            crate::notifier::deliverer::run(&state_dir)?;
            Ok(Status::Ok)
        }
        Command::Starter { .. } => Ok(crate::bridge::serve_starter()?),
    }
}

/// Parses `std::env::args`, runs, prints any error, and returns the exit code.
#[must_use]
pub fn main() -> ExitCode {
    let cli = match parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(status) => ExitCode::from(status.code()),
        Err(err) => {
            crate::errln!("loop: {err}");
            ExitCode::from(err.code().code())
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::m1::settings::SETTINGS;

    /// Flags of `loop start` that are not settings of the loop it writes.
    const NOT_SETTINGS: &[&str] = &[
        "step",
        "plan",
        "constraints",
        "force",
        "detach",
        "quiet",
        "at",
        "plan-only",
        // Where the loop's goal comes from and where its work goes, given per loop as the goal
        // is (`GITHUB:` in M1.md).
        "issue",
        "pr",
        "no-comment",
        "file",
        "help",
    ];

    /// `loop --help` named 4 of the chat's 10 commands.
    #[test]
    fn the_telegram_summary_names_every_command_of_the_chat() {
        let cmd = super::command();
        let about = cmd
            .find_subcommand("telegram")
            .unwrap()
            .get_about()
            .unwrap();
        for c in super::telegram::commands::COMMANDS {
            assert!(about.to_string().contains(c), "{c} missing from: {about}");
        }
    }

    /// `loop --help`'s environment was written by hand beside the settings table.
    #[test]
    fn loop_help_lists_every_variable_of_the_settings_table_once_with_its_homes() {
        let help = super::command().render_long_help().to_string();
        let listed: Vec<&str> = help
            .split("Environment:\n")
            .nth(1)
            .unwrap()
            .lines()
            .take_while(|l| !l.is_empty())
            .filter(|l| !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for s in SETTINGS {
            let Some(v) = s.env else { continue };
            assert_eq!(
                listed.iter().filter(|n| **n == v.name).count(),
                1,
                "{} in:\n{help}",
                v.name
            );
            if let Some(flag) = s.flag {
                assert!(help.contains(&format!("--{flag},")), "--{flag} in:\n{help}");
            }
        }
        for (name, _) in super::OTHER_VARIABLES {
            assert!(
                SETTINGS
                    .iter()
                    .all(|s| s.env.is_none_or(|v| v.name != *name)),
                "{name} is a setting's variable"
            );
            assert!(listed.contains(name), "{name} in:\n{help}");
        }
    }

    #[test]
    fn every_setting_flag_of_start_is_in_the_settings_table_and_no_other() {
        let cmd = super::command();
        let start = cmd.find_subcommand("start").unwrap();
        let flags: Vec<&str> = start.get_arguments().filter_map(|a| a.get_long()).collect();
        for s in SETTINGS {
            if let Some(flag) = s.flag {
                assert!(
                    flags.contains(&flag),
                    "--{flag} is missing from `loop start`"
                );
            }
        }
        for flag in flags {
            assert!(
                NOT_SETTINGS.contains(&flag) || SETTINGS.iter().any(|s| s.flag == Some(flag)),
                "--{flag} of `loop start` is not in the settings table"
            );
        }
    }
}
