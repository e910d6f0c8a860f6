//! `loop telegram`: a long-running bot that long-polls `getUpdates` and lets the configured
//! chat drive loops.
//!
//! It must outlive the network: transport errors, 5xx and Telegram outages are waited out
//! with backoff, never a reason to exit. The update offset is written (atomically) to
//! `state/telegram.offset` *before* a command runs, so after a crash or restart no command
//! runs twice; at worst one is lost, which is the safe side for `/loop`.

pub(in crate::cli) mod commands;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::error::Error;
use crate::exit::Status;
use crate::notifier::backoff::Backoff;
use crate::notifier::deliverer::Queued;
use crate::notifier::delivery::TelegramNotifier;
use crate::notifier::telegram::{Client, Config};
use commands::{Bot, Exec, Incoming, LoopBinary, Tap, User};

/// The file that remembers the next update to ask for.
#[must_use]
pub(crate) fn offset_path(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).telegram("offset")
}

/// Runs the bot for the loop whose state file is `file`, until killed. Its own files (the
/// offset, its lock, its log lines and replies) are in `state_dir`: the loop's state directory,
/// or the per-user one where no loop is yet.
///
/// # Errors
/// Bad or missing Telegram settings, a token Telegram refuses, an unreadable offset file, or
/// another bot already running for this state directory.
pub(crate) fn run(
    file: &Path,
    state_dir: &Path,
    poll_timeout: Duration,
) -> crate::error::Result<Status> {
    let state_dir = state_dir.to_path_buf();
    let config = Config::from_env()
        .map_err(|bad| Error::bad_input(crate::notifier::redact(&bad)))?
        .ok_or_else(|| {
            Error::bad_input(format!(
                "loop telegram needs TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID: {}",
                crate::notifier::setup_hint().unwrap_or_default()
            ))
        })?;
    crate::dirs::create_state_dir(&state_dir)
        .with_context(|| format!("while creating {}", state_dir.display()))?;
    let lock_path = crate::layout::Layout::dir(&state_dir).telegram("lock");
    let Ok(_lock) = crate::lockfile::try_exclusive(&lock_path)? else {
        return Err(Error::bad_input(format!(
            "another `loop telegram` is already running for {} (it holds {})",
            state_dir.display(),
            lock_path.display()
        )));
    };
    let offset = read_offset(&state_dir)?;
    let exec = LoopBinary::from_env(file, &state_dir).context("while finding the loop binary")?;
    let bot = Bot {
        chat_id: config.chat_id.clone(),
        file: file.to_path_buf(),
        state_dir: state_dir.clone(),
        exec,
    };
    // Replies are queued and sent by a delivery process, so that a slow `sendMessage` never
    // holds up the next command.
    let exe = std::env::current_exe().ok();
    let poller = Poller {
        client: Client::new(config.clone()),
        replies: Queued::new(&state_dir, config, exe.as_deref()),
        state_dir,
        poll_timeout,
    };
    poller.replies.deliver();
    poller.say(&format!(
        "telegram: polling for commands from chat {}",
        bot.chat_id
    ));
    poller.serve(&bot, offset)
}

/// The next update id to ask for, if the bot has run before.
fn read_offset(state_dir: &Path) -> crate::error::Result<Option<i64>> {
    let path = offset_path(state_dir);
    match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::Error::from(e)
            .context(format!("while reading {}", path.display()))
            .into()),
        Ok(text) => text.trim().parse::<i64>().map(Some).map_err(|_| {
            Error::bad_input(format!(
                "{} holds {:?}, not an update id: fix it, or delete it (which may repeat \
                 commands sent in the last 24 hours)",
                path.display(),
                text.trim()
            ))
        }),
    }
}

fn write_offset(state_dir: &Path, offset: i64) -> crate::error::Result<()> {
    let path = offset_path(state_dir);
    let mut f = atomic_write_file::AtomicWriteFile::open(&path)
        .with_context(|| format!("while writing {}", path.display()))?;
    f.write_all(format!("{offset}\n").as_bytes())?;
    f.commit()
        .with_context(|| format!("while writing {}", path.display()))?;
    Ok(())
}

