//! Exit statuses a user or a script acts on, and the error that carries one.

use std::fmt;

/// The documented exit codes of `loop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The command did what it was asked; for `start`/`resume`: the loop is DONE.
    Ok = 0,
    /// `start`/`resume`: the loop is FAILED. Also any unexpected runtime error.
    Failed = 1,
    /// Bad input: a bad flag, id or duration, or an invalid M1.md.
    BadInput = 2,
    /// The loop is WAITING: stopped, needs a human, or waiting out a limit.
    Waiting = 3,
}

impl Status {
    #[must_use]
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// An error that ends the command with a specific exit status.
///
/// Anything else that reaches `main` exits with [`Status::Failed`].
#[derive(Debug)]
pub struct Exit {
    pub status: Status,
    pub message: String,
}

impl Exit {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self {
            status: Status::BadInput,
            message: message.into(),
        }
    }

    pub fn waiting(message: impl Into<String>) -> Self {
        Self {
            status: Status::Waiting,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            status: Status::Failed,
            message: message.into(),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// The exit status an error asks for: the first [`Exit`] in its chain; else `BadInput` for an
/// invalid M1.md (its errors are in the chain); else `Failed`.
#[must_use]
pub fn status_of(err: &anyhow::Error) -> Status {
    if let Some(e) = err.chain().find_map(|e| e.downcast_ref::<Exit>()) {
        return e.status;
    }
    if err.chain().any(|e| e.is::<crate::m1::Errors>()) {
        return Status::BadInput;
    }
    Status::Failed
}
