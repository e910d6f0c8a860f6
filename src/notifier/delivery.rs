//! At-least-once delivery: queue in the outbox, then send everything pending, oldest first.
//!
//! A message that Telegram refuses for good (400, 403) is marked rejected and reported once,
//! in the log and on stderr, with the API's own description; one that could not be delivered
//! now stays pending, and the flush stops there so that messages keep their order.

use std::path::{Path, PathBuf};

use super::outbox::{Message, Outbox};
use super::render::render;
use super::split::split;
use super::telegram::{Client, Config, Delivery};
use super::{Event, Notifier};

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
    pub(crate) rejected_ids: Vec<String>,
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

/// Sends through Telegram, by way of the outbox.
#[derive(Debug)]
pub(crate) struct TelegramNotifier {
    state_dir: PathBuf,
    outbox: Outbox,
    client: Client,
}

impl TelegramNotifier {
    pub(crate) fn new(state_dir: &Path, config: Config) -> Self {
        Self {
            state_dir: state_dir.to_path_buf(),
            outbox: Outbox::new(state_dir),
            client: Client::new(config),
        }
    }

    fn log(&self, line: &str) {
        let _ = crate::decision_log::append(&self.state_dir, &self.client.redact(line));
    }

    /// Logs a problem and says it on stderr too, since nobody may be reading the log.
    fn report(&self, line: &str) {
        let line = self.client.redact(line);
        crate::errln!("loop: {line}");
        let _ = crate::decision_log::append(&self.state_dir, &line);
    }

    /// Queues `event` (rendered and split) and delivers everything pending. Returns the ids of
    /// this event's messages, and the flush's report.
    pub(crate) fn send_event(&self, event: &Event) -> (Vec<String>, FlushReport) {
        match event {
            Event::Gate(g) => self.send_parts(
                event.kind(),
                &render(event),
                g.keyboard().as_ref(),
                Some(&format!("{} {}", g.id, g.shown)),
            ),
            _ => self.send_html(event.kind(), &render(event)),
        }
    }

    /// Queues a message already in Bot API HTML (split if long) and delivers everything
    /// pending; `kind` names it in log lines.
    pub(crate) fn send_html(&self, kind: &str, html: &str) -> (Vec<String>, FlushReport) {
        self.send_parts(kind, html, None, None)
    }

    /// [`Self::send_html`], with buttons under its last part and the gate it shows.
    fn send_parts(
        &self,
        kind: &str,
        html: &str,
        markup: Option<&serde_json::Value>,
        gate: Option<&str>,
    ) -> (Vec<String>, FlushReport) {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let parts = split(html, true);
        let last = parts.len().saturating_sub(1);
        let messages: Vec<Message> = parts
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
            .collect();
        if messages.is_empty() {
            self.log(&format!(
                "notify: the {kind} message is empty; nothing sent"
            ));
            return (Vec::new(), FlushReport::default());
        }
        let ids = messages.iter().map(|m| m.id.clone()).collect();
        if let Err(e) = self.outbox.append(&messages) {
            // No outbox (disk full, permissions): still try to tell the user, just without the
            // guarantee.
            self.report(&format!(
                "notify: could not queue the {kind} message ({e:#}); sending it directly"
            ));
            let mut report = FlushReport::default();
            for m in &messages {
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
            return (ids, report);
        }
        (ids, self.flush_backlog())
    }

    /// Sends every pending message, oldest first, and reports what happened.
    pub(crate) fn flush_backlog(&self) -> FlushReport {
        match self.deliver_pending() {
            Ok(report) => report,
            Err(e) => {
                let why = self.client.redact(&format!("{e:#}"));
                self.report(&format!("notify: could not read the outbox: {why}"));
                FlushReport {
                    error: Some(why),
                    ..FlushReport::default()
                }
            }
        }
    }

    fn deliver_pending(&self) -> anyhow::Result<FlushReport> {
        let _sending = self.outbox.lock_sending()?;
        let pending = self.outbox.pending()?;
        let mut report = FlushReport::default();
        for (i, m) in pending.iter().enumerate() {
            match self.client.send_message(&m.text, m.html, m.markup.as_ref()) {
                Delivery::Accepted(id) => {
                    self.note_gate_message(m, id);
                    self.outbox.mark_sent(&m.id)?;
                    report.sent += 1;
                    self.log(&format!(
                        "notify: sent the {} message {} to Telegram",
                        m.event,
                        short(&m.id)
                    ));
                }
                Delivery::Rejected(why) => {
                    self.outbox.mark_rejected(&m.id, &why)?;
                    report.rejected += 1;
                    report.rejected_ids.push(m.id.clone());
                    self.report(&format!(
                        "notify: Telegram rejected the {} message {} ({why}); it will not be retried. \
                         Check TELEGRAM_CHAT_ID and that the bot may write to that chat.",
                        m.event,
                        short(&m.id)
                    ));
                }
                Delivery::Failed(why) => {
                    report.pending = pending.len() - i;
                    self.report(&format!(
                        "notify: {} message(s) not delivered yet, kept in {} for the next loop \
                         command or `loop notify --flush`: {why}",
                        report.pending,
                        self.outbox.path().display()
                    ));
                    report.error = Some(why);
                    break;
                }
            }
        }
        if report.pending == 0
            && !pending.is_empty()
            && let Err(e) = self.outbox.compact()
        {
            self.log(&format!("notify: could not compact the outbox: {e:#}"));
        }
        Ok(report)
    }
}

impl TelegramNotifier {
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

impl Notifier for TelegramNotifier {
    fn notify(&mut self, event: &Event) {
        let _ = self.send_event(event);
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
