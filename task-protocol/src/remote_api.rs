//! The wire shapes of the sessions API (SPEC §16): the contract between its server (`tasks
//! serve`) and its client (the remote executor, task-remote, which re-exports this module as
//! `task_remote::api`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a remote session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Working on a turn.
    Running,
    /// Waiting for a message (its turn ended).
    Idle,
    /// Waiting for a person (a permission prompt).
    RequiresAction,
    /// Ended for good.
    Archived,
}

/// A message of a user turn: `{role, content}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserMessage {
    /// Always `user`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl UserMessage {
    /// A user message with `content`.
    pub fn new(content: impl Into<String>) -> Self {
        UserMessage {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// A user event, as `POST /v1/sessions` and `POST /v1/sessions/{id}/events` take it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserEvent {
    /// Always `user`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The client's id of the event, if it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The session it is for, if the client says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The message.
    pub message: UserMessage,
}

impl UserEvent {
    /// A user turn saying `text`.
    pub fn text(text: impl Into<String>) -> Self {
        UserEvent {
            kind: "user".into(),
            uuid: None,
            session_id: None,
            message: UserMessage::new(text),
        }
    }
}

/// `POST /v1/sessions`: the first turn as events, and options.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CreateSession {
    /// The initial user turn(s); the first one's text is the prompt.
    pub events: Vec<UserEvent>,
    /// A title for the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A model override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The header of `POST /v1/sessions` that names its [`IdempotencyKey`].
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The most characters an [`IdempotencyKey`] may have.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// The key of one logical session creation, sent as the `Idempotency-Key` header of
/// `POST /v1/sessions` and sent again, unchanged, when the create is retried (after a timeout,
/// a reset connection, a 5xx): a server that has seen the key answers with the session it made
/// for it instead of making a second one. 1 to [`MAX_IDEMPOTENCY_KEY_LEN`] visible ASCII
/// characters; a client makes a fresh one per logical create with [`random`](Self::random).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// A new key: 128 bits from the OS's randomness as 32 hex digits. (Should the OS give
    /// none, the time in nanoseconds, the process id and a counter of this process stand in:
    /// still never the same twice within one server's memory of keys.)
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64);
            let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            bytes[..8].copy_from_slice(&nanos.to_le_bytes());
            bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
            bytes[12..].copy_from_slice(&made.to_le_bytes());
        }
        IdempotencyKey(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The key a client sent, if it is one: 1 to [`MAX_IDEMPOTENCY_KEY_LEN`] visible ASCII
    /// characters (`!` to `~`).
    ///
    /// ```
    /// use task_protocol::remote_api::IdempotencyKey;
    ///
    /// assert!(IdempotencyKey::parse("8f14e45f-ceea-467a-9575-2a3b0c1f9e2d").is_some());
    /// assert!(IdempotencyKey::parse("").is_none());
    /// assert!(IdempotencyKey::parse("two words").is_none());
    /// ```
    pub fn parse(text: &str) -> Option<Self> {
        let fits = (1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_graphic());
        fits.then(|| IdempotencyKey(text.to_owned()))
    }

    /// The key as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `POST /v1/sessions/{id}/events`: user turns for a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendEvents {
    /// The turns, in order.
    pub events: Vec<UserEvent>,
}

/// A session as `GET /v1/sessions/{id}` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Its id.
    pub id: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// Where it is.
    pub session_status: SessionStatus,
    /// When it was created (RFC 3339 or epoch text, as the server gives it).
    #[serde(default)]
    pub created_at: String,
    /// When it last changed.
    #[serde(default)]
    pub updated_at: String,
}

/// One page of a session's events, after a cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    /// Stream-json messages, each with an `id`.
    pub data: Vec<Map<String, Value>>,
    /// Whether more events follow this page now.
    pub has_more: bool,
    /// The first event's id.
    #[serde(default)]
    pub first_id: Option<String>,
    /// The last event's id: the cursor for the next page.
    #[serde(default)]
    pub last_id: Option<String>,
}

/// An error body: `{"error": {"type", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The inside of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A class: `authentication_error`, `not_found_error`, `invalid_request_error`, ….
    #[serde(rename = "type")]
    pub kind: String,
    /// One line for people.
    pub message: String,
}

/// The id of an event (`id`, else `uuid`).
pub fn event_id(event: &Map<String, Value>) -> Option<&str> {
    event
        .get("id")
        .or_else(|| event.get("uuid"))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_keys_are_valid_and_differ() {
        let (one, two) = (IdempotencyKey::random(), IdempotencyKey::random());
        assert_ne!(one, two);
        assert_eq!(one.as_str().len(), 32);
        assert_eq!(IdempotencyKey::parse(one.as_str()), Some(one));
        let longest = "k".repeat(MAX_IDEMPOTENCY_KEY_LEN);
        assert!(IdempotencyKey::parse(&longest).is_some());
        assert!(IdempotencyKey::parse(&format!("{longest}k")).is_none());
        assert!(IdempotencyKey::parse("tab\there").is_none());
        assert!(IdempotencyKey::parse("é").is_none());
    }
}
