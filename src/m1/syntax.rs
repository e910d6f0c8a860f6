//! The line grammar: which lines are keys, which are prose the runner keeps untouched, and
//! which are broken key lines a human must fix (with the exact column).
//!
//! At top level, a line is a key only when it starts with an upper-case `KEY:`; anything else
//! (headings, sentences, fenced code) is prose and ends any open block. Inside a block, every
//! indented line must be a key line or an indented `# comment`, two spaces deeper than its
//! parent; anything else there is an error, because silently keeping it as prose would hide a
//! typo in the state the runner acts on.

use super::error::Error;
use super::line::{self, KeyLine, Kind, Line};
use super::value;

/// Lexes `text` into lines with parents set. Errors are syntax errors only.
pub(super) fn lex(text: &str) -> (Vec<Line>, Vec<Error>) {
    let mut lines: Vec<Line> = Vec::new();
    let mut errors = Vec::new();
    // Open key lines: (indent, line index).
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (idx, (body, eol)) in line::split(text).into_iter().enumerate() {
        let n = idx + 1;
        errors.extend(stray_controls(body, n));
        let odd = if fence.is_none() {
            odd_indent(body, n, !stack.is_empty())
        } else {
            None
        };
        let (text, kind) = if let Some(e) = odd {
            // Reported, then read as meant (the odd spaces as spaces, or as nothing at top
            // level), so the lines after it read without a cascade of errors. The document
            // is rejected, so this text is never rendered.
            errors.push(e);
            let mut read = None;
            for with in [Width::Shown, Width::One, Width::Zero] {
                let t = odd_spaces(body, with);
                let mut trial = stack.clone();
                let mut trial_fence = fence;
                let (kind, err) = classify(&t, n, &mut trial, &mut trial_fence, &lines);
                if err.is_none() || with == Width::Zero {
                    stack = trial;
                    fence = trial_fence;
                    errors.extend(err);
                    read = Some((t, kind));
                    break;
                }
            }
            read.expect("the last reading is always taken")
        } else {
            let (kind, err) = classify(body, n, &mut stack, &mut fence, &lines);
            errors.extend(err);
            (body.to_string(), kind)
        };
        lines.push(Line { text, eol, kind });
    }
    (lines, errors)
}

/// What one line is, given the blocks and fence open before it (which it updates).
fn classify(
    body: &str,
    n: usize,
    stack: &mut Vec<(usize, usize)>,
    fence: &mut Option<(char, usize)>,
    lines: &[Line],
) -> (Kind, Option<Error>) {
    let idx = n - 1;
    if let Some((ch, len)) = *fence {
        if is_fence(body).is_some_and(|(c, l)| c == ch && l >= len) {
            *fence = None;
        }
        return (Kind::Prose, None);
    }
    if lead_len(body) == body.len() {
        return (Kind::Blank, None);
    }
    if !body.starts_with([' ', '\t']) {
        stack.clear();
        if let Some(f) = is_fence(body) {
            *fence = Some(f);
            return (Kind::Prose, None);
        }
        if top_key_len(body).is_none() {
            return (Kind::Prose, None);
        }
        return match key_line(body, 0, n, None) {
            Ok(k) => {
                stack.push((0, idx));
                (Kind::Key(k), None)
            }
            Err(e) => (Kind::Prose, Some(e)),
        };
    }
    if stack.is_empty() {
        // Indented Markdown under prose (a nested list, indented code): not ours.
        return (Kind::Prose, None);
    }
    match nested(body, n, stack, lines, idx) {
        Ok(kind) => (kind, None),
        Err(e) => (Kind::Prose, Some(e)),
    }
}

/// How many spaces an odd space stands for when a line is read as meant.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Width {
    /// As wide as an editor shows it (a full-width space is two).
    Shown,
    One,
    Zero,
}

