//! The emergency stop: `LOOP_STOP_FILE` (default `/tmp/croppy-stop`) stops every loop, and a
//! `STOP` file beside M1.md stops that loop only.

use std::path::{Path, PathBuf};

/// The default global stop file of the seed.
pub const DEFAULT_STOP_FILE: &str = "/tmp/croppy-stop";

/// The global stop file: `LOOP_STOP_FILE`, else [`DEFAULT_STOP_FILE`].
#[must_use]
pub fn global() -> PathBuf {
    std::env::var_os("LOOP_STOP_FILE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_STOP_FILE), PathBuf::from)
}

/// The per-loop stop file beside M1.md.
#[must_use]
pub fn local(state_dir: &Path) -> PathBuf {
    crate::layout::Layout::dir(state_dir).stop_file()
}

/// Both stop files that apply to the loop in `state_dir`.
#[must_use]
pub fn paths(state_dir: &Path) -> [PathBuf; 2] {
    [global(), local(state_dir)]
}

/// The first stop file that exists, if any.
#[must_use]
pub fn present(state_dir: &Path) -> Option<PathBuf> {
    paths(state_dir).into_iter().find(|p| p.exists())
}

/// Creates the global stop file (what `loop stop` does) and returns its path.
///
/// # Errors
/// When the file cannot be created.
pub fn create() -> std::io::Result<PathBuf> {
    let p = global();
    std::fs::write(
        &p,
        format!(
            "stopped by loop stop at {}\n",
            chrono::Utc::now().to_rfc3339()
        ),
    )?;
    Ok(p)
}
