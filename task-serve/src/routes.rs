//! The sessions API (SPEC §16) over the session layer: a session is an agent task of this
//! machine's `tasks` session, run through the configured agent CLI.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use task_protocol::remote_api::{
    CreateSession, ErrorBody, ErrorDetail, IDEMPOTENCY_KEY_HEADER, IdempotencyKey,
    MAX_IDEMPOTENCY_KEY_LEN, SendEvents, Session, SessionStatus, UserEvent,
};
use task_protocol::start::{AgentStart, RunnerFormat};
use task_protocol::{Address, TaskId, TaskStatus, TaskType};

use super::idempotency::{Creates, KeyReused};
use super::pages::{self, PageLimits, Source};
use super::token::Token;
use task_session::record::TaskRecord;
use task_session::session::Session as Tasks;

/// What every request handler shares.
#[derive(Debug)]
pub struct Served {
    /// The local session the agents run in.
    pub tasks: Tasks,
    /// The agent CLI and its format.
    pub agent: (Vec<String>, RunnerFormat),
    /// The token every request must present.
    pub token: Token,
    /// Page size limits of `GET …/events`.
    pub pages: PageLimits,
    /// The sessions made per idempotency key.
    pub creates: Creates,
}

/// The router: every route behind bearer auth, request bodies limited to `max_body` bytes.
pub fn router(served: Arc<Served>, max_body: usize) -> Router {
    Router::new()
        .route("/v1/sessions", post(create))
        .route("/v1/sessions/{id}", get(status))
        .route("/v1/sessions/{id}/events", get(events).post(send))
        .route("/v1/sessions/{id}/archive", post(archive))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&served), auth))
        .with_state(served)
}

/// An error answer: `{"error": {"type", "message"}}`.
#[derive(Debug)]
pub struct ApiFailure {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiFailure {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiFailure {
            status,
            kind,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    fn not_found(id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            format!("no session {id:?}"),
        )
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

impl ApiFailure {
    /// A failure of this server (logged): 503, the error in words.
    fn unavailable(error: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %error, "request failed");
        ApiFailure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            error.to_string(),
        )
    }
}

impl From<task_session::Error> for ApiFailure {
    fn from(error: task_session::Error) -> Self {
        match error {
            task_session::Error::UnknownTask { id, .. } => ApiFailure::not_found(&id),
            task_session::Error::MalformedId { input } => ApiFailure::not_found(&input),
            other => ApiFailure::unavailable(&other),
        }
    }
}

impl From<JsonRejection> for ApiFailure {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "request_too_large"
        } else {
            "invalid_request_error"
        };
        ApiFailure::new(status, kind, rejection.body_text())
    }
}

impl From<PathRejection> for ApiFailure {
    fn from(rejection: PathRejection) -> Self {
        ApiFailure::invalid(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiFailure {
    fn from(rejection: QueryRejection) -> Self {
        ApiFailure::invalid(rejection.body_text())
    }
}

type Answer<T> = Result<Json<T>, ApiFailure>;
type IdPath = Result<Path<String>, PathRejection>;

/// Refuses, before anything else runs, a request without the right bearer token.
async fn auth(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
    match presented {
        Some(token) if served.token.matches(token) => next.run(request).await,
        Some(_) => ApiFailure::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid bearer token",
        )
        .into_response(),
        None => ApiFailure::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing bearer token (Authorization: Bearer …)",
        )
        .into_response(),
    }
}

async fn not_found() -> ApiFailure {
    ApiFailure::new(StatusCode::NOT_FOUND, "not_found_error", "no such route")
}

/// Runs blocking session work off the runtime's workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiFailure> + Send + 'static,
) -> Result<T, ApiFailure> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        ApiFailure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            e.to_string(),
        )
    })?
}

/// A session id: an agent task's id, validated before anything is built from it.
fn session_id(text: &str) -> Result<TaskId, ApiFailure> {
    match TaskId::parse(text) {
        Ok(id) if id.task_type() == TaskType::LocalAgent => Ok(id),
        _ => Err(ApiFailure::not_found(text)),
    }
}

/// `POST /v1/sessions`: an agent task on the first turn; with an `Idempotency-Key`, made once
/// for the key (a retry gets the session the first attempt made, or waits for it).
async fn create(
    State(served): State<Arc<Served>>,
    headers: HeaderMap,
    body: Result<Json<CreateSession>, JsonRejection>,
) -> Answer<Session> {
    let Json(request) = body?;
    let key = idempotency_key(&headers)?;
    let prompt = user_texts(request.events.clone())?.join("\n\n");
    for (what, text) in [("title", &request.title), ("model", &request.model)] {
        if let Some(text) = text {
            no_nul(what, text)?;
        }
    }
    let description = request
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| first_line(&prompt));
    let (command, runner) = served.agent.clone();
    let start = AgentStart {
        command,
        runner,
        description,
        prompt,
        name: None,
        model: request.model.clone(),
        subagent_type: None,
        worktree: None,
        budget: None,
        placement: None,
    };
    let mut made = match key {
        Some(key) => Some(served.creates.lock(key, &request).await?),
        None => None,
    };
    let worker = Arc::clone(&served);
    // On the blocking pool, which runs it to the end even if the client has gone: the session
    // made is recorded for its key whatever becomes of this request.
    blocking(move || {
        let make =
            || -> Result<TaskId, ApiFailure> { Ok(worker.tasks.start(start, Tasks::caller()?)?) };
        let id = match made.as_deref_mut() {
            Some(Some(id)) => *id,
            Some(recorded) => *recorded.insert(make()?),
            None => make()?,
        };
        Ok(describe(&worker.tasks.task(&id)?))
    })
    .await
    .map(Json)
}

