//! `watch` on PostgreSQL: `LISTEN` on the changes channel; every commit that writes notifies
//! it with the list id. A lost connection is re-opened (backing off, bounded by
//! [`crate::PgConfig::retries`]) and counted as an event, so the watcher re-reads the list and
//! no change made while it was away is missed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fallible_iterator::FallibleIterator;
use postgres::Client;

use crate::error::Result;
use crate::pg::{CHANGES_CHANNEL, PgStore, off_runtime};

/// A listening connection.
pub(crate) struct PgWatch {
    store: Arc<PgStore>,
    client: Option<Client>,
}

impl std::fmt::Debug for PgWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWatch")
            .field("store", &self.store)
            .field("connected", &self.client.is_some())
            .finish()
    }
}

impl PgWatch {
    /// Starts listening.
    pub(crate) fn start(store: Arc<PgStore>) -> Result<Self> {
        let client = off_runtime(|| listen(&store))?;
        Ok(Self {
            store,
            client: Some(client),
        })
    }

    /// Waits up to `wait` (forever with `None`) for a change to this list. `true`: a change
    /// was notified, or the connection was lost and re-opened (re-read to catch up).
    pub(crate) fn wait(&mut self, wait: Option<Duration>) -> Result<bool> {
        off_runtime(|| self.wait_here(wait))
    }

    fn wait_here(&mut self, wait: Option<Duration>) -> Result<bool> {
        let deadline = wait.map(|w| Instant::now() + w);
        loop {
            let Some(client) = self.client.as_mut() else {
                self.reconnect()?;
                return Ok(true);
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let next = {
                let mut notifications = client.notifications();
                match left {
                    Some(left) => notifications.timeout_iter(left).next(),
                    None => notifications.blocking_iter().next(),
                }
            };
            let lost = match next {
                Ok(Some(n)) => {
                    if n.channel() == CHANGES_CHANNEL && n.payload() == self.store.list_id() {
                        return Ok(true);
                    }
                    None
                }
                Ok(None) if client.is_closed() => Some("connection closed".to_string()),
                Ok(None) => return Ok(false),
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = lost {
                tracing::warn!(error = why, "watch connection lost; reconnecting");
                self.client = None;
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
        }
    }

    /// Swallows notifications until `quiet` passes without one (at most `cap` in all).
    pub(crate) fn drain(&mut self, quiet: Duration, cap: Duration) {
        off_runtime(|| self.drain_here(quiet, cap));
    }

    fn drain_here(&mut self, quiet: Duration, cap: Duration) {
        let end = Instant::now() + cap;
        while Instant::now() < end {
            match self.wait_here(Some(quiet)) {
                Ok(true) => {}
                _ => return,
            }
        }
    }

    fn reconnect(&mut self) -> Result<()> {
        let config = self.store.retry_config();
        let mut attempt = 0;
        let mut backoff = config.backoff();
        loop {
            match listen(&self.store) {
                Ok(client) => {
                    self.client = Some(client);
                    return Ok(());
                }
                Err(e) if attempt < config.retries => {
                    attempt += 1;
                    tracing::warn!(attempt, error = %e, "watch reconnect failed; retrying");
                    std::thread::sleep(backoff.next_delay());
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for PgWatch {
    fn drop(&mut self) {
        let client = self.client.take();
        off_runtime(move || drop(client));
    }
}

fn listen(store: &PgStore) -> Result<Client> {
    let mut client = store.open_client()?;
    client
        .batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))
        .map_err(|e| store.error("listen", e))?;
    Ok(client)
}

impl crate::backend::ChangeFeed for PgWatch {
    fn wait(&mut self, wait: Option<Duration>) -> Result<bool> {
        PgWatch::wait(self, wait)
    }

    fn drain(&mut self, quiet: Duration, cap: Duration) {
        PgWatch::drain(self, quiet, cap);
    }
}
