//! Text made to fit: M1.md values and log lines are single lines, and a message, an error or a
//! status line has room for so many characters.

/// `text` with every run of whitespace (newlines included) made one space, and no space at
/// either end.
#[must_use]
pub(crate) fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
