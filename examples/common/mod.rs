//! What the soaks share: a seeded random sequence, the built binaries, and the processes a loop
//! left alive.

#![allow(
    dead_code,
    reason = "each soak includes this file and uses a part of it"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A seeded sequence (xorshift64*): the same seed, the same faults.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The number after `flag` on the command line (`--loops 100`), if it is there.
pub fn number_after(args: &[String], flag: &str) -> Option<u64> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// A binary built beside the example (`target/<profile>/<name>`).
pub fn bin(name: &str) -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    // target/<profile>/examples/<soak> → target/<profile>/<name>
    let dir = me.parent().and_then(Path::parent).expect("target dir");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} not found: run `cargo build --release` (or without --release for a debug soak) first",
        p.display()
    );
    p
}

/// The live processes whose command line or environment names `dir`: pid and command line.
pub fn processes_of(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let hay = |b: &[u8]| String::from_utf8_lossy(b).contains(&needle);
        if hay(&env) || hay(&cmd) {
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

/// Polls `f` every 5 ms until it holds; false if `timeout` passes first.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

pub fn kill9(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
        nix::sys::signal::Signal::SIGKILL,
    );
}