/// `body` with the odd spaces of its indentation replaced by ASCII spaces.
fn odd_spaces(body: &str, with: Width) -> String {
    let lead = lead_len(body);
    let mut out = String::with_capacity(body.len());
    for c in body[..lead].chars() {
        if is_odd_space(c) {
            let n = match (with, c) {
                (Width::Shown, '\u{3000}') => 2,
                (Width::Shown, '\u{feff}' | '\u{200b}') | (Width::Zero, _) => 0,
                _ => 1,
            };
            out.push_str(&" ".repeat(n));
        } else {
            out.push(c);
        }
    }
    out.push_str(&body[lead..]);
    out
}

/// A NUL byte or a carriage return inside a line: text no editor shows as it is read. A NUL
/// is what a crash leaves in a file whose blocks were allocated but never written; a lone CR
/// is a line break to some editors and part of the line to the runner.
fn stray_controls(body: &str, n: usize) -> Vec<Error> {
    let mut out = Vec::new();
    if let Some(at) = body.find('\0') {
        out.push(Error::new(
            n,
            line::column(body, at),
            "unexpected NUL byte: M1.md is text; remove it (a crash can leave NUL bytes where \
             text was never written)",
        ));
    }
    if let Some(at) = body.find('\r') {
        out.push(Error::new(
            n,
            line::column(body, at),
            "carriage return (CR) inside the line: line endings must be LF or CRLF; remove it \
             or save with LF or CRLF",
        ));
    }
    out
}

/// Whitespace an editor shows as a space but that is not one: a line indented with it would
/// silently read as prose and end the block it sits in.
fn is_odd_space(c: char) -> bool {
    (c.is_whitespace() && c != ' ' && c != '\t' && !c.is_ascii_control())
        || matches!(c, '\u{feff}' | '\u{200b}')
}

/// The whitespace-looking characters at the start of `body`.
pub(crate) fn lead_len(body: &str) -> usize {
    body.len()
        - body
            .trim_start_matches(|c: char| c == ' ' || c == '\t' || is_odd_space(c))
            .len()
}

/// A line indented with non-ASCII whitespace (a no-break space, a full-width space) where a
/// key could be: inside a block, or before something that reads as a key.
fn odd_indent(body: &str, n: usize, in_block: bool) -> Option<Error> {
    let lead = lead_len(body);
    let (at, c) = body[..lead]
        .char_indices()
        .find(|&(_, c)| is_odd_space(c))?;
    let rest = &body[lead..];
    // A line of nothing but spaces of any kind is blank: it looks blank and reads blank.
    if rest.is_empty() || !in_block && any_key_len(rest).is_none() {
        return None;
    }
    Some(Error::new(
        n,
        line::column(body, at),
        format!(
            "{} at the start of the line: indent with ASCII spaces (anything else makes the \
             line read as text, not as a key)",
            space_name(c)
        ),
    ))
}

/// How an error names an odd space.
pub(crate) fn space_name(c: char) -> String {
    let name = match c {
        '\u{a0}' => "no-break space",
        '\u{3000}' => "full-width space",
        '\u{feff}' => "byte order mark",
        '\u{200b}' => "zero-width space",
        _ => "non-ASCII space",
    };
    format!("{name} (U+{:04X})", u32::from(c))
}

/// An indented line inside a block: a comment, or a key line two spaces deeper than its parent.
fn nested(
    body: &str,
    n: usize,
    stack: &mut Vec<(usize, usize)>,
    lines: &[Line],
    idx: usize,
) -> Result<Kind, Error> {
    let ws = body.len() - body.trim_start_matches([' ', '\t']).len();
    let content = &body[ws..];
    if content.starts_with('#') {
        return Ok(Kind::Comment);
    }
    if let Some(t) = body[..ws].find('\t') {
        return Err(Error::new(
            n,
            t + 1,
            "bad indentation: expected spaces, found a tab",
        ));
    }
    while stack.last().is_some_and(|&(i, _)| i >= ws) {
        stack.pop();
    }
    let &(pindent, pidx) = stack
        .last()
        .expect("top-level key is never popped by indent > 0");
    let parent = lines[pidx].key().expect("stack holds key lines");
    if parent.value.is_some() {
        return Err(Error::new(
            n,
            ws + 1,
            format!(
                "bad indentation: expected at most {pindent} spaces (`{}` on line {} has a value, \
                 so nothing can be nested under it), found {ws}",
                parent.key,
                pidx + 1
            ),
        ));
    }
    if ws != pindent + 2 {
        return Err(Error::new(
            n,
            ws + 1,
            format!(
                "bad indentation: expected {} spaces (inside `{}` on line {}), found {ws}",
                pindent + 2,
                parent.key,
                pidx + 1
            ),
        ));
    }
    let k = key_line(body, ws, n, Some(pidx))?;
    stack.push((ws, idx));
    Ok(Kind::Key(k))
}

