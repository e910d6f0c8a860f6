//! At-least-once delivery: a message is queued in the outbox, durably, then sent, oldest first,
//! by whichever process has its turn in the line of senders ([`super::line`]).
//!
//! Queueing is quick and is all a runner does; sending waits on the network and is done beside
//! the loop, by a delivery process ([`super::deliverer`]), or by `loop notify` for its own
//! message. A turn sends until the outbox is empty, reading it again so that messages queued
//! meanwhile go too; a message Telegram refuses for good (400, 403) is marked rejected and
//! reported once, with the API's own description; one that could not be delivered now stays
//! pending, and the turn stops there so that messages keep their order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Event;
use super::line::{Line, Sending, Waited};
use super::outbox::{Message, Outbox};
use super::render::render;
use super::split::split;
use super::telegram::{Client, Config, Delivery};

/// How long a command waits for another process that is sending from the outbox, before it
/// says its message is still pending. Each of that process's tries may take half a minute on a
/// Telegram that does not answer; a command a person waits on gives up sooner.
pub(crate) const WAIT_FOR_SENDER: Duration = Duration::from_secs(10);

/// What one flush of the outbox did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// Messages Telegram accepted in this flush.
    pub sent: usize,
    /// Messages still waiting in the outbox afterwards.
    pub pending: usize,
    /// Messages Telegram refused for good (each reported once, then dropped).
    pub rejected: usize,
    /// Why pending messages were not sent (redacted), if any are pending.
    pub error: Option<String>,
}

/// The report of a flush that could not send: everything pending stays so, for `why`.
pub(crate) fn report_unconfigured(state_dir: &Path, why: &str) -> FlushReport {
    let pending = Outbox::new(state_dir).pending().map_or(0, |p| p.len());
    FlushReport {
        pending,
        error: Some(why.to_string()),
        ..FlushReport::default()
    }
}

/// Queues messages for Telegram and sends them, by way of the outbox.
#[derive(Debug, Clone)]
pub(crate) struct TelegramNotifier {
    state_dir: PathBuf,
    outbox: Outbox,
    line: Line,
    client: Client,
}

