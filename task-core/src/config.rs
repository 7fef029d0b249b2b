//! Timing constants of the registry and the poll loop.

use std::time::Duration;

/// How often the poll loop runs (SPEC §2: 1000 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(1000);
/// How long a finished agent stays in the panel unless retained (`PANEL_GRACE_MS`).
pub const PANEL_GRACE: Duration = Duration::from_millis(30_000);
/// How long a killed teammate stays visible (`STOPPED_DISPLAY_MS`).
pub const STOPPED_DISPLAY: Duration = Duration::from_millis(3_000);
/// How many events a slow subscriber may fall behind before it misses some.
pub const EVENT_CAPACITY: usize = 1024;

/// The registry's timing. `Default` is the SPEC values; tests use milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    /// Period of the poll loop.
    pub poll_interval: Duration,
    /// Eviction grace of a finished task that someone stopped retaining (leaving its view).
    pub panel_grace: Duration,
    /// Capacity of the event broadcast channel.
    pub event_capacity: usize,
    /// The most bytes the poll loop reads from one task per tick.
    pub max_read_bytes: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            poll_interval: POLL_INTERVAL,
            panel_grace: PANEL_GRACE,
            event_capacity: EVENT_CAPACITY,
            max_read_bytes: task_output::read::DEFAULT_MAX_READ_BYTES,
        }
    }
}

/// `duration` in whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
