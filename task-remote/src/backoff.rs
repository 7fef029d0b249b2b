//! Capped exponential backoff with full jitter, and the outage clock it feeds.

use std::time::{Duration, Instant};

/// The delays between retries of a failing server, and how long it has been failing.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
    since: Option<Instant>,
}

impl Backoff {
    /// Delays from `base`, doubling, never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            failures: 0,
            since: None,
        }
    }

    /// Records a failure; returns the delay before the next try: a random point in the upper
    /// half of `min(cap, base · 2^failures)` (jitter spreads clients that failed together).
    pub fn fail(&mut self) -> Duration {
        self.since.get_or_insert_with(Instant::now);
        let exp = self.base.saturating_mul(1u32 << self.failures.min(16));
        self.failures = self.failures.saturating_add(1);
        let ceiling = exp.min(self.cap);
        let half = ceiling / 2;
        half + half.mul_f64(jitter())
    }

    /// Records a success: the next failure starts from `base` again.
    pub fn succeed(&mut self) {
        self.failures = 0;
        self.since = None;
    }

    /// How long the server has been failing (zero while it answers).
    pub fn outage(&self) -> Duration {
        self.since.map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// A uniform number in `[0, 1)` from the OS's randomness (`0.5` if it has none to give).
fn jitter() -> f64 {
    let mut bytes = [0u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_stay_in_the_upper_half() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
        for ceiling in [100, 200, 400, 400, 400] {
            let delay = backoff.fail();
            assert!(delay >= Duration::from_millis(ceiling / 2), "{delay:?}");
            assert!(delay <= Duration::from_millis(ceiling), "{delay:?}");
        }
        backoff.succeed();
        assert!(backoff.fail() <= Duration::from_millis(100));
        assert_eq!(backoff.failures(), 1);
    }
}
