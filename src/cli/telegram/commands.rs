//! What `loop telegram` does with one chat message: obey the configured chat, ignore (and log)
//! every other one, and run loop commands as child processes of the `loop` binary itself, so
//! the bot depends only on the command line.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::layout::Layout;
use crate::m1::gates::id_of;
use crate::notifier::render::escape;

/// A chat message, as far as the bot reads it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Incoming {
    pub chat_id: i64,
    pub chat_username: Option<String>,
    pub text: String,
    /// Who sent it, for M1.md and loop.log when it decides a gate.
    pub from: Option<User>,
    /// The message it replies to.
    pub reply_to: Option<i64>,
}

/// A person in the chat.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct User {
    pub id: i64,
    pub username: Option<String>,
    pub first_name: Option<String>,
}

impl User {
    /// `telegram 4242 (@dj)`: how a decision names who made it.
    pub(crate) fn who(&self) -> String {
        match (&self.username, &self.first_name) {
            (Some(u), _) => format!("telegram {} (@{u})", self.id),
            (None, Some(n)) => format!("telegram {} ({n})", self.id),
            (None, None) => format!("telegram {}", self.id),
        }
    }
}

/// A tap on a button of a gate's message (`callback_query`).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Tap {
    pub id: String,
    pub from: User,
    /// The chat of the message tapped, its type (`private`, `group`, …), and the message.
    pub chat_id: i64,
    pub chat_username: Option<String>,
    pub chat_type: String,
    pub message_id: i64,
    pub message_text: String,
    pub data: String,
}

/// What the bot does about a tap: the answer the tapper sees, and the message's new text
/// (without buttons), if it changes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TapReply {
    pub answer: String,
    pub edit: Option<String>,
    pub log: String,
}

/// A command the configured chat may give.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BotCommand {
    Loop(String),
    /// `/issue N|URL`: a loop from a GitHub issue (`loop start --issue`).
    Issue(String),
    Status,
    Stop,
    Resume,
    Gates,
    Approve(Option<String>),
    Reject(Option<String>),
    /// `/answer [ID] TEXT`.
    Answer(Option<String>, String),
    Retry(Option<u32>),
    /// `/skip [N]`: the option `skip` of the gate about step N (or the only one offering it).
    Skip(Option<u32>),
    /// `/at TIME GOAL`: a loop queued for a time (`loop start --at`).
    At(String, String),
    /// `/schedule …`: `loop schedule` with these words.
    Schedule(Vec<String>),
    Help,
}

/// Every command the bot takes, as `/help` and `loop telegram --help` list them (checked).
#[cfg(test)]
pub(crate) const COMMANDS: [&str; 13] = [
    "/loop",
    "/issue",
    "/status",
    "/stop",
    "/resume",
    "/gates",
    "/approve",
    "/reject",
    "/answer",
    "/retry",
    "/skip",
    "/at",
    "/schedule",
];

