//! The two Bot API calls we need, `sendMessage` and `getUpdates`, over plain HTTP with `ureq`.
//!
//! `http_status_as_error(false)` lets us read the API's JSON on 4xx/5xx: a 429 carries the
//! `retry_after` to honour, a 400 the `description` that tells the user what is wrong. Every
//! error string built here goes through [`redact_with`], because the token is in the URL.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::backoff::{self, Backoff};
use super::redact::redact_with;

/// The public Bot API.
pub(crate) const DEFAULT_API_BASE: &str = "https://api.telegram.org";

/// The variables the loop reads for its own messages: the bot's token, its chat, and where
/// its Bot API is. They are the loop's, never the agent's: no run the loop starts for the
/// agent gets them (see [`crate::bridge::FireRequest::without_loop_credentials`]).
pub(crate) const CREDENTIALS: [&str; 3] = [
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_CHAT_ID",
    "TELEGRAM_API_BASE",
];

/// Attempts per message in one turn before leaving it in the outbox for the next.
const TRIES: u32 = 3;
/// At most this much waiting for 429 `retry_after`s per message in one turn.
const MAX_RATE_WAIT: Duration = Duration::from_secs(60);
/// One `sendMessage` request, all included (connecting, sending, the answer): every call has
/// such a bound, so a Telegram that accepts and never answers costs a try this long, no more.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Connecting, within a call's own bound: a host that drops the connection attempt is given
/// up on sooner than one that is slow to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and as whom to send. Its `Debug` never shows the token.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) token: String,
    pub(crate) chat_id: String,
    pub(crate) api_base: String,
    pub(crate) backoff_base: Duration,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("token", &"<redacted>")
            .field("chat_id", &self.chat_id)
            .field("api_base", &self.api_base)
            .field("backoff_base", &self.backoff_base)
            .finish()
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default().trim().to_string()
}

impl Config {
    /// The settings from `TELEGRAM_BOT_TOKEN`, `TELEGRAM_CHAT_ID`, `TELEGRAM_API_BASE` and
    /// `LOOP_NOTIFY_BACKOFF_MS`; `None` when the token or the chat id is not set.
    ///
    /// # Errors
    /// A message naming the variable that holds a bad value (never quoting the token).
    pub(crate) fn from_env() -> Result<Option<Config>, String> {
        let (token, chat_id) = (env("TELEGRAM_BOT_TOKEN"), env("TELEGRAM_CHAT_ID"));
        if token.is_empty() || chat_id.is_empty() {
            return Ok(None);
        }
        if token.contains(|c: char| c.is_whitespace() || c == '/' || c == '?' || c == '#') {
            return Err("TELEGRAM_BOT_TOKEN is malformed: a token looks like \
                        123456789:AA… with no spaces or slashes (copy it again from @BotFather)"
                .into());
        }
        let numeric = chat_id.strip_prefix('-').unwrap_or(&chat_id);
        let is_number = !numeric.is_empty() && numeric.chars().all(|c| c.is_ascii_digit());
        let is_channel = chat_id.len() > 1
            && chat_id.starts_with('@')
            && chat_id[1..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_number && !is_channel {
            return Err(format!(
                "TELEGRAM_CHAT_ID={chat_id:?} is not a chat id: expected a number such as \
                 123456789 or -1001234567890, or @channelname"
            ));
        }
        let mut api_base = env("TELEGRAM_API_BASE");
        if api_base.is_empty() {
            api_base = DEFAULT_API_BASE.to_string();
        }
        if !(api_base.starts_with("http://") || api_base.starts_with("https://")) {
            return Err(format!(
                "TELEGRAM_API_BASE={api_base:?} must start with http:// or https://"
            ));
        }
        let api_base = api_base.trim_end_matches('/').to_string();
        let backoff_base = backoff::base_from_env()?;
        Ok(Some(Config {
            token,
            chat_id,
            api_base,
            backoff_base,
        }))
    }
}

/// One line on what is missing, when Telegram is not (fully) configured.
pub(crate) fn missing_settings_hint() -> Option<&'static str> {
    match (
        env("TELEGRAM_BOT_TOKEN").is_empty(),
        env("TELEGRAM_CHAT_ID").is_empty(),
    ) {
        (false, false) => None,
        (true, true) => Some(
            "Telegram notifications are off: set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID \
             (see docs/05-telegram.md)",
        ),
        (true, false) => Some(
            "Telegram notifications are off: TELEGRAM_CHAT_ID is set but TELEGRAM_BOT_TOKEN is \
             not (see docs/05-telegram.md)",
        ),
        (false, true) => Some(
            "Telegram notifications are off: TELEGRAM_BOT_TOKEN is set but TELEGRAM_CHAT_ID is \
             not (see docs/05-telegram.md)",
        ),
    }
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Delivery {
    /// Sent, with the message's id when the API said it.
    Accepted(Option<i64>),
    /// The API refused this message for good (400 bad chat id or formatting, 403 bot blocked):
    /// retrying cannot help. Holds the API's own description.
    Rejected(String),
    /// Not delivered now (network, 5xx, rate limit, bad token); worth trying again later.
    Failed(String),
}

/// A Bot API reply, as far as we read it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ApiReply {
    #[serde(skip)]
    pub status: u16,
    #[serde(default)]
    pub ok: bool,
    pub description: Option<String>,
    pub parameters: Option<Parameters>,
    pub result: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Parameters {
    pub retry_after: Option<u64>,
}

impl ApiReply {
    /// `"429 Too Many Requests: retry after 5"`: the status and the API's own words.
    pub(crate) fn summary(&self) -> String {
        let desc = self.description.as_deref().unwrap_or("(no description)");
        format!("{} {desc}", self.status)
    }
}

/// A Bot API client for one configuration.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) config: Config,
    agent: ureq::Agent,
}

