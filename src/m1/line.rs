//! One line of M1.md as read: its exact text and ending, and what it is (a key line, or
//! something the runner does not own and keeps byte for byte).

use super::value::Scalar;

/// A line ending, kept per line so a CRLF file stays CRLF and a missing final newline stays
/// missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eol {
    Lf,
    CrLf,
    None,
}

impl Eol {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Eol::Lf => "\n",
            Eol::CrLf => "\r\n",
            Eol::None => "",
        }
    }
}

/// What a line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Empty or only spaces: belongs to nothing, ends nothing.
    Blank,
    /// An indented `# ...` inside a block: kept, ends nothing.
    Comment,
    /// Markdown, headings, fences, sentences: ends any open block.
    Prose,
    Key(KeyLine),
}

/// `KEY: value` or `KEY:` (a block), at some indentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyLine {
    /// Leading spaces (a multiple of two in a valid file).
    pub indent: usize,
    pub key: String,
    /// Byte offset of the `:` after the key.
    pub colon: usize,
    /// `None` for a block key (nothing but maybe a comment after the colon).
    pub value: Option<Scalar>,
    /// Index of the enclosing key line, `None` at top level.
    pub parent: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Line {
    /// The line without its ending.
    pub text: String,
    pub eol: Eol,
    pub kind: Kind,
}

impl Line {
    #[must_use]
    pub(crate) fn key(&self) -> Option<&KeyLine> {
        match &self.kind {
            Kind::Key(k) => Some(k),
            _ => None,
        }
    }

    pub(crate) fn key_mut(&mut self) -> Option<&mut KeyLine> {
        match &mut self.kind {
            Kind::Key(k) => Some(k),
            _ => None,
        }
    }
}

/// Splits text into lines with their endings; the last line has `Eol::None` when the text
/// does not end with a newline. Empty text has no lines.
#[must_use]
pub(super) fn split(text: &str) -> Vec<(&str, Eol)> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(i) = rest.find('\n') {
            let (body, eol) = match rest[..i].strip_suffix('\r') {
                Some(b) => (b, Eol::CrLf),
                None => (&rest[..i], Eol::Lf),
            };
            out.push((body, eol));
            rest = &rest[i + 1..];
        } else {
            out.push((rest, Eol::None));
            rest = "";
        }
    }
    out
}

/// The 1-based column (in characters) of byte offset `byte` in `text`.
#[must_use]
pub(super) fn column(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].chars().count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_each_ending() {
        let v = split("a\r\nb\nc");
        assert_eq!(v, vec![("a", Eol::CrLf), ("b", Eol::Lf), ("c", Eol::None)]);
        assert!(split("").is_empty());
        assert_eq!(split("\n"), vec![("", Eol::Lf)]);
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(column("GOAL: 日本語 x", "GOAL: 日本語 ".len()), 11);
    }
}
