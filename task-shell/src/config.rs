//! Timing and size constants of shell and monitor tasks.
//!
//! Every default is the value of the reference implementation (SPEC §5, §6); tests build a
//! [`ShellConfig`] with millisecond durations instead of sleeping for minutes.

use std::time::Duration;

use task_protocol::start::MonitorLimits;

/// The output-size cap past which a backgrounded command is killed: 5 GiB.
pub const DEFAULT_SIZE_CAP_BYTES: u64 = 5 * 1024 * 1024 * 1024;

/// Knobs of the shell and monitor executors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShellConfig {
    /// How often the stall watchdog stats the output file where its writes are not watched
    /// (SPEC: 5 000 ms); where they are, it looks once the output has been quiet for
    /// [`stall_threshold`](Self::stall_threshold).
    pub stall_check_interval: Duration,
    /// How long the output must stay the same size before its tail is inspected (SPEC: 45 000 ms).
    pub stall_threshold: Duration,
    /// How many trailing bytes of output the stall watchdog inspects (SPEC: 1024).
    pub stall_tail_bytes: u64,
    /// How often the size watchdog stats the output file where its writes are not watched
    /// (SPEC: 5 000 ms); where they are, each write wakes it.
    pub size_check_interval: Duration,
    /// The output size past which a backgrounded command is killed (SPEC: 5 GiB).
    pub size_cap_bytes: u64,
    /// A monitor's lifetime when the caller gives none (SPEC: 300 000 ms).
    pub monitor_default_timeout: Duration,
    /// The longest lifetime a non-persistent monitor may ask for (SPEC: 3 600 000 ms).
    pub monitor_max_timeout: Duration,
    /// The longest monitor event line kept whole; longer lines are split into several events.
    pub monitor_max_line_bytes: usize,
}

impl Default for ShellConfig {
    fn default() -> Self {
        let monitor = MonitorLimits::default();
        Self {
            stall_check_interval: Duration::from_millis(5_000),
            stall_threshold: Duration::from_millis(45_000),
            stall_tail_bytes: 1024,
            size_check_interval: Duration::from_millis(5_000),
            size_cap_bytes: DEFAULT_SIZE_CAP_BYTES,
            monitor_default_timeout: monitor.default_timeout,
            monitor_max_timeout: monitor.max_timeout,
            monitor_max_line_bytes: 64 * 1024,
        }
    }
}

impl ShellConfig {
    /// The limits of a monitor's lifetime these settings give.
    pub fn monitor_limits(&self) -> MonitorLimits {
        MonitorLimits {
            default_timeout: self.monitor_default_timeout,
            max_timeout: self.monitor_max_timeout,
        }
    }

    /// The lifetime of a monitor: `None` when persistent, else the requested timeout (or the
    /// default) clamped to the maximum ([`MonitorLimits::lifetime`]).
    pub fn monitor_timeout(
        &self,
        requested: Option<Duration>,
        persistent: bool,
    ) -> Option<Duration> {
        self.monitor_limits().lifetime(requested, persistent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_spec_values() {
        let config = ShellConfig::default();
        assert_eq!(config.stall_check_interval, Duration::from_secs(5));
        assert_eq!(config.stall_threshold, Duration::from_secs(45));
        assert_eq!(config.stall_tail_bytes, 1024);
        assert_eq!(config.size_check_interval, Duration::from_secs(5));
        assert_eq!(config.size_cap_bytes, 5_368_709_120);
        assert_eq!(
            config.monitor_default_timeout,
            Duration::from_millis(300_000)
        );
        assert_eq!(config.monitor_max_timeout, Duration::from_millis(3_600_000));
    }

    #[test]
    fn monitor_timeout_defaults_clamps_and_ignores_persistent() {
        let config = ShellConfig::default();
        assert_eq!(
            config.monitor_timeout(None, false),
            Some(Duration::from_millis(300_000))
        );
        assert_eq!(
            config.monitor_timeout(Some(Duration::from_secs(7_200)), false),
            Some(Duration::from_millis(3_600_000))
        );
        assert_eq!(
            config.monitor_timeout(Some(Duration::from_secs(10)), false),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            config.monitor_timeout(Some(Duration::from_secs(10)), true),
            None
        );
    }
}
