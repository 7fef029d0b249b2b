//! The client side of the sessions API: the [`RemoteSessions`] trait and its HTTP
//! implementation on reqwest (rustls, no default features).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use task_protocol::remote_api::{
    CreateSession, ErrorBody, EventsPage, IDEMPOTENCY_KEY_HEADER, IdempotencyKey, SendEvents,
    Session, UserEvent,
};

/// A sessions server, as the remote executor uses it (SPEC §16).
#[async_trait]
pub trait RemoteSessions: Send + Sync + fmt::Debug {
    /// Creates a session that starts on `request`'s first turn. `key` names this logical
    /// create: a retry passes the same key, and a server that already made the session for it
    /// answers with that session instead of making another.
    async fn create(
        &self,
        request: &CreateSession,
        key: &IdempotencyKey,
    ) -> Result<Session, ApiError>;
    /// The session's status.
    async fn status(&self, session: &str) -> Result<Session, ApiError>;
    /// One page of the session's events after `after` (from the start when `None`).
    async fn events(&self, session: &str, after: Option<&str>) -> Result<EventsPage, ApiError>;
    /// Sends a user turn.
    async fn send(&self, session: &str, text: &str) -> Result<(), ApiError>;
    /// Ends the session for good.
    async fn archive(&self, session: &str) -> Result<(), ApiError>;
}

/// [`RemoteSessions`] over HTTP(S) with a bearer token.
#[derive(Clone)]
pub struct HttpSessions {
    http: reqwest::Client,
    base: Url,
    token: String,
}

impl fmt::Debug for HttpSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        f.debug_struct("HttpSessions")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl HttpSessions {
    /// A client of the server at `base` (`http://127.0.0.1:7070`), each request limited to
    /// `timeout`.
    ///
    /// # Errors
    /// [`ApiError::BadServer`] for an address that is not an `http`/`https` URL.
    pub fn new(base: &str, token: impl Into<String>, timeout: Duration) -> Result<Self, ApiError> {
        let bad = |reason: String| ApiError::BadServer {
            url: base.to_owned(),
            reason,
        };
        let parsed = Url::parse(base).map_err(|e| bad(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.cannot_be_a_base() {
            return Err(bad("not an http or https URL".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(HttpSessions {
            http,
            base: parsed,
            token: token.into(),
        })
    }

    /// `{base}/v1/sessions/{segments…}`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Result<Url, ApiError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| ApiError::BadServer {
                url: self.base.to_string(),
                reason: "not a base URL".into(),
            })?
            .pop_if_empty()
            .extend(["v1", "sessions"])
            .extend(segments);
        Ok(url)
    }

    /// A request with the token and, if given, a JSON body.
    fn request(
        &self,
        method: Method,
        url: Url,
        body: Option<&(dyn ErasedBody + Sync)>,
    ) -> Result<reqwest::RequestBuilder, ApiError> {
        let mut request = self.http.request(method, url).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_json()?);
        }
        Ok(request)
    }

    /// Asks the server whether it accepts the token, without making anything: a read of a
    /// session that cannot exist, answered 401/403 before any lookup when the token is refused.
    ///
    /// # Errors
    /// Only [`ApiError::Unauthorized`]: any other answer (the expected 404, a 400, even a
    /// transient fault) says nothing against the token, and is left to the start itself.
    pub async fn check_token(&self) -> Result<(), ApiError> {
        let probe = self.url(&["access-check"])?;
        match answer::<serde::de::IgnoredAny>(self.request(Method::GET, probe, None)?).await {
            Err(refused @ ApiError::Unauthorized { .. }) => Err(refused),
            _ => Ok(()),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&(dyn ErasedBody + Sync)>,
    ) -> Result<T, ApiError> {
        answer(self.request(method, url, body)?).await
    }
}

/// Sends `request`; its answer, classified.
async fn answer<T: DeserializeOwned>(request: reqwest::RequestBuilder) -> Result<T, ApiError> {
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    let bytes = response.bytes().await.map_err(transport)?;
    if !status.is_success() {
        return Err(classify(status, &bytes));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::Transient(format!("malformed answer (HTTP {}): {e}", status.as_u16()))
    })
}

/// A request body, serialized once.
trait ErasedBody {
    fn to_json(&self) -> Result<Vec<u8>, ApiError>;
}

impl<T: Serialize> ErasedBody for T {
    fn to_json(&self) -> Result<Vec<u8>, ApiError> {
        serde_json::to_vec(self).map_err(|e| ApiError::Rejected {
            status: 0,
            message: format!("cannot encode the request: {e}"),
        })
    }
}

/// A failure before a status arrived: all of them may pass (refused, reset, timed out).
fn transport(error: reqwest::Error) -> ApiError {
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "connection failed"
    };
    ApiError::Transient(format!("{what}: {error}"))
}

/// The error of a non-2xx answer.
fn classify(status: StatusCode, body: &[u8]) -> ApiError {
    let message = serde_json::from_slice::<ErrorBody>(body)
        .map(|b| b.error.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    let code = status.as_u16();
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ApiError::Unauthorized {
            status: code,
            message,
        },
        StatusCode::NOT_FOUND => ApiError::NotFound(message),
        StatusCode::TOO_MANY_REQUESTS | StatusCode::REQUEST_TIMEOUT => {
            ApiError::Transient(format!("HTTP {code}: {message}"))
        }
        s if s.is_server_error() => ApiError::Transient(format!("HTTP {code}: {message}")),
        _ => ApiError::Rejected {
            status: code,
            message,
        },
    }
}

#[async_trait]
impl RemoteSessions for HttpSessions {
    async fn create(
        &self,
        request: &CreateSession,
        key: &IdempotencyKey,
    ) -> Result<Session, ApiError> {
        let request = self.request(Method::POST, self.url(&[])?, Some(request))?;
        answer(request.header(IDEMPOTENCY_KEY_HEADER, key.as_str())).await
    }

    async fn status(&self, session: &str) -> Result<Session, ApiError> {
        self.call(Method::GET, self.url(&[session])?, None).await
    }

    async fn events(&self, session: &str, after: Option<&str>) -> Result<EventsPage, ApiError> {
        let mut url = self.url(&[session, "events"])?;
        if let Some(after) = after {
            url.query_pairs_mut().append_pair("after_id", after);
        }
        self.call(Method::GET, url, None).await
    }

    async fn send(&self, session: &str, text: &str) -> Result<(), ApiError> {
        let body = SendEvents {
            events: vec![UserEvent {
                session_id: Some(session.to_owned()),
                ..UserEvent::text(text)
            }],
        };
        let url = self.url(&[session, "events"])?;
        self.call::<serde_json::Value>(Method::POST, url, Some(&body))
            .await
            .map(drop)
    }

    async fn archive(&self, session: &str) -> Result<(), ApiError> {
        let url = self.url(&[session, "archive"])?;
        self.call::<serde_json::Value>(Method::POST, url, None)
            .await
            .map(drop)
    }
}
