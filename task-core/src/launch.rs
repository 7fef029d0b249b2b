//! The start side of an executor: starting a task from a request that may have crossed a process
//! boundary (a `tasks run` talking to its session's supervisor), so that a host process can hold
//! executors for any number of task types without knowing what their requests contain.

use std::fmt;

use task_protocol::start::StartRequest;

use crate::{Caller, TaskId};

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
