//! Validation errors that point at a line and column, so a human fixing M1.md by hand knows
//! exactly where to look.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in M1.md. Line and column are 1-based; the column counts characters (not
/// bytes), so it matches what an editor shows for Japanese text too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Error {
    pub fn new(line: usize, column: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            column,
            message: message.into(),
        }
    }

    /// A problem of the whole file (what the path names, its size), at no line: line and
    /// column 0, shown as `path: message`.
    pub fn whole_file(message: impl Into<String>) -> Self {
        Self::new(0, 0, message)
    }

    /// About the file as a whole (it could not be read as a text), not at a line.
    #[must_use]
    pub fn is_whole_file(&self) -> bool {
        self.line == 0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_whole_file() {
            return f.write_str(&self.message);
        }
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Every problem found in one document, in file order. Never empty when returned as an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Errors(pub Vec<Error>, Option<PathBuf>);

impl Errors {
    #[must_use]
    pub fn new(errors: Vec<Error>) -> Self {
        Self(errors, None)
    }

    /// The same errors, displayed as `path:line:column: message`.
    #[must_use]
    pub fn with_path(self, path: &Path) -> Self {
        Self(self.0, Some(path.to_path_buf()))
    }

    /// The file these errors are about, when known.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.1.as_deref()
    }

    #[must_use]
    pub fn errors(&self) -> &[Error] {
        &self.0
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            match &self.1 {
                Some(p) if e.is_whole_file() => write!(f, "{}: ", p.display())?,
                Some(p) => write!(f, "{}:", p.display())?,
                None => {}
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_error_per_line_with_optional_path() {
        let errs = Errors::new(vec![Error::new(1, 2, "a"), Error::new(3, 4, "b")]);
        assert_eq!(errs.to_string(), "1:2: a\n3:4: b");
        let errs = errs.with_path(Path::new("state/M1.md"));
        assert_eq!(errs.to_string(), "state/M1.md:1:2: a\nstate/M1.md:3:4: b");
        let whole = Errors::new(vec![Error::whole_file("a FIFO")]);
        assert_eq!(whole.to_string(), "a FIFO");
        assert_eq!(
            whole.with_path(Path::new("M1.md")).to_string(),
            "M1.md: a FIFO"
        );
    }
}
