//! The remote executor against a sessions server this test controls (real HTTP on 127.0.0.1,
//! axum): 5xx bursts, hangs past the request timeout, truncated and malformed bodies, a 401,
//! the server killed and restarted, and an outage longer than the limit. Through all of them a
//! task ends exactly once, never stays `running`, and logs every event exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};
use task_core::{Registry, TaskId, TaskKind, TaskStatus};
use task_remote::{RemoteConfig, RemoteExecutor, RemoteRequest};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// What the next requests get instead of an answer.
#[derive(Debug, Clone)]
enum Fault {
    Status(u16),
    Hang(Duration),
    Truncated,
    Malformed,
}

#[derive(Debug, Default)]
struct Script {
    events: Vec<Map<String, Value>>,
    idle: bool,
    archived: bool,
    faults: VecDeque<Fault>,
    created: u32,
    /// The `Idempotency-Key` of every create request, faulty or not, in order.
    create_keys: Vec<Option<String>>,
}

type Fake = Arc<Mutex<Script>>;

fn push_event(fake: &Fake, kind: &str, extra: Value) {
    let mut script = fake.lock().unwrap();
    let id = (script.events.len() + 1).to_string();
    let mut event = json!({"type": kind, "id": id});
    if let (Some(event), Some(extra)) = (event.as_object_mut(), extra.as_object()) {
        event.extend(extra.clone());
    }
    script.events.push(event.as_object().unwrap().clone());
}

fn finish(fake: &Fake, result: &str) {
    push_event(fake, "result", json!({"result": result, "is_error": false}));
    fake.lock().unwrap().idle = true;
}

async fn faults(State(fake): State<Fake>, request: Request, next: Next) -> Response {
    if request.method() == axum::http::Method::POST && request.uri().path() == "/v1/sessions" {
        let key = request.headers().get("idempotency-key");
        let key = key.map(|key| key.to_str().unwrap().to_owned());
        fake.lock().unwrap().create_keys.push(key);
    }
    let fault = fake.lock().unwrap().faults.pop_front();
    match fault {
        None => next.run(request).await,
        Some(Fault::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap();
            (status, r#"{"error":{"type":"x","message":"injected"}}"#).into_response()
        }
        Some(Fault::Hang(time)) => {
            tokio::time::sleep(time).await;
            next.run(request).await
        }
        Some(Fault::Truncated) => {
            // Part of a body, then the connection breaks.
            let parts: Vec<Result<&'static str, std::io::Error>> =
                vec![Ok(r#"{"id":"s1","#), Err(std::io::Error::other("cut"))];
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(futures_util::stream::iter(parts)))
                .unwrap()
        }
        Some(Fault::Malformed) => (StatusCode::OK, "{this is not json").into_response(),
    }
}

fn session(script: &Script) -> Value {
    let status = if script.archived {
        "archived"
    } else if script.idle {
        "idle"
    } else {
        "running"
    };
    json!({"id": "s1", "title": "t", "session_status": status,
           "created_at": "2026-11-23T00:00:00Z", "updated_at": "2026-11-23T00:00:00Z"})
}

async fn create(State(fake): State<Fake>) -> axum::Json<Value> {
    let mut script = fake.lock().unwrap();
    script.created += 1;
    axum::Json(session(&script))
}

async fn status(State(fake): State<Fake>, Path(_id): Path<String>) -> axum::Json<Value> {
    axum::Json(session(&fake.lock().unwrap()))
}

async fn archive(State(fake): State<Fake>, Path(_id): Path<String>) -> axum::Json<Value> {
    let mut script = fake.lock().unwrap();
    script.archived = true;
    axum::Json(session(&script))
}

/// Pages of two events.
async fn events(
    State(fake): State<Fake>,
    Path(_id): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> axum::Json<Value> {
    let script = fake.lock().unwrap();
    let after: usize = query.get("after_id").map_or(0, |id| id.parse().unwrap());
    let page: Vec<_> = script.events.iter().skip(after).take(2).cloned().collect();
    let has_more = after + page.len() < script.events.len();
    axum::Json(json!({
        "data": page, "has_more": has_more,
        "first_id": page.first().map(|e| e["id"].clone()),
        "last_id": page.last().map(|e| e["id"].clone()),
    }))
}

/// A running fake server on `address` (port 0: any); dropping the sender stops it.
async fn serve(fake: &Fake, address: SocketAddr) -> (SocketAddr, oneshot::Sender<()>) {
    let app = Router::new()
        .route("/v1/sessions", post(create))
        .route("/v1/sessions/{id}", get(status))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/archive", post(archive))
        .layer(middleware::from_fn_with_state(Arc::clone(fake), faults))
        .with_state(Arc::clone(fake));
    let listener = TcpListener::bind(address).await.unwrap();
    let bound = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (bound, stop)
}

struct Harness {
    registry: Arc<Registry>,
    executor: RemoteExecutor,
    dir: tempfile::TempDir,
    token_file: std::path::PathBuf,
}

impl Harness {
    fn new(config: RemoteConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks");
        std::fs::create_dir_all(&tasks).unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "secret\n").unwrap();
        // A token file only its owner may read, as the client demands.
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let registry = Arc::new(Registry::default());
        let executor = RemoteExecutor::new(Arc::clone(&registry), &tasks, dir.path(), config)
            .register_with_registry();
        Harness {
            registry,
            executor,
            dir,
            token_file,
        }
    }

    fn start(&self, address: SocketAddr) -> TaskId {
        let request = RemoteRequest::new(
            format!("http://{address}"),
            &self.token_file,
            "faulty job",
            "work through faults",
        );
        self.executor.start(request).unwrap()
    }

    async fn ended(&self, id: &TaskId) -> Arc<task_core::TaskState> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = self.registry.subscribe();
        loop {
            // Ended and notified (the latch is set just after the transition).
            if let Some(state) = self.registry.get(id)
                && state.status().is_terminal()
                && state.base.notified
            {
                return state;
            }
            assert!(Instant::now() < deadline, "the task never ended");
            let _ = tokio::time::timeout(Duration::from_millis(50), events.recv()).await;
        }
    }

    async fn running(&self, id: &TaskId) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = self.registry.subscribe();
        while self.registry.get(id).map(|s| s.status()) != Some(TaskStatus::Running) {
            assert!(Instant::now() < deadline, "the task never ran");
            let _ = tokio::time::timeout(Duration::from_millis(50), events.recv()).await;
        }
    }

    fn logged_ids(&self, id: &TaskId) -> Vec<String> {
        let path = self.dir.path().join("tasks").join(format!("{id}.output"));
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| {
                let event: Value = serde_json::from_str(line).unwrap();
                event["id"].as_str().unwrap().to_owned()
            })
            .collect()
    }

    fn sidecar_exists(&self, id: &TaskId) -> bool {
        self.executor.sidecars().path(id).exists()
    }

    /// The notifications queued so far.
    fn notifications(&self) -> Vec<String> {
        self.registry
            .notifications()
            .drain()
            .iter()
            .map(|n| n.render())
            .collect()
    }

    /// The notifications of an ended task: queued just after its latch is set, so waited for.
    async fn notified(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.registry.notifications().is_empty() {
            assert!(Instant::now() < deadline, "no notification");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.notifications()
    }
}

