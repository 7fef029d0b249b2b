//! task-session embedded by a harness of its own: a toy executor defined here (a task that
//! writes its lines to its output, then ends with a result once released), a supervisor that
//! is this test binary started on demand by the session's client, and the client in the test
//! process: two processes, no `tasks` binary, no executor crate of ours.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use task_core::{
    AgentState, Caller, Delivery, EndReason, KillError, Launch, LaunchError, Launched,
    Notification, Priority, Registry, Task, TaskId, TaskKind, TaskState, TaskStatus, TaskType,
};
use task_session::changes::RecordChanges;
use task_session::client::SupervisorCommand;
use task_session::config::Config;
use task_session::engine::{Host, Launchers};
use task_session::paths::SessionPaths;
use task_session::protocol::{KillResult, Op, Response, Start};
use task_session::session::{Session, WaitOutcome};

use support::eventually;
use tokio::io::AsyncReadExt;
use tokio::sync::{oneshot, watch};

/// What a toy task does: write `lines`, then finish once its gate `release` opens (a FIFO the
/// test writes a byte to; see [`Gate`]). A survivor outlives its supervisor: the next
/// supervisor of the session resumes it from its record.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ToyStart {
    lines: Vec<String>,
    release: PathBuf,
    #[serde(default)]
    survivor: bool,
    /// Started at once by its launcher, as a monitor is (`running` before the launcher
    /// returns). The first launch of it then creates `{hold}.held` and returns only once
    /// `hold` exists: the moment between the task made `running` and the start noting its key.
    #[serde(default)]
    hold: Option<PathBuf>,
}

/// The agent type of a toy that survives its supervisor; its prompt is its gate's path.
const SURVIVOR: &str = "survivor";

#[derive(Clone)]
struct Toy {
    registry: Arc<Registry>,
    dir: PathBuf,
    cancels: Arc<Mutex<HashMap<TaskId, oneshot::Sender<()>>>>,
    /// The gates its toys wait at, by path: one reader of each FIFO in this supervisor,
    /// whose first byte opens the gate for every toy at it, then and later.
    gates: Arc<Mutex<HashMap<PathBuf, watch::Receiver<bool>>>>,
}

impl task_protocol::start::StartRequest for ToyStart {
    const KIND: &'static str = "toy";
}

impl Launch for Toy {
    type Request = ToyStart;

    fn launch(&self, start: ToyStart, caller: Caller) -> Result<Launched, LaunchError> {
        let failed = |e: String| LaunchError::Failed(e.into());
        let id = TaskId::generate(TaskType::LocalAgent).map_err(|e| failed(e.to_string()))?;
        let output = self.dir.join(format!("{id}.output"));
        std::fs::write(&output, "").map_err(|e| failed(e.to_string()))?;
        let agent = AgentState {
            agent_type: if start.survivor { SURVIVOR } else { "toy" }.into(),
            prompt: if start.survivor {
                start.release.display().to_string()
            } else {
                start.lines.join(" ")
            },
            ..AgentState::default()
        };
        let state = TaskState::new(id, "toy task", &output, TaskKind::Agent(Box::new(agent)))
            .map_err(|e| failed(e.to_string()))?
            .owned_by(caller.agent_id);
        if start.hold.is_some() {
            // Registered and made `running` by a thread of its own, as a monitor's process is
            // watched: its events wake the supervisor's event loop on the worker this launch
            // does not hold (a wake from this worker would wait in its queue for this launch
            // to return).
            let registry = Arc::clone(&self.registry);
            std::thread::spawn(move || {
                registry.register(state).unwrap();
                registry.transition(&id, TaskStatus::Running).unwrap();
            })
            .join()
            .unwrap();
        } else {
            self.registry
                .register(state)
                .map_err(|e| failed(e.to_string()))?;
        }
        let (cancel, cancelled) = oneshot::channel();
        self.cancels.lock().unwrap().insert(id, cancel);
        let registry = Arc::clone(&self.registry);
        if let Some(hold) = &start.hold {
            let held = hold.with_extension("held");
            if !held.exists() {
                // Whole when it appears: the test reads it as soon as it exists.
                let part = hold.with_extension("held.part");
                std::fs::write(&part, id.to_string()).unwrap();
                std::fs::rename(&part, &held).unwrap();
                eventually("the test's hold file", || hold.exists().then_some(()));
            }
            let gate = self.gate(&start.release);
            tokio::spawn(finish(registry, id, gate, cancelled));
            return Ok(Launched { id, start: None });
        }
        let gate = self.gate(&start.release);
        Ok(Launched {
            id,
            start: Some(Box::new(move || {
                tokio::spawn(play(registry, id, output, start.lines, gate, cancelled));
            })),
        })
    }
}

