//! The stall and size watchdogs as state machines (SPEC §5).
//!
//! They hold no timers and do no I/O: the task's run stats the output file on its own schedule,
//! feeds the size and the current instant in, and does what the returned step says. That keeps the
//! rules testable without clocks and the I/O in one place.

use std::time::{Duration, Instant};

use crate::prompt::looks_like_prompt;

/// What the task's run should do after feeding the stall watchdog an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StallStep {
    /// Nothing to do until the next check.
    Wait,
    /// The output has been quiet for the threshold: read its tail and call
    /// [`StallWatchdog::judge`].
    InspectTail,
    /// The watchdog has fired; stop checking.
    Done,
}

/// Detects a command that stopped producing output because it waits on a prompt.
///
/// The output must stay the same size for `threshold`; then the last line of the tail is tested
/// against the prompt patterns. No match restarts the quiet clock, so a slow but progressing
/// command never triggers. A match fires once; after that the watchdog is done.
#[derive(Debug, Clone)]
pub struct StallWatchdog {
    threshold: Duration,
    last_size: Option<u64>,
    quiet_since: Instant,
    /// The output size whose tail was judged not a prompt: until the output grows past it,
    /// its tail is the same and there is nothing new to judge.
    judged: Option<u64>,
    fired: bool,
}

impl StallWatchdog {
    /// A watchdog whose quiet clock starts at `now`.
    pub fn new(threshold: Duration, now: Instant) -> Self {
        Self {
            threshold,
            last_size: None,
            quiet_since: now,
            // An empty output has no last line to judge: nothing to look at until it grows.
            judged: Some(0),
            fired: false,
        }
    }

    /// Feeds the output size seen at `now`.
    pub fn observe(&mut self, size: u64, now: Instant) -> StallStep {
        if self.fired {
            return StallStep::Done;
        }
        if self.saw(size, now) || self.judged == Some(size) {
            return StallStep::Wait;
        }
        if now.saturating_duration_since(self.quiet_since) >= self.threshold {
            StallStep::InspectTail
        } else {
            StallStep::Wait
        }
    }

    /// Notes the output size seen at `now` without judging it: a growth restarts the quiet
    /// clock. Returns whether it grew.
    pub fn saw(&mut self, size: u64, now: Instant) -> bool {
        let grew = self.last_size != Some(size);
        if grew {
            self.last_size = Some(size);
            self.quiet_since = now;
        }
        grew
    }

    /// When the output will have been quiet for the threshold, if it does not grow before:
    /// the earliest an observation can call for the tail. `None` once fired, and while the
    /// tail last judged not a prompt is still the whole output (until it grows).
    pub fn due(&self) -> Option<Instant> {
        let nothing_new = self.judged.is_some() && self.judged == self.last_size;
        (!self.fired && !nothing_new).then(|| self.quiet_since + self.threshold)
    }

    /// Judges the output tail read after [`StallStep::InspectTail`]; `true` means "notify now"
    /// and is returned at most once.
    pub fn judge(&mut self, tail: &str, now: Instant) -> bool {
        if self.fired {
            return false;
        }
        if looks_like_prompt(tail) {
            self.fired = true;
        } else {
            self.quiet_since = now;
            self.judged = self.last_size;
        }
        self.fired
    }
}

/// The output-size cap of a backgrounded command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeCap {
    bytes: u64,
}

impl SizeCap {
    /// A cap of `bytes`.
    pub fn new(bytes: u64) -> Self {
        Self { bytes }
    }

    /// Whether an output of `size` bytes is past the cap.
    pub fn is_exceeded(&self, size: u64) -> bool {
        size > self.bytes
    }

    /// The message appended to the output when the command is killed for passing the cap, e.g.
    /// `Background command killed: output file exceeded 5GB`.
    pub fn kill_message(&self) -> String {
        self.end_reason().stderr_note().unwrap_or_default()
    }

    /// Why a command killed by this cap ended.
    pub fn end_reason(&self) -> task_core::EndReason {
        task_core::EndReason::OutputCapExceeded {
            cap_bytes: self.bytes,
        }
    }
}