impl TelegramNotifier {
    pub(crate) fn new(state_dir: &Path, config: Config) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            outbox: Outbox::new(state_dir),
            line: Line::new(state_dir),
            client: Client::new(config),
        }
    }

    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub(crate) fn line(&self) -> &Line {
        &self.line
    }

    pub(crate) fn config(&self) -> &Config {
        &self.client.config
    }

    pub(crate) fn log(&self, line: &str) {
        let _ = crate::decision_log::append(&self.state_dir, &self.client.redact(line));
    }

    /// Logs a problem and says it on stderr too, since nobody may be reading the log.
    pub(crate) fn report(&self, line: &str) {
        let line = self.client.redact(line);
        crate::errln!("loop: {line}");
        let _ = crate::decision_log::append(&self.state_dir, &line);
    }

    /// The messages that tell `event`: rendered, split if long, a gate's buttons under the last.
    pub(crate) fn messages(event: &Event) -> Vec<Message> {
        match event {
            Event::Gate(g) => parts(
                event.kind(),
                &render(event),
                g.keyboard().as_ref(),
                Some(&format!("{} {}", g.id, g.shown)),
            ),
            Event::Done {
                once: Some(key), ..
            } => parts(event.kind(), &render(event), None, None)
                .into_iter()
                .enumerate()
                .map(|(i, m)| Message {
                    id: format!("{key}.{i}"),
                    ..m
                })
                .collect(),
            _ => parts(event.kind(), &render(event), None, None),
        }
    }

    /// The messages of a text already in Bot API HTML; `kind` names them in log lines.
    pub(crate) fn html_messages(kind: &str, html: &str) -> Vec<Message> {
        parts(kind, html, None, None)
    }

    /// Puts `messages` in the outbox, durably, in order: from then on they are sent whatever
    /// happens to this process.
    ///
    /// # Errors
    /// When the outbox cannot be written (disk full, permissions).
    pub(crate) fn queue(&self, messages: &[Message]) -> anyhow::Result<()> {
        self.outbox.append(messages)
    }

    /// Sends `messages` without the outbox, for when it cannot be written: still tells the
    /// user, just without the guarantee.
    pub(crate) fn send_directly(&self, messages: &[Message]) -> FlushReport {
        let mut report = FlushReport::default();
        for m in messages {
            match self.client.send_message(&m.text, m.html, m.markup.as_ref()) {
                Delivery::Accepted(id) => {
                    self.note_gate_message(m, id);
                    report.sent += 1;
                }
                Delivery::Rejected(why) | Delivery::Failed(why) => {
                    self.report(&format!(
                        "notify: the {} message was not delivered: {why}",
                        m.event
                    ));
                    report.pending += 1;
                    report.error = Some(why);
                }
            }
        }
        report
    }

    /// Sends whatever the outbox holds, oldest first, here and now, waiting a little (at most
    /// [`WAIT_FOR_SENDER`]) for another process that is sending; reports what happened. Should
    /// it stop waiting in line with messages pending, it starts a delivery process
    /// (`deliverer_binary`, the `loop` binary) in its place, so that none is left behind.
    pub(crate) fn flush_backlog(&self, deliverer_binary: Option<&Path>) -> FlushReport {
        self.flush_within(WAIT_FOR_SENDER, deliverer_binary)
            .unwrap_or_else(|e| {
                let why = self.client.redact(&format!("{e:#}"));
                self.report(&format!("notify: could not read the outbox: {why}"));
                FlushReport {
                    error: Some(why),
                    ..FlushReport::default()
                }
            })
    }

    fn flush_within(
        &self,
        patience: Duration,
        deliverer_binary: Option<&Path>,
    ) -> anyhow::Result<FlushReport> {
        let empty = || self.outbox.pending().is_ok_and(|p| p.is_empty());
        Line::keep_place();
        let deliver = || {
            if let Some(binary) = deliverer_binary {
                super::deliverer::Launcher::new(&self.state_dir, binary).deliver();
            }
        };
        let why = match self.line.wait_turn(patience, Some(patience), empty)? {
            Waited::Turn(sending) => return self.turn(&sending),
            Waited::Done => {
                // Empty when it looked; a message queued since, by a process that found this
                // one in line, gets a delivery process.
                deliver();
                return Ok(FlushReport::default());
            }
            Waited::Queued => format!(
                "another process is next in line to send the outbox and had not sent it after \
                 {}; the messages stay queued for it",
                crate::duration::human(patience)
            ),
            Waited::Busy(holder) => {
                deliver();
                busy(&holder, patience)
            }
        };
        self.report(&format!("notify: {why}"));
        Ok(FlushReport {
            pending: self.outbox.pending()?.len(),
            error: Some(why),
            ..FlushReport::default()
        })
    }

    /// One turn of the process whose turn it is: sends every pending message, oldest first,
    /// reading the outbox again until it is empty or a message could not be delivered.
    ///
    /// # Errors
    /// When the outbox cannot be read or a settlement cannot be written.
    pub(crate) fn turn(&self, _sending: &Sending) -> anyhow::Result<FlushReport> {
        let mut report = FlushReport::default();
        let mut settled_any = false;
        loop {
            let pending = self.outbox.pending()?;
            if pending.is_empty() {
                break;
            }
            for (i, m) in pending.iter().enumerate() {
                match self.client.send_message(&m.text, m.html, m.markup.as_ref()) {
                    Delivery::Accepted(id) => self.sent(m, id, &mut report)?,
                    Delivery::Rejected(why) => self.rejected(m, &why, &mut report)?,
                    Delivery::Failed(why) => {
                        report.pending = pending.len() - i;
                        self.report(&format!(
                            "notify: {} message(s) not delivered yet, kept in {}: {why}",
                            report.pending,
                            self.outbox.path().display()
                        ));
                        report.error = Some(why);
                        return Ok(report);
                    }
                }
                settled_any = true;
            }
        }
        if settled_any && let Err(e) = self.outbox.compact() {
            self.log(&format!("notify: could not compact the outbox: {e:#}"));
        }
        Ok(report)
    }

    fn sent(&self, m: &Message, id: Option<i64>, report: &mut FlushReport) -> anyhow::Result<()> {
        self.note_gate_message(m, id);
        self.outbox.mark_sent(&m.id)?;
        report.sent += 1;
        self.log(&format!(
            "notify: sent the {} message {} to Telegram",
            m.event,
            short(&m.id)
        ));
        Ok(())
    }

    fn rejected(&self, m: &Message, why: &str, report: &mut FlushReport) -> anyhow::Result<()> {
        self.outbox.mark_rejected(&m.id, why)?;
        report.rejected += 1;
        self.report(&format!(
            "notify: Telegram rejected the {} message {} ({why}); it will not be retried. \
             Check TELEGRAM_CHAT_ID and that the bot may write to that chat.",
            m.event,
            short(&m.id)
        ));
        Ok(())
    }

    /// Notes which gate a sent message shows, so that a reply to it answers that gate.
    fn note_gate_message(&self, m: &Message, message_id: Option<i64>) {
        let (Some(gate), Some(mid)) = (&m.gate, message_id) else {
            return;
        };
        if let Err(e) = super::gate_messages::note(&self.state_dir, mid, gate) {
            self.report(&format!(
                "notify: could not note that message {mid} shows gate {gate} (a reply to it will \
                 not be understood; `/answer` still works): {e:#}"
            ));
        }
    }
}

/// Why a command stopped waiting for the process sending from the outbox (its pid as it
/// wrote it).
pub(crate) fn busy(holder: &str, waited: Duration) -> String {
    let who = if holder.is_empty() {
        "another process".to_owned()
    } else {
        format!("process {holder}")
    };
    format!(
        "{who} is sending the outbox and had not finished after {} (Telegram may not be \
         answering); the messages stay queued and go out in order once Telegram answers",
        crate::duration::human(waited)
    )
}

/// `html` as queued messages: split if long, the buttons under the last part.
fn parts(
    kind: &str,
    html: &str,
    markup: Option<&serde_json::Value>,
    gate: Option<&str>,
) -> Vec<Message> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // Every message queued is made here: what an agent or a plan wrote reaches the chat with
    // no control character and no bidirectional override, each shown as an escape.
    let parts = split(&crate::text::shown(html), true);
    let last = parts.len().saturating_sub(1);
    parts
        .into_iter()
        .enumerate()
        .map(|(i, text)| Message {
            id: uuid::Uuid::new_v4().to_string(),
            at: now.clone(),
            event: kind.to_string(),
            text,
            html: true,
            markup: markup.filter(|_| i == last).cloned(),
            gate: gate.map(str::to_owned),
        })
        .collect()
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
