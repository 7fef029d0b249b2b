//! Shell commands and monitors started from requests that crossed a process boundary: the
//! [`Launch`] side of [`ShellExecutor`] (a host such as the `tasks` supervisor registers
//! [`ShellExecutor`] for `"shell"` requests and [`Monitors`] for `"monitor"` requests).

use std::ffi::OsString;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use task_core::{Caller, Launch, LaunchError, Launched, TaskState};

use crate::ShellExecutor;
use crate::error::ShellError;
use crate::monitor::{MonitorRequest, MonitorSource};
use crate::process::{CommandSpec, StdinMode};
use crate::shell::ShellRequest;

pub use task_protocol::start::{Placement, ShellStart};

pub use task_protocol::start::MonitorStart;

/// The event source this asks for, in the caller's directory and environment.
///
/// # Errors
/// [`ShellError::MonitorSource`] unless exactly one of `command` and `ws` is given;
/// [`ShellError::NotWebSocket`], [`ShellError::EmptyCommand`].
pub fn monitor_source(start: &MonitorStart, caller: &Caller) -> Result<MonitorSource, ShellError> {
    match (&start.command, &start.ws) {
        (Some(command), None) => Ok(MonitorSource::Command(command_in(command, caller)?)),
        (None, Some(ws)) => {
            crate::monitor::ws::validate(ws)?;
            Ok(MonitorSource::WebSocket(ws.clone()))
        }
        _ => Err(ShellError::MonitorSource),
    }
}

/// `command` run in the caller's working directory and environment.
fn command_in(command: &str, caller: &Caller) -> Result<CommandSpec, ShellError> {
    let spec = CommandSpec::new(command)?
        .current_dir(&caller.cwd)
        .shared_environment(shared(&caller.env));
    spec.validate()?;
    Ok(spec)
}

/// An environment held once for every command started with it.
type SharedEnv = Arc<[(OsString, OsString)]>;

/// `env` as an environment shared with the commands started before it with the same one: the
/// last one seen is kept, so a caller that starts many commands (100 000 tasks queued from one
/// shell) has its environment held once, not once a task, while they wait.
fn shared(env: &[(OsString, OsString)]) -> SharedEnv {
    static LAST: Mutex<Option<SharedEnv>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    match &*last {
        Some(known) if **known == *env => Arc::clone(known),
        _ => {
            let fresh: SharedEnv = env.into();
            *last = Some(Arc::clone(&fresh));
            fresh
        }
    }
}

/// Invalid input is [`LaunchError::Invalid`]; anything else a failure to register.
fn launch_error(error: ShellError) -> LaunchError {
    match error {
        ShellError::EmptyCommand
        | ShellError::MissingWorkingDir { .. }
        | ShellError::NotWebSocket(_)
        | ShellError::MonitorSource
        | ShellError::NoBatchEngine { .. }
        | ShellError::BatchStdin => LaunchError::Invalid(error.to_string()),
        other => LaunchError::Failed(Box::new(other)),
    }
}

impl Launch for ShellExecutor {
    type Request = ShellStart;

    /// Registers the command (its id can be handed out before the fork); the returned start
    /// spawns it (see [`ShellExecutor::register`]).
    fn launch(&self, start: ShellStart, caller: Caller) -> Result<Launched, LaunchError> {
        let (stdin, placement) = (start.stdin, start.placement.clone());
        let request = shell_request(start, &caller)?;
        if let Some(placement) = self.placement(placement, stdin) {
            let pending = self
                .register_batch(request, placement)
                .map_err(launch_error)?;
            let id = pending.id();
            return Ok(Launched {
                id,
                start: Some(Box::new(move || drop(pending.start()))),
            });
        }
        let pending = self.register(request).map_err(launch_error)?;
        let id = pending.id();
        // Input sent before the process exists waits for its pipe.
        let pipe = (stdin == StdinMode::Piped).then(|| self.reserve_stdin(id));
        Ok(Launched {
            id,
            start: Some(Box::new(move || match pending.start() {
                Ok(task) => {
                    if let Some(pipe) = pipe {
                        pipe.attach(task);
                    }
                }
                Err(error) => tracing::warn!(task = %id, %error, "the command did not start"),
            })),
        })
    }

    /// A command run on this machine with stdin `/dev/null` is described
    /// ([`ShellExecutor::describe`]) and registered at its turn; one with a pipe is registered
    /// at once (input sent before it runs waits for its pipe), and so is one placed on a batch
    /// system (the dependencies it waits for are handed to that system once registered).
    fn prepare(
        &self,
        start: &ShellStart,
        caller: &Caller,
    ) -> Result<Option<TaskState>, LaunchError> {
        if start.stdin == StdinMode::Piped
            || self
                .placement(start.placement.clone(), start.stdin)
                .is_some()
        {
            return Ok(None);
        }
        let request = shell_request(start.clone(), caller)?;
        self.describe(&request).map(Some).map_err(launch_error)
    }
}

/// The shell request `start` makes for `caller` (under [`Caller::task_id`] when given).
fn shell_request(start: ShellStart, caller: &Caller) -> Result<ShellRequest, LaunchError> {
    let spec = command_in(&start.command, caller)
        .map_err(launch_error)?
        .stdin(start.stdin);
    let mut request = ShellRequest::new(spec, start.description).background(caller.background);
    request.timeout = start.timeout_ms.map(Duration::from_millis);
    request.agent_id = caller.agent_id;
    request.tool_use_id.clone_from(&caller.tool_use_id);
    request.id = caller.task_id;
    Ok(request)
}

/// The monitor side of a [`ShellExecutor`]: launches `"monitor"` requests.
#[derive(Debug, Clone)]
pub struct Monitors(pub ShellExecutor);

impl Launch for Monitors {
    type Request = MonitorStart;

    fn launch(&self, start: MonitorStart, caller: Caller) -> Result<Launched, LaunchError> {
        let source = monitor_source(&start, &caller).map_err(launch_error)?;
        let mut request =
            MonitorRequest::new(source, start.description).persistent(start.persistent);
        request.timeout = start.timeout_ms.map(Duration::from_millis);
        request.agent_id = caller.agent_id;
        request.tool_use_id = caller.tool_use_id;
        let handle = self.0.spawn_monitor(request).map_err(launch_error)?;
        Ok(Launched {
            id: handle.id(),
            start: None,
        })
    }
}
