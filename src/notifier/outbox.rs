//! `state/outbox.jsonl`: messages waiting to be delivered, so that none is lost when the
//! network, Telegram or the process dies.
//!
//! The file is append-only JSON lines: a `message` record is written (and fsynced) before the
//! first attempt to send it, and a `sent` or `rejected` record naming its id once that is
//! settled. Appending a settlement instead of rewriting the file means a message appended by
//! another process meanwhile can never be lost. `outbox.lock` is held for each short read or
//! write of the file, so several `loop` processes may queue at once; who sends is decided by
//! the line of senders ([`super::line`]). [`Outbox::compact`], an atomic rewrite under the
//! lock, drops the messages settled, keeping the last few settlements, so that a process
//! waiting for its message to be sent by another can still learn how it went.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// One message as queued: its text is final (rendered and split), so a later command can send
/// it without knowing what the event was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Message {
    pub id: String,
    /// When it was queued (RFC 3339, UTC).
    pub at: String,
    /// The event kind it came from, for log lines.
    pub event: String,
    pub text: String,
    /// `parse_mode: HTML` when true; plain text otherwise.
    pub html: bool,
    /// The buttons under it (`reply_markup`), for a gate's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markup: Option<serde_json::Value>,
    /// The gate it shows, as `ID FINGERPRINT`: once sent, its message id is noted for the gate,
    /// so that a reply to it answers the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Record {
    Message(Message),
    Sent { id: String },
    Rejected { id: String, error: String },
}

impl Record {
    /// The id of a message queued under a key of its own (not a random id): such a message
    /// is queued once, however often it is told.
    fn key(&self) -> Option<&str> {
        match self {
            Record::Message(m) if uuid::Uuid::parse_str(&m.id).is_err() => Some(&m.id),
            _ => None,
        }
    }
}

/// The outbox of one loop's state directory.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    dir: PathBuf,
}

/// How a message was settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    Sent,
    /// Refused for good, with Telegram's description.
    Rejected(String),
}

/// Settlements kept by [`Outbox::compact`] without their messages: enough for a process that
/// waits a few seconds for another to send its message to find out how that went.
const KEPT_SETTLEMENTS: usize = 64;

impl Outbox {
    pub(crate) fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.to_path_buf(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        crate::layout::Layout::dir(&self.dir).outbox()
    }

    fn lock(&self, path: &Path) -> anyhow::Result<crate::lockfile::Held> {
        crate::dirs::create_state_dir(&self.dir)
            .with_context(|| format!("while creating {}", self.dir.display()))?;
        crate::lockfile::exclusive(path)
    }

    /// Queues `messages`, durably, in order. A message whose id is a key of its own (not a
    /// random one) and is in the outbox already, pending or settled, is not queued again:
    /// looked for under the same lock as the append, so two processes never both queue it.
    pub(crate) fn append(&self, messages: &[Message]) -> anyhow::Result<()> {
        let records: Vec<Record> = messages.iter().cloned().map(Record::Message).collect();
        self.append_records(&records)
    }

    pub(crate) fn mark_sent(&self, id: &str) -> anyhow::Result<()> {
        self.append_records(&[Record::Sent { id: id.to_string() }])
    }

    pub(crate) fn mark_rejected(&self, id: &str, error: &str) -> anyhow::Result<()> {
        let error = error.to_string();
        self.append_records(&[Record::Rejected {
            id: id.to_string(),
            error,
        }])
    }

    fn append_records(&self, records: &[Record]) -> anyhow::Result<()> {
        let _lock = self.lock(&crate::layout::Layout::dir(&self.dir).outbox_lock())?;
        let known: std::collections::HashSet<String> = if records.iter().any(|r| r.key().is_some())
        {
            records_in(&self.read()?)
                .into_iter()
                .map(|r| match r {
                    Record::Message(m) => m.id,
                    Record::Sent { id } | Record::Rejected { id, .. } => id,
                })
                .collect()
        } else {
            std::collections::HashSet::new()
        };
        let records: Vec<&Record> = records
            .iter()
            .filter(|r| r.key().is_none_or(|k| !known.contains(k)))
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        let path = self.path();
        let mut f = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("while opening {}", path.display()))?;
        let mut buf = String::new();
        // A crash mid-append leaves a line without its newline; start on a fresh line.
        if f.metadata()?.len() > 0 {
            let mut last = [0u8; 1];
            f.seek(SeekFrom::End(-1))?;
            f.read_exact(&mut last)?;
            if last[0] != b'\n' {
                buf.push('\n');
            }
        }
        for r in records {
            buf.push_str(&serde_json::to_string(r)?);
            buf.push('\n');
        }
        f.write_all(buf.as_bytes())
            .and_then(|()| f.sync_data())
            .with_context(|| format!("while appending to {}", path.display()))
    }

    /// Messages not yet sent or rejected, oldest first.
    pub(crate) fn pending(&self) -> anyhow::Result<Vec<Message>> {
        let _lock = self.lock(&crate::layout::Layout::dir(&self.dir).outbox_lock())?;
        Ok(pending_in(&self.read()?))
    }

    /// How message `id` was settled: `None` while it is pending, or once its settlement is no
    /// longer kept (see [`KEPT_SETTLEMENTS`]).
    pub(crate) fn settlement(&self, id: &str) -> anyhow::Result<Option<Settled>> {
        let _lock = self.lock(&crate::layout::Layout::dir(&self.dir).outbox_lock())?;
        Ok(records_in(&self.read()?).into_iter().find_map(|r| match r {
            Record::Sent { id: s } if s == id => Some(Settled::Sent),
            Record::Rejected { id: s, error } if s == id => Some(Settled::Rejected(error)),
            _ => None,
        }))
    }

    fn read(&self) -> anyhow::Result<String> {
        match std::fs::read_to_string(self.path()) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e).with_context(|| format!("while reading {}", self.path().display())),
        }
    }

    /// Drops settled messages, keeping pending ones in order and the last settlements (an
    /// atomic rewrite under the lock, so a concurrent append either lands before it and is
    /// kept, or waits for it).
    pub(crate) fn compact(&self) -> anyhow::Result<()> {
        let _lock = self.lock(&crate::layout::Layout::dir(&self.dir).outbox_lock())?;
        let text = self.read()?;
        let pending = pending_in(&text);
        let settlements: Vec<Record> = records_in(&text)
            .into_iter()
            .filter(|r| !matches!(r, Record::Message(_)))
            .collect();
        let kept = &settlements[settlements.len().saturating_sub(KEPT_SETTLEMENTS)..];
        if text.lines().filter(|l| !l.trim().is_empty()).count() == pending.len() + kept.len() {
            return Ok(());
        }
        let mut out = String::new();
        for m in pending {
            out.push_str(&serde_json::to_string(&Record::Message(m))?);
            out.push('\n');
        }
        for r in kept {
            out.push_str(&serde_json::to_string(r)?);
            out.push('\n');
        }
        let path = self.path();
        let mut f = atomic_write_file::AtomicWriteFile::options()
            .open(&path)
            .with_context(|| format!("while rewriting {}", path.display()))?;
        f.write_all(out.as_bytes())?;
        f.commit()
            .with_context(|| format!("while rewriting {}", path.display()))
    }
}

