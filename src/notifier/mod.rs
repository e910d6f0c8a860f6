//! Notifications: the notifier interface, the Telegram Bot API, and the outbox.
//!
//! "Tell me when it's done or needs me." Every message goes into `state/outbox.jsonl` before it
//! is sent and is marked sent once Telegram accepts it, so a network outage delays messages but
//! never loses them. Sending happens beside the loop, in a delivery process of its own
//! ([`deliverer`]): no decision waits for the network. A notification never fails the loop:
//! every failure is logged (with the bot token redacted) and the caller carries on.

pub(crate) mod backoff;
pub(crate) mod deliverer;
pub(crate) mod delivery;
pub(crate) mod gate_messages;
pub(crate) mod line;
pub(crate) mod log_only;
pub(crate) mod outbox;
mod redact;
pub(crate) mod render;
mod split;
pub(crate) mod telegram;

use std::path::Path;

pub(crate) use redact::redact;
pub(crate) use telegram::CREDENTIALS;

pub use delivery::FlushReport;
pub use render::render;

/// Something the loop tells its user about.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Event {
    Started {
        goal: String,
        steps: Vec<String>,
        /// How the loop's runs are confined, in a few words (`bubblewrap`, `none: …`).
        #[serde(default)]
        sandbox: Option<String>,
    },
    StepDone {
        goal: String,
        step: u32,
        total: u32,
        summary: String,
    },
    Waiting {
        goal: String,
        reason: String,
        how_to_continue: String,
    },
    Failed {
        goal: String,
        step: Option<u32>,
        reason: String,
        /// What the agent last said before its verdict line, if it said anything.
        answer: Option<String>,
        /// The end of what the agent printed on stderr (often nothing for `claude -p`).
        stderr_tail: Vec<String>,
    },
    Done {
        goal: String,
        summaries: Vec<(u32, String)>,
        cost_usd: f64,
        /// Tokens of the steps run on a backend that reports tokens, not dollars.
        tokens: u64,
        elapsed_s: u64,
        /// Where the loop's report page is, when it was written.
        #[serde(default)]
        report: Option<String>,
        /// The loop's end this tells, as a key (`done-LOOP_ID-STARTED_AT`): its messages are
        /// queued once, however often it is told. A runner queues it before it writes DONE, so
        /// one killed in between tells it again when the loop is carried on.
        #[serde(default)]
        once: Option<String>,
        /// The pull request the loop opened (`--pr`, `--issue`).
        #[serde(default)]
        pull_request: Option<String>,
        /// DONE steps whose work was to be committed and is not at all.
        #[serde(default)]
        uncommitted: usize,
    },
    /// A decision the loop waits for (a gate): what it asks, and the answers offered, which
    /// the chat shows as buttons.
    Gate(GateMessage),
    /// `loop notify MSG`: a message of the user's own.
    Text(String),
}

/// What a gate's message shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GateMessage {
    pub goal: String,
    /// `G1`, …
    pub id: String,
    pub kind: crate::m1::GateKind,
    pub step: u32,
    /// The plan's steps, for a plan's gate.
    pub steps: Vec<String>,
    pub question: Option<String>,
    /// The answers offered (buttons); empty: a free-text answer (a reply).
    pub options: Vec<String>,
    /// The fingerprint of what is shown, which each button carries.
    pub shown: String,
    /// How to decide it from the shell.
    pub how: String,
    /// For a FAILED gate: what the agent last said before its verdict line, and the end of
    /// its stderr.
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(default)]
    pub stderr_tail: Vec<String>,
}

impl GateMessage {
    /// A button's `callback_data`: the gate, the option's index, and the fingerprint of what
    /// was shown; all looked up again when it is tapped (a client can forge it).
    #[must_use]
    pub fn button_data(&self, option: usize) -> String {
        format!("{} {option} {}", self.id, self.shown)
    }

    /// The inline keyboard: one row of buttons, one per option.
    #[must_use]
    pub fn keyboard(&self) -> Option<serde_json::Value> {
        if self.options.is_empty() {
            return None;
        }
        let row: Vec<serde_json::Value> = self
            .options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                serde_json::json!({
                    "text": render::button_label(self.kind, o),
                    "callback_data": self.button_data(i),
                })
            })
            .collect();
        Some(serde_json::json!({ "inline_keyboard": [row] }))
    }
}