/// The `Idempotency-Key` of a request, if it has one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, ApiFailure> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(IdempotencyKey::parse)
        .map(Some)
        .ok_or_else(|| {
            ApiFailure::invalid(format!(
                "an Idempotency-Key is 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
            ))
        })
}

impl From<KeyReused> for ApiFailure {
    fn from(reused: KeyReused) -> Self {
        ApiFailure::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            reused.to_string(),
        )
    }
}

async fn status(State(served): State<Arc<Served>>, id: IdPath) -> Answer<Session> {
    let Path(id) = id?;
    let id = session_id(&id)?;
    blocking(move || Ok(describe(&served.tasks.task(&id)?)))
        .await
        .map(Json)
}

/// `after_id`: the cursor (absent: from the start).
#[derive(Debug, Deserialize)]
struct After {
    after_id: Option<String>,
}

async fn events(
    State(served): State<Arc<Served>>,
    id: IdPath,
    after: Result<Query<After>, QueryRejection>,
) -> Answer<task_protocol::remote_api::EventsPage> {
    let Path(id) = id?;
    let id = session_id(&id)?;
    let Query(after) = after?;
    let offset = match after.after_id.as_deref() {
        None | Some("") => 0,
        // Digits beyond any offset: past the end, so nothing after it.
        Some(text) if text.bytes().all(|b| b.is_ascii_digit()) => text.parse().unwrap_or(u64::MAX),
        Some(text) => {
            return Err(ApiFailure::invalid(format!(
                "after_id {text:?} is not an event id"
            )));
        }
    };
    blocking(move || {
        served.tasks.task(&id)?;
        let source = Transcript {
            tasks: &served.tasks,
            id,
        };
        Ok(pages::page(&source, offset, served.pages)?)
    })
    .await
    .map(Json)
}

async fn send(
    State(served): State<Arc<Served>>,
    id: IdPath,
    body: Result<Json<SendEvents>, JsonRejection>,
) -> Answer<serde_json::Value> {
    let Path(id) = id?;
    let id = session_id(&id)?;
    let Json(request) = body?;
    let texts = user_texts(request.events)?;
    blocking(move || {
        let task = served.tasks.task(&id)?;
        if task.status() == TaskStatus::Killed {
            return Err(ApiFailure::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "the session is archived",
            ));
        }
        let to = Address::Task(task.id());
        for text in &texts {
            let sent = served.tasks.send_message(&to, text)?;
            if !sent.delivered() {
                return Err(ApiFailure::new(
                    StatusCode::CONFLICT,
                    "invalid_request_error",
                    sent.text(&to),
                ));
            }
        }
        Ok(json!({"accepted": texts.len()}))
    })
    .await
    .map(Json)
}

async fn archive(State(served): State<Arc<Served>>, id: IdPath) -> Answer<Session> {
    let Path(id) = id?;
    let id = session_id(&id)?;
    blocking(move || {
        served.tasks.kill(&[id])?;
        let mut session = describe(&served.tasks.task(&id)?);
        // A session that had ended on its own is archived all the same: it takes no more turns.
        session.session_status = SessionStatus::Archived;
        Ok(session)
    })
    .await
    .map(Json)
}

/// The texts of user turns: at least one, each a `user` event with a `user` message of text.
fn user_texts(events: Vec<UserEvent>) -> Result<Vec<String>, ApiFailure> {
    if events.is_empty() {
        return Err(ApiFailure::invalid(
            "events must hold at least one user turn",
        ));
    }
    events
        .into_iter()
        .map(|event| {
            if event.kind != "user" || event.message.role != "user" {
                return Err(ApiFailure::invalid(
                    "every event must be of type user with a message of role user",
                ));
            }
            if event.message.content.is_empty() {
                return Err(ApiFailure::invalid("a user message must have text"));
            }
            no_nul("a user message", &event.message.content)?;
            Ok(event.message.content)
        })
        .collect()
}

/// Refuses text with a NUL byte (it can be neither an argument nor a line of a CLI's input).
fn no_nul(what: &str, text: &str) -> Result<(), ApiFailure> {
    if text.contains('\0') {
        return Err(ApiFailure::invalid(format!(
            "{what} contains a NUL character"
        )));
    }
    Ok(())
}

/// The session of an agent task: running while it works, idle once its turn is over (a
/// message resumes it), archived once killed.
fn describe(task: &TaskRecord) -> Session {
    let state = &task.task.base;
    let session_status = match task.status() {
        TaskStatus::Pending | TaskStatus::Running => SessionStatus::Running,
        TaskStatus::Completed | TaskStatus::Failed => SessionStatus::Idle,
        TaskStatus::Killed => SessionStatus::Archived,
    };
    Session {
        id: state.id.to_string(),
        title: state.description.clone(),
        session_status,
        created_at: rfc3339(state.start_time),
        updated_at: rfc3339(state.end_time.unwrap_or(state.start_time)),
    }
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(80).collect()
}

/// An agent's transcript, read through the session layer.
struct Transcript<'a> {
    tasks: &'a Tasks,
    id: TaskId,
}

impl Source for Transcript<'_> {
    fn read(&self, offset: u64, len: usize) -> task_session::Result<Vec<u8>> {
        match self.tasks.read_delta(&self.id, offset, len) {
            Ok(delta) => Ok(delta.bytes.to_vec()),
            // A cursor past the end (not one this server gave): nothing after it.
            Err(task_session::Error::Invalid(_)) => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }
}
