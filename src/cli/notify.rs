//! `loop notify MSG` and `loop notify --flush`: the exec bridge's notify, through the
//! same outbox and retries as the loop's own messages.

use std::path::Path;

use crate::error::Error;
use crate::exit::Status;

use crate::notifier::delivery::TelegramNotifier;
use crate::notifier::telegram::Config;
use crate::notifier::{Event, Notifier, log_only::LogNotifier, setup_hint};

/// `loop notify MSG`, or with no message `loop notify --flush` (a message flushes the backlog
/// too, oldest first). Exit 0 when the message (and the backlog) went out, or went
/// to the log because Telegram is not set up; 1 when something is still pending or was
/// rejected (already reported on stderr); 2 for an empty message or bad settings.
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
        let pending = crate::notifier::flush(state_dir).pending;
        return Err(Error::bad_input(format!(
            "loop notify --flush: {hint} ({pending} message(s) pending)"
        )));
    };
    let notifier = TelegramNotifier::new(state_dir, config);
    let Some(text) = message else {
        let report = notifier.flush_backlog();
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
    let (ids, report) = notifier.send_event(&Event::Text(text.to_string()));
    let pending_ids = crate::notifier::outbox::Outbox::new(state_dir)
        .pending()
        .map(|p| p.into_iter().map(|m| m.id).collect::<Vec<_>>())
        .unwrap_or_default();
    let delivered = ids
        .iter()
        .all(|id| !pending_ids.contains(id) && !report.rejected_ids.contains(id));
    // Failures were already reported on stderr and in the log by the delivery itself.
    Ok(if delivered && report.error.is_none() {
        Status::Ok
    } else {
        Status::Failed
    })
}