/// Parses `/cmd[@botname] [args]`; anything that is not a known command asks for help.
pub(crate) fn parse(text: &str) -> BotCommand {
    let text = text.trim();
    let (head, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let name = head.split('@').next().unwrap_or_default();
    match name {
        "/loop" if !rest.trim().is_empty() => BotCommand::Loop(rest.trim().to_string()),
        "/issue" if !rest.trim().is_empty() => BotCommand::Issue(rest.trim().to_string()),
        "/status" => BotCommand::Status,
        "/stop" => BotCommand::Stop,
        "/resume" => BotCommand::Resume,
        "/gates" => BotCommand::Gates,
        "/approve" => BotCommand::Approve(id_of(rest)),
        "/reject" => BotCommand::Reject(id_of(rest)),
        "/answer" => {
            let rest = rest.trim();
            let (first, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            match id_of(first) {
                Some(id) if !after.trim().is_empty() => {
                    BotCommand::Answer(Some(id), after.trim().to_owned())
                }
                _ if !rest.is_empty() => BotCommand::Answer(None, rest.to_owned()),
                _ => BotCommand::Help,
            }
        }
        "/retry" => step_arg(rest).map_or(BotCommand::Help, BotCommand::Retry),
        "/skip" => step_arg(rest).map_or(BotCommand::Help, BotCommand::Skip),
        "/at" => {
            let rest = rest.trim();
            match rest.split_once(char::is_whitespace) {
                Some((time, goal)) if !goal.trim().is_empty() => {
                    BotCommand::At(time.to_owned(), goal.trim().to_owned())
                }
                _ => BotCommand::Help,
            }
        }
        "/schedule" => schedule_words(rest).map_or(BotCommand::Help, BotCommand::Schedule),
        _ => BotCommand::Help,
    }
}

/// The words of `/schedule`, as `loop schedule` takes them: `list` (also with nothing),
/// `pause ID`, `resume ID`, `rm ID`, or `add "WHEN" GOAL` (the time in quotes, straight or a
/// phone's curly ones, unless it is one word such as `hourly`).
fn schedule_words(rest: &str) -> Option<Vec<String>> {
    let rest = rest.trim();
    let (verb, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let after = after.trim();
    match verb {
        "" | "list" => Some(vec!["list".into()]),
        "pause" | "resume" | "rm" if !after.is_empty() && !after.contains(' ') => {
            Some(vec![verb.into(), after.into()])
        }
        "add" => {
            let quoted = after.strip_prefix(['"', '\u{201c}']).and_then(|q| {
                let end = q.find(['"', '\u{201d}'])?;
                Some((&q[..end], q[end..].chars().skip(1).collect::<String>()))
            });
            let (when, goal) = if let Some((w, g)) = quoted {
                (w.to_owned(), g)
            } else {
                let (w, g) = after.split_once(char::is_whitespace)?;
                (w.to_owned(), g.to_owned())
            };
            let goal = goal.trim();
            (!when.trim().is_empty() && !goal.is_empty()).then(|| {
                vec![
                    "add".into(),
                    goal.into(),
                    "--every".into(),
                    when.trim().into(),
                ]
            })
        }
        _ => None,
    }
}

/// `[N]`: no step, or a step number; an error when it is neither.
fn step_arg(rest: &str) -> Result<Option<u32>, std::num::ParseIntError> {
    match rest.trim() {
        "" => Ok(None),
        n => n.parse().map(Some),
    }
}

const HELP: &str = "Commands:\n/loop &lt;goal&gt; – start a loop toward the goal\n\
                    /issue &lt;number or URL&gt; – start a loop on a GitHub issue; a pull request at DONE\n\
                    /status – what the loop is doing\n\
                    /stop – stop this loop (as loop stop): its step ends, it waits\n\
                    /resume – carry it on (as loop resume)\n\
                    /gates – the decisions the loop waits for\n\
                    /approve [ID] – approve the plan; /reject [ID] – reject it\n\
                    /answer [ID] &lt;text&gt; – answer a step's question (or reply to its message)\n\
                    /retry [N] – run the failed step (or step N) again\n\
                    /skip [N] – skip the step a gate waits on (or step N) and go on\n\
                    /at &lt;time&gt; &lt;goal&gt; – start a loop at a time (02:00, or 2026-12-01T02:00)\n\
                    /schedule add \"&lt;when&gt;\" &lt;goal&gt; – start one again and again \
                    (\"weekdays 02:00\", or a cron expression); /schedule – list them; \
                    /schedule pause|resume|rm &lt;ID&gt;";

/// What a child `loop` command printed and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildOutput {
    pub code: Option<i32>,
    pub output: String,
}

/// Runs `loop <args>`; injectable so tests can check the exact command line.
pub(crate) trait Exec {
    fn run(&self, args: &[String]) -> ChildOutput;
}

/// Runs the `loop` binary (or `LOOP_BOT_EXEC`, for tests) with `--file FILE` and the args.
#[derive(Debug)]
pub(crate) struct LoopBinary {
    pub program: PathBuf,
    pub file: PathBuf,
    pub state_dir: PathBuf,
    pub timeout: Duration,
}

impl LoopBinary {
    pub(super) fn from_env(file: &Path, state_dir: &Path) -> std::io::Result<Self> {
        let program = match std::env::var_os("LOOP_BOT_EXEC").filter(|v| !v.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => std::env::current_exe()?,
        };
        Ok(Self {
            program,
            file: file.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            timeout: Duration::from_secs(60),
        })
    }
}

impl Exec for LoopBinary {
    fn run(&self, args: &[String]) -> ChildOutput {
        let failed = |why: String| ChildOutput {
            code: None,
            output: why,
        };
        // Output goes to a file, not a pipe: a detached loop that inherited a pipe would keep
        // it open and hang us.
        let out_path = crate::layout::Layout::dir(&self.state_dir).telegram("cmd.out");
        let out = match File::create(&out_path) {
            Ok(f) => f,
            Err(e) => return failed(format!("could not create {}: {e}", out_path.display())),
        };
        let err = match out.try_clone() {
            Ok(f) => f,
            Err(e) => return failed(format!("could not share {}: {e}", out_path.display())),
        };
        let mut child = match Command::new(&self.program)
            .arg("--file")
            .arg(&self.file)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return failed(format!("could not run {}: {e}", self.program.display())),
        };
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let mut output = std::fs::read_to_string(&out_path).unwrap_or_default();
        if status.is_none() {
            let _ = write!(output, "\n(killed after {}s)", self.timeout.as_secs());
        }
        ChildOutput {
            code: status.and_then(|s| s.code()),
            output: output.trim().to_string(),
        }
    }
}

/// The configured chat and what it may drive.
pub(crate) struct Bot<E> {
    pub chat_id: String,
    /// The loop's M1.md.
    pub file: PathBuf,
    pub state_dir: PathBuf,
    pub exec: E,
}

impl<E: Exec> Bot<E> {
    /// Whether `msg` comes from the configured chat (a number, or `@username` of a channel).
    pub(super) fn is_ours(&self, msg: &Incoming) -> bool {
        match self.chat_id.strip_prefix('@') {
            Some(name) => msg
                .chat_username
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(name)),
            None => self.chat_id.parse::<i64>() == Ok(msg.chat_id),
        }
    }

    /// Obeys one message from the configured chat; returns the reply (Bot API HTML) and a
    /// line for the log.
    pub(super) fn handle(&self, msg: &Incoming) -> (String, String) {
        // A reply to a gate's message answers it; a command is a command wherever it is.
        if !msg.text.trim_start().starts_with('/')
            && let Some(answered) = self.reply(msg)
        {
            return answered;
        }
        match parse(&msg.text) {
            BotCommand::Loop(goal) => {
                let out = self
                    .exec
                    .run(&["start".into(), "--detach".into(), goal.clone()]);
                let reply = format!(
                    "▶️ Starting a loop: <b>{}</b>\n{}",
                    escape(&goal),
                    show(&out)
                );
                (reply, format!("ran `loop start --detach` ({})", code(&out)))
            }
            BotCommand::Issue(which) => {
                let out = self.exec.run(&[
                    "start".into(),
                    "--detach".into(),
                    "--issue".into(),
                    which.clone(),
                ]);
                let reply = format!(
                    "▶️ Starting a loop on issue <b>{}</b>\n{}",
                    escape(&which),
                    show(&out)
                );
                (
                    reply,
                    format!("ran `loop start --detach --issue` ({})", code(&out)),
                )
            }
            BotCommand::Status => {
                let out = self.exec.run(&["status".into()]);
                (show(&out), format!("ran `loop status` ({})", code(&out)))
            }
            BotCommand::Stop => self.stop(),
            BotCommand::Resume => self.resume(),
            BotCommand::Gates => {
                let out = self.exec.run(&["gates".into()]);
                (show(&out), format!("ran `loop gates` ({})", code(&out)))
            }
            BotCommand::Approve(id) => self.decide(msg, "approve", id, None, None),
            BotCommand::Reject(id) => self.decide(msg, "reject", id, None, None),
            BotCommand::Answer(id, text) => self.decide(msg, "answer", id, Some(text), None),
            BotCommand::Retry(n) => {
                let mut args = vec!["retry".to_owned(), "--detach".to_owned()];
                args.extend(n.map(|n| n.to_string()));
                let out = self.exec.run(&args);
                (
                    format!("🔁 {}", show(&out)),
                    format!("ran `loop retry --detach` ({})", code(&out)),
                )
            }
            BotCommand::Skip(n) => self.decide(msg, "skip", None, n.map(|n| n.to_string()), None),
            BotCommand::At(time, goal) => {
                let out = self
                    .exec
                    .run(&["start".into(), "--at".into(), time, goal.clone()]);
                let reply = format!("⏰ <b>{}</b>\n{}", escape(&goal), show(&out));
                (reply, format!("ran `loop start --at` ({})", code(&out)))
            }
            BotCommand::Schedule(words) => {
                let verb = words.first().cloned().unwrap_or_default();
                let mut args = vec!["schedule".to_owned()];
                args.extend(words);
                let out = self.exec.run(&args);
                (
                    format!("🗓 {}", show(&out)),
                    format!("ran `loop schedule {verb}` ({})", code(&out)),
                )
            }
            BotCommand::Help => (
                HELP.to_string(),
                "answered with the command list".to_string(),
            ),
        }
    }
}

