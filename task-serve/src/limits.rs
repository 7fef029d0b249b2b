//! How much of this machine the sessions server lets clients hold, and for how long: a cap on open
//! connections kept below the descriptor limit, and the timeouts after which a connection that
//! does not use its slot loses it.

use std::time::Duration;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// How long a new connection has to send its first whole request head (TLS handshake included),
/// and a kept-alive one to finish a request head once its first byte came.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a kept-alive connection with no request in flight may stay silent.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most connections served at once when the descriptor limit allows more.
pub const MAX_CONNECTIONS: usize = 4096;
/// Descriptors kept free for the server's own files: the listener, the runtime's, the sockets
/// to the session's supervisor and the transcripts read by the blocking pool
/// ([`BLOCKING_THREADS`] threads, each using a few at a time).
pub const DESCRIPTOR_HEADROOM: u64 = 256;
/// The threads that run session-layer calls (each request needing one waits for a free one).
pub const BLOCKING_THREADS: usize = 32;
/// The listen queue: connections beyond the cap wait here until a slot frees (the kernel
/// lowers it to `net.core.somaxconn`).
pub const LISTEN_BACKLOG: u32 = 1024;

/// The connection limits of the sessions server. `Default` is the values above; tests use short
/// durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// The most connections served at once. Beyond it the server stops accepting: a new
    /// connection waits in the listen queue until one of those served closes, while every
    /// connection already accepted goes on being served.
    pub max_connections: usize,
    /// A new connection that has not sent a whole request head this long after it was
    /// accepted (its TLS handshake included) is closed, as is a kept-alive connection whose
    /// next request head is not whole this long after its first byte.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request in flight that sends nothing for this long is
    /// closed.
    pub idle_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
        }
    }
}

impl ServeLimits {
    /// These limits with the connection cap lowered, if need be, to leave
    /// [`DESCRIPTOR_HEADROOM`] of `descriptors` (the soft `RLIMIT_NOFILE` in force) for the
    /// server's own files; never below one connection.
    pub fn within_descriptors(self, descriptors: u64) -> Self {
        let room = descriptors.saturating_sub(DESCRIPTOR_HEADROOM).max(1);
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        ServeLimits {
            max_connections: self.max_connections.clamp(1, room),
            ..self
        }
    }
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (a login session's soft limit
/// is often 1024 while the hard one is far higher); returns the soft limit now in force
/// (`u64::MAX` when unlimited). A refusal is logged and the old limit kept.
pub fn raise_descriptor_limit() -> u64 {
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    let Some(hard) = limit.maximum.filter(|&hard| hard > soft) else {
        return soft;
    };
    let raised = Rlimit {
        current: Some(hard),
        maximum: Some(hard),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => hard,
        Err(error) => {
            tracing::warn!(%error, soft, hard, "cannot raise the descriptor limit");
            soft
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_headroom_below_the_descriptor_limit() {
        let limits = ServeLimits::default();
        assert_eq!(limits.within_descriptors(1024).max_connections, 768);
        assert_eq!(
            limits.within_descriptors(1_048_576).max_connections,
            MAX_CONNECTIONS
        );
        assert_eq!(limits.within_descriptors(u64::MAX).max_connections, 4096);
        assert_eq!(limits.within_descriptors(100).max_connections, 1);
        let asked = ServeLimits {
            max_connections: 5000,
            ..limits
        };
        assert_eq!(asked.within_descriptors(20_000).max_connections, 5000);
        assert_eq!(asked.within_descriptors(2_000).max_connections, 1744);
    }

    #[test]
    fn the_soft_descriptor_limit_is_raised_to_the_hard_one() {
        let raised = raise_descriptor_limit();
        let now = getrlimit(Resource::Nofile);
        assert_eq!(now.current.unwrap_or(u64::MAX), raised);
        assert_eq!(now.current, now.maximum);
    }
}
