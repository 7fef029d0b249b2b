//! The delays between retries of a failing server (task-output's [`task_output::Backoff`], with
//! full jitter), and the outage clock they feed.

use std::time::{Duration, Instant};

/// The delays between retries of a failing server, and how long it has been failing.
#[derive(Debug, Clone)]
pub struct Backoff {
    delays: task_output::Backoff,
    failures: u32,
    since: Option<Instant>,
}

impl Backoff {
    /// Delays from `base`, doubling, never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            delays: task_output::Backoff::new(base, cap).jitter(),
            failures: 0,
            since: None,
        }
    }

    /// Records a failure; returns the delay before the next try: a random point in the upper
    /// half of `min(cap, base · 2^failures)` (jitter spreads clients that failed together).
    pub fn fail(&mut self) -> Duration {
        self.since.get_or_insert_with(Instant::now);
        self.failures = self.failures.saturating_add(1);
        self.delays.next_delay()
    }

    /// Records a success: the next failure starts from `base` again.
    pub fn succeed(&mut self) {
        self.failures = 0;
        self.since = None;
        self.delays.reset();
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
