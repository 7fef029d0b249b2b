//! Leases on notifications being delivered: who holds one (a process, named by its pid and its
//! start time, so a recycled pid is never mistaken for it) and until when.
//!
//! A reader claims a notification under a lease, writes it out, and only then marks it
//! delivered. A lease whose holder died, or whose time ran out (a holder stopped or blocked on
//! a full pipe), is stale: the notification is deliverable again, and another reader may
//! deliver it. A notification is therefore never lost to a reader killed mid-delivery; at
//! worst it is delivered twice, with the same [`Notice::key`](crate::notice::Notice::key).

use std::time::Duration;

/// A process holding a lease, until a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pid: u32,
    started: u64,
    until_ms: u64,
}

impl Holder {
    /// This process, for `lease` from now.
    pub fn this_process(lease: Duration) -> Self {
        let pid = std::process::id();
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        Self {
            pid,
            started: process_start(pid).unwrap_or(0),
            until_ms: task_core::now_ms().saturating_add(lease_ms),
        }
    }

    /// This holder with its lease over: stale at once (a lease given back).
    #[must_use]
    pub fn expired(self) -> Self {
        Self {
            until_ms: 0,
            ..self
        }
    }

    /// Whether the lease no longer holds at `now_ms`: its time is over, or its holder is gone
    /// (no process with its pid, or one started at another time).
    pub fn is_stale(&self, now_ms: u64) -> bool {
        now_ms >= self.until_ms || process_start(self.pid) != Some(self.started)
    }

    /// The holder as text: `{pid}-{start}-{until}` (a file name part, and a lease file's body).
    pub fn encode(&self) -> String {
        format!("{}-{}-{}", self.pid, self.started, self.until_ms)
    }

    /// Reads [`Holder::encode`]'s text; `None` for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.trim().splitn(3, '-').map(str::parse::<u64>);
        let pid = u32::try_from(parts.next()?.ok()?).ok()?;
        let started = parts.next()?.ok()?;
        let until_ms = parts.next()?.ok()?;
        Some(Self {
            pid,
            started,
            until_ms,
        })
    }
}

/// When process `pid` started (field 22 of `/proc/{pid}/stat`, in clock ticks since boot), or
/// `None` if there is no such process.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn this_process_holds_until_its_lease_ends_or_it_gives_it_back() {
        let holder = Holder::this_process(Duration::from_secs(60));
        let now = task_core::now_ms();
        assert!(!holder.is_stale(now));
        assert!(holder.is_stale(now + 61_000));
        assert!(holder.expired().is_stale(now));
        assert_eq!(Holder::decode(&holder.encode()), Some(holder));
    }

    #[test]
    fn a_dead_or_recycled_holder_is_stale_and_garbage_is_no_holder() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let started = process_start(pid).unwrap();
        child.wait().unwrap();
        let until_ms = u64::MAX;
        let dead = Holder {
            pid,
            started,
            until_ms,
        };
        assert!(dead.is_stale(0), "its process is gone");
        let me = Holder::this_process(Duration::from_secs(60));
        let recycled = Holder {
            started: me.started + 1,
            ..me
        };
        assert!(recycled.is_stale(0), "another process has its pid");
        for garbage in ["", "1-2", "a-b-c", "-1-2-3", "99999999999-1-1"] {
            assert_eq!(Holder::decode(garbage), None, "{garbage:?}");
        }
    }
}
