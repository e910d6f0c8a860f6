//! Helpers shared by the integration tests (`mod support;`). Each test binary uses a part.
#![allow(dead_code)]

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
