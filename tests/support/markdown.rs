//! Markdown as the manual's tests read it: fenced code blocks, sections under a heading, table
//! rows, links, and the anchors GitHub gives headings. Only what the manual uses: fences of three
//! backticks, ATX headings (`## …`), pipe tables, inline links.

use std::collections::HashSet;

/// A fenced code block: its info string (`sh`, `console`, or empty) and its lines.
#[derive(Debug, Clone)]
pub struct Block {
    pub lang: String,
    pub body: String,
}

/// The lines of `text` outside fenced code blocks, with their index.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i, line));
        }
    }
    out
}

/// Every fenced code block of `text`, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    lang: info.trim().to_owned(),
                    body: String::new(),
                });
            }
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some(b), None) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The heading level of `line` (`## x` is 2), outside code.
fn level(line: &str) -> Option<usize> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    (hashes > 0 && line[hashes..].starts_with(' ')).then_some(hashes)
}

/// The part of `text` under the heading line `heading` (exactly as written, `## Exit status`),
/// up to the next heading of the same level or above; panics if there is no such heading.
pub fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let lines: Vec<&str> = text.lines().collect();
    let prose = prose_lines(text);
    let (start, _) = prose
        .iter()
        .find(|(_, l)| l.trim_end() == heading)
        .unwrap_or_else(|| panic!("no heading `{heading}`"));
    let own = level(heading).expect("a heading");
    let end = prose
        .iter()
        .find(|(i, l)| *i > *start && level(l).is_some_and(|n| n <= own))
        .map_or(lines.len(), |(i, _)| *i);
    let from = line_offset(text, start + 1);
    let to = line_offset(text, end);
    &text[from..to]
}

/// The byte offset where line `n` (0-based) of `text` starts.
fn line_offset(text: &str, n: usize) -> usize {
    text.split_inclusive('\n').take(n).map(str::len).sum()
}

/// The first fenced block of `lang` in `text`; panics if there is none.
pub fn block(text: &str, lang: &str) -> Block {
    blocks(text)
        .into_iter()
        .find(|b| b.lang == lang)
        .unwrap_or_else(|| panic!("no ```{lang} block in:\n{text}"))
}

/// The rows of the pipe tables in `text` (header and `|---|` lines left out), each as its
/// cells, trimmed.
pub fn table_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut header = true;
    for (_, line) in prose_lines(text) {
        let line = line.trim();
        if !line.starts_with('|') {
            header = true;
            continue;
        }
        if line.starts_with("|---") || line.starts_with("| ---") {
            continue;
        }
        if header {
            header = false;
            continue;
        }
        let inner = line.trim_start_matches('|').trim_end_matches('|');
        rows.push(inner.split('|').map(|c| c.trim().to_owned()).collect());
    }
    rows
}

/// The text of `text` outside fenced code blocks, its lines joined again.
fn prose(text: &str) -> String {
    prose_lines(text)
        .into_iter()
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The code spans of `text` outside fenced blocks (a span may go on over a line break, which
/// reads as a space).
pub fn code_spans(text: &str) -> Vec<String> {
    prose(text)
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.replace('\n', " "))
        .collect()
}

/// The targets of the inline links of `text` outside code: `[text](target)`.
pub fn links(text: &str) -> Vec<String> {
    let outside: String = prose(text)
        .split('`')
        .step_by(2)
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    let mut rest = outside.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

/// The anchor GitHub gives a heading's text: lower case, letters, digits, `-` and `_` kept,
/// spaces made `-`, everything else left out.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of `text` (a repeated one gets `-1`, `-2`, … as on GitHub).
pub fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose_lines(text) {
        let Some(n) = level(line) else { continue };
        let base = slug(&line[n..]);
        let mut anchor = base.clone();
        let mut k = 0;
        while seen.contains(&anchor) {
            k += 1;
            anchor = format!("{base}-{k}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("Drive loops from the chat: `loop telegram`"),
        "drive-loops-from-the-chat-loop-telegram"
    );
    assert_eq!(slug("1. Getting started"), "1-getting-started");
    assert_eq!(slug("Claude Code's hooks"), "claude-codes-hooks");
    let text = "# A\n```\n# not a heading\n```\n## Details\n### Details\n";
    let got = anchors(text);
    assert!(got.contains("a") && got.contains("details") && got.contains("details-1"));
    assert!(!got.contains("not-a-heading"));
}

#[test]
fn a_section_ends_at_the_next_heading_of_its_level() {
    let text = "# T\n## One\na\n### Sub\nb\n## Two\nc\n";
    assert_eq!(section(text, "## One"), "a\n### Sub\nb\n");
    assert_eq!(section(text, "## Two"), "c\n");
    assert_eq!(
        table_rows("| a | b |\n|---|---|\n| 1 | `x` |\n"),
        [vec!["1".to_owned(), "`x`".to_owned()]]
    );
    assert_eq!(links("see [x](a.md#b) and `[y](c)`"), ["a.md#b"]);
    assert_eq!(
        code_spans("a `loop\nhook install` b"),
        ["loop hook install"]
    );
}