/// A button's `callback_data` read back: gate id, option index, fingerprint.
#[must_use]
pub fn parse_button_data(data: &str) -> Option<(String, usize, String)> {
    let mut w = data.split(' ');
    let (id, i, shown) = (w.next()?, w.next()?, w.next()?);
    if w.next().is_some() || crate::m1::gates::gate_number(id).is_none() {
        return None;
    }
    Some((id.to_owned(), i.parse().ok()?, shown.to_owned()))
}

impl Event {
    /// A short lower-case name for log lines and outbox records.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::StepDone { .. } => "step-done",
            Event::Waiting { .. } => "waiting",
            Event::Failed { .. } => "failed",
            Event::Done { .. } => "done",
            Event::Gate(_) => "gate",
            Event::Text(_) => "text",
        }
    }
}

/// Where the loop's events go. Never fails: failures are logged (redacted) and swallowed, since
/// a lost network must not stop a loop that is otherwise working.
pub trait Notifier: Send {
    fn notify(&mut self, event: &Event);
}

/// Telegram when `TELEGRAM_BOT_TOKEN` and `TELEGRAM_CHAT_ID` are set, else the log-only notifier
/// (which writes the message into `state/loop.log`, plus, once per process, one hint line saying
/// how to set Telegram up). With Telegram, each message is queued in the outbox and sent by a
/// delivery process, `deliverer_binary __deliver` (the `loop` binary), which is started at once
/// for a backlog a previous command left; without a binary, messages only queue, for the next
/// command that delivers.
#[must_use]
pub fn from_env(state_dir: &Path, deliverer_binary: Option<&Path>) -> Box<dyn Notifier> {
    match telegram::Config::from_env() {
        Ok(Some(config)) => {
            let notifier = deliverer::Queued::new(state_dir, config, deliverer_binary);
            notifier.deliver();
            Box::new(notifier)
        }
        Ok(None) => Box::new(log_only::LogNotifier::new(state_dir)),
        Err(bad) => {
            let line = redact(&format!("notify: Telegram is not used: {bad}"));
            crate::errln!("loop: {line}");
            let _ = crate::decision_log::append(state_dir, &line);
            Box::new(log_only::LogNotifier::new(state_dir))
        }
    }
}

/// The notifier that writes each message to the log only, whatever the settings (the loop of
/// a parallel step, whose parallel loop tells the person).
#[must_use]
pub fn log_only(state_dir: &Path) -> Box<dyn Notifier> {
    Box::new(log_only::LogNotifier::new(state_dir))
}

/// Starts a delivery process (`binary __deliver`) for what the outbox still holds, unless one
/// is at work, and returns at once. Without Telegram settings, nothing.
pub(crate) fn deliver(state_dir: &Path, binary: &Path) {
    if let Ok(Some(_)) = telegram::Config::from_env() {
        deliverer::Launcher::new(state_dir, binary).deliver();
    }
}

/// Sends whatever the outbox still holds, oldest first, here and now, waiting a little for a
/// process that is sending from it; should it stop waiting with messages pending, it starts a
/// delivery process (`deliverer_binary`) in its place. Without a token nothing is sent and
/// everything stays pending.
#[must_use]
pub fn flush(state_dir: &Path, deliverer_binary: Option<&Path>) -> FlushReport {
    match telegram::Config::from_env() {
        Ok(Some(config)) => {
            delivery::TelegramNotifier::new(state_dir, config).flush_backlog(deliverer_binary)
        }
        Ok(None) => delivery::report_unconfigured(state_dir, setup_hint().unwrap_or_default()),
        Err(bad) => delivery::report_unconfigured(state_dir, &redact(&bad)),
    }
}

/// Whether a Telegram chat is set up (`TELEGRAM_BOT_TOKEN` and `TELEGRAM_CHAT_ID`, well
/// formed): only then is a person told they may decide in the chat.
#[must_use]
pub fn chat_set_up() -> bool {
    matches!(telegram::Config::from_env(), Ok(Some(_)))
}

/// One line for `loop status` when Telegram is not set up, saying how to set it up.
#[must_use]
pub fn setup_hint() -> Option<&'static str> {
    telegram::missing_settings_hint()
}
