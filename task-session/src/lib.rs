//! The session layer of the task system: tasks that outlive the process that started them.
//!
//! A client ([`session::Session`]) hands a typed start request to the session's supervisor, one
//! daemon per session started on demand ([`supervisor`]), which runs every task of the session
//! in one tokio runtime and mirrors each task's state to `{id}.json` ([`record`]). Every other
//! operation reads those files; completions and events are delivered exactly once across
//! processes by atomic file claims ([`notice`]).
//!
//! Nothing here knows a task type. The supervisor holds task-core executors by type and
//! [`Launch`](task_core::Launch)ers by kind, registered by a [`engine::Wiring`] function that
//! the embedder writes (the `tasks` binary's registers shells, monitors, agents, teammates,
//! dreams, workflows and remote agents). The rules that differ by type are task-core's: the
//! [`Task`](task_core::Task) trait (kill, eviction grace, resume, orphan reaping, whether a task
//! survives its supervisor, input) and the per-type data ([`TaskKind`](task_core::TaskKind)).
//!
//! The supervisor runs in a process of the embedder's own: its binary calls
//! [`supervisor::run`] with its wiring when started as the supervisor, and its clients point at
//! that binary with [`Session::with_supervisor`](session::Session::with_supervisor).
//!
//! # Example
//!
//! A supervisor with one executor of the embedder's own (a task that writes a line and ends),
//! started on demand by the first request, in this same program:
//!
//! ```no_run
//! # #![allow(clippy::print_stdout)]
//! use std::sync::Arc;
//! use task_core::{
//!     AgentState, Caller, Delivery, EndReason, KillError, Launch, LaunchError, Launched,
//!     Notification, Priority, Registry, Task, TaskId, TaskKind, TaskState, TaskStatus, TaskType,
//! };
//! use task_session::client::{Program, SupervisorCommand};
//! use task_session::engine::{Host, Launchers};
//! use task_session::paths::SessionPaths;
//! use task_session::session::Session;
//!
//! /// The request of the `echo` kind: the line to write.
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct EchoStart(String);
//!
//! impl task_protocol::start::StartRequest for EchoStart {
//!     const KIND: &'static str = "echo";
//! }
//!
//! /// Writes `line` to its output and completes.
//! struct Echo {
//!     registry: Arc<Registry>,
//!     dir: std::path::PathBuf,
//! }
//!
//! impl Launch for Echo {
//!     type Request = EchoStart;
//!
//!     fn launch(&self, EchoStart(line): EchoStart, caller: Caller) -> Result<Launched, LaunchError> {
//!         let failed = |e: String| LaunchError::Failed(e.into());
//!         let id = TaskId::generate(TaskType::LocalAgent).map_err(|e| failed(e.to_string()))?;
//!         let output = self.dir.join(format!("{id}.output"));
//!         std::fs::write(&output, format!("{line}\n")).map_err(|e| failed(e.to_string()))?;
//!         let kind = TaskKind::Agent(Box::default());
//!         let state = TaskState::new(id, "echo", &output, kind)
//!             .map_err(|e| failed(e.to_string()))?
//!             .owned_by(caller.agent_id);
//!         self.registry.register(state).map_err(|e| failed(e.to_string()))?;
//!         let registry = Arc::clone(&self.registry);
//!         Ok(Launched {
//!             id,
//!             start: Some(Box::new(move || {
//!                 let _ = registry.transition(&id, TaskStatus::Running);
//!                 let done = registry.transition_with(&id, TaskStatus::Completed, |state| {
//!                     state.base.end_reason = Some(EndReason::Succeeded);
//!                 });
//!                 if let Ok(done) = done {
//!                     let note = Notification::for_task(
//!                         &done,
//!                         TaskStatus::Completed.terminal(),
//!                         "echoed",
//!                     );
//!                     registry.notify_once(&id, note, Delivery::Queue(Priority::Later));
//!                 }
//!             })),
//!         })
//!     }
//! }
//!
//! #[async_trait::async_trait]
//! impl Task for Echo {
//!     async fn kill(&self, _: &Registry, _: &TaskId) -> Result<(), KillError> {
//!         Ok(()) // it never runs long enough to be killed
//!     }
//! }
//!
//! fn wiring(host: &Host) -> task_session::Result<Launchers> {
//!     let dir = host.paths.tasks_dir();
//!     let echo = Echo { registry: Arc::clone(&host.registry), dir: dir.clone() };
//!     host.registry.register_executor(
//!         TaskType::LocalAgent,
//!         Arc::new(Echo { registry: Arc::clone(&host.registry), dir }),
//!     );
//!     Ok(Launchers::new().with(echo))
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let paths = SessionPaths::new("/tmp/echo-sessions", "default")?;
//!     if std::env::args().nth(1).as_deref() == Some("supervise") {
//!         return Ok(task_session::supervisor::run(paths, wiring)?);
//!     }
//!     let supervisor = SupervisorCommand {
//!         program: Program::ThisExecutable,
//!         args: vec!["supervise".into()],
//!     };
//!     let session = Session::open(paths)?.with_supervisor(supervisor);
//!     let id = session.start(EchoStart("hello".into()), Session::caller()?)?;
//!     session.wait(&[id], None, |_| {})?;
//!     print!("{}", session.tail(&id, 1)?.join("\n"));
//!     for delivered in session.drain_notifications()? {
//!         println!("{}", delivered.text());
//!     }
//!     Ok(())
//! }
//! ```
#![deny(missing_docs)]

pub mod changes;
pub mod client;
pub mod config;
pub mod engine;
pub mod error;
pub mod hooks;
pub mod input;
pub mod lease;
pub mod lock;
pub mod notice;
pub mod paths;
mod placement;
pub mod protocol;
pub mod prune;
pub mod queue;
mod reads;
pub mod ready;
pub mod record;
mod refusal;
pub mod resolve;
pub mod restart;
mod retention;
mod schedule;
pub mod session;
pub mod start_record;
pub mod strays;
pub mod supervisor;
mod wire;

pub use error::{Error, Result};

/// Locks `mutex`, carrying on with its data if a thread panicked while holding it (every
/// structure guarded by the session layer stays consistent between statements).
pub fn guard<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