impl<E: Exec> Bot<E> {
    /// A reply to a message: the answer to the gate that message shows, if it shows one.
    pub(super) fn reply(&self, msg: &Incoming) -> Option<(String, String)> {
        let (id, shown) = crate::notifier::gate_messages::lookup(&self.loop_dir(), msg.reply_to?)?;
        let text = msg.text.trim().to_owned();
        Some(self.decide(msg, "answer", Some(id), Some(text), Some(shown)))
    }

    /// Runs `loop VERB [ID] [TEXT] --detach --json` as the sender, and words its outcome.
    fn decide(
        &self,
        msg: &Incoming,
        verb: &str,
        id: Option<String>,
        text: Option<String>,
        shown: Option<String>,
    ) -> (String, String) {
        let who = msg
            .from
            .as_ref()
            .map_or_else(|| format!("telegram chat {}", msg.chat_id), User::who);
        let out = self.run_decision(verb, id, text, shown, &who);
        let reply = match decision_outcome(&out) {
            Some(d) => d.line(),
            None => show(&out),
        };
        (
            reply,
            format!("ran `loop {verb}` for {who} ({})", code(&out)),
        )
    }

    fn run_decision(
        &self,
        verb: &str,
        id: Option<String>,
        text: Option<String>,
        shown: Option<String>,
        who: &str,
    ) -> ChildOutput {
        let mut args = vec![verb.to_owned()];
        args.extend(id);
        args.extend(text);
        if let Some(shown) = shown {
            args.extend(["--shown".to_owned(), shown]);
        }
        args.extend([
            "--by".to_owned(),
            who.to_owned(),
            "--detach".to_owned(),
            "--json".to_owned(),
        ]);
        self.exec.run(&args)
    }

