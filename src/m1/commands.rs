//! `loop validate` and `loop status`: read M1.md and report; neither ever writes it.

use std::path::Path;

use crate::exit::{Exit, Status};

use super::error::Errors;
use super::{Store, status_view};

/// `loop validate`: `path: ok`, or every error as `path:line:column: message` on stderr and
/// exit status 2.
///
/// # Errors
/// A missing or unreadable file.
pub fn validate(file: &Path) -> anyhow::Result<Status> {
    match open(file)? {
        Ok(_) => {
            println!("{}: ok", file.display());
            Ok(Status::Ok)
        }
        Err(errors) => {
            eprintln!("{errors}");
            Ok(Status::BadInput)
        }
    }
}

/// `loop status [--json]`: what the file says. Never writes.
///
/// # Errors
/// A missing or unreadable file.
pub fn status(file: &Path, json: bool) -> anyhow::Result<Status> {
    let doc = match open(file)? {
        Ok(doc) => doc,
        Err(errors) => {
            eprintln!("{errors}");
            return Ok(Status::BadInput);
        }
    };
    let m = doc.view();
    let state_dir = crate::cli::state_dir(file);
    let task = m
        .current
        .task_id
        .as_deref()
        .and_then(|id| task_line(&state_dir, id));
    if json {
        println!("{}", status_view::json(&m, task.as_deref()));
    } else {
        print!("{}", status_view::human(&m, task.as_deref()));
    }
    Ok(Status::Ok)
}

/// One line about the running task from the exec bridge (alive, elapsed, exit). The bridge
/// fills this in (`crate::bridge::check`); until then there is nothing to add to what the
/// file says.
fn task_line(_state_dir: &Path, _task_id: &str) -> Option<String> {
    None
}

/// Opens the file read-only: the document, or its validation errors (with the path).
/// A missing file is bad input that says how to start a loop.
fn open(file: &Path) -> anyhow::Result<Result<super::Document, Errors>> {
    if !file.exists() {
        return Err(Exit::bad_input(format!(
            "{} does not exist; start a loop with `loop start \"GOAL\"` (or pass --file PATH)",
            file.display()
        ))
        .into());
    }
    match Store::open(file) {
        Ok((_, doc)) => Ok(Ok(doc)),
        Err(err) => match err.downcast::<Errors>() {
            Ok(errors) => Ok(Err(errors)),
            Err(other) => Err(other),
        },
    }
}
