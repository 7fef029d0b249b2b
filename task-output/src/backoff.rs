//! Exponential backoff: the one way this workspace spaces out retries and polls.

use std::time::Duration;

/// Delays that start at `initial`, grow by `factor` after each one, never exceed `cap`, and
/// (with [`jitter`](Self::jitter)) are spread at random over the upper half of each step, so
/// that clients that failed together do not retry together.
///
/// [`next_delay`](Self::next_delay) returns the delay to wait now and grows the following one;
/// [`reset`](Self::reset) starts over from `initial` (a success, or new activity).
///
/// ```
/// use std::time::Duration;
/// use task_output::Backoff;
///
/// let ms = Duration::from_millis;
/// let mut backoff = Backoff::new(ms(5), ms(30));
/// let delays: Vec<_> = (0..5).map(|_| backoff.next_delay()).collect();
/// assert_eq!(delays, [ms(5), ms(10), ms(20), ms(30), ms(30)]);
/// backoff.reset();
/// assert_eq!(backoff.next_delay(), ms(5));
///
/// let mut spread = Backoff::new(ms(100), ms(400)).jitter();
/// let delay = spread.next_delay();
/// assert!(delay >= ms(50) && delay <= ms(100));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    factor: u32,
    cap: Duration,
    jitter: bool,
    next: Duration,
}

impl Backoff {
    /// Delays from `initial`, doubling, never above `cap` (an `initial` above `cap` is `cap`).
    pub fn new(initial: Duration, cap: Duration) -> Self {
        Self {
            initial: initial.min(cap),
            factor: 2,
            cap,
            jitter: false,
            next: initial.min(cap),
        }
    }

    /// Grows each delay by `factor` instead of 2 (at least 1).
    #[must_use]
    pub fn factor(self, factor: u32) -> Self {
        Self {
            factor: factor.max(1),
            ..self
        }
    }

    /// Spreads each delay at random over the upper half of its step: `[d/2, d]`.
    #[must_use]
    pub fn jitter(self) -> Self {
        Self {
            jitter: true,
            ..self
        }
    }

    /// The delay to wait now; the next one is `factor` times longer, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = step.saturating_mul(self.factor).min(self.cap);
        if self.jitter {
            let half = step / 2;
            half + half.mul_f64(unit_random())
        } else {
            step
        }
    }

    /// Starts over: the next delay is the initial one.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// A uniform number in `[0, 1)` from the OS's randomness (`0.5` if it has none to give).
fn unit_random() -> f64 {
    let mut bytes = [0u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn delays_grow_by_the_factor_up_to_the_cap_and_start_over_on_reset() {
        let mut backoff = Backoff::new(ms(1), ms(100)).factor(3);
        let delays: Vec<_> = (0..7).map(|_| backoff.next_delay()).collect();
        assert_eq!(
            delays,
            [ms(1), ms(3), ms(9), ms(27), ms(81), ms(100), ms(100)]
        );
        backoff.reset();
        assert_eq!(backoff.next_delay(), ms(1));
    }

    #[test]
    fn jittered_delays_stay_in_the_upper_half_of_each_step() {
        let mut backoff = Backoff::new(ms(100), ms(400)).jitter();
        for step in [100, 200, 400, 400, 400] {
            let delay = backoff.next_delay();
            assert!(delay >= ms(step / 2) && delay <= ms(step), "{delay:?}");
        }
    }

    #[test]
    fn an_initial_delay_above_the_cap_is_the_cap_and_a_huge_factor_saturates() {
        let mut backoff = Backoff::new(ms(50), ms(10));
        assert_eq!(backoff.next_delay(), ms(10));
        let mut backoff =
            Backoff::new(Duration::from_secs(u64::MAX / 2), Duration::MAX).factor(u32::MAX);
        backoff.next_delay();
        assert_eq!(backoff.next_delay(), Duration::MAX);
    }
}
