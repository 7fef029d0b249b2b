//! The wire shapes of the sessions API (SPEC §16), shared by the client and `tasks serve`.

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
