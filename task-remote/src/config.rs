//! Timing of remote agents. `Default` is the SPEC values; tests use milliseconds.

use std::time::Duration;

/// How often a remote session is polled (SPEC §11: 1000 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(1000);
/// Consecutive idle polls before an idle status is trusted (SPEC §11).
pub const IDLE_POLLS_TRUSTED: u32 = 5;
/// How long a review (`ultrareview`) may run.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The first retry delay after a transient fault (the reference: 2, 4, 8, 16 s).
pub const BACKOFF_BASE: Duration = Duration::from_secs(2);
/// The longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(16);
/// How long the server may stay unreachable before the task fails.
pub const OUTAGE_LIMIT: Duration = Duration::from_secs(5 * 60);
pub use sessions_client::REQUEST_TIMEOUT;

/// Knobs of the [`RemoteExecutor`](crate::RemoteExecutor) and the HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteConfig {
    /// Period of the poll loop.
    pub poll_interval: Duration,
    /// Consecutive idle polls before idle is trusted.
    pub idle_polls_trusted: u32,
    /// Time limit of review subtypes.
    pub review_timeout: Duration,
    /// First retry delay after a transient fault.
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_cap: Duration,
    /// How long faults may last before the task fails.
    pub outage_limit: Duration,
    /// Time limit of one HTTP request (connect and body included).
    pub request_timeout: Duration,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            poll_interval: POLL_INTERVAL,
            idle_polls_trusted: IDLE_POLLS_TRUSTED,
            review_timeout: REVIEW_TIMEOUT,
            backoff_base: BACKOFF_BASE,
            backoff_cap: BACKOFF_CAP,
            outage_limit: OUTAGE_LIMIT,
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

impl RemoteConfig {
    /// Every duration scaled to `unit` per second of the defaults' order (for tests):
    /// `RemoteConfig::fast(Duration::from_millis(20))` polls every 20 ms.
    pub fn fast(poll: Duration) -> Self {
        RemoteConfig {
            poll_interval: poll,
            idle_polls_trusted: IDLE_POLLS_TRUSTED,
            review_timeout: poll * 1800,
            backoff_base: poll,
            backoff_cap: poll * 4,
            outage_limit: poll * 100,
            request_timeout: poll * 25,
        }
    }
}
