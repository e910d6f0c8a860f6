//! Lines a person reads as keys but the grammar reads as text: ` STATUS:` (indented),
//! `status:` (lower case), `STATUS RUNNING` (no colon), a step line outside PLAN.STEPS. Left
//! alone they make a key silently absent (a loop reads as IDLE, a plan as empty), so
//! validation points at them, and an edit of STATUS rewrites such a line instead of adding a
//! second one.

use super::line::{self, Kind, Line};
use super::syntax::{self, Fenced};

/// The top-level keys the runner reads.
pub(super) const KNOWN_TOP: &[&str] = &[
    "STATUS",
    "GOAL",
    "CONSTRAINTS",
    "PLAN",
    "CURRENT",
    "RESULTS",
    "LIMITS",
    "AGENT",
    "LAST_ACTION",
    "NEXT_ACTION",
    "VERIFY",
    "GATES",
];

/// A text line that looks like the top-level key `key`, and what keeps it from being one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Lookalike {
    pub key: &'static str,
    /// 1-based character column of the problem.
    pub column: usize,
    /// What is wrong, for the end of an error message.
    pub why: String,
}

/// How a key line for `key` should look, for error messages.
#[must_use]
pub(super) fn expected(key: &str) -> String {
    match key {
        "STATUS" => "`STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`".to_string(),
        "GOAL" => "`GOAL: what the loop should achieve`".to_string(),
        "PLAN" | "CURRENT" | "RESULTS" | "LIMITS" | "AGENT" => {
            format!("`{key}:` alone on its line")
        }
        _ => format!("`{key}: value`"),
    }
}

/// Whether `body` (a line read as text) looks like a known top-level key line.
#[must_use]
pub(super) fn lookalike(body: &str) -> Option<Lookalike> {
    let lead = syntax::lead_len(body);
    let rest = &body[lead..];
    let word_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let word = &rest[..word_len];
    let key = *KNOWN_TOP.iter().find(|k| k.eq_ignore_ascii_case(word))?;
    let after = &rest[word_len..];
    let gap = after.len() - after.trim_start_matches(' ').len();
    let colon = after[gap..].starts_with(':');
    let exact = word == key;
    if !colon && !exact {
        // `Status update below`: prose that merely starts with the word.
        return None;
    }
    let shown = shown(rest);
    let why = if lead > 0 {
        let spaces = &body[..lead];
        let what = match spaces.chars().find(|c| *c != ' ') {
            Some('\t') => "a tab".to_string(),
            Some(c) => format!("a {}", syntax::space_name(c)),
            None if lead == 1 => "a space".to_string(),
            None => format!("{lead} spaces"),
        };
        (
            1,
            format!("found `{shown}` after {what} — a top-level key starts the line"),
        )
    } else if !exact {
        (1, format!("found `{shown}` — keys are upper case"))
    } else if colon && gap == 0 {
        // A well-formed key line: not a lookalike.
        return None;
    } else if colon {
        (
            line::column(body, lead + word_len),
            format!("found `{shown}` — the colon goes right after the key"),
        )
    } else if after.is_empty() || after.starts_with(' ') {
        (
            line::column(body, lead + word_len),
            format!("found `{shown}` — a colon goes after the key"),
        )
    } else {
        return None;
    };
    Some(Lookalike {
        key,
        column: why.0,
        why: format!("expected {}; {}", expected(key), why.1),
    })
}

/// The start of a line as an error quotes it: up to a comment, at most 40 characters and an ellipsis.
fn shown(rest: &str) -> String {
    let cut = rest.find(" #").unwrap_or(rest.len());
    crate::text::cut(rest[..cut].trim_end(), 41)
}

/// Whether `body` looks like a step line, `N: [STATE] text`, whatever its indentation.
#[must_use]
pub(super) fn step_like(body: &str) -> bool {
    let rest = &body[syntax::lead_len(body)..];
    syntax::any_key_len(rest).is_some_and(|n| {
        rest.as_bytes()[0].is_ascii_digit() && rest[n + 1..].trim_start().starts_with('[')
    })
}

/// The text lines (outside closed code fences) that look like the top-level key `key`:
/// each with its index and fence state.
pub(super) fn candidates<'a>(
    lines: &'a [Line],
    fenced: &'a [Fenced],
    key: &'a str,
) -> impl Iterator<Item = (usize, Fenced, Option<Lookalike>)> + 'a {
    lines.iter().enumerate().filter_map(move |(i, l)| {
        if l.kind != Kind::Prose || fenced[i] == Fenced::Closed {
            return None;
        }
        let look = lookalike(&l.text).filter(|lk| lk.key == key);
        match fenced[i] {
            Fenced::Unclosed { .. } => {
                let canonical = syntax::top_key_len(&l.text).is_some_and(|n| &l.text[..n] == key);
                (canonical || look.is_some()).then_some((i, fenced[i], look))
            }
            _ => look.map(|lk| (i, fenced[i], Some(lk))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(s: &str) -> Option<(usize, String)> {
        lookalike(s).map(|l| (l.column, l.why))
    }

    #[test]
    fn lookalikes_say_what_is_wrong() {
        assert_eq!(
            why("status: RUNNING"),
            Some((
                1,
                "expected `STATUS: IDLE|RUNNING|WAITING|DONE|FAILED`; found `status: RUNNING` — \
                 keys are upper case"
                    .into()
            ))
        );
        assert_eq!(why("STATUS RUNNING  # x").unwrap().0, 7);
        assert!(why(" STATUS: DONE").unwrap().1.contains("after a space"));
        assert!(
            why("\u{a0}PLAN:")
                .unwrap()
                .1
                .contains("no-break space (U+00A0)")
        );
        assert_eq!(why("STATUS : DONE").unwrap().0, 7);
        assert_eq!(why("Status update below"), None);
        assert_eq!(why("STATUSES: x"), None);
        assert_eq!(why("# PLAN"), None);
        assert!(step_like("    3: [DONE] x"));
        assert!(step_like("\u{a0}1: [DONE] x"));
        assert!(!step_like("1: x"));
    }
}
