//! `loop notify MSG` and `loop notify --flush`: the exec bridge's notify, through the
//! same outbox and retries as the loop's own messages. Here the command is the sender: it
//! waits for its own message (each try bounded), and its exit code says whether it was sent.

use std::path::Path;

use crate::error::Error;
use crate::exit::Status;

use crate::notifier::delivery::{TelegramNotifier, WAIT_FOR_SENDER, busy};
use crate::notifier::line::{Line, Waited};
use crate::notifier::outbox::Settled;
use crate::notifier::telegram::Config;
use crate::notifier::{Event, Notifier, log_only::LogNotifier, setup_hint};

/// `loop notify MSG`, or with no message `loop notify --flush` (a message flushes the backlog
/// too, oldest first). Exit 0 when the message (and the backlog) went out, or went
/// to the log because Telegram is not set up; 1 when something is still pending or was
/// rejected (already reported on stderr), or another process sending from the outbox had not
/// sent it after [`WAIT_FOR_SENDER`]; 2 for an empty message or bad settings.
///
/// # Errors
/// [`Error::BadInput`] for an empty message, bad Telegram settings, or `--flush` with
/// no Telegram configured.
pub(crate) fn notify(state_dir: &Path, message: Option<&str>) -> crate::error::Result<Status> {
    let message = message.map(str::trim);
    if message == Some("") {
        return Err(Error::bad_input(
            "loop notify: the message is empty; give the text to send",
        ));
    }
    let config =
        Config::from_env().map_err(|bad| Error::bad_input(crate::notifier::redact(&bad)))?;
    let Some(config) = config else {
        let hint = setup_hint().unwrap_or_default();
        if let Some(text) = message {
            LogNotifier::new(state_dir).notify(&Event::Text(text.to_string()));
            // Which log: outside a loop it is the per-user one, which nobody would guess.
            crate::errln!(
                "loop: {hint}; the message was written to {} instead",
                crate::decision_log::path(state_dir).display()
            );
            return Ok(Status::Ok);
        }
        let pending = crate::notifier::flush(state_dir, None).pending;
        return Err(Error::bad_input(format!(
            "loop notify --flush: {hint} ({pending} message(s) pending)"
        )));
    };
    let sender = TelegramNotifier::new(state_dir, config);
    let Some(text) = message else {
        let report = sender.flush_backlog(std::env::current_exe().ok().as_deref());
        crate::outln!(
            "sent {}, still pending {}, rejected {}",
            report.sent,
            report.pending,
            report.rejected
        );
        return Ok(if report.pending == 0 && report.rejected == 0 {
            Status::Ok
        } else {
            Status::Failed
        });
    };
    let messages = TelegramNotifier::messages(&Event::Text(text.to_string()));
    if let Err(e) = sender.queue(&messages) {
        sender.report(&format!(
            "notify: could not queue the message ({e:#}); sending it directly"
        ));
        let report = sender.send_directly(&messages);
        return Ok(if report.pending == 0 {
            Status::Ok
        } else {
            Status::Failed
        });
    }
    let ids: Vec<String> = messages.into_iter().map(|m| m.id).collect();
    // Failures were already reported on stderr and in the log by whoever settled them.
    Ok(if send_own(&sender, &ids, state_dir)? {
        Status::Ok
    } else {
        Status::Failed
    })
}

/// Sends the messages `ids`, just queued: in a turn of this process, after the backlog; or,
/// while another process is sending from the outbox, by waiting for it to (at most
/// [`WAIT_FOR_SENDER`]). Whether every one of them was sent.
fn send_own(sender: &TelegramNotifier, ids: &[String], state_dir: &Path) -> anyhow::Result<bool> {
    let settled = || {
        sender
            .outbox()
            .pending()
            .is_ok_and(|p| p.iter().all(|m| !ids.contains(&m.id)))
    };
    // The sender here: a delivery process started meanwhile does not take its place.
    Line::keep_place();
    let why = match sender
        .line()
        .wait_turn(WAIT_FOR_SENDER, Some(WAIT_FOR_SENDER), settled)?
    {
        Waited::Turn(sending) => {
            sender.turn(&sending)?;
            // This turn said what went wrong already.
            return all_sent(sender, ids, false);
        }
        Waited::Done => {
            // Another process sent it; one that came meanwhile may have found this one in
            // line and left: whatever is pending gets a delivery process.
            if let Ok(exe) = std::env::current_exe() {
                crate::notifier::deliver(state_dir, &exe);
            }
            return all_sent(sender, ids, true);
        }
        Waited::Queued => format!(
            "the message is queued in {}; another process, next in line to send, had not sent \
             it after {} (Telegram may not be answering) and sends it once it can",
            sender.outbox().path().display(),
            crate::duration::human(WAIT_FOR_SENDER)
        ),
        Waited::Busy(holder) => {
            // This process leaves the line: a delivery process takes its place.
            if let Ok(exe) = std::env::current_exe() {
                crate::notifier::deliver(state_dir, &exe);
            }
            busy(&holder, WAIT_FOR_SENDER)
        }
    };
    sender.report(&format!("notify: {why}"));
    Ok(false)
}

/// Whether the messages `ids` were all sent; with `say`, a rejection (by another process,
/// which said it only in the log) is said on stderr too.
fn all_sent(sender: &TelegramNotifier, ids: &[String], say: bool) -> anyhow::Result<bool> {
    let pending = sender.outbox().pending()?;
    let mut all = true;
    for id in ids {
        if pending.iter().any(|m| &m.id == id) {
            all = false;
        } else if let Some(Settled::Rejected(why)) = sender.outbox().settlement(id)? {
            if say {
                crate::errln!("loop: notify: Telegram rejected the message: {why}");
            }
            all = false;
        }
    }
    Ok(all)
}
