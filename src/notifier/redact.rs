//! Keeping the bot token out of everything a user or a log can see.
//!
//! The Bot API puts the token in the URL path (`/bot<token>/sendMessage`) and HTTP clients like
//! to quote URLs in their errors, so every text that leaves this module passes through
//! [`redact`]: the configured token by value, and anything shaped like a token URL segment.

use std::sync::LazyLock;

use regex::Regex;

/// `bot123456:AAE...` in a URL path, also with the colon percent-encoded.
static TOKEN_SEGMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)bot[0-9]+(?::|%3A)[A-Za-z0-9_-]+").expect("the token pattern is valid")
});

/// A bare token (`123456:AAE...`, the secret part being long), outside of a URL.
static BARE_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9]{5,}:[A-Za-z0-9_-]{30,}").expect("the bare token pattern is valid")
});

/// Shorter configured tokens are not replaced by value: a real token is ~46 characters, and
/// replacing a two-character "token" everywhere would garble every message.
const MIN_LITERAL_LEN: usize = 6;

/// `text` with the configured `TELEGRAM_BOT_TOKEN`, and any `/bot<digits>:<secret>/` URL
/// segment, replaced by `<redacted>` (`/bot<redacted>/` in URLs).
#[must_use]
pub(crate) fn redact(text: &str) -> String {
    let token = std::env::var("TELEGRAM_BOT_TOKEN").unwrap_or_default();
    redact_with(text, token.trim())
}

/// [`redact`] with the token given, for callers that hold a configuration.
#[must_use]
pub(crate) fn redact_with(text: &str, token: &str) -> String {
    let mut out = text.to_string();
    if token.len() >= MIN_LITERAL_LEN {
        out = out.replace(&format!("bot{token}"), "bot<redacted>");
        out = out.replace(token, "<redacted>");
    }
    let out = TOKEN_SEGMENT.replace_all(&out, "bot<redacted>");
    BARE_TOKEN.replace_all(&out, "<redacted>").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

    #[test]
    fn url_segments_become_bot_redacted() {
        let err = format!("bad uri: https://api.telegram.org/bot{TOKEN}/sendMessage: oops");
        assert_eq!(
            redact_with(&err, ""),
            "bad uri: https://api.telegram.org/bot<redacted>/sendMessage: oops"
        );
    }

    #[test]
    fn the_configured_token_is_removed_wherever_it_appears() {
        let weird = "tok-en_that-does-not-look-like-one";
        let text = format!("value {weird} and /bot{weird}/getUpdates");
        let out = redact_with(&text, weird);
        assert!(!out.contains(weird), "{out}");
        assert!(out.contains("/bot<redacted>/getUpdates"), "{out}");
    }

    #[test]
    fn percent_encoded_and_bare_tokens_are_caught() {
        let enc = TOKEN.replace(':', "%3A");
        let out = redact_with(&format!("GET /bot{enc}/x and {TOKEN}"), "");
        assert!(!out.contains("AAHdqTcv"), "{out}");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let text = "step 3: 12:30 done, see bot.rs and the robot 42:x";
        assert_eq!(redact_with(text, "short"), text);
    }
}