/// The pending messages of an outbox file's text. Lines that do not parse (a torn last line
/// after a crash, a hand edit) are skipped rather than blocking every later message.
fn pending_in(text: &str) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut settled = std::collections::HashSet::new();
    for record in records_in(text) {
        match record {
            Record::Message(m) => messages.push(m),
            Record::Sent { id } | Record::Rejected { id, .. } => {
                settled.insert(id);
            }
        }
    }
    messages.retain(|m| !settled.contains(&m.id));
    messages
}

/// The records of an outbox file's text, skipping lines that do not parse.
fn records_in(text: &str) -> Vec<Record> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str::<Record>(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str) -> Message {
        Message {
            id: id.into(),
            at: "2026-01-01T00:00:00Z".into(),
            event: "text".into(),
            text: format!("text of {id}"),
            html: true,
            markup: None,
            gate: None,
        }
    }

    #[test]
    fn settled_messages_are_no_longer_pending_and_order_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ob = Outbox::new(dir.path());
        ob.append(&[msg("a"), msg("b"), msg("c")]).unwrap();
        ob.mark_sent("b").unwrap();
        ob.mark_rejected("a", "400 Bad Request: chat not found")
            .unwrap();
        assert_eq!(ob.pending().unwrap(), vec![msg("c")]);
        ob.append(&[msg("d")]).unwrap();
        assert_eq!(ob.pending().unwrap(), vec![msg("c"), msg("d")]);
    }

    #[test]
    fn a_torn_last_line_does_not_swallow_the_next_message() {
        let dir = tempfile::tempdir().unwrap();
        let ob = Outbox::new(dir.path());
        ob.append(&[msg("a")]).unwrap();
        let mut f = OpenOptions::new().append(true).open(ob.path()).unwrap();
        f.write_all(br#"{"kind":"message","id":"torn","te"#)
            .unwrap();
        ob.append(&[msg("b")]).unwrap();
        assert_eq!(ob.pending().unwrap(), vec![msg("a"), msg("b")]);
    }

    #[test]
    fn compact_keeps_pending_messages_and_the_last_settlements_without_their_messages() {
        let dir = tempfile::tempdir().unwrap();
        let ob = Outbox::new(dir.path());
        ob.append(&[msg("a"), msg("b"), msg("c")]).unwrap();
        ob.mark_sent("a").unwrap();
        ob.mark_rejected("c", "400 Bad Request: chat not found")
            .unwrap();
        ob.compact().unwrap();
        let text = std::fs::read_to_string(ob.path()).unwrap();
        assert_eq!(text.lines().count(), 3, "b, and how a and c went: {text}");
        assert!(!text.contains("text of a"), "{text}");
        assert_eq!(ob.pending().unwrap(), vec![msg("b")]);
        assert_eq!(ob.settlement("a").unwrap(), Some(Settled::Sent));
        assert_eq!(
            ob.settlement("c").unwrap(),
            Some(Settled::Rejected("400 Bad Request: chat not found".into()))
        );
        assert_eq!(ob.settlement("b").unwrap(), None);

        // Only the last settlements are kept.
        let many: Vec<Message> = (0..KEPT_SETTLEMENTS + 5)
            .map(|i| msg(&format!("m{i}")))
            .collect();
        ob.append(&many).unwrap();
        for m in &many {
            ob.mark_sent(&m.id).unwrap();
        }
        ob.compact().unwrap();
        let text = std::fs::read_to_string(ob.path()).unwrap();
        assert_eq!(text.lines().count(), 1 + KEPT_SETTLEMENTS, "{text}");
        assert_eq!(ob.settlement("a").unwrap(), None);
        assert_eq!(
            ob.settlement(&format!("m{}", KEPT_SETTLEMENTS + 4))
                .unwrap(),
            Some(Settled::Sent)
        );
        assert_eq!(ob.pending().unwrap(), vec![msg("b")]);
    }
}