async fn play(
    registry: Arc<Registry>,
    id: TaskId,
    output: PathBuf,
    lines: Vec<String>,
    gate: watch::Receiver<bool>,
    cancelled: oneshot::Receiver<()>,
) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&output, text).unwrap();
    registry.transition(&id, TaskStatus::Running).unwrap();
    finish(registry, id, gate, cancelled).await;
}

/// Completes `id` once its `gate` opens.
async fn finish(
    registry: Arc<Registry>,
    id: TaskId,
    mut gate: watch::Receiver<bool>,
    mut cancelled: oneshot::Receiver<()>,
) {
    tokio::select! {
        _ = &mut cancelled => return,
        opened = gate.wait_for(|open| *open) => {
            if opened.is_err() {
                return; // its gate could not be read: it stays running until killed
            }
        }
    }
    let done = registry.transition_with(&id, TaskStatus::Completed, |state| {
        state.base.end_reason = Some(EndReason::Succeeded);
    });
    if let Ok(done) = done {
        let note = Notification::for_task(&done, TaskStatus::Completed.terminal(), "toy done");
        registry.notify_once(&id, note, Delivery::Queue(Priority::Later));
    }
}

#[async_trait]
impl Task for Toy {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        if let Some(cancel) = self.cancels.lock().unwrap().remove(id) {
            let _ = cancel.send(());
        }
        let _ = registry.transition_with(id, TaskStatus::Killed, |state| {
            state.base.end_reason = Some(EndReason::Killed);
            state.base.notified = true;
        });
        Ok(())
    }

    fn survives_supervisor(&self, task: &TaskState) -> bool {
        matches!(&task.kind, TaskKind::Agent(agent) if agent.agent_type == SURVIVOR)
    }
}

impl Toy {
    /// Follows again every survivor a dead supervisor left live (what a remote executor does
    /// from its sidecars): registered from its record, running, finished once released.
    fn resume_survivors(&self, paths: &SessionPaths) {
        for found in task_session::record::list(paths).unwrap().tasks {
            let TaskKind::Agent(agent) = &found.task.kind else {
                continue;
            };
            if found.is_terminal() || agent.agent_type != SURVIVOR {
                continue;
            }
            let id = found.id();
            let gate = self.gate(Path::new(&agent.prompt));
            let mut state = found.task.clone();
            state.base.status = TaskStatus::Pending;
            self.registry.register(state).unwrap();
            self.registry.transition(&id, TaskStatus::Running).unwrap();
            let (cancel, cancelled) = oneshot::channel();
            self.cancels.lock().unwrap().insert(id, cancel);
            tokio::spawn(finish(Arc::clone(&self.registry), id, gate, cancelled));
        }
    }

    /// The gate at `path`, opened once its FIFO (made here if the test did not yet) gives a
    /// byte: its one reader in this supervisor is started by the first toy at it.
    fn gate(&self, path: &Path) -> watch::Receiver<bool> {
        let mut gates = self.gates.lock().unwrap();
        let gate = gates.entry(path.to_owned()).or_insert_with(|| {
            let (open, opened) = watch::channel(false);
            let path = path.to_owned();
            tokio::spawn(async move {
                match pass(&path).await {
                    Ok(()) => open.send_replace(true),
                    Err(error) => panic!("cannot read the gate {}: {error}", path.display()),
                };
            });
            opened
        });
        gate.clone()
    }
}

/// Waits for one byte through the FIFO at `path`, made if missing and opened for reading and
/// writing (the open never blocks; a byte written before the read waits in it).
async fn pass(path: &Path) -> std::io::Result<()> {
    make_fifo(path)?;
    let mut receiver = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(path)?;
    receiver.read_exact(&mut [0; 1]).await.map(drop)
}

