//! Exponential backoff: the base (env `LOOP_NOTIFY_BACKOFF_MS`, default 1000) doubling up to a
//! cap. The base is configurable so tests of retries run in milliseconds.

use std::time::Duration;

/// The default first wait.
const DEFAULT_BASE_MS: u64 = 1000;

/// The first wait between retries, from `LOOP_NOTIFY_BACKOFF_MS`.
///
/// # Errors
/// When the variable is set but is not a whole number of milliseconds.
pub(crate) fn base_from_env() -> Result<Duration, String> {
    match std::env::var("LOOP_NOTIFY_BACKOFF_MS") {
        Err(_) => Ok(Duration::from_millis(DEFAULT_BASE_MS)),
        Ok(v) if v.trim().is_empty() => Ok(Duration::from_millis(DEFAULT_BASE_MS)),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| {
                format!("LOOP_NOTIFY_BACKOFF_MS={v:?} is not a number of milliseconds (e.g. 1000)")
            }),
    }
}

/// Successive waits: `base`, `2·base`, `4·base`, … never more than `cap`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

impl Backoff {
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            failures: 0,
        }
    }

    /// The wait after one more failure.
    pub(crate) fn next_wait(&mut self) -> Duration {
        let factor = 1u32 << self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// How many failures in a row so far.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(10));
        let waits: Vec<u64> = (0..5).map(|_| b.next_wait().as_secs()).collect();
        assert_eq!(waits, vec![2, 4, 8, 10, 10]);
        assert_eq!(b.failures(), 5);
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_secs(2));
    }
}