    /// What a tap's data asks, for the log: ` on gate G1 (approve)`, or nothing when it names
    /// no gate's option.
    fn tapped_on(&self, data: &str) -> String {
        let Some((id, option, _)) = crate::notifier::parse_button_data(data) else {
            return String::new();
        };
        let choice = crate::m1::load(&self.file).ok().and_then(|d| {
            d.view()
                .gate(&id)
                .and_then(|g| g.options.get(option).cloned())
        });
        match choice {
            Some(c) => format!(" on gate {id} ({c})"),
            None => format!(" on gate {id}"),
        }
    }

    /// A tap on a gate's button: authorised (the configured chat, and in a private chat its
    /// person), looked up (the data is only an id, an option and a fingerprint: a client can
    /// forge it), then decided through the same command as from the shell.
    pub(super) fn tap(&self, tap: &Tap) -> TapReply {
        let refuse = |answer: &str, log: String| TapReply {
            answer: answer.to_owned(),
            edit: None,
            log,
        };
        let chat = Incoming {
            chat_id: tap.chat_id,
            chat_username: tap.chat_username.clone(),
            ..Incoming::default()
        };
        if !self.is_ours(&chat) || (tap.chat_type == "private" && tap.from.id != tap.chat_id) {
            return refuse(
                "Not allowed: this bot takes decisions from its own chat only.",
                format!(
                    "ignored a tap{} from {} in chat {} (only chat {} decides, and in a private \
                     chat only its person)",
                    self.tapped_on(&tap.data),
                    tap.from.who(),
                    tap.chat_id,
                    self.chat_id
                ),
            );
        }
        let Some((id, option, shown)) = crate::notifier::parse_button_data(&tap.data) else {
            return refuse(
                "Unknown button.",
                format!("ignored a tap with unknown data from {}", tap.from.who()),
            );
        };
        let gate = crate::m1::load(&self.file)
            .ok()
            .and_then(|d| d.view().gate(&id).cloned());
        let Some(choice) = gate.and_then(|g| g.options.get(option).cloned()) else {
            return refuse(
                "This button is not one of the loop's gates.",
                format!(
                    "ignored a tap on gate {id} option {option} from {}: no such gate or option",
                    tap.from.who()
                ),
            );
        };
        let who = tap.from.who();
        // Any gate's option, the plan's approve and reject too, is an answer that names it.
        let out = self.run_decision(
            "answer",
            Some(id.clone()),
            Some(choice.clone()),
            Some(shown),
            &who,
        );
        let log = format!("tap on gate {id} ({choice}) by {who}: {}", code(&out));
        let Some(d) = decision_outcome(&out) else {
            return TapReply {
                answer: crate::text::cut(&format!("Not decided: {}", out.output), 190),
                edit: None,
                log,
            };
        };
        let edit = match d.outcome.as_str() {
            "decided" | "already" => Some(format!("{}\n\n{}", tap.message_text, d.stamp())),
            "stale" => Some(format!(
                "{}\n\n⚠️ Out of date: it changed since this message; see the newer one.",
                tap.message_text
            )),
            _ => None,
        };
        TapReply {
            answer: crate::text::cut(&d.line(), 190),
            edit,
            log,
        }
    }

