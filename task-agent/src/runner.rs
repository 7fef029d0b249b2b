//! The seam an agent loop plugs into: [`AgentRunner`] starts sessions, [`AgentSession`] yields
//! normalised events and takes messages and cancellation.

use std::ffi::OsString;
use std::path::PathBuf;

use async_trait::async_trait;

use crate::error::AgentError;
use crate::event::AgentEvent;

/// What an agent is started with.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AgentSpec {
    /// The first user turn.
    pub prompt: String,
    /// A model override.
    pub model: Option<String>,
    /// `general-purpose`, …
    pub agent_type: String,
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment (the executor adds `TASKS_AGENT_ID`).
    pub env: Vec<(OsString, OsString)>,
    /// The task's marker (its id), set as `TASKS_TASK_ID` in the CLI's environment and so in
    /// everything it starts: a kill finds by it the processes that left the CLI's tree
    /// (`setsid`, double forks). `None`: only the tree is killed.
    pub marker: Option<String>,
    /// Whether `env` replaces the inherited environment instead of adding to it.
    pub replace_env: bool,
    /// Where the session's transcript goes (appended to on resume).
    pub transcript: PathBuf,
    /// A JSON Schema for structured output (Claude's `--json-schema`).
    pub json_schema: Option<String>,
}

impl AgentSpec {
    /// A spec with a prompt and a transcript path; everything else default.
    pub fn new(prompt: impl Into<String>, transcript: impl Into<PathBuf>) -> Self {
        AgentSpec {
            prompt: prompt.into(),
            transcript: transcript.into(),
            ..AgentSpec::default()
        }
    }

    /// The value of the variable `name` in the environment the CLI runs with: `env`'s, else
    /// the inherited one's (unless `env` replaces it).
    pub fn variable(&self, name: &str) -> Option<OsString> {
        let given = self.env.iter().rev().find(|(key, _)| key == name);
        match given {
            Some((_, value)) => Some(value.clone()),
            None if self.replace_env => None,
            None => std::env::var_os(name),
        }
    }
}

/// What a session yields.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// Something the agent did.
    Agent(AgentEvent),
    /// The session is over: nothing follows.
    Ended(SessionEnd),
}

/// How a session's process ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionEnd {
    /// Its exit code (128 + signal when killed by one); `None` when there was no process.
    pub exit_code: Option<i32>,
    /// The last lines it wrote to stderr.
    pub stderr_tail: Vec<String>,
    /// The first stderr line that said something (not blank, not a backtrace frame), when it
    /// is not among `stderr_tail`: where a failing CLI usually says why.
    pub stderr_first: Option<String>,
}

/// Starts agent sessions. Implement it to plug an agent loop into the task system; the
/// [`CommandRunner`](crate::CommandRunner) runs agent CLIs.
#[async_trait]
pub trait AgentRunner: Send + Sync + std::fmt::Debug {
    /// A short name (`claude`, `codex`, …) for messages.
    fn name(&self) -> &'static str;

    /// Whether its sessions take messages while running ([`AgentSession::send`]).
    fn accepts_messages(&self) -> bool {
        true
    }

    /// Whether [`resume`](Self::resume) can continue its finished sessions (a stopped agent
    /// can then be sent another message, and its notification says so).
    fn resumes(&self) -> bool {
        true
    }

    /// The agent CLI it runs, when it runs one (the command module's `CommandRunner`, which
    /// `placed_runner` downcasts to): what a batch system can run as a job. Default: none.
    fn command(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// The batch system its runs are jobs of (`slurm`), if any: an agent's state names it
    /// from its registration on, so that a supervisor that dies before it records the job's
    /// id leaves a run the next one can find by name. Default: none (runs on this machine).
    fn batch_engine(&self) -> Option<&'static str> {
        None
    }

    /// Ends what a run of the task `spec` names that an earlier supervisor left may still be
    /// doing, before that task's session is started or resumed again after its supervisor
    /// died: two runs of one session never write into its transcript at once. A batch
    /// system's runner cancels the task's live job (found by the task's name) and waits until
    /// it has ended. Default: nothing (a run on this machine is stopped from the task's record
    /// of its process group).
    async fn end_earlier_runs(&self, spec: &AgentSpec) -> Result<(), AgentError> {
        let _ = spec;
        Ok(())
    }

    /// Starts a new session with `spec.prompt` as its first turn.
    async fn start(&self, spec: &AgentSpec) -> Result<Box<dyn AgentSession>, AgentError>;

    /// Continues finished session `session_id` with `message` as its next turn.
    async fn resume(
        &self,
        spec: &AgentSpec,
        session_id: &str,
        message: &str,
    ) -> Result<Box<dyn AgentSession>, AgentError>;

    /// Follows again the run of `spec` that an earlier supervisor started as batch job `job`
    /// ([`AgentSession::batch`]; its id unknown when that supervisor died before recording it)
    /// and that outlived it: nothing is started. Default: a runner
    /// whose runs die with their supervisor has none to follow
    /// ([`AgentError::NotPlaceable`]).
    async fn follow(
        &self,
        spec: &AgentSpec,
        job: &task_core::BatchJob,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let _ = (spec, job);
        Err(AgentError::NotPlaceable(self.name()))
    }
}

/// One running agent session.
#[async_trait]
pub trait AgentSession: Send {
    /// The next event; after [`SessionEvent::Ended`] it keeps returning `Ended`.
    async fn next_event(&mut self) -> SessionEvent;

    /// Delivers `message` as the agent's next user turn.
    ///
    /// # Errors
    /// [`AgentError::InputClosed`]-like errors when the session takes no more input.
    async fn send(&mut self, message: &str) -> Result<(), AgentError>;

    /// Ends the session's input: it finishes what it is doing and exits.
    async fn close_input(&mut self);

    /// Cancels the session: interrupt, then force after the runner's grace. Returns once the
    /// agent's processes are gone.
    async fn cancel(&mut self);

    /// The process group the session runs in, recorded in the task's state so a later
    /// supervisor can reap it if this one dies; `None` for a session without processes.
    fn process(&self) -> Option<task_core::ShellProcess> {
        None
    }

    /// The batch job the session runs as, recorded in the task's state so that a later
    /// supervisor follows it if this one dies ([`AgentRunner::follow`]); `None` for a session
    /// on this machine.
    fn batch(&self) -> Option<task_core::BatchJob> {
        None
    }
}
