//! task-session: the state files every `tasks` process reads (records, events, start records,
//! `config.json`, lease holders) and the supervisor protocol's lines.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use task_core::{TaskId, TaskKind, TaskState};
use task_session::config::{self, Config};
use task_session::lease::Holder;
use task_session::notice::{self, Notice};
use task_session::paths::SessionPaths;
use task_session::protocol::{Request, Response};
use task_session::record::{self, TaskRecord};
use task_session::restart::{self, StartRecord};
use task_session::session::Session;

use crate::scratch;

/// The id a record is read as when its bytes name none.
const DEFAULT_ID: &str = "b12345678";

/// A session under this thread's scratch directory, its directories emptied.
fn fresh_session() -> SessionPaths {
    let root = scratch::dir().join("state");
    scratch::create_private_dir(&root);
    let paths = SessionPaths::new(&root, "fuzz").unwrap();
    let _ = std::fs::remove_dir_all(paths.dir());
    paths.create_dirs().unwrap();
    paths
}

/// The task id `bytes` name (a record's `task.id`, a legacy record's `id`), if any: the file
/// must be named after the task it describes, so the target names it so.
fn named_id(bytes: &[u8]) -> Option<TaskId> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let id = value
        .pointer("/task/id")
        .or_else(|| value.get("id"))
        .or_else(|| value.get("taskId"))?;
    TaskId::parse(id.as_str()?).ok()
}

fn default_id() -> TaskId {
    TaskId::parse(DEFAULT_ID).unwrap()
}

/// `{id}.json`: read as every reader reads it (`record::read`, `record::list`, the session's
/// listing with its orphan rule, the delivery of completions), rendered as `tasks ps`, `status`
/// and the pill render it; a record that reads is written back by the supervisor's writer and
/// must read back equal, and so must its orphan.
pub fn record(data: &[u8]) {
    let paths = fresh_session();
    let id = named_id(data).unwrap_or_else(default_id);
    scratch::write(&paths.snapshot(&id), data);
    let read = record::read(&paths, &id);
    let listing = record::list(&paths).expect("a listing never fails for a bad record");
    assert_eq!(listing.tasks.len() + listing.problems.len(), 1);
    assert_eq!(listing.tasks.len(), usize::from(read.is_ok()));
    let _ = read.as_ref().map_err(ToString::to_string);
    if let Ok(record) = read {
        check_record(&paths, &id, record);
    }
    // The session's own readers: the orphan rule (no supervisor runs here, so a live record
    // reads as orphaned) and the completions due, claimed and given back.
    let session = Session::with_config(paths.clone(), Config::default());
    if let Ok(listing) = session.tasks() {
        for task in &listing.tasks {
            task.task.validate().expect("a listed task is valid");
            render(task);
        }
    }
    if let Ok(leased) = session.lease_notifications() {
        for notice in leased.notices() {
            let _ = notice.text();
        }
    }
}

fn check_record(paths: &SessionPaths, id: &TaskId, record: TaskRecord) {
    assert_eq!(
        record.id(),
        *id,
        "a record is about the task its file names"
    );
    record
        .task
        .validate()
        .expect("a record that reads is valid");
    render(&record);
    let orphan = record.clone().orphaned();
    orphan
        .task
        .validate()
        .expect("the orphan of a valid record is valid");
    if !record.is_terminal() {
        assert!(orphan.is_terminal(), "an orphan has ended");
    }
    render(&orphan);
    for written in [record, orphan] {
        record::write(paths, &written).expect("a record that reads can be written");
        let mut again = record::read(paths, id).expect("a written record reads back");
        again.written_ms = written.written_ms;
        assert_eq!(again, written, "a record reads back as it was written");
    }
}

/// What the readers print of a record.
fn render(record: &TaskRecord) {
    let _ = (record.status(), record.exit_code(), record.command());
    if let Some(reason) = record.end_reason() {
        let _ = (
            reason.exit_code(),
            reason.is_limit(),
            reason.stderr_note(),
            reason.short(),
        );
    }
    let base = &record.task.base;
    if let Some(end) = base.end_time {
        let _ =
            task_core::human_duration(Duration::from_millis(end.saturating_sub(base.start_time)));
    }
    if let Some(notice) = &record.notification {
        let _ = (
            notice.text(),
            notice.notification.render_for_model(),
            notice.task_id(),
        );
    }
    render_task(&record.task);
    let _ = task_client::cli::render::Row::new(record, 0, false);
    for width in [0, 1, 40] {
        let _ = task_client::cli::render::one_line(record.command(), width);
        let _ = task_client::cli::render::one_line(&base.description, width);
    }
}

fn render_task(task: &TaskState) {
    let _ = task_client::cli::render::describe(task, None);
    let _ = task_client::cli::render::teammate_activity(task);
    let _ = task_client::cli::pill::pill([task]);
    let _ = task.kind.command_line();
    if let TaskKind::Agent(agent) = &task.kind {
        let _ = task_client::cli::render::size(agent.progress.token_count);
    }
}

