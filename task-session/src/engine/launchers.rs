//! Launchers by kind, and who takes messages: what the wiring hands the engine.

use std::collections::HashMap;
use std::sync::Arc;

use task_core::{
    Address, Caller, Launch, LaunchError, Launched, MessageReply, Registry, TaskState,
};

use task_protocol::start::StartRequest;

use crate::config::Config;
use crate::error::Result;
use crate::paths::SessionPaths;
use crate::protocol::Start;
use crate::start_record::StartRecord;

/// What the wiring of a supervisor gets: the registry to register executors with, where task
/// files go, and the session's settings.
#[derive(Debug)]
pub struct Host {
    /// The registry every executor records into.
    pub registry: Arc<Registry>,
    /// The session's paths (output files go to [`SessionPaths::tasks_dir`]).
    pub paths: SessionPaths,
    /// The session's settings.
    pub config: Config,
}

/// The launchers of a supervisor, by [`StartRequest::KIND`], and who takes messages.
#[derive(Default)]
pub struct Launchers {
    by_kind: HashMap<&'static str, Box<dyn LaunchAny>>,
    pub(super) messenger: Option<Arc<dyn Messenger>>,
}

/// Delivers messages to the tasks that take them (agents, teammates, remote agents).
#[async_trait::async_trait]
pub trait Messenger: Send + Sync {
    /// Sends `message` to `to`; says what became of it. `id` is the message's id, chosen by
    /// its sender and the same on every attempt of one send (a client whose supervisor died
    /// before answering sends it again to the next): a messenger that keeps messages drops a
    /// repeat by it.
    async fn send(&self, to: &Address, message: &str, id: Option<&str>) -> MessageReply;
}

impl std::fmt::Debug for Launchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_kind.keys()).finish()
    }
}

impl Launchers {
    /// No launcher yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `launcher` for requests of its kind (a second one of the same kind replaces it).
    #[must_use]
    pub fn with<L: Launch>(mut self, launcher: L) -> Self {
        self.by_kind
            .insert(<L::Request as StartRequest>::KIND, Box::new(launcher));
        self
    }

    /// Routes messages ([`Engine::send`]) to `messenger`.
    #[must_use]
    pub fn with_messenger(mut self, messenger: impl Messenger + 'static) -> Self {
        self.messenger = Some(Arc::new(messenger));
        self
    }

    pub(super) fn get(&self, kind: &str) -> Option<&dyn LaunchAny> {
        self.by_kind.get(kind).map(AsRef::as_ref)
    }
}

/// A [`Launch`] whose request is still JSON.
pub(super) trait LaunchAny: Send + Sync {
    fn launch_json(
        &self,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError>;

    /// [`Launch::prepare`] from a request still JSON.
    fn prepare_json(
        &self,
        request: &serde_json::Value,
        caller: &Caller,
    ) -> Result<Option<TaskState>, LaunchError>;

    /// Whether a task of this kind can be resumed ([`StartRequest::RESUMABLE`]): its start is
    /// kept with its caller's environment.
    fn resumable(&self) -> bool;

    /// [`Launch::take_back`] from a request still JSON.
    fn take_back_json(
        &self,
        previous: &TaskState,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError>;

    /// [`Launch::goes_on_after_supervisor_death`].
    fn goes_on_after_supervisor_death(&self) -> bool;
}

impl<L: Launch> LaunchAny for L {
    fn launch_json(
        &self,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        self.launch(decode::<L>(request)?, caller)
    }

    fn prepare_json(
        &self,
        request: &serde_json::Value,
        caller: &Caller,
    ) -> Result<Option<TaskState>, LaunchError> {
        let request = <L::Request as serde::Deserialize>::deserialize(request)
            .map_err(|e| bad_request::<L>(&e))?;
        self.prepare(&request, caller)
    }

    fn resumable(&self) -> bool {
        <L::Request as StartRequest>::RESUMABLE
    }

    fn take_back_json(
        &self,
        previous: &TaskState,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        self.take_back(previous, decode::<L>(request)?, caller)
    }

    fn goes_on_after_supervisor_death(&self) -> bool {
        Launch::goes_on_after_supervisor_death(self)
    }
}

/// The request of `L`'s kind that `request` holds.
fn decode<L: Launch>(request: serde_json::Value) -> Result<L::Request, LaunchError> {
    serde_json::from_value::<L::Request>(request).map_err(|e| bad_request::<L>(&e))
}

/// A request of `L`'s kind that does not decode.
fn bad_request<L: Launch>(error: &serde_json::Error) -> LaunchError {
    LaunchError::Invalid(format!(
        "bad {} request: {error}",
        <L::Request as StartRequest>::KIND
    ))
}

/// Registers the executors of every task type a supervisor runs and returns their launchers.
pub type Wiring = fn(&Host) -> Result<Launchers>;

/// What the records of a task started by `start` keep of it: with its caller's environment
/// when `launcher`'s kind resumes, for the resume to run in.
pub(super) fn remembered(launcher: &dyn LaunchAny, start: &Start) -> StartRecord {
    if launcher.resumable() {
        StartRecord::keeping_caller(start)
    } else {
        StartRecord::of(start)
    }
}
