//! Text made to fit: M1.md values and log lines are single lines, and a message, an error or a
//! status line has room for so many characters. And text made safe to show: what an agent, a
//! plan, a reviewer or a chat wrote reaches a terminal, a log, a commit or a message only as
//! visible characters ([`shown`]).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal, a log line, a commit message or a chat message as it
/// is. Control characters (C0 but tab and newline, DEL, C1) are acted on by a terminal: an OSC
/// 52 write to the clipboard, a window title, a cleared screen, a carriage return or a
/// backspace that writes over what a line said. Bidirectional overrides and isolates (U+202A–
/// U+202E, U+2066–U+2069) show a line's characters in another order than they are, and the
/// line and paragraph separators (U+2028, U+2029) break a line in some viewers: each makes a
/// line read as another.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// `text` safe to show: each character a terminal would act on, or that would make the text
/// read as something else ([`hidden`]), written as its escape (`\u001b`), which shows what was
/// there and does nothing; tabs and newlines kept (a CR before a newline goes: a line end
/// written on Windows). The escape is JSON's, so that a JSON text stays the same JSON.
/// What is safe already comes back as it is.
#[must_use]
pub(crate) fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if hidden(c) {
            // Every such character is in the Basic Multilingual Plane: four digits suffice.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every run of whitespace (newlines included) made one space, and no space at
/// either end, then [`shown`]: one line that reads as what it says.
#[must_use]
pub(crate) fn fold(text: &str) -> String {
    shown(&text.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

/// `text` cut to at most `max` characters, the last of them an ellipsis when something was
/// cut.
#[must_use]
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// `text` as one line of at most `max` characters: [`fold`], then [`cut`].
#[must_use]
pub(crate) fn one_line(text: &str, max: usize) -> String {
    cut(&fold(text), max)
}

/// `text` as one shell word: as it is when nothing in it is special to a shell, else
/// single-quoted.
#[must_use]
pub(crate) fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// A count with thousands separated: `2,100`.
#[must_use]
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What a loop spent, as a person reads it: `$0.42`; the tokens of runs on a backend that
/// reports tokens and no dollars (Codex) instead of a `$0.00` it never spent (`2,100 tokens`),
/// or beside the dollars of the others (`$0.42 and 2,100 tokens`).
#[must_use]
pub(crate) fn spent(dollars: f64, tokens: u64) -> String {
    let cents = format!("${dollars:.2}");
    match tokens {
        0 => cents,
        t if cents == "$0.00" => format!("{} tokens", thousands(t)),
        t => format!("{cents} and {} tokens", thousands(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spent_says_tokens_without_dollars_never_zero_dollars() {
        assert_eq!(spent(0.0, 0), "$0.00");
        assert_eq!(spent(0.421, 0), "$0.42");
        assert_eq!(spent(0.0, 2100), "2,100 tokens");
        assert_eq!(spent(1.2, 2100), "$1.20 and 2,100 tokens");
    }

    #[test]
    fn one_line_folds_and_cuts() {
        assert_eq!(one_line("a\n  b\tc ", 10), "a b c");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
        assert_eq!(one_line("abcde", 5), "abcde");
    }

    #[test]
    fn controls_and_bidi_overrides_are_shown_as_escapes_and_tabs_and_newlines_kept() {
        let osc52 = "done\u{1b}]52;c;cm0gLXJmIH4=\u{7} \u{1b}[2J\u{9b}31m";
        assert_eq!(
            shown(osc52),
            "done\\u001b]52;c;cm0gLXJmIH4=\\u0007 \\u001b[2J\\u009b31m"
        );
        assert_eq!(shown("a\tb\nc\r\nd"), "a\tb\nc\nd");
        assert_eq!(shown("ok\rfake\u{8}"), "ok\\u000dfake\\u0008");
        assert_eq!(shown("\u{202e}txt.exe\u{2066}"), "\\u202etxt.exe\\u2066");
        assert!(matches!(shown("日本語 ✅ plain"), Cow::Borrowed(_)));
        // A JSON text stays the same JSON.
        let json = serde_json::json!({ "s": "\u{9b}\u{202e}x" }).to_string();
        let back: serde_json::Value = serde_json::from_str(&shown(&json)).unwrap();
        assert_eq!(back["s"], "\u{9b}\u{202e}x");
    }

    #[test]
    fn one_line_leaves_no_control_and_no_line_break() {
        let said = one_line(
            "sum\n2026-11-29T00:00:00Z decide: x\u{85}y\u{2028}z\u{1b}]0;t\u{7}",
            300,
        );
        assert_eq!(
            said,
            "sum 2026-11-29T00:00:00Z decide: x y z\\u001b]0;t\\u0007"
        );
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("ééééé", 3), "éé…");
        assert_eq!(cut("ééé", 3), "ééé");
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(2100), "2,100");
        assert_eq!(super::thousands(1_234_567), "1,234,567");
    }
}