pub use task_core::human_duration;

#[cfg(test)]
mod tests {
    use super::*;

    const THRESHOLD: Duration = Duration::from_secs(45);

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn quiet_output_is_inspected_after_the_threshold() {
        let t0 = Instant::now();
        let mut dog = StallWatchdog::new(THRESHOLD, t0);
        assert_eq!(dog.observe(10, t0), StallStep::Wait);
        assert_eq!(dog.observe(10, at(t0, 40)), StallStep::Wait);
        assert_eq!(dog.observe(10, at(t0, 45)), StallStep::InspectTail);
    }

    #[test]
    fn growth_restarts_the_clock() {
        let t0 = Instant::now();
        let mut dog = StallWatchdog::new(THRESHOLD, t0);
        dog.observe(10, t0);
        assert_eq!(dog.observe(11, at(t0, 44)), StallStep::Wait);
        assert_eq!(dog.observe(11, at(t0, 80)), StallStep::Wait);
        assert_eq!(dog.observe(11, at(t0, 89)), StallStep::InspectTail);
    }

    #[test]
    fn an_empty_output_is_never_inspected_until_it_grows() {
        let t0 = Instant::now();
        let mut dog = StallWatchdog::new(THRESHOLD, t0);
        assert!(dog.saw(0, t0));
        assert_eq!(dog.due(), None);
        assert_eq!(dog.observe(0, at(t0, 3600)), StallStep::Wait);
        assert!(dog.saw(7, at(t0, 3600)));
        assert_eq!(dog.due(), Some(at(t0, 3645)));
    }

    #[test]
    fn it_is_due_a_threshold_after_the_last_growth_seen_and_never_once_fired() {
        let t0 = Instant::now();
        let mut dog = StallWatchdog::new(THRESHOLD, t0);
        assert!(dog.saw(10, t0));
        assert_eq!(dog.due(), Some(at(t0, 45)));
        assert!(!dog.saw(10, at(t0, 30)), "no growth, no new clock");
        assert!(dog.saw(12, at(t0, 30)));
        assert_eq!(dog.due(), Some(at(t0, 75)));
        assert_eq!(dog.observe(12, at(t0, 75)), StallStep::InspectTail);
        assert!(dog.judge("Continue? ", at(t0, 75)));
        assert_eq!(dog.due(), None);
    }

    #[test]
    fn no_match_restarts_the_clock_on_the_next_growth_and_a_match_fires_once() {
        let t0 = Instant::now();
        let mut dog = StallWatchdog::new(THRESHOLD, t0);
        dog.observe(10, t0);
        assert_eq!(dog.observe(10, at(t0, 45)), StallStep::InspectTail);
        assert!(!dog.judge("compiling...\n", at(t0, 45)));
        // The same output has the same tail: nothing to judge again until it grows.
        assert_eq!(dog.observe(10, at(t0, 50)), StallStep::Wait);
        assert_eq!(dog.observe(10, at(t0, 500)), StallStep::Wait);
        assert_eq!(dog.due(), None);
        assert_eq!(dog.observe(16, at(t0, 510)), StallStep::Wait);
        assert_eq!(dog.due(), Some(at(t0, 555)));
        assert_eq!(dog.observe(16, at(t0, 555)), StallStep::InspectTail);
        assert!(dog.judge("Continue? [y/N] ", at(t0, 555)));
        assert!(!dog.judge("Continue? [y/N] ", at(t0, 560)));
        assert_eq!(dog.observe(16, at(t0, 700)), StallStep::Done);
    }

    #[test]
    fn size_cap_is_strictly_greater() {
        let cap = SizeCap::new(1024);
        assert!(!cap.is_exceeded(1024));
        assert!(cap.is_exceeded(1025));
    }

    #[test]
    fn kill_message_names_the_cap() {
        assert_eq!(
            SizeCap::new(crate::config::DEFAULT_SIZE_CAP_BYTES).kill_message(),
            "Background command killed: output file exceeded 5GB"
        );
        assert_eq!(
            SizeCap::new(64 * 1024).kill_message(),
            "Background command killed: output file exceeded 64KB"
        );
    }
}
