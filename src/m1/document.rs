//! The lossless document: every line of M1.md as read, plus an index of its key lines.
//! Rendering concatenates the lines, so an unedited document gives back the identical bytes;
//! edits rewrite or insert whole lines and touch nothing else.

use super::edit::Edit;
use super::error::{Error, Errors};
use super::line::{self, Eol, KeyLine, Kind, Line};
use super::view::M1;
use super::{syntax, validate};

const BOM: char = '\u{feff}';

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// A UTF-8 byte order mark before the first line (Windows editors write one): not part
    /// of any line, so line 1 reads and counts columns as an editor shows it, and given back
    /// by [`Document::render`].
    bom: bool,
    pub(crate) lines: Vec<Line>,
    /// Top-level key lines, then each line's child key lines: rebuilt after every edit so
    /// lookups stay linear on large files.
    top: Vec<usize>,
    kids: Vec<Vec<usize>>,
    /// The typed view, built at the first [`Document::view`] after the last change: a runner
    /// reads it many times a step, and building it walks the whole document.
    view: ViewCache,
}

/// A cache that is no part of the document's value: documents compare by their lines.
#[derive(Clone, Debug, Default)]
struct ViewCache(std::sync::OnceLock<std::sync::Arc<M1>>);

impl PartialEq for ViewCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ViewCache {}

impl Document {
    /// Parses and validates M1.md. Errors are all syntax and semantic problems found, in
    /// file order.
    ///
    /// # Errors
    /// [`Errors`] with line and column of each problem.
    pub fn parse(text: &str) -> Result<Document, Errors> {
        let doc = Self::parse_syntax(text)?;
        let mut errors = validate::check(&doc);
        if errors.is_empty() {
            Ok(doc)
        } else {
            errors.sort_by_key(|e| (e.line, e.column));
            Err(Errors::new(errors))
        }
    }

    /// Parses the line grammar only, without the rules about what the keys mean.
    ///
    /// # Errors
    /// Syntax errors (indentation, malformed key lines, quotes, duplicate keys).
    pub fn parse_syntax(text: &str) -> Result<Document, Errors> {
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if let Some(at) = text.find('\r')
            && !text.contains('\n')
        {
            // Read as LF, the whole file would be one line and every key "missing".
            return Err(Errors::new(vec![Error::new(
                1,
                line::column(text, at),
                "line endings are CR only (old Mac style); save with LF or CRLF",
            )]));
        }
        let (lines, mut errors) = syntax::lex(text);
        let mut doc = Document {
            bom,
            lines,
            top: Vec::new(),
            kids: Vec::new(),
            view: ViewCache::default(),
        };
        doc.index();
        errors.extend(doc.duplicates());
        if errors.is_empty() {
            Ok(doc)
        } else {
            errors.sort_by_key(|e| (e.line, e.column));
            Err(Errors::new(errors))
        }
    }

