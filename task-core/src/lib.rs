//! The semantic core of an AI-agent task system: ids, lifecycle, registry, exactly-once
//! notifications.
//!
//! Background tasks (shell commands, agents, teammates, workflows, monitors, dreams, remote
//! sessions) all share what this crate defines:
//!
//! - identity: [`TaskType`] and the validated, unpredictable [`TaskId`];
//! - the lifecycle: [`TaskStatus`] and its transition table, enforced on every write;
//! - state as data: [`TaskState`] = [`TaskStateBase`] + a per-type [`TaskKind`];
//! - the [`Registry`]: register, compare-and-set [`update`](Registry::update), the one-way
//!   notified latch, eviction, and [`kill`](Registry::kill) dispatched to the executor of each
//!   type through the [`Task`] trait;
//! - the `<task-notification>` envelope ([`Notification`]) and its [`Priority`] queue;
//! - the event stream ([`TaskEvent`]) and the output [poll loop](PollLoop).
//!
//! It spawns no process and talks to no network: executor crates do that and plug in here. What
//! they share of process control (the hook a task's first process runs before `exec`, killing a
//! task's whole tree with its escapees, reaping, killing an orphaned task's remains) is its
//! [`process`] module, so that every task type's kill is the same.
//!
//! # Example
//!
//! Register a task, complete it, and drain its one notification:
//!
//! ```
//! use task_core::summary::{self, ShellEnd};
//! use task_core::{
//!     Delivery, Notification, Priority, Registry, ShellState, TaskId, TaskKind, TaskState,
//!     TaskStatus, TaskType, TerminalStatus,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::default();
//! let id = TaskId::generate(TaskType::LocalBash)?;
//! let shell = ShellState { command: "make".into(), ..ShellState::default() };
//! let task = TaskState::new(id, "build", format!("/tmp/tasks/{id}.output"), TaskKind::Shell(shell))?;
//! registry.register(task)?;
//!
//! registry.transition(&id, TaskStatus::Running)?;
//! let done = registry.transition_with(&id, TaskStatus::Completed, |state| {
//!     if let TaskKind::Shell(shell) = &mut state.kind {
//!         shell.exit_code = Some(0);
//!     }
//! })?;
//!
//! let summary = summary::shell(&done.base.description, ShellEnd::Completed(0));
//! let notification = Notification::for_task(&done, Some(TerminalStatus::Completed), summary);
//! assert!(registry.notify_once(&id, notification.clone(), Delivery::Queue(Priority::Later)));
//! // The latch: a racing second notifier gets nothing.
//! assert!(!registry.notify_once(&id, notification, Delivery::Queue(Priority::Later)));
//!
//! let queued = registry.notifications().drain();
//! assert_eq!(queued.len(), 1);
//! assert!(queued[0].render().contains(r#"<summary>Background command "build" completed (exit code 0)</summary>"#));
//!
//! // Terminal and notified: it may leave the registry now.
//! assert!(registry.evict(&id));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod config;
mod event;
mod input;
mod launch;
mod notification;
mod poll;
pub mod process;
mod registry;
mod slot;
mod state;

pub use config::{EVENT_CAPACITY, PANEL_GRACE, POLL_INTERVAL, RegistryConfig, STOPPED_DISPLAY};
pub use event::{SdkStatus, TaskEvent, TaskPatch};
pub use input::{Input, InputError};
pub use launch::{Launch, LaunchError, Launched};
pub use notification::{
    AGENT_FINAL_NOTE, AGENT_RESUME_NOTE, AgentExtras, AgentUsage, MODEL_FRAMING, Notification,
    NotificationQueue, Priority, sanitize, summary,
};
pub use poll::{FileReader, OutputReader, PollLoop, PollReport, spawn_poll_loop};
pub use registry::executor::{Admission, KillError, KillOutcome, Task};
pub use registry::{Delivery, Holder, Registration, Registry, RegistryError, UpdateOutcome};
pub use state::{
    AgentBudget, AgentProgress, AgentState, BatchJob, CappedVec, DREAM_TURNS_CAP, DreamPhase,
    DreamState, DreamTurn, MessageUsage, ProcessOwner, RECENT_ACTIVITIES_CAP, RemoteState,
    RemoteSubtype, ShellKind, ShellProcess, ShellState, StateError, TEAMMATE_MESSAGES_CAP,
    TaskKind, TaskState, TaskStateBase, TeammateIdentity, TeammateState, ToolActivity,
    WorkflowState, WorkflowStep, Worktree, now_ms,
};
pub use task_protocol::{
    AGENT_ID_ENV, Address, AddressError, BudgetLimit, Caller, EXIT_KILLED, EXIT_SPAWN_FAILED,
    EXIT_TIMED_OUT, EndReason, IdError, MessageOutcome, MessageReply, ProgramError, TASK_ID_LEN,
    TASK_MARKER_ENV, TaskId, TaskStatus, TaskType, TerminalStatus, human_duration, lenient_task_id,
};

/// Compile-time proof that the types shared across threads and async tasks are `Send + Sync`.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Registry>();
    shared::<std::sync::Arc<Registry>>();
    shared::<TaskId>();
    shared::<TaskState>();
    shared::<TaskEvent>();
    shared::<Notification>();
    shared::<NotificationQueue>();
    shared::<KillError>();
    shared::<RegistryError>();
    shared::<PollLoop>();
    shared::<std::sync::Arc<dyn Task>>();
};
