//! Session creations made once per idempotency key: a client that retries `POST /v1/sessions`
//! with the same `Idempotency-Key` (its first answer lost to a timeout or a reset connection)
//! gets the session the first attempt made, not a second one.
//!
//! The keys live in this server's memory, a bounded map whose entries expire: a retry after
//! [`IdempotencyLimits::ttl`], after [`IdempotencyLimits::max_keys`] later keys, or after
//! the sessions server restarted, makes a new session. (task-remote retries a create for at most its
//! outage limit, 5 minutes.)

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use task_protocol::TaskId;
use task_protocol::remote_api::{CreateSession, IdempotencyKey};
use tokio::sync::OwnedMutexGuard;

/// How long a key is remembered.
pub const KEY_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// The most keys remembered at once (the oldest is forgotten first).
pub const MAX_KEYS: usize = 10_000;

/// How long, and how many, idempotency keys the sessions server remembers. `Default` is the values
/// above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyLimits {
    /// A key is forgotten this long after its first create.
    pub ttl: Duration,
    /// The most keys remembered; a new key beyond it makes the oldest forgotten.
    pub max_keys: usize,
}

impl Default for IdempotencyLimits {
    fn default() -> Self {
        IdempotencyLimits {
            ttl: KEY_TTL,
            max_keys: MAX_KEYS,
        }
    }
}

/// The session made (or being made) for one key: held locked while its create runs, so a
/// retry arriving meanwhile waits for it instead of making another.
pub type Made = OwnedMutexGuard<Option<TaskId>>;

/// A key's create: the request it was for and the session made for it.
#[derive(Debug)]
struct Entry {
    request: u64,
    session: Arc<tokio::sync::Mutex<Option<TaskId>>>,
}

/// The keys remembered, oldest first.
#[derive(Debug, Default)]
struct Keys {
    entries: HashMap<IdempotencyKey, Entry>,
    order: VecDeque<(Instant, IdempotencyKey)>,
}

/// The creates of this server, by idempotency key.
#[derive(Debug)]
pub struct Creates {
    limits: IdempotencyLimits,
    keys: Mutex<Keys>,
}

/// The key was used before for a different request.
#[derive(Debug, thiserror::Error)]
#[error("the Idempotency-Key {0:?} was used for a different request")]
pub struct KeyReused(pub String);

impl Creates {
    /// No key remembered yet.
    pub fn new(limits: IdempotencyLimits) -> Self {
        Creates {
            limits,
            keys: Mutex::new(Keys::default()),
        }
    }

    /// The session of `key`, locked: `Some` when a create with this key made one, `None` for
    /// the caller to make it and record it (a failed create records nothing, so a retry tries
    /// again). Waits while another create with the key runs.
    ///
    /// # Errors
    /// [`KeyReused`] when the key was remembered for a request other than `request`.
    pub async fn lock(
        &self,
        key: IdempotencyKey,
        request: &CreateSession,
    ) -> Result<Made, KeyReused> {
        Ok(self.entry(Instant::now(), key, request)?.lock_owned().await)
    }

    /// The session slot of `key` at `now`, made if the key is new.
    fn entry(
        &self,
        now: Instant,
        key: IdempotencyKey,
        request: &CreateSession,
    ) -> Result<Arc<tokio::sync::Mutex<Option<TaskId>>>, KeyReused> {
        let fingerprint = fingerprint(request);
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        self.forget_old(&mut keys, now);
        match keys.entries.get(&key) {
            Some(entry) if entry.request != fingerprint => Err(KeyReused(key.as_str().to_owned())),
            Some(entry) => Ok(Arc::clone(&entry.session)),
            None => {
                let session = Arc::default();
                keys.order.push_back((now, key.clone()));
                let entry = Entry {
                    request: fingerprint,
                    session: Arc::clone(&session),
                };
                keys.entries.insert(key, entry);
                Ok(session)
            }
        }
    }

    /// Forgets the keys past their time, and the oldest while there is no room for one more.
    fn forget_old(&self, keys: &mut Keys, now: Instant) {
        while let Some((at, key)) = keys.order.front() {
            let expired = now.saturating_duration_since(*at) >= self.limits.ttl;
            if !expired && keys.order.len() < self.limits.max_keys.max(1) {
                break;
            }
            keys.entries.remove(key);
            keys.order.pop_front();
        }
    }
}

/// What tells one create request from another (within this process).
fn fingerprint(request: &CreateSession) -> u64 {
    let mut hasher = DefaultHasher::new();
    request.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use task_protocol::TaskType;
    use task_protocol::remote_api::UserEvent;

    use super::*;

    fn request(text: &str) -> CreateSession {
        CreateSession {
            events: vec![UserEvent::text(text)],
            title: None,
            model: None,
        }
    }

    fn key(text: &str) -> IdempotencyKey {
        IdempotencyKey::parse(text).unwrap()
    }

    #[tokio::test]
    async fn a_key_gives_its_session_until_it_expires_or_is_crowded_out() {
        let creates = Creates::new(IdempotencyLimits {
            ttl: Duration::from_secs(60),
            max_keys: 2,
        });
        let start = Instant::now();
        let lock = |at: u64, name: &str, text: &str| {
            creates
                .entry(start + Duration::from_secs(at), key(name), &request(text))
                .map(tokio::sync::Mutex::lock_owned)
        };
        let made = TaskId::generate(TaskType::LocalAgent).unwrap();
        *lock(0, "a", "x").unwrap().await = Some(made);
        assert_eq!(*lock(1, "a", "x").unwrap().await, Some(made));
        assert!(lock(1, "a", "y").is_err(), "another request");
        // A failed create records nothing: the retry makes it.
        drop(lock(2, "b", "x").unwrap().await);
        assert_eq!(*lock(2, "b", "x").unwrap().await, None);
        // Expired.
        assert_eq!(*lock(61, "a", "x").unwrap().await, None);
        // Crowded out: a, then c and d beyond two keys.
        *lock(62, "a", "x").unwrap().await = Some(made);
        drop(lock(62, "c", "x").unwrap().await);
        drop(lock(62, "d", "x").unwrap().await);
        assert_eq!(*lock(62, "a", "x").unwrap().await, None);
    }

    #[tokio::test]
    async fn a_retry_waits_for_the_create_under_way_and_gets_its_session() {
        let creates = Arc::new(Creates::new(IdempotencyLimits::default()));
        let mut first = creates.lock(key("k"), &request("x")).await.unwrap();
        let retry = tokio::spawn({
            let creates = Arc::clone(&creates);
            async move { *creates.lock(key("k"), &request("x")).await.unwrap() }
        });
        tokio::task::yield_now().await;
        assert!(!retry.is_finished(), "the retry waits");
        let made = TaskId::generate(TaskType::LocalAgent).unwrap();
        *first = Some(made);
        drop(first);
        assert_eq!(retry.await.unwrap(), Some(made));
    }
}
