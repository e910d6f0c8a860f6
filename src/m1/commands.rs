//! `loop validate` and `loop status`.

use std::path::Path;

use crate::exit::Status;

/// `loop validate`.
pub fn validate(_file: &Path) -> anyhow::Result<Status> {
    anyhow::bail!("validate: not built yet")
}

/// `loop status`.
pub fn status(_file: &Path, _json: bool) -> anyhow::Result<Status> {
    anyhow::bail!("status: not built yet")
}