/// `events/pending/*.json`: peeked at as `tasks notifications --watch` does, then claimed and
/// given back as every delivering reader does.
pub fn event(data: &[u8]) {
    let paths = fresh_session();
    let name = format!(
        "5-{:016}-{:08}-{:010}-{DEFAULT_ID}.json",
        1_764_000_000_000u64, 1, 0
    );
    scratch::write(&paths.pending_events().join(&name), data);
    let peeked = notice::peek_events(&paths).expect("peeking never fails for a bad event");
    let direct = serde_json::from_slice::<Notice>(data).ok();
    assert_eq!(peeked.len(), usize::from(direct.is_some()));
    if let Some(event) = peeked.first() {
        assert_eq!(event.name, name);
        let stem = name.strip_suffix(".json").unwrap();
        assert_eq!(event.notice.key.as_deref(), Some(stem));
        let _ = (event.notice.text(), event.notice.task_id());
        let encoded = serde_json::to_vec(&event.notice).unwrap();
        let decoded: Notice = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(
            decoded, event.notice,
            "an event reads back as it was written"
        );
    }
    let holder = Holder::this_process(Duration::from_secs(60));
    let leased =
        notice::claim_events(&paths, &holder).expect("a claim never fails for a bad event");
    assert_eq!(leased.len(), peeked.len());
    for notice in leased.notices() {
        let _ = notice.text();
    }
    drop(leased); // given back
    let again = notice::peek_events(&paths).unwrap();
    assert_eq!(
        again.len(),
        peeked.len(),
        "an event given back is pending again"
    );
}

/// One request line as the supervisor reads it (and the answer line as a client reads it):
/// what parses re-serializes and parses to an equal value. A start's record
/// (`{id}.start.json`) is read back by `tasks restart` the same way.
pub fn protocol(data: &[u8]) {
    let line = match data.iter().position(|&b| b == b'\n') {
        Some(end) => &data[..=end],
        None => data,
    };
    if line.len() <= task_session::supervisor::MAX_REQUEST_BYTES
        && let Ok(request) = serde_json::from_slice::<Request>(line)
    {
        let encoded = serde_json::to_vec(&request).unwrap();
        let decoded: Request = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(decoded, request, "a request reads back as it was sent");
        if let task_session::protocol::Op::Start(start) = &request.op {
            let remembered = StartRecord::of(start);
            let _ = remembered.again();
        }
    }
    if let Ok(response) = serde_json::from_slice::<Response>(line) {
        let encoded = serde_json::to_vec(&response).unwrap();
        let decoded: Response = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(decoded, response, "a response reads back as it was sent");
    }
    start_record(data);
}

/// A start record through `restart::recall`: written beside the task's record by an older
/// client (`{id}.start.json`), then kept in the record itself, as supervisors keep it now.
fn start_record(data: &[u8]) {
    let paths = fresh_session();
    let id = default_id();
    let state = TaskState::new(
        id,
        "fuzz",
        paths.output(&id),
        TaskKind::Shell(task_core::ShellState {
            command: "true".into(),
            is_backgrounded: true,
            kind: task_core::ShellKind::Shell,
            exit_code: None,
            process: None,
            batch: None,
        }),
    )
    .unwrap();
    let mut kept = TaskRecord::new(state);
    record::write(&paths, &kept).unwrap();
    scratch::write(&paths.start_request(&id), data);
    if let Ok(start) = restart::recall(&paths, &id) {
        let _ = start.again();
        kept.start = Some(std::sync::Arc::new(start.clone()));
        record::write(&paths, &kept).unwrap();
        let again = restart::recall(&paths, &id).expect("a start record reads back");
        assert_eq!(again, start, "a start record reads back as it was written");
    }
}

/// `config.json` as the supervisor and the `tasks` wiring read it; its text as a duration or
/// a size (the environment's values go through the same functions).
pub fn config(data: &[u8]) {
    let path: PathBuf = scratch::dir().join("config.json");
    scratch::write(&path, data);
    if let Ok(config) = Config::load(&path) {
        let settings = &config.executors;
        let _ = settings.text("TASKS_FUZZ_NONE", "agent_command");
        let _ = settings.number("TASKS_FUZZ_NONE", "size_cap_bytes");
        let _ = settings.millis("TASKS_FUZZ_NONE", "stall_threshold_ms", Duration::ZERO);
        let _ = settings.check_known(&["stall_threshold_ms"]);
        let _ = task_cli::settings::Settings::read(settings);
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(duration) = config::parse_duration(&text) {
        let ms = config::parse_duration_ms(&text).expect("a duration is a number of ms");
        assert_eq!(
            u128::from(ms),
            duration.as_millis().min(u128::from(u64::MAX))
        );
    }
    if let Ok(ms) = text.trim().parse::<u64>() {
        assert_eq!(
            config::parse_duration(&text),
            Ok(Duration::from_millis(ms)),
            "a bare number is ms"
        );
    }
    let _ = task_session::prune::parse_size(&text);
}

/// A lease holder's text (a lease symlink's target, an event's leased name): what decodes
/// encodes to text that decodes to the same holder.
pub fn lease(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(holder) = Holder::decode(text) {
        assert_eq!(Holder::decode(&holder.encode()), Some(holder));
        let _ = holder.is_stale(task_core::now_ms());
        assert!(holder.expired().is_stale(0) || holder.expired().is_stale(1));
    }
}