struct Poller {
    client: Client,
    replies: Queued,
    state_dir: PathBuf,
    poll_timeout: Duration,
}

impl Poller {
    /// Logs a line and prints it on stderr (the bot runs in a terminal or under a supervisor).
    fn say(&self, line: &str) {
        let line = self.client.redact(line);
        crate::errln!("loop: {line}");
        let _ = crate::decision_log::append(&self.state_dir, &line);
    }

    fn serve<E: Exec>(
        &self,
        bot: &Bot<E>,
        mut offset: Option<i64>,
    ) -> crate::error::Result<Status> {
        let mut backoff = Backoff::new(self.client.config.backoff_base, Duration::from_secs(60));
        // The kind of the last problem reported: each new kind is said once, then quiet until
        // polling works again, so an outage does not flood the log.
        let mut reported: Option<&str> = None;
        let body = |offset: Option<i64>| {
            json!({
                "offset": offset,
                "timeout": self.poll_timeout.as_secs(),
                // Taps on a gate's buttons arrive as `callback_query`, only when asked for.
                "allowed_updates": ["message", "callback_query"],
            })
        };
        loop {
            let reply = self.client.call(
                "getUpdates",
                &body(offset),
                self.poll_timeout + Duration::from_secs(15),
            );
            let (kind, problem) = match polled(reply)? {
                Polled::Updates(updates) => {
                    if backoff.failures() > 0 {
                        self.say(&format!(
                            "telegram: getUpdates works again after {} failure(s)",
                            backoff.failures()
                        ));
                        backoff.reset();
                    }
                    for update in &updates {
                        offset = self.take(bot, update, offset);
                    }
                    continue;
                }
                Polled::RateLimited { secs, summary } => {
                    self.say(&format!(
                        "telegram: rate limited, waiting {secs}s ({summary})"
                    ));
                    std::thread::sleep(Duration::from_secs(secs));
                    continue;
                }
                Polled::Problem { kind, message } => (kind, message),
            };
            if reported != Some(kind) {
                self.say(&format!("telegram: {problem}"));
                reported = Some(kind);
            }
            std::thread::sleep(backoff.next_wait());
        }
    }

    /// Handles one update; returns the offset to ask for next.
    fn take<E: Exec>(&self, bot: &Bot<E>, update: &Value, offset: Option<i64>) -> Option<i64> {
        let Some(id) = update.get("update_id").and_then(Value::as_i64) else {
            self.say("telegram: skipped an update without update_id");
            return offset;
        };
        if offset.is_some_and(|o| id < o) {
            return offset; // already handled: the server resent it
        }
        let next = Some(id + 1);
        if let Err(e) = write_offset(&self.state_dir, id + 1) {
            self.say(&format!(
                "telegram: update {id} not obeyed: could not record the offset, so it could run \
                 twice after a restart: {e:#}"
            ));
            return next;
        }
        if let Some(tap) = tap(update) {
            self.tapped(bot, &tap);
            return next;
        }
        let Some(msg) = incoming(update) else {
            return next;
        };
        if !bot.is_ours(&msg) {
            // Who was refused, and what they asked (its first word: a command, not a text).
            let who = msg
                .from
                .as_ref()
                .map_or_else(|| "someone unnamed".to_owned(), User::who);
            let asked = msg.text.split_whitespace().next().unwrap_or_default();
            self.say(&format!(
                "telegram: ignored a message ({}) from {who} in chat {} (only chat {} is obeyed)",
                crate::text::one_line(asked, 40),
                msg.chat_id,
                bot.chat_id
            ));
            return next;
        }
        let (reply, what) = bot.handle(&msg);
        let first_word = msg.text.split_whitespace().next().unwrap_or_default();
        self.say(&format!(
            "telegram: {first_word} from chat {}: {what}",
            msg.chat_id
        ));
        let reply = self.client.redact(&reply);
        self.replies
            .send("reply", TelegramNotifier::html_messages("reply", &reply));
        next
    }
}

