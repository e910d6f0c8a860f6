//! Scalar values: where a value ends and its comment begins, and double-quoting.
//!
//! A value runs to the first ` #` (a comment) or the end of the line; trailing spaces belong to
//! the gap before the comment, not to the value. A value that would be misread that way is
//! written double-quoted with `\"`, `\\`, `\n` (and `\r`, `\t`, `\0`) escapes.

/// Where a value sits in its line (byte offsets), and what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Scalar {
    /// Start of the value text (the opening quote, if quoted).
    pub start: usize,
    /// End of the value text (after the closing quote, if quoted).
    pub end: usize,
    /// The value with quotes and escapes removed.
    pub text: String,
    pub quoted: bool,
}

/// Why a value could not be read: byte offset in the line, and what was expected.
pub(crate) type ScanError = (usize, String);

/// Reads the value that starts at byte `from` of `line` (just after `KEY:`).
/// `Ok(None)` when there is no value (a block key, possibly with a comment).
///
/// # Errors
///
/// A malformed value: where in the line, and what was expected there.
pub(crate) fn scan(line: &str, from: usize) -> Result<Option<Scalar>, ScanError> {
    let rest = &line[from..];
    let lead = rest.len() - rest.trim_start_matches(' ').len();
    let start = from + lead;
    let body = &line[start..];
    if body.is_empty() || body.starts_with('#') && lead > 0 {
        return Ok(None);
    }
    if body.starts_with('"') {
        let (text, len) = unquote(body).map_err(|(off, msg)| (start + off, msg))?;
        let end = start + len;
        let after = &line[end..];
        let trimmed = after.trim_start_matches(' ');
        if !(trimmed.is_empty() || trimmed.starts_with('#') && trimmed.len() < after.len()) {
            return Err((
                end,
                "expected end of line or a comment (` # ...`) after the closing quote".into(),
            ));
        }
        return Ok(Some(Scalar {
            start,
            end,
            text,
            quoted: true,
        }));
    }
    let raw_end = body.find(" #").map_or(body.len(), |i| i);
    let text = body[..raw_end].trim_end_matches(' ');
    Ok(Some(Scalar {
        start,
        end: start + text.len(),
        text: text.to_string(),
        quoted: false,
    }))
}

/// Decodes a quoted string at the start of `s`; returns the text and the bytes consumed.
fn unquote(s: &str) -> Result<(String, usize), ScanError> {
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, i + 1)),
            '\\' => match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, 't')) => out.push('\t'),
                Some((_, '0')) => out.push('\0'),
                Some((j, other)) => {
                    return Err((
                        j - 1,
                        format!(
                            "unknown escape `\\{other}`: expected one of \\\" \\\\ \\n \\r \\t \\0"
                        ),
                    ));
                }
                None => break,
            },
            _ => out.push(c),
        }
    }
    Err((0, "unterminated quote: expected a closing `\"`".into()))
}

/// Whether `value` must be quoted to read back equal.
#[must_use]
pub(crate) fn needs_quotes(value: &str) -> bool {
    value.is_empty()
        || value.starts_with([' ', '"', '#'])
        || value.ends_with(' ')
        || value.contains(" #")
        || value.contains(['\n', '\r', '\t', '\0'])
}

/// `value` double-quoted with escapes.
#[must_use]
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How to write `value`: quoted when it must be, or when `keep_quotes` (the line was quoted
/// by hand and a human's choice is kept).
#[must_use]
pub fn encode(value: &str, keep_quotes: bool) -> String {
    if keep_quotes || needs_quotes(value) {
        quote(value)
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str) -> Option<String> {
        scan(line, line.find(':').unwrap() + 1)
            .unwrap()
            .map(|s| s.text)
    }

    #[test]
    fn comment_and_padding_are_not_part_of_the_value() {
        assert_eq!(
            text("STATUS: RUNNING      # a / b").as_deref(),
            Some("RUNNING")
        );
        assert_eq!(text("GOAL: a#b c").as_deref(), Some("a#b c"));
        assert_eq!(text("PLAN:   # block"), None);
        assert_eq!(text("PLAN:"), None);
        assert_eq!(text("X: \"a # b\"  # c").as_deref(), Some("a # b"));
        assert_eq!(text("X: \"\"").as_deref(), Some(""));
    }

    #[test]
    fn quoting_round_trips() {
        for v in [
            "",
            " a",
            "a ",
            "\"x",
            "# y",
            "a #b",
            "l1\nl2",
            "back\\slash \"q\"",
            "nul\0byte",
        ] {
            let line = format!("K: {}", encode(v, false));
            assert_eq!(text(&line).as_deref(), Some(v), "{line}");
        }
        assert_eq!(encode("plain → 日本", false), "plain → 日本");
    }

    #[test]
    fn bad_quotes_point_at_the_problem() {
        assert_eq!(scan("K: \"abc", 2).unwrap_err().0, 3);
        assert_eq!(scan("K: \"a\\qb\"", 2).unwrap_err().0, 5);
        assert_eq!(scan("K: \"a\" b", 2).unwrap_err().0, 6);
    }
}