    /// The loop's state directory, where its `STOP` is (the bot's own files may be elsewhere).
    fn loop_dir(&self) -> PathBuf {
        Layout::of(&self.file).state_dir().to_path_buf()
    }

    /// Where the bot notes that its `/stop` left the loop's `STOP` behind.
    fn left_stop_marker(&self) -> PathBuf {
        Layout::dir(&self.state_dir).telegram("stop")
    }

    /// `/stop`: `loop stop` for this loop, as a person would run it; it stopped every loop on
    /// the machine when it created the stop file. `loop stop` leaves its `STOP` in place only
    /// when the runner had not let go within its patience: that `STOP` is the bot's, which
    /// `/resume` takes away (a phone cannot), and the bot notes so.
    fn stop(&self) -> (String, String) {
        let out = self.exec.run(&["stop".into()]);
        let marker = self.left_stop_marker();
        if out.code != Some(0) && crate::runner::stopfile::left_by_command(&self.loop_dir()) {
            let _ = std::fs::write(&marker, format!("{}\n", self.file.display()));
        } else {
            let _ = std::fs::remove_file(&marker);
        }
        (
            format!("⏹ {}\n/resume carries it on.", show(&out)),
            format!("ran `loop stop` ({})", code(&out)),
        )
    }

    /// `/resume`. Right after a `/stop`, the stopped runner still holds the loop while it ends
    /// its step and writes WAITING, and `resume` would meet it: so this first waits (as long as
    /// `loop stop` does) for the loop's runner lock to be free, whatever stopped the runner.
    /// Then it takes away a `STOP` the bot's own `/stop` left (`resume` refuses while one
    /// exists, and a phone cannot delete it), never one a person put there nor the machine-wide
    /// stop file, and resumes.
    fn resume(&self) -> (String, String) {
        let patience = crate::runner::STOP_PATIENCE;
        if let Some(pid) = crate::runner::lock::wait_released(&self.file, patience) {
            let why = format!(
                "a runner (pid {pid}) still drives the loop {}s later, so nothing was resumed \
                 and any stop file is left in place",
                patience.as_secs()
            );
            return (
                format!(
                    "⏳ {}.\n/status shows what it does; once it is WAITING, /resume again.",
                    escape(&why)
                ),
                why,
            );
        }
        let mut reply = String::new();
        let marker = self.left_stop_marker();
        if marker.exists() {
            let loop_dir = self.loop_dir();
            if crate::runner::stopfile::clear_local(&loop_dir) {
                let _ = writeln!(
                    reply,
                    "Removed the stop file <code>{}</code> that /stop left",
                    escape(
                        &crate::runner::stopfile::local(&loop_dir)
                            .display()
                            .to_string()
                    )
                );
            }
            let _ = std::fs::remove_file(&marker);
        }
        let out = self.exec.run(&["resume".into(), "--detach".into()]);
        let _ = write!(reply, "▶️ Resuming\n{}", show(&out));
        (
            reply,
            format!("ran `loop resume --detach` ({})", code(&out)),
        )
    }
}

