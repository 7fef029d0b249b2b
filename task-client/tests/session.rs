//! The async client against a real supervisor: this test binary, started on demand by the
//! client as a supervisor with no launcher (it starts no task of any kind, and answers every
//! other request). Its refusals reach both clients typed, not as strings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use task_client::AsyncSession;
use task_protocol::start::ShellStart;
use task_protocol::wire::{ErrorKind, PROTOCOL_VERSION};
use task_protocol::{TaskId, TaskType};
use task_session::client::{Program, SupervisorCommand};
use task_session::engine::{Host, Launchers};
use task_session::paths::SessionPaths;
use task_session::protocol::{Op, Response};
use task_session::session::Session;
use task_session::{Error, Result};

/// Not a test: the supervisor process of the tests, started by their client.
#[test]
#[ignore = "the supervisor the tests start, not a test"]
fn supervisor_entry() {
    task_session::supervisor::run_from_env(no_launchers).unwrap();
}

fn no_launchers(_: &Host) -> Result<Launchers> {
    Ok(Launchers::new())
}

/// A session in a temporary root (default settings) whose supervisor is this binary; the
/// supervisor it started is killed when it is dropped.
struct Harness {
    session: Session,
    _root: tempfile::TempDir,
}

impl Harness {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        // This binary, running only its supervisor entry.
        let entry = ["supervisor_entry", "--exact", "--ignored"];
        let supervisor = SupervisorCommand {
            program: Program::ThisExecutable,
            args: entry.iter().map(Into::into).collect(),
        };
        Harness {
            session: Session::open(SessionPaths::new(root.path(), "default").unwrap())
                .unwrap()
                .with_supervisor(supervisor),
            _root: root,
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.session.paths().lock())
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn shell(command: &str) -> ShellStart {
    ShellStart {
        command: command.into(),
        description: command.into(),
        timeout_ms: None,
        stdin: Default::default(),
        placement: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_client_starts_the_supervisor_and_speaks_its_version() {
    let harness = Harness::new();
    let client = AsyncSession::new(harness.session.clone());
    match client.send(Op::Hello).await.unwrap() {
        Response::Hello { version, pid, .. } => {
            assert_eq!(version, PROTOCOL_VERSION);
            assert_ne!(pid, std::process::id());
        }
        other => panic!("not a hello: {other:?}"),
    }
    // The blocking client reaches the same supervisor.
    let (pid, registered) = harness.session.ping().unwrap();
    assert_eq!(registered, 0);
    match client.send(Op::Ping).await.unwrap() {
        Response::Pong { pid: again, .. } => assert_eq!(again, pid),
        other => panic!("not a pong: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_reach_both_clients_typed() {
    let harness = Harness::new();
    let client = AsyncSession::new(harness.session.clone());
    let missing = TaskId::generate(TaskType::LocalBash).unwrap();

    // Killing a task the session never had: not found, typed, before anything is killed.
    let error = client.kill(&[missing]).await.unwrap_err();
    assert!(
        matches!(&error, Error::UnknownTask { id, .. } if *id == missing.to_string()),
        "{error:?}"
    );
    let error = harness.session.kill(&[missing]).unwrap_err();
    assert!(matches!(error, Error::UnknownTask { .. }), "{error:?}");

    // The supervisor's own refusal of a read naming no task: not found, typed.
    let error = client.output(missing, 0, 1024).await.unwrap_err();
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    assert_eq!(error.refusal(), None);

    // A start of a kind this supervisor does not start: a bad request, typed, from both.
    let caller = Session::caller().unwrap();
    let error = client
        .start(shell("true"), caller.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Invalid(message) if message.contains("starts no \"shell\" tasks")),
        "{error:?}"
    );
    let error = harness.session.start(shell("true"), caller).unwrap_err();
    assert!(matches!(error, Error::Invalid(_)), "{error:?}");

    // Every other refusal keeps its kind.
    let refused = Error::refused(ErrorKind::Spawn, "no such program".into());
    assert_eq!(refused.refusal(), Some(ErrorKind::Spawn));
    assert_eq!(refused.to_string(), "supervisor: no such program");
}