    /// The document's bytes: identical to the parsed text when nothing was edited.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.lines.iter().map(|l| l.text.len() + 2).sum());
        if self.bom {
            out.push(BOM);
        }
        for l in &self.lines {
            out.push_str(&l.text);
            out.push_str(l.eol.as_str());
        }
        out
    }

    /// The typed view. Fields that do not read as their type are left at their defaults;
    /// a document from [`Document::parse`] has none of those.
    #[must_use]
    pub fn view(&self) -> M1 {
        M1::clone(&self.shared_view())
    }

    /// The typed view, shared: built once per change of the document, never copied.
    #[must_use]
    pub fn shared_view(&self) -> std::sync::Arc<M1> {
        std::sync::Arc::clone(
            self.view
                .0
                .get_or_init(|| std::sync::Arc::new(M1::from_document(self))),
        )
    }

    /// Applies one edit; see [`Edit`] for what each one touches.
    pub fn apply(&mut self, edit: &Edit) {
        self.view = ViewCache::default();
        super::edit::apply(self, edit);
        self.view = ViewCache::default();
    }

    /// The unquoted value at `path`, e.g. `&["PLAN", "CURRENT_STEP"]`; `None` when the key is
    /// absent or is a block.
    #[must_use]
    pub fn get(&self, path: &[&str]) -> Option<String> {
        let idx = self.find(path)?;
        self.key_at(idx).value.as_ref().map(|v| v.text.clone())
    }

    /// The unquoted value of a declared key ([`super::keys`]).
    #[must_use]
    pub fn get_at(&self, path: &super::KeyPath) -> Option<String> {
        self.get(&path.keys().iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// [`Document::position`] of a declared key.
    #[must_use]
    pub fn position_at(&self, path: &super::KeyPath) -> Option<(usize, usize)> {
        self.position(&path.keys().iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Where the value at `path` is, as errors name it: line and column (1-based; the column
    /// in characters). `None` when the key is absent.
    #[must_use]
    pub fn position(&self, path: &[&str]) -> Option<(usize, usize)> {
        self.find(path).map(|i| self.value_position(i))
    }

    /// [`Document::position`] of the key line at `idx`: its value, or right after its colon.
    pub(crate) fn value_position(&self, idx: usize) -> (usize, usize) {
        let k = self.key_at(idx);
        let at = k.value.as_ref().map_or(k.colon + 1, |v| v.start);
        (idx + 1, super::line::column(&self.lines[idx].text, at))
    }

    /// Whether a key (scalar or block) exists at `path`.
    #[must_use]
    pub fn contains(&self, path: &[&str]) -> bool {
        self.find(path).is_some()
    }

    /// Keys directly under `path` (top-level keys for an empty path), in file order.
    #[must_use]
    pub fn keys(&self, path: &[&str]) -> Vec<String> {
        let parent = if path.is_empty() {
            None
        } else {
            match self.find(path) {
                Some(i) => Some(i),
                None => return Vec::new(),
            }
        };
        self.children(parent)
            .map(|i| self.key_at(i).key.clone())
            .collect()
    }

    /// The line ending most lines use; new lines get it.
    #[must_use]
    pub fn dominant_eol(&self) -> Eol {
        let crlf = self.lines.iter().filter(|l| l.eol == Eol::CrLf).count();
        let lf = self.lines.iter().filter(|l| l.eol == Eol::Lf).count();
        if crlf > lf { Eol::CrLf } else { Eol::Lf }
    }

    pub(crate) fn key_at(&self, idx: usize) -> &KeyLine {
        self.lines[idx].key().expect("index of a key line")
    }

    /// Indices of the key lines whose parent is `parent`.
    pub(crate) fn children(&self, parent: Option<usize>) -> impl Iterator<Item = usize> + '_ {
        match parent {
            None => self.top.iter().copied(),
            Some(p) => self.kids[p].iter().copied(),
        }
    }

    /// Rebuilds parents and the child index after lines were inserted or removed.
    pub(crate) fn reindex(&mut self) {
        syntax::reindex(&mut self.lines);
        self.index();
    }

    /// Brings parents and the child index up to date after a key line was inserted at `pos`,
    /// without walking the whole document as [`Document::reindex`] does (an edit inserts a
    /// line per new key, so a step's record would walk it a dozen times): every index from
    /// `pos` on moves down by one, and the new line's parent is the nearest key line above it
    /// that is less indented, none past a line of prose, as [`syntax::reindex`] finds it.
    /// Where the new line would become the parent of lines below it, the index is rebuilt.
    pub(crate) fn inserted(&mut self, pos: usize) {
        let indent = self.key_at(pos).indent;
        for l in &self.lines[pos + 1..] {
            match &l.kind {
                Kind::Blank | Kind::Comment => {}
                Kind::Key(k) if k.indent > indent => {
                    self.reindex();
                    return;
                }
                Kind::Prose | Kind::Key(_) => break,
            }
        }
        self.view = ViewCache::default();
        let parent = self.lines[..pos]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, l)| match &l.kind {
                Kind::Prose => Some(None),
                Kind::Key(k) if k.indent < indent => Some(Some(i)),
                _ => None,
            })
            .flatten();
        let shift = |i: &mut usize| {
            if *i >= pos {
                *i += 1;
            }
        };
        for l in &mut self.lines {
            if let Kind::Key(k) = &mut l.kind
                && let Some(p) = &mut k.parent
            {
                shift(p);
            }
        }
        if let Kind::Key(k) = &mut self.lines[pos].kind {
            k.parent = parent;
        }
        self.top.iter_mut().for_each(shift);
        self.kids.iter_mut().flatten().for_each(shift);
        self.kids.insert(pos, Vec::new());
        let siblings = match parent {
            None => &mut self.top,
            Some(p) => &mut self.kids[p],
        };
        let at = siblings.partition_point(|&i| i < pos);
        siblings.insert(at, pos);
        debug_assert!(
            {
                let mut whole = self.clone();
                whole.reindex();
                whole == *self
            },
            "the index kept up after an insertion at line {pos} is the one a rebuild gives"
        );
    }

    fn index(&mut self) {
        self.view = ViewCache::default();
        self.top.clear();
        self.kids = vec![Vec::new(); self.lines.len()];
        for (i, l) in self.lines.iter().enumerate() {
            if let Some(k) = l.key() {
                match k.parent {
                    None => self.top.push(i),
                    Some(p) => self.kids[p].push(i),
                }
            }
        }
    }

    pub(super) fn child(&self, parent: Option<usize>, key: &str) -> Option<usize> {
        self.children(parent).find(|&i| self.key_at(i).key == key)
    }

    pub(super) fn find(&self, path: &[&str]) -> Option<usize> {
        let mut at = None;
        for key in path {
            at = Some(self.child(at, key)?);
        }
        at
    }

    /// The last key line inside the block at `idx` (or `idx` itself when it has none).
    pub(crate) fn subtree_end(&self, idx: usize) -> usize {
        let indent = self.key_at(idx).indent;
        let mut last = idx;
        for (j, l) in self.lines.iter().enumerate().skip(idx + 1) {
            match &l.kind {
                Kind::Prose => break,
                Kind::Key(k) if k.indent <= indent => break,
                Kind::Key(_) => last = j,
                Kind::Blank | Kind::Comment => {}
            }
        }
        last
    }

    fn duplicates(&self) -> Vec<Error> {
        let mut seen = std::collections::HashMap::new();
        let mut errors = Vec::new();
        for (i, l) in self.lines.iter().enumerate() {
            if let Some(k) = l.key()
                && let Some(first) = seen.insert((k.parent, k.key.as_str()), i)
            {
                seen.insert((k.parent, k.key.as_str()), first);
                errors.push(Error::new(
                    i + 1,
                    k.indent + 1,
                    format!("duplicate key `{}` (first on line {})", k.key, first + 1),
                ));
            }
        }
        errors
    }
}