/// What `loop approve | reject | answer --json` said.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[expect(
    clippy::struct_field_names,
    reason = "the fields of the JSON object the command prints"
)]
pub(crate) struct Outcome {
    pub outcome: String,
    pub message: String,
    pub gate: Option<serde_json::Value>,
}

impl Outcome {
    fn field(&self, name: &str) -> Option<String> {
        self.gate.as_ref()?.get(name)?.as_str().map(str::to_owned)
    }

    /// ` at <when>`, when the gate says when it was decided.
    fn at(&self, format: &str) -> String {
        self.field("at")
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| format!(" at {}", t.format(format)))
            .unwrap_or_default()
    }

    /// The line the person reads.
    fn line(&self) -> String {
        match self.outcome.as_str() {
            "decided" => format!("✅ {}", self.field("choice").unwrap_or_default()),
            "already" => format!(
                "already answered: {}{}",
                self.field("choice").unwrap_or_default(),
                self.at("%H:%M UTC")
            ),
            "stale" => "This message is out of date: a fresh one was sent.".into(),
            _ => self.message.clone(),
        }
    }

    /// The line a decided gate's message gets in place of its buttons.
    fn stamp(&self) -> String {
        format!(
            "✅ Decided: {} — by {}{}",
            self.field("choice").unwrap_or_default(),
            self.field("by").unwrap_or_default(),
            self.at("%Y-%m-%d %H:%M UTC")
        )
    }
}

/// The JSON line a decision printed, if it printed one.
fn decision_outcome(out: &ChildOutput) -> Option<Outcome> {
    out.output
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Outcome>(l.trim()).ok())
}

fn code(out: &ChildOutput) -> String {
    out.code
        .map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}"))
}