/// Reads a key line whose key starts at byte `indent`.
fn key_line(body: &str, indent: usize, n: usize, parent: Option<usize>) -> Result<KeyLine, Error> {
    let content = &body[indent..];
    let klen = any_key_len(content).ok_or_else(|| {
        Error::new(
            n,
            indent + 1,
            "expected `KEY: value` (an upper-case key or a step number), or a `# comment`",
        )
    })?;
    let colon = indent + klen;
    let after = colon + 1;
    if body.len() > after && !body[after..].starts_with(' ') {
        return Err(Error::new(
            n,
            line::column(body, after),
            format!("expected a space after `{}:`", &content[..klen]),
        ));
    }
    let value =
        value::scan(body, after).map_err(|(at, msg)| Error::new(n, line::column(body, at), msg))?;
    Ok(KeyLine {
        indent,
        key: content[..klen].to_string(),
        colon,
        value,
        parent,
    })
}

/// Length of an upper-case key followed by `:` at the start of `s` (top level: no numbers).
pub(crate) fn top_key_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if !b.first()?.is_ascii_uppercase() {
        return None;
    }
    let len = b
        .iter()
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b'_')
        .count();
    (b.get(len) == Some(&b':')).then_some(len)
}

/// Length of an upper-case key or a step number followed by `:` at the start of `s`.
pub(crate) fn any_key_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.first()?.is_ascii_digit() {
        let len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        return (b.get(len) == Some(&b':')).then_some(len);
    }
    top_key_len(s)
}

/// A Markdown fence (```` ``` ```` or `~~~`, up to three spaces in): its character and length.
fn is_fence(body: &str) -> Option<(char, usize)> {
    let t = body.trim_start_matches(' ');
    if body.len() - t.len() > 3 {
        return None;
    }
    let ch = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = t.chars().take_while(|c| *c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// Where a line stands with respect to Markdown code fences, as [`lex`] read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fenced {
    No,
    /// Inside a fence that is closed further down (the fence lines included).
    Closed,
    /// Inside a fence that runs to the end of the file; `opened` is the opening line's index.
    Unclosed {
        opened: usize,
    },
}

/// The fence state of every line, by the same rules as [`lex`].
pub(super) fn fences(lines: &[Line]) -> Vec<Fenced> {
    let mut out = vec![Fenced::No; lines.len()];
    let mut open: Option<(char, usize, usize)> = None;
    for (idx, l) in lines.iter().enumerate() {
        if let Some((ch, len, from)) = open {
            if is_fence(&l.text).is_some_and(|(c, n)| c == ch && n >= len) {
                out[from..=idx].fill(Fenced::Closed);
                open = None;
            }
        } else if l.kind == Kind::Prose
            && !l.text.starts_with([' ', '\t'])
            && let Some((ch, len)) = is_fence(&l.text)
        {
            open = Some((ch, len, idx));
        }
    }
    if let Some((_, _, from)) = open {
        out[from..].fill(Fenced::Unclosed { opened: from });
    }
    out
}

/// Recomputes every key line's parent from indentation, after an edit moved lines around.
pub(super) fn reindex(lines: &mut [Line]) {
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for (idx, line) in lines.iter_mut().enumerate() {
        match &mut line.kind {
            Kind::Prose => stack.clear(),
            Kind::Blank | Kind::Comment => {}
            Kind::Key(k) => {
                while stack.last().is_some_and(|&(i, _)| i >= k.indent) {
                    stack.pop();
                }
                k.parent = stack.last().map(|&(_, p)| p);
                stack.push((k.indent, idx));
            }
        }
    }
}