impl Poller {
    /// A tap: decided (written to M1.md) first, then answered, then its message shows the
    /// decision instead of its buttons. Answering or editing may fail (the network): the
    /// decision stands, and a second tap is answered "already answered".
    fn tapped<E: Exec>(&self, bot: &Bot<E>, tap: &Tap) {
        let reply = bot.tap(tap);
        self.say(&format!("telegram: {}", reply.log));
        let answered = self.client.call(
            "answerCallbackQuery",
            &json!({ "callback_query_id": tap.id, "text": crate::text::shown(&reply.answer) }),
            Duration::from_secs(15),
        );
        if let Err(e) = answered {
            self.say(&format!("telegram: could not answer the tap: {e}"));
        }
        if let Some(text) = reply.edit {
            // No reply_markup: the buttons go.
            let edited = self.client.call(
                "editMessageText",
                &json!({
                    "chat_id": tap.chat_id,
                    "message_id": tap.message_id,
                    "text": crate::text::shown(&text),
                }),
                Duration::from_secs(15),
            );
            if let Err(e) = edited {
                self.say(&format!(
                    "telegram: could not edit message {}: {e}",
                    tap.message_id
                ));
            }
        }
    }
}

/// The chat message in an update, if it is a text message.
fn incoming(update: &Value) -> Option<Incoming> {
    let msg = update.get("message")?;
    let chat = msg.get("chat")?;
    Some(Incoming {
        chat_id: chat.get("id")?.as_i64()?,
        chat_username: str_of(chat, "username"),
        text: msg.get("text")?.as_str()?.to_string(),
        from: msg.get("from").and_then(user),
        reply_to: msg
            .get("reply_to_message")
            .and_then(|r| r.get("message_id"))
            .and_then(Value::as_i64),
    })
}

/// The tap in an update, if it is a `callback_query` on a message the bot can see.
fn tap(update: &Value) -> Option<Tap> {
    let q = update.get("callback_query")?;
    let msg = q.get("message")?;
    let chat = msg.get("chat")?;
    Some(Tap {
        id: str_of(q, "id")?,
        from: user(q.get("from")?)?,
        chat_id: chat.get("id")?.as_i64()?,
        chat_username: str_of(chat, "username"),
        chat_type: str_of(chat, "type").unwrap_or_default(),
        message_id: msg.get("message_id")?.as_i64()?,
        message_text: str_of(msg, "text").unwrap_or_default(),
        data: str_of(q, "data").unwrap_or_default(),
    })
}

fn user(v: &Value) -> Option<User> {
    Some(User {
        id: v.get("id")?.as_i64()?,
        username: str_of(v, "username"),
        first_name: str_of(v, "first_name"),
    })
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// What one getUpdates call came to.
enum Polled {
    Updates(Vec<Value>),
    /// 429: wait as Telegram says.
    RateLimited {
        secs: u64,
        summary: String,
    },
    /// Retry after a backoff; `kind` names the problem, said once until polling works again.
    Problem {
        kind: &'static str,
        message: String,
    },
}

/// Reads a getUpdates reply. A refused token ends the bot (bad input); anything else is
/// retried.
fn polled(
    reply: Result<crate::notifier::telegram::ApiReply, String>,
) -> crate::error::Result<Polled> {
    let problem = |kind, message| Ok(Polled::Problem { kind, message });
    match reply {
        Ok(r) if r.ok && r.status == 200 => Ok(Polled::Updates(
            r.result
                .as_ref()
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        )),
        Ok(r) if r.status == 401 || r.status == 404 => Err(Error::bad_input(format!(
            "Telegram refused the bot token ({}): check TELEGRAM_BOT_TOKEN",
            r.summary()
        ))),
        Ok(r) if r.status == 409 => problem(
            "conflict",
            format!(
                "Telegram says another client is reading this bot's updates ({}): stop the \
                 other `loop telegram` (or other bot program) using this token, or remove its \
                 webhook with deleteWebhook; retrying",
                r.summary()
            ),
        ),
        Ok(r) if r.status == 429 => Ok(Polled::RateLimited {
            secs: r
                .parameters
                .as_ref()
                .and_then(|p| p.retry_after)
                .unwrap_or(5),
            summary: r.summary(),
        }),
        Ok(r) => problem(
            "api",
            format!("getUpdates failed: {}; retrying", r.summary()),
        ),
        Err(transport) => problem(
            "network",
            format!("getUpdates failed: {transport}; retrying"),
        ),
    }
}
