//! The start side of an executor: starting a task from a request that may have crossed a process
//! boundary (a `tasks run` talking to its session's supervisor), so that a host process can hold
//! executors for any number of task types without knowing what their requests contain.

use std::fmt;

use task_protocol::start::StartRequest;

use crate::{Caller, TaskId, TaskState};

/// Starts tasks of one kind (a shell command, a monitor, an agent…) from a typed request.
///
/// A host registers one `Launch` per kind of request; the request travels as JSON tagged with
/// [`StartRequest::KIND`] and is decoded back into [`Launch::Request`] by the launcher itself, so the
/// host never looks inside it.
pub trait Launch: Send + Sync + 'static {
    /// Everything specific to this kind that a front end gives to start one task; its
    /// [`StartRequest::KIND`] names the kind on the wire (`"shell"`, `"monitor"`, `"agent"`),
    /// unique in a host.
    type Request: StartRequest;

    /// Registers the task (`pending`, its output file created) and returns its id, with the
    /// work that starts it. The host records the pending task, answers its caller, then runs
    /// [`Launched::start`] on a long-lived thread of its runtime (a process's parent-death
    /// signal follows the thread that forked it).
    ///
    /// # Errors
    /// [`LaunchError::Invalid`] for a request that can never start (nothing is registered);
    /// [`LaunchError::Failed`] when registering failed.
    fn launch(&self, request: Self::Request, caller: Caller) -> Result<Launched, LaunchError>;

    /// Checks `request` and describes the task it would start, registering nothing and
    /// creating no file: its `pending` state, under [`Caller::task_id`] when given (else a new
    /// id). A host that keeps a task waiting for its turn (a queue) records that state where
    /// readers see it, keeps the request itself, and calls [`Launch::launch`] at the task's
    /// turn with [`Caller::task_id`] set to that id, so that nothing of the task is held by its
    /// executor while it waits. The state [`Launch::launch`] then registers is the same but
    /// for its times.
    ///
    /// `Ok(None)`, the default: a task of this kind, or started by this request, is registered
    /// by [`Launch::launch`] at once, even when it must wait (it holds something from its
    /// start: a stdin pipe reserved for input sent before it runs, say), or its launcher
    /// cannot start it under a given id.
    ///
    /// # Errors
    /// [`LaunchError::Invalid`] for a request that can never start, as [`Launch::launch`].
    fn prepare(
        &self,
        request: &Self::Request,
        caller: &Caller,
    ) -> Result<Option<TaskState>, LaunchError> {
        let _ = (request, caller);
        Ok(None)
    }

    /// Registers again, under its id, the task `previous` (its last recorded state) from how
    /// it was started (`request`, and `caller`: the one it was started by, environment
    /// included, so that it runs where it ran), for the host to run it again: a stopped task
    /// that a message resumes (the host then hands the message over as to any live task), or
    /// a live one whose supervisor died, when [`Launch::goes_on_after_supervisor_death`].
    /// The host keeps what its records carried (its start, its end hook) and runs
    /// [`Launched::start`].
    ///
    /// The default: a task of this kind cannot be taken back ([`LaunchError::Invalid`]).
    ///
    /// # Errors
    /// [`LaunchError::Invalid`] with the reason it cannot be taken back (the host refuses the
    /// message with it); as [`Launch::launch`].
    fn take_back(
        &self,
        previous: &TaskState,
        request: Self::Request,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        let _ = (request, caller);
        Err(LaunchError::Invalid(format!(
            "a {} task cannot be resumed ({})",
            Self::Request::KIND,
            previous.base.id
        )))
    }

    /// Whether a task of this kind that a dead supervisor left live is taken back by the next
    /// ([`Launch::take_back`]: a teammate's session goes on) rather than ended as that
    /// supervisor's orphan. The default: it is ended.
    fn goes_on_after_supervisor_death(&self) -> bool {
        false
    }
}

/// A task a [`Launch`] registered, and what starts it.
#[must_use = "a launched task that is never started stays pending"]
pub struct Launched {
    /// The task's id (already registered).
    pub id: TaskId,
    /// Starts it; `None` when registering already started it.
    pub start: Option<Box<dyn FnOnce() + Send>>,
}

impl Launched {
    /// A task whose start spawns `work` on the tokio runtime of the thread that runs the start
    /// (a host runs it on a long-lived worker). Without a runtime `work` is dropped unstarted,
    /// with a warning.
    pub fn on_runtime<F>(id: TaskId, work: F) -> Self
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let start = move || match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(work);
            }
            Err(_) => tracing::warn!(task = %id, "no tokio runtime to start the task on"),
        };
        Launched {
            id,
            start: Some(Box::new(start)),
        }
    }
}

impl fmt::Debug for Launched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Launched")
            .field("id", &self.id)
            .field("start", &self.start.is_some())
            .finish()
    }
}

/// Why a task could not be launched. Nothing was registered unless it says so.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The request can never start (bad input: a missing working directory, an empty command).
    #[error("{0}")]
    Invalid(String),
    /// Registering the task failed.
    #[error("{0}")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
}