fn config() -> RemoteConfig {
    let mut config = RemoteConfig::fast(Duration::from_millis(10));
    config.request_timeout = Duration::from_millis(300);
    config.outage_limit = Duration::from_secs(20);
    config
}

fn all_ids(count: usize) -> Vec<String> {
    (1..=count).map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_faults_are_retried_and_every_event_is_logged_exactly_once() {
    let fake = Fake::default();
    push_event(&fake, "system", json!({"subtype": "init"}));
    let (address, _stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    // The create call itself meets a 503 and a malformed body first.
    fake.lock()
        .unwrap()
        .faults
        .extend([Fault::Status(503), Fault::Malformed]);
    let id = harness.start(address);
    harness.running(&id).await;
    for n in 0..5 {
        push_event(&fake, "assistant", json!({"n": n}));
    }
    fake.lock().unwrap().faults.extend([
        Fault::Status(500),
        Fault::Status(502),
        Fault::Status(503),
        Fault::Hang(Duration::from_millis(800)),
        Fault::Truncated,
        Fault::Malformed,
        Fault::Status(429),
    ]);
    finish(&fake, "made it");
    let ended = harness.ended(&id).await;
    assert_eq!(ended.status(), TaskStatus::Completed, "{ended:?}");
    assert_eq!(harness.logged_ids(&id), all_ids(7));
    assert_eq!(fake.lock().unwrap().created, 1, "one session");
    let notifications = harness.notified().await;
    assert_eq!(notifications.len(), 1, "{notifications:?}");
    assert!(notifications[0].contains("<task-type>remote_agent</task-type>"));
    assert!(notifications[0].contains("<result>made it</result>"));
    assert!(!harness.sidecar_exists(&id));
    let TaskKind::Remote(remote) = &ended.kind else {
        panic!("not remote")
    };
    assert_eq!(remote.last_event_id.as_deref(), Some("7"));
    assert_eq!(remote.events_received, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_fails_the_task_at_once() {
    let fake = Fake::default();
    let (address, _stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    let id = harness.start(address);
    harness.running(&id).await;
    fake.lock().unwrap().faults.push_back(Fault::Status(401));
    let ended = harness.ended(&id).await;
    assert_eq!(ended.status(), TaskStatus::Failed);
    let notifications = harness.notified().await;
    assert_eq!(notifications.len(), 1);
    assert!(
        notifications[0].contains("the server refused the token (HTTP 401)"),
        "{notifications:?}"
    );
    assert!(!harness.sidecar_exists(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_and_restarted_within_the_outage_limit_is_survived() {
    let fake = Fake::default();
    push_event(&fake, "system", json!({"subtype": "init"}));
    let (address, stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    let id = harness.start(address);
    harness.running(&id).await;
    drop(stop);
    // The server is gone: polls are refused, and the task keeps running.
    let refused = async {
        while tokio::net::TcpStream::connect(address).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), refused)
        .await
        .unwrap();
    push_event(&fake, "assistant", json!({"text": "while down"}));
    finish(&fake, "back again");
    assert!(!harness.registry.get(&id).unwrap().status().is_terminal());
    let (_, _stop) = serve(&fake, address).await;
    let ended = harness.ended(&id).await;
    assert_eq!(ended.status(), TaskStatus::Completed, "{ended:?}");
    assert_eq!(harness.logged_ids(&id), all_ids(3));
    assert_eq!(harness.notified().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_limit_fails_the_task_with_a_clear_reason() {
    let fake = Fake::default();
    let (address, stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let mut config = config();
    config.outage_limit = Duration::from_millis(300);
    let harness = Harness::new(config);
    let id = harness.start(address);
    harness.running(&id).await;
    drop(stop);
    let ended = harness.ended(&id).await;
    assert_eq!(ended.status(), TaskStatus::Failed);
    let notifications = harness.notified().await;
    assert_eq!(notifications.len(), 1);
    assert!(
        notifications[0].contains("the server was unreachable for"),
        "{notifications:?}"
    );
    assert!(!harness.sidecar_exists(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_stays_idle_is_trusted_complete_only_after_five_idle_polls() {
    let fake = Fake::default();
    let (address, _stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    let id = harness.start(address);
    harness.running(&id).await;
    // Idle, but no result event: only five idle polls in a row end it.
    fake.lock().unwrap().idle = true;
    let mut events = harness.registry.subscribe();
    let mut idle_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !harness.registry.get(&id).unwrap().status().is_terminal() {
        assert!(Instant::now() < deadline);
        let _ = tokio::time::timeout(Duration::from_millis(50), events.recv()).await;
        if let TaskKind::Remote(remote) = &harness.registry.get(&id).unwrap().kind {
            idle_seen.push(remote.idle_polls);
        }
    }
    assert!(idle_seen.iter().all(|&n| n < 5), "{idle_seen:?}");
    assert!(idle_seen.contains(&4), "{idle_seen:?}");
    let ended = harness.ended(&id).await;
    assert_eq!(ended.status(), TaskStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_archives_the_session() {
    let fake = Fake::default();
    let (address, _stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    let id = harness.start(address);
    harness.running(&id).await;
    assert!(harness.sidecar_exists(&id));
    harness.registry.kill(&id).await.unwrap();
    assert_eq!(
        harness.registry.get(&id).unwrap().status(),
        TaskStatus::Killed
    );
    assert!(fake.lock().unwrap().archived);
    assert!(!harness.sidecar_exists(&id));
    assert!(harness.notifications().is_empty(), "a kill is not notified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_retried_after_its_answer_was_lost_carries_the_same_idempotency_key() {
    let fake = Fake::default();
    let (address, _stop) = serve(&fake, "127.0.0.1:0".parse().unwrap()).await;
    let harness = Harness::new(config());
    // The first create is answered after the client gave up on it; the second is cut
    // mid-body.
    fake.lock()
        .unwrap()
        .faults
        .extend([Fault::Hang(Duration::from_millis(800)), Fault::Truncated]);
    let first = harness.start(address);
    harness.running(&first).await;
    let second = harness.start(address);
    harness.running(&second).await;
    let keys = fake.lock().unwrap().create_keys.clone();
    let keys: Vec<String> = keys.into_iter().map(Option::unwrap).collect();
    // The first task: hung (its answer lost), truncated, answered; then the second's.
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert!(
        keys[0] == keys[1] && keys[1] == keys[2],
        "every attempt of the first task's create carried one key: {keys:?}"
    );
    assert_ne!(
        keys[2], keys[3],
        "each logical create has its own key: {keys:?}"
    );
    assert!(keys.iter().all(|key| key.len() == 32), "{keys:?}");
}
