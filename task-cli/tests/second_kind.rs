//! A second kind of task plugged into the session layer with no change to it: a small scripted
//! executor standing in for agents (`local_agent` tasks that print their lines, wait for a
//! release file, and finish with a result), wired next to the standard shells into a real
//! supervisor process, which is this test binary started by the session's client.
//!
//! The task is started through the library's `Session::start` (the `tasks` binary has no
//! command for this kind) and then listed, read, waited for, killed and notified through the
//! real `tasks` binary, whose read commands know nothing of the kind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use task_core::summary::{self, AgentEnd};
use task_core::{
    AgentState, Caller, Delivery, EndReason, KillError, Launch, LaunchError, Launched,
    Notification, Priority, Registry, Task, TaskId, TaskKind, TaskState, TaskStatus, TaskType,
};
use task_session::client::SupervisorCommand;
use task_session::config::Config;
use task_session::engine::{Host, Launchers};
use task_session::paths::SessionPaths;
use task_session::protocol::KillResult;
use task_session::session::Session;
use tokio::sync::oneshot;

/// What a scripted task does: print `lines`, then finish with `reply` once `release` exists.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ScriptedStart {
    description: String,
    lines: Vec<String>,
    release: PathBuf,
    reply: String,
}

/// The executor: launches scripted tasks and kills them.
#[derive(Clone)]
struct Scripted {
    registry: Arc<Registry>,
    dir: PathBuf,
    cancels: Arc<Mutex<HashMap<TaskId, oneshot::Sender<()>>>>,
}

impl task_protocol::start::StartRequest for ScriptedStart {
    const KIND: &'static str = "scripted";
}

impl Launch for Scripted {
    type Request = ScriptedStart;

    fn launch(&self, start: ScriptedStart, caller: Caller) -> Result<Launched, LaunchError> {
        let failed = |e: String| LaunchError::Failed(e.into());
        let id = TaskId::generate(TaskType::LocalAgent).map_err(|e| failed(e.to_string()))?;
        let output = self.dir.join(format!("{id}.output"));
        std::fs::write(&output, "").map_err(|e| failed(e.to_string()))?;
        let agent = AgentState {
            agent_id: format!("agent-{id}"),
            prompt: start.lines.join(" "),
            agent_type: "scripted".into(),
            ..AgentState::default()
        };
        let state = TaskState::new(
            id,
            &start.description,
            &output,
            TaskKind::Agent(Box::new(agent)),
        )
        .map_err(|e| failed(e.to_string()))?
        .owned_by(caller.agent_id);
        self.registry
            .register(state)
            .map_err(|e| failed(e.to_string()))?;
        let (cancel, cancelled) = oneshot::channel();
        self.cancels.lock().unwrap().insert(id, cancel);
        let registry = Arc::clone(&self.registry);
        Ok(Launched {
            id,
            start: Some(Box::new(move || {
                tokio::spawn(play(registry, id, output, start, cancelled));
            })),
        })
    }
}

/// Runs one scripted task until it is released (completed) or cancelled (the kill records it).
async fn play(
    registry: Arc<Registry>,
    id: TaskId,
    output: PathBuf,
    start: ScriptedStart,
    mut cancelled: oneshot::Receiver<()>,
) {
    let text: String = start.lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&output, text).unwrap();
    registry.transition(&id, TaskStatus::Running).unwrap();
    loop {
        tokio::select! {
            _ = &mut cancelled => return,
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        if start.release.exists() {
            break;
        }
    }
    let done = registry.transition_with(&id, TaskStatus::Completed, |state| {
        state.base.end_reason = Some(EndReason::Succeeded);
        if let TaskKind::Agent(agent) = &mut state.kind {
            agent.result = Some(start.reply.clone());
        }
    });
    if let Ok(done) = done {
        let text = summary::agent(&done.base.description, AgentEnd::Finished);
        let note = Notification::for_task(&done, TaskStatus::Completed.terminal(), text);
        registry.notify_once(&id, note, Delivery::Queue(Priority::Later));
    }
}

#[async_trait]
impl Task for Scripted {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        if let Some(cancel) = self.cancels.lock().unwrap().remove(id) {
            let _ = cancel.send(());
        }
        let killed = registry.transition_with(id, TaskStatus::Killed, |state| {
            state.base.end_reason = Some(EndReason::Killed);
            state.base.notified = true;
        });
        if let Err(error) = killed {
            // It ended by itself first: the trait's contract is Ok, the state tells.
            assert!(
                registry.get(id).is_some_and(|s| s.status().is_terminal()),
                "{error}"
            );
        }
        Ok(())
    }
}

/// The standard wiring, plus the scripted kind: the lines a new executor needs.
fn wiring(host: &Host) -> task_session::Result<Launchers> {
    let scripted = Scripted {
        registry: Arc::clone(&host.registry),
        dir: host.paths.tasks_dir(),
        cancels: Arc::default(),
    };
    // After the standard wiring, whose agents it stands in for: its type is this executor's.
    let launchers = task_cli::wiring::standard(host)?;
    host.registry
        .register_executor(TaskType::LocalAgent, Arc::new(scripted.clone()));
    Ok(launchers.with(scripted))
}

