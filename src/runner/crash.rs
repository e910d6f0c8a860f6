//! Named crash points, for the crash-safety tests: `LOOP_CRASH_AT=NAME` (or `NAME@K` for the
//! K-th time that point is reached) makes the runner kill itself with SIGKILL there, exactly
//! as a power cut or `kill -9` would. Unset, each point costs one cached string comparison.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Every crash point, in the order a step passes them.
/// (A revived runner also passes `after-revival`, right after it took the loop over.)
pub const POINTS: &[&str] = &[
    "before-spawn-write",
    "after-spawn-write",
    "after-fire",
    "after-pid-write",
    "before-verify",
    "before-record-write",
    "after-record-write",
    "before-done-write",
    "after-done-write",
];

static TARGET: OnceLock<Option<(String, u32)>> = OnceLock::new();
static HITS: AtomicU32 = AtomicU32::new(0);

fn target() -> Option<&'static (String, u32)> {
    TARGET
        .get_or_init(|| {
            let raw = std::env::var("LOOP_CRASH_AT")
                .ok()
                .filter(|s| !s.is_empty())?;
            let (name, nth) = match raw.split_once('@') {
                Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
                None => (raw, 1),
            };
            Some((name, nth))
        })
        .as_ref()
}

/// Dies here if `LOOP_CRASH_AT` names this point (and this is its K-th passage).
pub fn point(name: &str) {
    let Some((want, nth)) = target() else { return };
    if want != name {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}
