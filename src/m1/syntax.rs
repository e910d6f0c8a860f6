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
pub fn lex(text: &str) -> (Vec<Line>, Vec<Error>) {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    // Open key lines: (indent, line index).
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (idx, (body, eol)) in line::split(text).into_iter().enumerate() {
        let n = idx + 1;
        let kind = if let Some((ch, len)) = fence {
            if is_fence(body).is_some_and(|(c, l)| c == ch && l >= len) {
                fence = None;
            }
            Kind::Prose
        } else if body.trim_start_matches([' ', '\t']).is_empty() {
            Kind::Blank
        } else if !body.starts_with([' ', '\t']) {
            stack.clear();
            if let Some(f) = is_fence(body) {
                fence = Some(f);
                Kind::Prose
            } else if top_key_len(body).is_some() {
                match key_line(body, 0, n, None) {
                    Ok(k) => {
                        stack.push((0, idx));
                        Kind::Key(k)
                    }
                    Err(e) => {
                        errors.push(e);
                        Kind::Prose
                    }
                }
            } else {
                Kind::Prose
            }
        } else if stack.is_empty() {
            // Indented Markdown under prose (a nested list, indented code): not ours.
            Kind::Prose
        } else {
            match nested(body, n, &mut stack, &lines, idx) {
                Ok(kind) => kind,
                Err(e) => {
                    errors.push(e);
                    Kind::Prose
                }
            }
        };
        lines.push(Line {
            text: body.to_string(),
            eol,
            kind,
        });
    }
    (lines, errors)
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
fn top_key_len(s: &str) -> Option<usize> {
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
fn any_key_len(s: &str) -> Option<usize> {
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

/// Recomputes every key line's parent from indentation, after an edit moved lines around.
pub fn reindex(lines: &mut [Line]) {
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
