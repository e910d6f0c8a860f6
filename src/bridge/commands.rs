//! `loop check` and `loop kill`.

use std::path::Path;

use crate::exit::Status;

/// `loop check ID`.
pub fn check(_state_dir: &Path, _id: &str, _json: bool) -> anyhow::Result<Status> {
    anyhow::bail!("check: not built yet")
}

/// `loop kill ID`.
pub fn kill(_state_dir: &Path, _id: &str) -> anyhow::Result<Status> {
    anyhow::bail!("kill: not built yet")
}
