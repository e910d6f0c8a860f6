//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod bridge;
pub mod harness;
pub mod sim;
pub mod telegram_fake;

use std::path::{Path, PathBuf};

/// Every file under `dir`, recursively.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// An M1.md with the given bytes in a temporary directory of its own.
pub struct Case {
    _dir: tempfile::TempDir,
    pub file: PathBuf,
}

pub fn case(bytes: &[u8]) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("M1.md");
    std::fs::write(&file, bytes).unwrap();
    Case { _dir: dir, file }
}
