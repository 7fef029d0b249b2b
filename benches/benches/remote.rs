//! Remote agents, two figures (a bench binary, not criterion: each is a whole-system run):
//!
//! 1. **events per second through `tasks serve` to a polling client**: a session whose agent
//!    prints N stream-json events at once; a client (`HttpSessions`) pages them with `after_id`
//!    until the `result` event, polling every 10 ms when caught up. Median of 5 runs.
//! 2. **the poll loop's cost with 1000 idle remote tasks**: a `RemoteExecutor` at the SPEC's
//!    1 s poll following 1000 sessions that stay `running` with no events, served by a minimal
//!    sessions server in a child process; this process's CPU time over 10 s (user + system),
//!    as a share of one core and per task-poll, and its RSS.
//!
//! `cargo bench -p benches --bench remote`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use task_core::{Registry, TaskStatus};
use task_remote::api::{CreateSession, IdempotencyKey, UserEvent};
use task_remote::{HttpSessions, RemoteConfig, RemoteExecutor, RemoteRequest, RemoteSessions};

const EVENTS: usize = 20_000;
const RUNS: usize = 5;
const IDLE_TASKS: usize = 1000;
const IDLE_WINDOW: Duration = Duration::from_secs(10);

fn main() {
    if std::env::args().nth(1).as_deref() == Some("idle-server") {
        return idle_server();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(events_per_second());
    runtime.block_on(idle_poll_cost());
}

/// `tasks serve` whose agent prints `EVENTS` assistant events and a result.
struct Serve {
    child: Child,
    root: tempfile::TempDir,
    url: String,
    token: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let pid = std::fs::read_to_string(self.root.path().join("default/supervisor.lock"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn serve() -> Serve {
    let tasks = benches::build_tasks_binary();
    let root = tempfile::tempdir().unwrap();
    let token_file = root.path().join("token");
    let token = Command::new(&tasks)
        .args(["serve", "--init-token", token_file.to_str().unwrap()])
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
    let script = format!(
        "import json\n\
         print(json.dumps({{'type':'system','subtype':'init','session_id':'bench'}}))\n\
         line = json.dumps({{'type':'assistant','message':{{'role':'assistant','content':[{{'type':'text','text':'x'*100}}]}}}})\n\
         print('\\n'.join([line]*{EVENTS}))\n\
         print(json.dumps({{'type':'result','subtype':'success','is_error':False,'result':'done'}}))"
    );
    let script_file = root.path().join("agent.py");
    std::fs::write(&script_file, script).unwrap();
    let mut child = Command::new(&tasks)
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .env("TASKS_ROOT", root.path())
        .env(
            "TASKS_AGENT_COMMAND",
            format!("python3 {}", script_file.display()),
        )
        .env("TASKS_AGENT_RUNNER", "auto")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().trim_start_matches("listening on ").to_owned();
    Serve {
        child,
        root,
        url,
        token,
    }
}

async fn events_per_second() {
    let server = serve();
    let client = HttpSessions::new(&server.url, &server.token, Duration::from_secs(30)).unwrap();
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let create = CreateSession {
            events: vec![UserEvent::text("go")],
            title: Some("bench".into()),
            model: None,
        };
        let session = client
            .create(&create, &IdempotencyKey::random())
            .await
            .unwrap();
        let mut cursor: Option<String> = None;
        let mut received = 0usize;
        let mut pages = 0usize;
        loop {
            let page = client.events(&session.id, cursor.as_deref()).await.unwrap();
            pages += 1;
            received += page.data.len();
            let done = page.data.iter().any(|e| e["type"] == "result");
            if page.last_id.is_some() {
                cursor = page.last_id;
            }
            if done {
                break;
            }
            if !page.has_more {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let elapsed = started.elapsed();
        let rate = received as f64 / elapsed.as_secs_f64();
        println!(
            "  run: {received} events in {pages} requests, {:.1} ms, {rate:.0} events/s",
            elapsed.as_secs_f64() * 1e3
        );
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "events through tasks serve to a polling client: median {:.0} events/s ({EVENTS} events of ~200 bytes a run, {RUNS} runs)",
        rates[RUNS / 2]
    );
}

/// A sessions server whose sessions run forever and say nothing.
fn idle_server() {
    use axum::Router;
    use axum::routing::{get, post};
    use serde_json::json;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let session = |id: String| {
            axum::Json(
                json!({"id": id, "title": "idle", "session_status": "running",
                "created_at": "2026-11-23T00:00:00Z", "updated_at": "2026-11-23T00:00:00Z"}),
            )
        };
        let app = Router::new()
            .route(
                "/v1/sessions",
                post(move || {
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async move { session(format!("s{n}")) }
                }),
            )
            .route(
                "/v1/sessions/{id}",
                get(
                    move |axum::extract::Path(id): axum::extract::Path<String>| async move {
                        session(id)
                    },
                ),
            )
            .route(
                "/v1/sessions/{id}/events",
                get(|| async {
                    axum::Json(json!({"data": [], "has_more": false,
                        "first_id": null, "last_id": null}))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        axum::serve(listener, app).await.unwrap();
    });
}

/// This process's CPU time (user + system) from `/proc/self/stat`, in clock ticks of 10 ms.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn idle_poll_cost() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("idle-server")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut address = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut address)
        .unwrap();
    let url = format!("http://{}", address.trim());
    let dir = tempfile::tempdir().unwrap();
    let tasks_dir = dir.path().join("tasks");
    std::fs::create_dir_all(&tasks_dir).unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t\n").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let registry = Arc::new(Registry::default());
    let config = RemoteConfig::default();
    let executor = RemoteExecutor::new(Arc::clone(&registry), &tasks_dir, dir.path(), config)
        .register_with_registry();
    let rss_before = rss_kib();
    let ids: Vec<_> = (0..IDLE_TASKS)
        .map(|n| {
            let request = RemoteRequest::new(&url, &token_file, format!("idle {n}"), "wait");
            executor.start(request).unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ids
        .iter()
        .any(|id| registry.get(id).map(|s| s.status()) != Some(TaskStatus::Running))
    {
        assert!(Instant::now() < deadline, "the idle tasks never all ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the first polls spread over the period, then measure a window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_before = cpu_time();
    let wall = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    let cpu = cpu_time() - cpu_before;
    let wall = wall.elapsed();
    let polls = IDLE_TASKS as f64 * wall.as_secs_f64() / config_poll().as_secs_f64();
    println!(
        "1000 idle remote tasks at a 1 s poll: {:.1}% of one core ({:.1} ms CPU per second), {:.0} µs CPU per task-poll (a status and an events request), RSS {} MiB (+{} MiB for the tasks)",
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        1e3 * cpu.as_secs_f64() / wall.as_secs_f64(),
        1e6 * cpu.as_secs_f64() / polls,
        rss_kib() / 1024,
        rss_kib().saturating_sub(rss_before) / 1024,
    );
    for id in &ids {
        assert!(!registry.get(id).unwrap().status().is_terminal());
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn config_poll() -> Duration {
    RemoteConfig::default().poll_interval
}
