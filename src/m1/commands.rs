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
            crate::outln!("{}: ok", file.display());
            Ok(Status::Ok)
        }
        Err(errors) => {
            crate::errln!("{errors}");
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
            crate::errln!("{errors}");
            return Ok(Status::BadInput);
        }
    };
    let m = doc.view();
    let state_dir = crate::cli::state_dir(file);
    // What the exec bridge knows of the task on record: alive or not, elapsed, exit.
    let report = m
        .current
        .task_id
        .as_deref()
        .filter(|id| crate::bridge::exists(&state_dir, id))
        .and_then(|id| crate::bridge::check(&state_dir, id).ok());
    let runner = crate::lock::holder(file);
    let line = report.as_ref().map(crate::bridge::TaskReport::line);
    if json {
        let mut v = status_view::json(&m, line.as_deref());
        v["task"] = report
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok())
            .unwrap_or(serde_json::Value::Null);
        v["runner_pid"] = runner.map_or(serde_json::Value::Null, Into::into);
        v["total_cost_usd"] = crate::engine::spent(&m).into();
        crate::outln!("{v}");
    } else {
        crate::out!("{}", status_view::human(&m, line.as_deref()));
        match (runner, m.status) {
            (Some(pid), _) => crate::outln!("RUNNER       pid {pid}"),
            (None, super::Status::Running) => {
                crate::outln!(
                    "RUNNER       none: `loop resume` carries the loop on from this file"
                );
            }
            (None, _) => {}
        }
        if let Some(hint) = crate::notifier::setup_hint() {
            crate::outln!("{hint}");
        }
    }
    Ok(Status::Ok)
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
