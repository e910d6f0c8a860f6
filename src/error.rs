//! The error of a `loop` command, whose variant picks the exit status (as just's `Error::code`).
//!
//! A command that can fail in a way a user or a script acts on returns [`Result`], up to
//! `cli::run`, which exits with [`Error::code`]. Anything unplanned (an I/O failure, a bug)
//! comes in as [`Error::Internal`] through `?` on an `anyhow::Result` or an `io::Result`.
//!
//! [`Error`] is deliberately not a [`std::error::Error`]: `?` cannot turn it into an
//! `anyhow::Error`, where its status would be lost. A function that may fail with bad input
//! says so in its type, and so does every caller up to `cli::run`; the compiler checks it.

use std::fmt;

use crate::exit::Status;

/// Why a command did not do what it was asked.
#[derive(Debug)]
pub enum Error {
    /// A bad flag, id, duration or file, an invalid M1.md, or a loop in the way
    /// ([`Status::BadInput`]).
    BadInput(String),
    /// The loop cannot go on until a person acts: a stop file, a hand edit that left M1.md
    /// invalid ([`Status::Waiting`]).
    Waiting(String),
    /// The command ran and did not get there: `stop` gave up waiting for a runner
    /// ([`Status::Failed`]).
    Failed(String),
    /// Anything `loop` did not plan for: an I/O failure or a bug ([`Status::Internal`]).
    Internal(anyhow::Error),
}

/// A [`std::result::Result`] whose error is [`Error`].
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::BadInput(message.into())
    }

    pub fn waiting(message: impl Into<String>) -> Self {
        Self::Waiting(message.into())
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// The exit status this error asks for.
    #[must_use]
    pub fn code(&self) -> Status {
        match self {
            Self::BadInput(_) => Status::BadInput,
            Self::Waiting(_) => Status::Waiting,
            Self::Failed(_) => Status::Failed,
            Self::Internal(_) => Status::Internal,
        }
    }

    /// The same error with `what` in front of its message, as `anyhow::Context` does.
    #[must_use]
    pub fn context(self, what: impl fmt::Display) -> Self {
        match self {
            Self::BadInput(m) => Self::BadInput(format!("{what}: {m}")),
            Self::Waiting(m) => Self::Waiting(format!("{what}: {m}")),
            Self::Failed(m) => Self::Failed(format!("{what}: {m}")),
            Self::Internal(e) => Self::Internal(e.context(what.to_string())),
        }
    }

    /// This error where no exit status hangs on it (inside a running loop, a task a step
    /// fires): its message, as an `anyhow::Error`. The one way out of the type, and explicit.
    #[must_use]
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            Self::Internal(e) => e,
            other => anyhow::Error::msg(other.to_string()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadInput(m) | Self::Waiting(m) | Self::Failed(m) => f.write_str(m),
            Self::Internal(e) => {
                write!(f, "{e:#}")?;
                if crate::full_disk::cause(e).is_some() {
                    f.write_str(
                        " (the file system cannot be written for now: a full disk, a spent \
                         quota or a read-only mount: make room, then run the command again)",
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Self::Internal(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Self::Internal(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpected_error_is_not_a_failed_loop() {
        let err: Error = anyhow::anyhow!("disk on fire")
            .context("while writing M1.md")
            .into();
        assert_eq!(err.code(), Status::Internal);
        assert_eq!(err.to_string(), "while writing M1.md: disk on fire");
        assert_ne!(Status::Internal.code(), Status::Failed.code());
    }

    /// `loop resume` on a full disk said only "No space left on device (os error 28)".
    #[test]
    fn an_error_of_a_full_disk_says_so_and_what_to_do() {
        let full = std::io::Error::from_raw_os_error(28);
        let err: Error = anyhow::Error::new(full)
            .context("while writing the lock state/M1.md.lock")
            .into();
        let said = err.to_string();
        assert!(said.starts_with("while writing the lock state/M1.md.lock: No space left"));
        assert!(
            said.contains("a full disk") && said.contains("make room"),
            "{said}"
        );
    }

    #[test]
    fn context_keeps_the_status_it_was_given() {
        let err = Error::bad_input("no task \"x\"").context("loop check");
        assert_eq!(err.code(), Status::BadInput);
        assert_eq!(err.to_string(), "loop check: no task \"x\"");
        let err = Error::from(std::io::Error::other("EIO")).context("reading M1.md");
        assert_eq!(err.code(), Status::Internal);
        assert_eq!(err.to_string(), "reading M1.md: EIO");
    }
}