/// Not a test: the entry point of this binary when the session's client starts it as the
/// supervisor (its session comes in `TASKS_ROOT` and `TASKS_SESSION`).
#[test]
#[ignore = "the supervisor process of the other tests, started by their session's client"]
fn supervisor_entry() {
    let root = std::env::var_os("TASKS_ROOT").expect("started as a supervisor");
    let session = std::env::var("TASKS_SESSION").unwrap_or_else(|_| "default".into());
    let paths = SessionPaths::new(PathBuf::from(root), &session).unwrap();
    task_session::supervisor::run(paths, wiring).unwrap();
}

struct Sandbox {
    root: tempfile::TempDir,
    session: Session,
}

impl Sandbox {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        std::fs::write(
            paths.config(),
            r#"{"idle_exit_ms": 2000, "sweep_interval_ms": 50}"#,
        )
        .unwrap();
        let supervisor = SupervisorCommand {
            program: std::env::current_exe().unwrap().into(),
            args: ["supervisor_entry", "--exact", "--ignored", "--nocapture"]
                .map(Into::into)
                .to_vec(),
        };
        let session = Session::with_config(paths.clone(), Config::load(&paths.config()).unwrap())
            .with_supervisor(supervisor);
        Self { root, session }
    }

    fn tasks(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tasks"))
            .args(args)
            .env("TASKS_ROOT", self.root.path())
            .env_remove("TASKS_SESSION")
            .env("TASKS_POLL_MS", "10")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn stdout(&self, args: &[&str]) -> String {
        let out = self.tasks(args);
        assert!(out.status.success(), "tasks {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn listed(&self, id: &TaskId) -> Value {
        let all: Value = serde_json::from_str(&self.stdout(&["ps", "--all", "--json"])).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id.as_str())
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn start(&self, lines: &[&str], release: &Path) -> TaskId {
        let start = ScriptedStart {
            description: "stand-in".into(),
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            release: release.to_owned(),
            reply: "all done".into(),
        };
        self.session
            .start(start, Session::caller().unwrap())
            .unwrap()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let lock = self.session.paths().lock();
        if let Some(pid) = std::fs::read_to_string(lock)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

#[test]
fn a_second_kind_runs_through_the_unchanged_session_layer_and_the_real_cli() {
    let sandbox = Sandbox::new();
    let release = sandbox.root.path().join("release");
    let id = sandbox.start(&["one", "two"], &release);
    assert_eq!(id.task_type(), TaskType::LocalAgent);

    // ps lists it with its own type, once it runs.
    let listed = support::eventually("the task listed running", || {
        let task = sandbox.listed(&id);
        (task["status"] == "running").then_some(task)
    });
    assert_eq!(listed["type"], "local_agent");
    assert_eq!(listed["kind"]["agent"]["agentType"], "scripted");
    assert_eq!(sandbox.stdout(&["output", id.as_str()]), "one\ntwo\n");

    // wait returns once it is released; its end reason and result are the executor's.
    std::fs::write(&release, "").unwrap();
    let waited = sandbox.tasks(&["wait", "--no-deliver", id.as_str()]);
    assert!(waited.status.success(), "{waited:?}");
    assert_eq!(
        String::from_utf8(waited.stdout).unwrap(),
        format!("{id} completed (done)\n")
    );
    let done = sandbox.listed(&id);
    assert_eq!(done["endReason"]["reason"], "succeeded");
    assert_eq!(done["kind"]["agent"]["result"], "all done");

    // Its completion is delivered once, in the executor's words.
    let notices = sandbox.stdout(&["notifications"]);
    assert!(
        notices.contains(&format!("<task-id>{id}</task-id>"))
            && notices.contains("<summary>Agent \"stand-in\" finished</summary>"),
        "{notices}"
    );
    assert_eq!(sandbox.stdout(&["notifications"]), "");

    // A kill goes through the session to the executor of the type: killed, not notified.
    let other = sandbox.start(&["three"], &sandbox.root.path().join("never"));
    support::eventually("the second task running", || {
        (sandbox.listed(&other)["status"] == "running").then_some(())
    });
    let reports = sandbox.session.kill(&[other]).unwrap();
    assert_eq!(reports[0].result, KillResult::Killed);
    let waited = sandbox.tasks(&["wait", other.as_str()]);
    assert_eq!(waited.status.code(), Some(137), "{waited:?}");
    assert_eq!(sandbox.listed(&other)["endReason"]["reason"], "killed");
    assert_eq!(sandbox.stdout(&["notifications"]), "");
    assert_eq!(
        sandbox.stdout(&["kill", other.as_str()]),
        format!("{other} already ended\n")
    );

    // Ended and settled, both leave the supervisor's memory (their files stay).
    support::eventually("every ended task evicted", || {
        (sandbox.session.ping().unwrap().1 == 0).then_some(())
    });
    assert_eq!(sandbox.stdout(&["output", id.as_str()]), "one\ntwo\n");
}