impl Client {
    #[must_use]
    pub(crate) fn new(config: Config) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .user_agent(concat!("m1loop/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { config, agent }
    }

    /// `text` with the token removed.
    pub(crate) fn redact(&self, text: &str) -> String {
        redact_with(text, &self.config.token)
    }

    /// One request to `method`; `Err` is a redacted description of a transport failure.
    pub(crate) fn call(
        &self,
        method: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<ApiReply, String> {
        let url = format!("{}/bot{}/{method}", self.config.api_base, self.config.token);
        let response = self
            .agent
            .post(&url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .send_json(body)
            .map_err(|e| self.redact(&format!("could not reach {}: {e}", self.config.api_base)))?;
        let status = response.status().as_u16();
        let text = response
            .into_body()
            .read_to_string()
            .map_err(|e| self.redact(&format!("reading the reply of {method}: {e}")))?;
        let mut reply = serde_json::from_str::<ApiReply>(&text).unwrap_or_else(|_| ApiReply {
            description: Some(format!("non-JSON reply: {}", crate::text::cut(&text, 200))),
            ..ApiReply::default()
        });
        reply.status = status;
        reply.description = reply.description.map(|d| self.redact(&d));
        Ok(reply)
    }

    /// Sends one message to the configured chat, retrying network errors and 5xx with backoff
    /// and honouring 429 `retry_after`, within a bounded time.
    /// A message an older version queued may hold a control character: it goes as an escape.
    pub(crate) fn send_message(&self, text: &str, html: bool, markup: Option<&Value>) -> Delivery {
        let mut body = json!({
            "chat_id": self.config.chat_id,
            "text": crate::text::shown(text),
            "link_preview_options": { "is_disabled": true },
        });
        if html {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(markup) = markup {
            body["reply_markup"] = markup.clone();
        }
        let mut backoff = Backoff::new(self.config.backoff_base, Duration::from_secs(60));
        let mut rate_waited = Duration::ZERO;
        loop {
            let why = match self.call("sendMessage", &body, SEND_TIMEOUT) {
                Ok(r) if r.ok && r.status == 200 => {
                    let id = r
                        .result
                        .as_ref()
                        .and_then(|m| m.get("message_id"))
                        .and_then(Value::as_i64);
                    return Delivery::Accepted(id);
                }
                Ok(r) if r.status == 429 => {
                    let wait = Duration::from_secs(
                        r.parameters
                            .as_ref()
                            .and_then(|p| p.retry_after)
                            .unwrap_or(1),
                    );
                    if rate_waited + wait > MAX_RATE_WAIT {
                        return Delivery::Failed(format!(
                            "rate limited by Telegram: {}",
                            r.summary()
                        ));
                    }
                    rate_waited += wait;
                    std::thread::sleep(wait);
                    continue;
                }
                Ok(r) if r.status == 401 || r.status == 404 => {
                    return Delivery::Failed(format!(
                        "Telegram refused the bot token ({}): check TELEGRAM_BOT_TOKEN",
                        r.summary()
                    ));
                }
                Ok(r) if (400..500).contains(&r.status) || r.status == 200 => {
                    return Delivery::Rejected(r.summary());
                }
                Ok(r) => format!("Telegram answered {}", r.summary()),
                Err(transport) => transport,
            };
            if backoff.failures() + 1 >= TRIES {
                return Delivery::Failed(why);
            }
            std::thread::sleep(backoff.next_wait());
        }
    }
}