/// A child's output for the chat: preformatted, the last 3000 characters, and its exit code
/// when it failed.
fn show(out: &ChildOutput) -> String {
    let chars: Vec<char> = out.output.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(3000)..].iter().collect();
    let mut s = if tail.is_empty() {
        String::new()
    } else {
        format!("<pre>{}</pre>", escape(&tail))
    };
    if out.code != Some(0) {
        let _ = write!(s, "\n({})", code(out));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Each command the bot takes is a command (not help) and `/help` lists it.
    #[test]
    fn every_command_is_taken_and_listed_in_help() {
        for c in COMMANDS {
            let args = if matches!(c, "/retry" | "/skip") {
                "2"
            } else if c == "/schedule" {
                "list"
            } else {
                "G1 x"
            };
            assert_ne!(parse(&format!("{c} {args}")), BotCommand::Help, "{c}");
            assert!(HELP.contains(&format!("{c} ")), "/help lacks {c}");
        }
    }

    #[test]
    fn commands_parse_with_or_without_the_bot_name() {
        assert_eq!(
            parse("/loop  fix it now "),
            BotCommand::Loop("fix it now".into())
        );
        assert_eq!(parse("/status@m1loop_bot"), BotCommand::Status);
        assert_eq!(parse("/stop"), BotCommand::Stop);
        assert_eq!(parse("/resume"), BotCommand::Resume);
        assert_eq!(parse("/loop"), BotCommand::Help, "a goal is required");
        assert_eq!(parse("hello"), BotCommand::Help);
        assert_eq!(parse("/rm -rf"), BotCommand::Help);
        assert_eq!(parse("/retry"), BotCommand::Retry(None));
        assert_eq!(parse("/skip 3"), BotCommand::Skip(Some(3)));
        assert_eq!(parse("/skip@m1loop_bot"), BotCommand::Skip(None));
        assert_eq!(parse("/skip three"), BotCommand::Help);
        assert_eq!(
            parse("/answer g2 use 8080"),
            BotCommand::Answer(Some("G2".into()), "use 8080".into())
        );
    }

    #[test]
    fn at_and_schedule_from_the_chat_are_loop_start_at_and_loop_schedule() {
        assert_eq!(
            parse("/at 02:00 bump the deps"),
            BotCommand::At("02:00".into(), "bump the deps".into())
        );
        assert_eq!(parse("/at 02:00"), BotCommand::Help, "a goal is required");
        let words = |w: &[&str]| BotCommand::Schedule(w.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(parse("/schedule"), words(&["list"]));
        assert_eq!(parse("/schedule pause S2"), words(&["pause", "S2"]));
        assert_eq!(
            parse("/schedule add \u{201c}weekdays 02:00\u{201d} bump the deps"),
            words(&["add", "bump the deps", "--every", "weekdays 02:00"])
        );
        assert_eq!(
            parse("/schedule add hourly look at the queue"),
            words(&["add", "look at the queue", "--every", "hourly"])
        );
        assert_eq!(parse("/schedule add \"daily 06:30\""), BotCommand::Help);
        assert_eq!(parse("/schedule drop S1"), BotCommand::Help);
        let rec = Recorder::default();
        let bot = rec.bot("1");
        bot.handle(&msg(1, None, "/at 02:00 bump the deps"));
        bot.handle(&msg(1, None, "/schedule rm S1"));
        assert_eq!(
            *rec.0.borrow(),
            [
                vec!["start", "--at", "02:00", "bump the deps"],
                vec!["schedule", "rm", "S1"]
            ]
        );
    }

    /// An [`Exec`] that records the commands it is given and refuses each.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<Vec<String>>>);

    impl Recorder {
        /// A bot of the chat `chat_id` (of `M1.md` here) that runs its commands through this.
        fn bot(&self, chat_id: &str) -> Bot<&Recorder> {
            Bot {
                chat_id: chat_id.into(),
                file: PathBuf::from("M1.md"),
                state_dir: PathBuf::from("."),
                exec: self,
            }
        }
    }

    impl Exec for &Recorder {
        fn run(&self, args: &[String]) -> ChildOutput {
            self.0.borrow_mut().push(args.to_vec());
            ChildOutput {
                code: Some(2),
                output: "refused: <stop file>".into(),
            }
        }
    }

    fn msg(chat_id: i64, username: Option<&str>, text: &str) -> Incoming {
        Incoming {
            chat_id,
            chat_username: username.map(str::to_string),
            text: text.into(),
            ..Incoming::default()
        }
    }

    #[test]
    fn only_the_configured_chat_is_ours_by_id_or_channel_name() {
        let rec = Recorder::default();
        let bot = rec.bot("-100123");
        assert!(bot.is_ours(&msg(-100_123, None, "/status")));
        assert!(!bot.is_ours(&msg(100_123, None, "/status")));
        let channel = rec.bot("@MyLoops");
        assert!(channel.is_ours(&msg(-5, Some("myloops"), "/status")));
        assert!(!channel.is_ours(&msg(-5, Some("other"), "/status")));
        assert!(!channel.is_ours(&msg(-5, None, "/status")));
    }

    #[test]
    fn issue_starts_a_loop_from_the_github_issue_in_the_background() {
        let rec = Recorder::default();
        let bot = rec.bot("1");
        assert_eq!(parse("/issue"), BotCommand::Help);
        let (reply, log) = bot.handle(&msg(1, None, "/issue 42"));
        assert_eq!(rec.0.borrow()[0], ["start", "--detach", "--issue", "42"]);
        assert!(
            reply.starts_with("▶️ Starting a loop on issue <b>42</b>\n"),
            "{reply}"
        );
        assert_eq!(log, "ran `loop start --detach --issue` (exit 2)");
    }

    #[test]
    fn a_failed_child_is_shown_escaped_with_its_exit_code() {
        let rec = Recorder::default();
        let bot = rec.bot("1");
        let (reply, log) = bot.handle(&msg(1, None, "/loop a <b> goal"));
        assert_eq!(rec.0.borrow()[0], ["start", "--detach", "a <b> goal"]);
        assert_eq!(
            reply,
            "▶️ Starting a loop: <b>a &lt;b&gt; goal</b>\n<pre>refused: &lt;stop file&gt;</pre>\n(exit 2)"
        );
        assert_eq!(log, "ran `loop start --detach` (exit 2)");
    }
}
