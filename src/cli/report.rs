//! `loop report [--format md|json|html] [--output PATH|-]`: what the loop did. The page goes
//! beside M1.md unless told otherwise, and its path is printed; Markdown and JSON go to
//! standard output unless told otherwise.

use std::path::{Path, PathBuf};

use crate::exit::Status;
use crate::report::{self, Format};

/// `loop report` for the loop of `file`.
///
/// # Errors
/// No loop at `file`, an M1.md that does not read (bad input); a file that cannot be written.
pub(crate) fn run(
    file: &Path,
    format: Format,
    output: Option<&Path>,
) -> crate::error::Result<Status> {
    let r = report::gather(file)?;
    let text = report::render(&r, format);
    let to: Option<PathBuf> = match (output, format) {
        (Some(p), _) if p == Path::new("-") => None,
        (Some(p), _) => Some(p.to_path_buf()),
        (None, Format::Html) => Some(report::default_path(file)),
        (None, _) => None,
    };
    match to {
        None => crate::out!("{text}"),
        Some(path) => {
            report::write(&path, &text)?;
            let shown = std::path::absolute(&path).unwrap_or(path);
            crate::outln!("{}", shown.display());
        }
    }
    Ok(Status::Ok)
}
