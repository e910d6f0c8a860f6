//! Splitting a long message into parts Telegram accepts (4096 characters each), at line
//! boundaries, without breaking the HTML: a `<pre>` block cut in two is closed at the end of
//! one part and reopened at the start of the next, and no cut falls inside a tag or an entity.

use std::fmt::Write as _;

/// The Bot API's limit on one message's text.
pub(crate) const LIMIT: usize = 4096;

/// Room kept in every part for the tags closed and reopened around a cut.
const RESERVE: usize = 64;

/// `text` cut into parts of at most [`LIMIT`] UTF-16 units each (Telegram counts UTF-16, and
/// counting the raw HTML overestimates, which is the safe side). Cuts fall at line ends; a
/// single line longer than a part is cut at a character that is not inside markup.
pub(crate) fn split(text: &str, html: bool) -> Vec<String> {
    split_at(text, html, LIMIT)
}

pub(crate) fn split_at(text: &str, html: bool, limit: usize) -> Vec<String> {
    let budget = limit.saturating_sub(RESERVE).max(1);
    let mut parts = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_len = 0;
    let mut has_content = false;
    for line in text.split_inclusive('\n') {
        for piece in pieces(line, html, budget) {
            let len = utf16_len(piece);
            if has_content && current_len + len > budget {
                parts.push(finish(&current, &open, html));
                current = reopen(&open);
                current_len = utf16_len(&current);
                has_content = false;
            }
            current.push_str(piece);
            current_len += len;
            has_content |= !piece.trim().is_empty();
            if html {
                track_tags(piece, &mut open);
            }
        }
    }
    if has_content {
        parts.push(finish(&current, &open, html));
    }
    parts
}

fn finish(current: &str, open: &[String], html: bool) -> String {
    let mut part = current.trim_end().to_string();
    if html {
        for tag in open.iter().rev() {
            let _ = write!(part, "</{tag}>");
        }
    }
    part
}

fn reopen(open: &[String]) -> String {
    open.iter().fold(String::new(), |mut out, t| {
        let _ = write!(out, "<{t}>");
        out
    })
}

/// A line as one piece, or, when it is longer than `max`, cut into pieces of at most `max`
/// units at characters outside tags and entities.
fn pieces(line: &str, html: bool, max: usize) -> Vec<&str> {
    if utf16_len(line) <= max {
        return vec![line];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut len = 0;
    let mut safe = 0; // the last byte index where a cut keeps markup whole
    let mut in_tag = false;
    let mut in_entity = false;
    for (i, c) in line.char_indices() {
        if !in_tag && !in_entity && i > start {
            safe = i;
        }
        if len + c.len_utf16() > max && safe > start {
            out.push(&line[start..safe]);
            len = utf16_len(&line[safe..i]);
            start = safe;
        }
        len += c.len_utf16();
        if html {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                '&' => in_entity = true,
                ';' => in_entity = false,
                _ => {}
            }
        }
    }
    out.push(&line[start..]);
    out
}

/// Updates the stack of open tags with the tags in `piece` (our own markup only: everything
/// else was escaped, so every `<` starts a tag).
fn track_tags(piece: &str, open: &mut Vec<String>) {
    let mut rest = piece;
    while let Some(lt) = rest.find('<') {
        let Some(gt) = rest[lt..].find('>') else {
            break;
        };
        let inner = &rest[lt + 1..lt + gt];
        if let Some(name) = inner.strip_prefix('/') {
            if let Some(pos) = open.iter().rposition(|t| t == name.trim()) {
                open.truncate(pos);
            }
        } else {
            let name = inner.split_whitespace().next().unwrap_or_default();
            open.push(name.to_string());
        }
        rest = &rest[lt + gt + 1..];
    }
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split("hello\nworld\n", true), vec!["hello\nworld"]);
        assert!(split("", true).is_empty());
    }

    #[test]
    fn cuts_fall_at_line_ends_and_keep_every_line_in_order() {
        let lines: Vec<String> = (0..100)
            .map(|i| format!("line {i:03} {}", "x".repeat(90)))
            .collect();
        let text = lines.join("\n");
        let parts = split(&text, false);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| utf16_len(p) <= LIMIT));
        assert_eq!(parts.join("\n"), text);
    }

    #[test]
    fn a_pre_block_cut_in_two_is_closed_and_reopened() {
        let body: Vec<String> = (0..20).map(|i| format!("out {i}")).collect();
        let text = format!("<b>g</b>\n<pre>{}</pre>", body.join("\n"));
        let parts = split_at(&text, true, 64 + 40);
        assert!(parts.len() > 2, "{parts:?}");
        for p in &parts {
            assert_eq!(
                p.matches("<pre>").count(),
                p.matches("</pre>").count(),
                "{p}"
            );
            assert!(utf16_len(p) <= 64 + 40, "{p}");
        }
        assert!(parts[1].starts_with("<pre>"), "{parts:?}");
    }

    #[test]
    fn a_long_line_is_cut_outside_entities() {
        let text = "&amp;".repeat(2000); // 10,000 units on one line
        let parts = split(&text, true);
        assert_eq!(parts.len(), 3);
        for p in &parts {
            assert!(
                p.starts_with("&amp;") && p.ends_with("&amp;"),
                "cut inside an entity"
            );
            assert!(utf16_len(p) <= LIMIT);
        }
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn astral_characters_count_as_two() {
        let text = "😀".repeat(3000); // 6000 UTF-16 units
        let parts = split(&text, false);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| utf16_len(p) <= LIMIT));
    }
}