/// Makes a FIFO at `path` unless one is there.
fn make_fifo(path: &Path) -> std::io::Result<()> {
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    match rustix::fs::mkfifoat(rustix::fs::CWD, path, mode) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// A toy's gate, held open by the test (a byte written stays in it until a toy's supervisor
/// reads it, across supervisors).
struct Gate(std::fs::File);

impl Gate {
    /// The closed gate at `path`.
    fn at(path: &Path) -> Self {
        make_fifo(path).unwrap();
        Self(
            std::fs::File::options()
                .read(true)
                .write(true)
                .open(path)
                .unwrap(),
        )
    }

    /// Opens the gate: every toy at it finishes. The byte waits in the FIFO, which this test
    /// keeps open, for a supervisor that reads it, this one or the next.
    fn open(&mut self) {
        self.0.write_all(b"\n").unwrap();
    }
}

fn wiring(host: &Host) -> task_session::Result<Launchers> {
    let toy = Toy {
        registry: Arc::clone(&host.registry),
        dir: host.paths.tasks_dir(),
        cancels: Arc::default(),
        gates: Arc::default(),
    };
    host.registry
        .register_executor(TaskType::LocalAgent, Arc::new(toy.clone()));
    toy.resume_survivors(&host.paths);
    Ok(Launchers::new().with(toy))
}

/// A file in the root that makes every supervisor started after it exists die as it starts.
const POISON: &str = "poison";

/// Not a test: the supervisor process of the other tests, started by their session's client
/// (its session comes in `TASKS_ROOT` and `TASKS_SESSION`).
#[test]
#[ignore = "the supervisor process of the other tests, started by their session's client"]
fn supervisor_entry() {
    let root = std::env::var_os("TASKS_ROOT").expect("started as a supervisor");
    let session = std::env::var("TASKS_SESSION").unwrap_or_else(|_| "default".into());
    let paths = SessionPaths::new(PathBuf::from(&root), &session).unwrap();
    if PathBuf::from(root).join(POISON).exists() {
        std::process::exit(3); // dies as it starts, before it says a word
    }
    task_session::supervisor::run(paths, wiring).unwrap();
}

struct Harness {
    root: tempfile::TempDir,
    session: Session,
}

impl Harness {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        std::fs::write(
            paths.config(),
            r#"{"idle_exit_ms": 2000, "sweep_interval_ms": 50, "poll_interval_ms": 5}"#,
        )
        .unwrap();
        let config = Config::load(&paths.config()).unwrap();
        let session = Session::with_config(paths, config).with_supervisor(toy_supervisor());
        Self { root, session }
    }

    fn start(&self, lines: &[&str], release: &str) -> TaskId {
        self.start_toy(lines, release, false)
    }

    fn start_toy(&self, lines: &[&str], release: &str, survivor: bool) -> TaskId {
        let start = ToyStart {
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            release: self.root.path().join(release),
            survivor,
            hold: None,
        };
        self.session
            .start(start, Session::caller().unwrap())
            .unwrap()
    }

    /// The gate `name` in the root, which toys started with it as their release wait at.
    fn gate(&self, name: &str) -> Gate {
        Gate::at(&self.root.path().join(name))
    }

    fn supervisor_pid(&self) -> Option<rustix::process::Pid> {
        std::fs::read_to_string(self.session.paths().lock())
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(pid) = self.supervisor_pid() {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

#[test]
fn an_embedded_executor_runs_in_a_supervisor_process_and_notifies_once() {
    let harness = Harness::new();
    let session = &harness.session;
    let id = harness.start(&["one", "two"], "release");
    assert_eq!(id.task_type(), TaskType::LocalAgent);
    let pid = harness
        .supervisor_pid()
        .expect("a supervisor started on demand");
    assert_ne!(
        pid.as_raw_nonzero().get().unsigned_abs(),
        std::process::id()
    );

    // Its record and output, read from files by this process.
    eventually("the task running", || {
        (session.task(&id).unwrap().status() == TaskStatus::Running).then_some(())
    });
    assert_eq!(session.tail(&id, 5).unwrap(), ["one", "two"]);
    assert!(session.drain_notifications().unwrap().is_empty());

    // Released, it completes with the executor's end reason.
    let mut release = harness.gate("release");
    release.open();
    let ended = match session.wait(&[id], Some(Duration::from_secs(30)), |_| {}) {
        Ok(WaitOutcome::Ended(tasks)) => tasks,
        other => panic!("wait: {other:?}"),
    };
    assert_eq!(ended[0].status(), TaskStatus::Completed);
    assert_eq!(ended[0].end_reason(), Some(&EndReason::Succeeded));

    // Exactly one notification, in the executor's words, across however many drains.
    let delivered = eventually("the completion delivered", || {
        let notices = session.drain_notifications().unwrap();
        (!notices.is_empty()).then_some(notices)
    });
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert_eq!(delivered[0].task_id(), id);
    assert!(
        delivered[0].text().contains("toy done"),
        "{}",
        delivered[0].text()
    );
    for _ in 0..3 {
        assert!(session.drain_notifications().unwrap().is_empty());
    }
}

#[test]
fn a_kill_reaches_the_embedded_executor_and_notifies_nothing() {
    let harness = Harness::new();
    let session = &harness.session;
    let id = harness.start(&["forever"], "never");
    eventually("the task running", || {
        (session.task(&id).unwrap().status() == TaskStatus::Running).then_some(())
    });
    let reports = session.kill(&[id]).unwrap();
    assert_eq!(reports[0].result, KillResult::Killed);
    assert_eq!(session.task(&id).unwrap().status(), TaskStatus::Killed);
    assert!(session.drain_notifications().unwrap().is_empty());
    let again = session.kill(&[id]).unwrap();
    assert_eq!(again[0].result, KillResult::AlreadyEnded);
}

#[test]
fn a_task_that_survives_its_supervisor_is_never_read_as_failed_and_the_next_read_resumes_it() {
    let harness = Harness::new();
    let session = &harness.session;
    let id = harness.start_toy(&["first run"], "release-survivor", true);
    let running = eventually("the survivor running", || {
        let task = session.task(&id).unwrap();
        (task.status() == TaskStatus::Running).then_some(task)
    });
    assert!(running.survives_supervisor, "{running:?}");
    let pid = harness.supervisor_pid().unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let lock = session.paths().lock();
    eventually("the supervisor gone", || {
        (!task_session::lock::is_held(&lock).unwrap()).then_some(())
    });

    // A reader that cannot start a supervisor shows it live, its supervisor down: never
    // failed, nothing to deliver.
    let broken = Session::with_config(session.paths().clone(), session.config().clone())
        .with_supervisor(SupervisorCommand {
            program: "/bin/false".into(),
            args: Vec::new(),
        });
    let seen = broken.task(&id).unwrap();
    assert_eq!(seen.status(), TaskStatus::Running, "{seen:?}");
    assert!(seen.supervisor_down, "{seen:?}");
    assert!(broken.drain_notifications().unwrap().is_empty());
    assert_eq!(
        broken.tasks().unwrap().tasks[0].status(),
        TaskStatus::Running
    );

    // The next read that can start the supervisor does: it resumes the task, which ends once,
    // with its true end and one notification.
    let mut release = harness.gate("release-survivor");
    release.open();
    let ended = match session.wait(&[id], Some(Duration::from_secs(30)), |_| {}) {
        Ok(WaitOutcome::Ended(tasks)) => tasks,
        other => panic!("wait: {other:?}"),
    };
    assert_eq!(ended[0].status(), TaskStatus::Completed, "{:?}", ended[0]);
    assert_eq!(ended[0].end_reason(), Some(&EndReason::Succeeded));
    assert_ne!(harness.supervisor_pid(), Some(pid), "a new supervisor");
    let delivered = eventually("the completion delivered", || {
        let notices = session.drain_notifications().unwrap();
        (!notices.is_empty()).then_some(notices)
    });
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    assert!(delivered[0].text().contains("toy done"), "{delivered:?}");
    assert!(session.drain_notifications().unwrap().is_empty());
}

#[test]
fn a_task_that_does_not_survive_its_supervisor_reads_as_failed_once_it_is_gone() {
    let harness = Harness::new();
    let session = &harness.session;
    let id = harness.start(&["mortal"], "never");
    eventually("the task running", || {
        (session.task(&id).unwrap().status() == TaskStatus::Running).then_some(())
    });
    assert!(!session.task(&id).unwrap().survives_supervisor);
    let pid = harness.supervisor_pid().unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let lock = session.paths().lock();
    eventually("the supervisor gone", || {
        (!task_session::lock::is_held(&lock).unwrap()).then_some(())
    });
    let seen = session.task(&id).unwrap();
    assert_eq!(seen.status(), TaskStatus::Failed);
    assert!(matches!(
        seen.end_reason(),
        Some(EndReason::SupervisorDied { .. })
    ));
    assert!(
        !task_session::lock::is_held(&lock).unwrap(),
        "no supervisor started by the read"
    );
}

#[test]
fn a_start_sent_again_with_its_key_after_its_supervisor_died_makes_no_second_task() {
    let harness = Harness::new();
    let session = &harness.session;
    let supervisor = toy_supervisor();
    let toy = ToyStart {
        lines: vec!["keyed".into()],
        release: harness.root.path().join("never"),
        survivor: false,
        hold: None,
    };
    let start = |key: &str, retry: bool| {
        let mut op = keyed_start(&toy, key);
        if let Op::Start(start) = &mut op {
            start.retry = retry;
        }
        op
    };
    let send =
        |op| match task_session::client::send(session.paths(), session.config(), &supervisor, op) {
            Ok(Response::Started { id }) => id,
            other => panic!("not started: {other:?}"),
        };
    // The first attempt made the task; its supervisor died before the client read the answer.
    let made = send(start("attempt-1", false));
    let pid = harness.supervisor_pid().unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let lock = session.paths().lock();
    eventually("the supervisor gone", || {
        (!task_session::lock::is_held(&lock).unwrap()).then_some(())
    });
    // Sent again, to the next supervisor: the same task, no second one.
    assert_eq!(send(start("attempt-1", true)), made);
    let listed = records(session);
    assert_eq!(listed.len(), 1, "{listed:?}");
    // Another start's retry, whose first attempt made nothing, makes its task.
    let other = send(start("attempt-2", true));
    assert_ne!(other, made);
    assert_eq!(records(session).len(), 2);
}

/// Window 1 of issue #24, held open: a launcher that starts its task at once (a monitor) makes
/// it `running` before the start notes its key. While it is held there, the writer thread
/// hears of the task (its `running` event) and puts its first record off (`Mirror::starting`),
/// so no record without the key reaches disk; the supervisor SIGKILLed at that moment leaves
/// nothing of the task on disk, and the start sent again (its key, `retry`) makes exactly one
/// task. Without the deferral the writer writes the keyless record during the hold, and the
/// retry makes a second task.
#[test]
fn a_start_killed_between_its_launch_and_its_key_leaves_no_keyless_record_and_makes_one_task() {
    let harness = Harness::new();
    let session = &harness.session;
    let root = harness.root.path();
    // A task the writer will write while the start is held: the barrier below.
    let other = harness.start(&["other"], "release-other");
    eventually("the other task running on disk", || {
        (session.task(&other).unwrap().status() == TaskStatus::Running).then_some(())
    });
    let hold = root.join("hold");
    let toy = ToyStart {
        lines: vec!["held".into()],
        release: root.join("never"),
        survivor: false,
        hold: Some(hold.clone()),
    };
    let op = keyed_start(&toy, "held-start");
    let (paths, config) = (session.paths().clone(), session.config().clone());
    let client = std::thread::spawn(move || {
        task_session::client::send(&paths, &config, &toy_supervisor(), op)
    });

    // Held: the task is registered and `running`, its key not noted yet.
    let held = hold.with_extension("held");
    eventually("the held launch", || held.exists().then_some(()));
    let first: TaskId = std::fs::read_to_string(&held).unwrap().parse().unwrap();
    // The writer hears of the other task's end after the held task's `running` (one event
    // stream, read in order, one writer handling its requests in order): once that end is
    // on disk, the writer has handled the held task too, and a sweep or more has run.
    let mut release = Gate::at(&root.join("release-other"));
    release.open();
    eventually("the other task's end on disk", || {
        session
            .task(&other)
            .unwrap()
            .status()
            .is_terminal()
            .then_some(())
    });
    let on_disk = records(session);
    assert!(
        on_disk.iter().all(|record| record.id() != first),
        "a record of the held task reached disk before its start noted its key: {on_disk:?}"
    );

    // The supervisor dies at that moment; the client sends the start again to the next one.
    let pid = harness.supervisor_pid().unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let made = match client.join().unwrap() {
        Ok(Response::Started { id }) => id,
        other => panic!("not started: {other:?}"),
    };
    assert_ne!(
        made, first,
        "the first attempt's task died with its supervisor"
    );
    let on_disk = records(session);
    let keyed: Vec<_> = on_disk
        .iter()
        .filter(|record| record.id() != other)
        .collect();
    assert_eq!(keyed.len(), 1, "one start made one task: {on_disk:?}");
    assert_eq!(keyed[0].id(), made);
    assert_eq!(keyed[0].start_key.as_deref(), Some("held-start"));
}

/// The supervisor process of the tests, started by their client.
fn toy_supervisor() -> SupervisorCommand {
    SupervisorCommand {
        program: std::env::current_exe().unwrap().into(),
        args: ["supervisor_entry", "--exact", "--ignored", "--nocapture"]
            .map(Into::into)
            .to_vec(),
    }
}

/// A start of a toy with `key`.
fn keyed_start(toy: &ToyStart, key: &str) -> Op {
    Op::Start(Start {
        kind: "toy".into(),
        caller: Session::caller().unwrap(),
        request: serde_json::to_value(toy).unwrap(),
        key: Some(key.into()),
        retry: false,
        schedule: None,
        on_end: None,
        strays: None,
    })
}

/// Window 2 of issue #24: a start no supervisor answers until its deadline (here every
/// supervisor dies as it starts) is decided from disk. The attempt that made the task was
/// answered to nobody (played here by an earlier send with the same key, whose supervisor was
/// then killed): the start answers with that task's id, and no second task is made. A start
/// whose key no record carries fails, saying the task was not made.
#[test]
fn a_start_no_supervisor_answers_until_its_deadline_answers_with_the_task_its_key_made() {
    let harness = Harness::new();
    let session = &harness.session;
    let root = harness.root.path();
    let toy = ToyStart {
        lines: vec!["made".into()],
        release: root.join("never"),
        survivor: false,
        hold: None,
    };
    let supervisor = toy_supervisor();
    let made = match task_session::client::send(
        session.paths(),
        session.config(),
        &supervisor,
        keyed_start(&toy, "made-unanswered"),
    ) {
        Ok(Response::Started { id }) => id,
        other => panic!("not started: {other:?}"),
    };
    let pid = harness.supervisor_pid().unwrap();
    std::fs::write(root.join(POISON), "").unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let lock = session.paths().lock();
    eventually("the supervisor gone", || {
        (!task_session::lock::is_held(&lock).unwrap()).then_some(())
    });

    let mut config = session.config().clone();
    config.request_timeout = Duration::from_millis(1500);
    config.start_timeout = Duration::from_millis(500);
    let send = |key: &str| {
        task_session::client::send(
            session.paths(),
            &config,
            &supervisor,
            keyed_start(&toy, key),
        )
    };
    match send("made-unanswered") {
        Ok(Response::Started { id }) => assert_eq!(id, made),
        other => panic!("not answered with the task its key made: {other:?}"),
    }
    let on_disk = records(session);
    assert_eq!(on_disk.len(), 1, "one task: {on_disk:?}");
    match send("never-made") {
        Err(error) => assert!(
            error.to_string().contains("the task was not made"),
            "{error}"
        ),
        other => panic!("a start nothing made did not fail: {other:?}"),
    }
    assert_eq!(records(session).len(), 1);
}

/// The race of window 2 closed: a start its supervisor read before the deadline, whose
/// launcher returns only after its client gave up and looked on disk (finding nothing, so
/// telling its caller the task was not made), is refused by that supervisor: the task its
/// launcher had started already is killed and recorded without the start's key, so no record
/// ever says that start made a task.
#[test]
fn a_start_whose_launcher_returns_after_its_client_gave_up_makes_no_task_of_its_key() {
    let harness = Harness::new();
    let session = &harness.session;
    let root = harness.root.path();
    let hold = root.join("hold");
    let toy = ToyStart {
        lines: vec!["late".into()],
        release: root.join("never"),
        survivor: false,
        hold: Some(hold.clone()),
    };
    let (paths, mut config) = (session.paths().clone(), session.config().clone());
    // Long enough for a supervisor to start and read the start under load.
    config.request_timeout = Duration::from_millis(3000);
    let op = keyed_start(&toy, "launched-late");
    let client = std::thread::spawn(move || {
        task_session::client::send(&paths, &config, &toy_supervisor(), op)
    });
    let held = hold.with_extension("held");
    eventually("the held launch", || held.exists().then_some(()));
    let late: TaskId = std::fs::read_to_string(&held).unwrap().parse().unwrap();
    match client.join().unwrap() {
        Err(error) => assert!(
            error.to_string().contains("the task was not made"),
            "{error}"
        ),
        other => panic!("an unanswered start did not fail: {other:?}"),
    }
    // Only now does the launcher return, past the deadline.
    std::fs::write(&hold, "").unwrap();
    let record = eventually("the late task's end on disk", || {
        records(session)
            .into_iter()
            .find(|record| record.id() == late)
            .inspect(|record| {
                assert_eq!(
                    record.start_key, None,
                    "made after its client gave up: {record:?}"
                );
            })
            .filter(|record| record.is_terminal())
    });
    assert_eq!(record.task.status(), TaskStatus::Killed, "{record:?}");
    assert_eq!(record.start_key, None, "{record:?}");
    assert_eq!(
        task_session::record::find_started(session.paths(), "launched-late").unwrap(),
        None
    );
}

/// The records on disk of the session.
fn records(session: &Session) -> Vec<task_session::record::TaskRecord> {
    task_session::record::list(session.paths()).unwrap().tasks
}

/// How many tasks end together in the burst test.
const BURST: usize = 1000;

/// What a reader of `session` delivers until `delivered` holds `expected` notices (or a
/// minute passes): as `tasks notifications --follow` does, woken by its watch on the records,
/// it claims and delivers what each wake makes deliverable in one go, and looks at everything
/// when the watch lost events or nothing changed for a while.
fn follow(session: &Session, delivered: &Mutex<Vec<TaskId>>, expected: usize) {
    let watch = RecordChanges::watch(session.paths()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while delivered.lock().unwrap().len() < expected {
        assert!(
            std::time::Instant::now() < deadline,
            "delivered by the deadline: {} of {expected}",
            delivered.lock().unwrap().len()
        );
        let changed = watch.wait(Duration::from_millis(200)).unwrap();
        let woken = changed.any() && !changed.lost;
        let leased = match woken.then(|| session.lease_changed(&changed)) {
            Some(Ok((_, leased))) => leased,
            // Nothing changed for a while, events were lost, or a record could not be read.
            _ => session.lease_notifications().unwrap(),
        };
        leased
            .deliver(|notices| {
                let mut delivered = delivered.lock().unwrap();
                delivered.extend(notices.iter().map(|notice| notice.task_id()));
                Ok(())
            })
            .unwrap();
    }
}

#[test]
fn a_thousand_ends_together_are_each_delivered_once_by_two_readers_woken_by_their_watches() {
    let harness = Harness::new();
    let session = &harness.session;
    let mut gate = harness.gate("release");
    let release = harness.root.path().join("release");
    let ids: Vec<TaskId> = (0..BURST)
        .map(|n| {
            let start = ToyStart {
                lines: vec![format!("toy {n}")],
                release: release.clone(),
                survivor: false,
                hold: None,
            };
            session.start(start, Session::caller().unwrap()).unwrap()
        })
        .collect();
    eventually("every task running", || {
        let running = records(session)
            .iter()
            .filter(|record| record.status() == TaskStatus::Running)
            .count();
        (running == BURST).then_some(())
    });
    let delivered = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| follow(session, &delivered, BURST));
        }
        gate.open(); // every toy at once
    });

    let mut counts: HashMap<TaskId, usize> = HashMap::new();
    for id in delivered.into_inner().unwrap() {
        *counts.entry(id).or_default() += 1;
    }
    let expected: HashMap<TaskId, usize> = ids.iter().map(|&id| (id, 1)).collect();
    assert_eq!(counts, expected, "each end delivered exactly once");
    assert!(session.drain_notifications().unwrap().is_empty());
    let log = std::fs::read_to_string(session.paths().notifications_log()).unwrap();
    assert_eq!(log.lines().count(), BURST, "each recorded once in the log");
    for record in records(session) {
        assert_eq!(record.status(), TaskStatus::Completed, "{record:?}");
        assert!(record.is_settled(session.paths()), "{record:?}");
    }
}
