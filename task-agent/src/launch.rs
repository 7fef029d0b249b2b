//! Agents started from requests that crossed a process boundary: the [`Launch`] side of
//! [`AgentExecutor`] (a host such as the `tasks` supervisor registers it for `"agent"`
//! requests, from `tasks agent` or the MCP `Agent` tool).

use std::sync::Arc;

use task_core::{Caller, Launch, LaunchError, Launched, TaskState};

use crate::command::CommandRunner;
use crate::error::AgentError;
use crate::executor::{AgentExecutor, AgentRequest};
use crate::format::CliFormat;

pub use task_protocol::start::{AgentStart, RunnerFormat};

/// What task-agent does with the event format a front end names ([`RunnerFormat`], a word
/// of the protocol): the runner that speaks it, the first turn of a command line.
pub trait RunnerFormatExt {
    /// A command runner of `command` in this format.
    ///
    /// # Errors
    /// [`AgentError::EmptyCommand`].
    fn command_runner(
        self,
        command: Vec<String>,
        config: crate::AgentConfig,
    ) -> Result<CommandRunner, AgentError>;

    /// The command and first user turn of an agent started from a command line, where the
    /// prompt may be in the command as its CLI takes it (`claude -p "do X"`, `codex exec "do
    /// X"`, `gemini -p "do X"` or `gemini "do X"`) or given apart (`option`). A prompt in the
    /// command is taken out of it (the runner passes the prompt the format's way). `Auto` runs
    /// the command as given: the prompt is `option`, only recorded, or empty.
    ///
    /// # Errors
    /// [`AgentError::PromptTwice`] when both give one, [`AgentError::NoPrompt`] when neither
    /// does, [`AgentError::PromptInCommandTwice`] when the command gives two.
    fn first_turn(
        self,
        command: Vec<String>,
        option: Option<String>,
    ) -> Result<(Vec<String>, String), AgentError>;

    /// The format, or `None` for one detected from the transcript.
    fn format(self) -> Option<CliFormat>;
}

impl RunnerFormatExt for RunnerFormat {
    fn command_runner(
        self,
        command: Vec<String>,
        config: crate::AgentConfig,
    ) -> Result<CommandRunner, AgentError> {
        match self.format() {
            Some(format) => CommandRunner::new(command, format, config),
            None => CommandRunner::detecting(command, config),
        }
    }

    fn first_turn(
        self,
        command: Vec<String>,
        option: Option<String>,
    ) -> Result<(Vec<String>, String), AgentError> {
        let Some(format) = self.format() else {
            return Ok((command, option.unwrap_or_default()));
        };
        let (command, in_command) = crate::command::take_prompt(format, &command)?;
        match (in_command, option) {
            (Some(in_command), Some(option)) => Err(AgentError::PromptTwice { in_command, option }),
            (Some(prompt), None) | (None, Some(prompt)) => Ok((command, prompt)),
            (None, None) => Err(AgentError::NoPrompt),
        }
    }

    fn format(self) -> Option<CliFormat> {
        match self {
            RunnerFormat::Claude => Some(CliFormat::Claude),
            RunnerFormat::Codex => Some(CliFormat::Codex),
            RunnerFormat::Gemini => Some(CliFormat::Gemini),
            RunnerFormat::Auto => None,
        }
    }
}

impl Launch for AgentExecutor {
    type Request = AgentStart;

    /// Registers the agent `pending` (its id and output file can be handed out at once); the
    /// returned start spawns its CLI on the current tokio runtime, in the caller's directory
    /// and environment, owned by the caller's agent if any.
    fn launch(&self, start: AgentStart, caller: Caller) -> Result<Launched, LaunchError> {
        let request = self.request_of(start, caller)?;
        let pending = self.register(request)?;
        Ok(start_on_runtime(pending.id(), async move {
            pending.start().await.map(|_| ())
        }))
    }

    /// [`adopt`](AgentExecutor::adopt)s the stopped agent `previous`, to be resumed by the
    /// message the host sends it next; nothing starts before that. A live one (its dead
    /// supervisor left it running as a batch job) is followed again
    /// ([`AgentExecutor::follow_again`]) by the returned start.
    fn take_back(
        &self,
        previous: &TaskState,
        start: AgentStart,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        let request = self.request_of(start, caller)?;
        if !previous.status().is_terminal() {
            let follow = self.follow_again(previous, request)?;
            return Ok(start_on_runtime(previous.base.id, follow));
        }
        self.adopt(previous, request)
            .map_err(|error| LaunchError::Invalid(error.to_string()))?;
        Ok(Launched {
            id: previous.base.id,
            start: None,
        })
    }
}

impl AgentExecutor {
    /// The agent `start` asks for, run for `caller`.
    fn request_of(&self, start: AgentStart, caller: Caller) -> Result<AgentRequest, LaunchError> {
        if !caller.cwd.is_dir() {
            let error = AgentError::MissingWorkingDir { path: caller.cwd };
            return Err(LaunchError::Invalid(error.to_string()));
        }
        let cli = command_runner(start.command, start.runner, self.config().clone(), &caller)?;
        // A time budget is the job's time limit too.
        let limit = start
            .budget
            .and_then(|budget| budget.timeout_ms)
            .map(std::time::Duration::from_millis);
        let runner = crate::placed_runner(&self.engines(), Arc::new(cli), start.placement, limit)?;
        let mut request = AgentRequest::new(runner, start.description, start.prompt);
        request.name = start.name;
        request.model = start.model;
        request.agent_type = start.subagent_type;
        request.cwd = Some(caller.cwd);
        request.env = caller.env;
        request.replace_env = true;
        request.owner_agent_id = caller.agent_id;
        request.tool_use_id = caller.tool_use_id;
        request.worktree = start.worktree;
        request.budget = start.budget;
        request.id = caller.task_id;
        Ok(request)
    }
}

/// The command runner of a request: `command` speaking `format`, run by `caller`. A program
/// the caller could not run refuses the start ("cannot start agent: codex: No such file or
/// directory"): nothing is registered.
pub fn command_runner(
    command: Vec<String>,
    format: RunnerFormat,
    config: crate::config::AgentConfig,
    caller: &Caller,
) -> Result<CommandRunner, LaunchError> {
    if let Some(program) = command.first() {
        caller
            .find_program(program)
            .map_err(|error| LaunchError::Invalid(format!("cannot start agent: {error}")))?;
    }
    format
        .command_runner(command, config)
        .map_err(|error| LaunchError::Invalid(error.to_string()))
}

/// A [`Launched`] whose start runs `start` on the current tokio runtime (dropping it unstarted
/// when there is none ends the task `failed`).
pub fn start_on_runtime(
    id: task_core::TaskId,
    start: impl std::future::Future<Output = Result<(), AgentError>> + Send + 'static,
) -> Launched {
    Launched::on_runtime(id, async move {
        if let Err(error) = start.await {
            tracing::warn!(task = %id, %error, "the task did not start");
        }
    })
}
