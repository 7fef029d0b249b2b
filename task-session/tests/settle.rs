//! The engine's record writer and eviction, in this process: a task ended, resumed under its id
//! before it was evicted, and ended again has that second end on disk before the engine lets it
//! go. (A teammate sent a message as its first end settles: under load, the settling of that
//! first end once evicted the second end before its record was written, and the next supervisor
//! took the teammate for live and started it again.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Map;
use task_core::{
    Delivery, EndReason, Notification, Priority, Registry, TaskId, TaskKind, TaskState, TaskStatus,
    TaskType,
};
use task_session::config::Config;
use task_session::engine::{Engine, Host, Launchers};
use task_session::paths::SessionPaths;
use task_session::record::TaskRecord;

use support::eventually;

/// The sweep interval of the engine under test: the settling of an end, and the wait of an
/// end for its notice, are each one interval long.
const SWEEP: Duration = Duration::from_millis(1000);

thread_local! {
    /// The registry of the engine the wiring on this thread built.
    static REGISTRY: RefCell<Option<Arc<Registry>>> = const { RefCell::new(None) };
}

/// Executors are the test's own: it drives the registry directly.
fn wiring(host: &Host) -> task_session::Result<Launchers> {
    REGISTRY.with(|slot| *slot.borrow_mut() = Some(Arc::clone(&host.registry)));
    Ok(Launchers::new())
}

/// Waits until `at` (a moment of the scenario, not an event: the test's steps must fall on
/// either side of the engine's sweep deadlines).
fn until(at: Instant) {
    while let Some(left) = at.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

fn agent_state(id: TaskId, dir: &Path) -> TaskState {
    let output = dir.join(format!("{id}.output"));
    std::fs::write(&output, "").unwrap();
    let kind = TaskKind::Agent(Box::default());
    TaskState::new(id, "resumed in place", &output, kind).unwrap()
}

fn record(paths: &SessionPaths, id: &TaskId) -> Option<TaskRecord> {
    task_session::record::read(paths, id).ok()
}

/// An engine running in this process on a session of its own, and its registry.
struct InProcess {
    paths: SessionPaths,
    registry: Arc<Registry>,
    _engine: Engine,
    _runtime: tokio::runtime::Runtime,
    _root: tempfile::TempDir,
}

impl InProcess {
    /// An engine whose writer sweeps every `sweep`.
    fn start(sweep: Duration) -> Self {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        let settings = format!(r#"{{"sweep_interval_ms": {}}}"#, sweep.as_millis());
        std::fs::write(paths.config(), settings).unwrap();
        let config = Config::load(&paths.config()).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let engine = {
            let _inside = runtime.enter();
            Engine::start(paths.clone(), config, wiring).unwrap()
        };
        let registry = REGISTRY.with(|slot| slot.borrow().clone()).unwrap();
        InProcess {
            paths,
            registry,
            _engine: engine,
            _runtime: runtime,
            _root: root,
        }
    }

    /// A running task of this session, registered the way an executor registers one.
    fn running_task(&self) -> (TaskId, TaskState) {
        let id = TaskId::generate(TaskType::LocalAgent).unwrap();
        let state = agent_state(id, &self.paths.tasks_dir());
        self.registry.register(state.clone()).unwrap();
        self.registry.transition(&id, TaskStatus::Running).unwrap();
        (id, state)
    }
}

#[test]
fn a_task_resumed_before_its_end_settled_has_its_next_end_written_before_it_is_evicted() {
    let engine = InProcess::start(SWEEP);
    let (paths, registry) = (&engine.paths, &engine.registry);

    // A run that ends with its completion notice: written at once, settled a sweep later.
    let (id, state) = engine.running_task();
    let first = registry
        .transition_with(&id, TaskStatus::Completed, |s| {
            s.base.end_reason = Some(EndReason::Succeeded);
        })
        .unwrap();
    let note = Notification::for_task(&first, TaskStatus::Completed.terminal(), "first run");
    assert!(registry.notify_once(&id, note, Delivery::Queue(Priority::Later)));
    let first_end = first.base.end_time.unwrap();
    eventually("the first end on disk", || {
        record(paths, &id).filter(|r| r.task.base.end_time == Some(first_end))
    });
    let written = Instant::now();

    // Resumed under its id before that end settles, with its latch set (as a teammate's is:
    // its next end has no notice, so it is written once its notice wait is over).
    let mut again = state;
    again.base.notified = true;
    registry.register(again).unwrap();
    registry.transition(&id, TaskStatus::Running).unwrap();
    eventually("the resumed run on disk", || {
        record(paths, &id).filter(|r| r.task.base.status == TaskStatus::Running)
    });
    eventually("a new millisecond", || {
        (task_core::now_ms() > first_end).then_some(())
    });
    until(written + SWEEP * 2 / 5);
    let second = registry
        .transition_with(&id, TaskStatus::Completed, |s| {
            s.base.end_reason = Some(EndReason::Succeeded);
        })
        .unwrap();
    let second_end = second.base.end_time.unwrap();

    // After the first end's settling is due and before the second end's notice wait is over,
    // the writer sweeps (woken by an event): the first end's settling must not evict the task.
    until(written + SWEEP * 23 / 20);
    registry.emit_progress(&id, Map::new());

    eventually("the second end on disk", || {
        record(paths, &id).filter(|r| r.task.base.end_time == Some(second_end))
    });
    let on_disk = record(paths, &id).unwrap();
    assert_eq!(
        on_disk.task.base.status,
        TaskStatus::Completed,
        "{on_disk:?}"
    );
    assert!(!on_disk.survives_supervisor, "{on_disk:?}");
    eventually("the task evicted once its end is on disk", || {
        registry.get(&id).is_none().then_some(())
    });
}

#[test]
fn a_task_settled_silently_has_its_end_written_without_waiting_for_a_notice() {
    // A sweep far beyond the test's deadline: the end is written by the settlement alone.
    let engine = InProcess::start(Duration::from_secs(3600));
    let (id, _) = engine.running_task();
    let registry = &engine.registry;
    eventually("its running record", || {
        record(&engine.paths, &id).filter(|r| r.task.base.status == TaskStatus::Running)
    });
    let ended = registry
        .transition_with(&id, TaskStatus::Completed, |s| {
            s.base.end_reason = Some(EndReason::Succeeded);
        })
        .unwrap();
    // A workflow's agent ends this way: its notification is settled, not queued for the model.
    let note = Notification::for_task(&ended, TaskStatus::Completed.terminal(), "silent");
    assert!(registry.notify_once(&id, note, Delivery::Silent));
    let on_disk = eventually("its end on disk", || {
        record(&engine.paths, &id).filter(|r| r.is_terminal())
    });
    assert_eq!(on_disk.task.base.end_time, ended.base.end_time);
    assert!(on_disk.notification.is_none(), "no notice: {on_disk:?}");
}
