//! The command runner: an agent CLI in its own process group, its stdout straight into the
//! transcript file, its events read back from that file by delta reads.

mod args;
mod process;
mod session;

use std::ffi::OsString;

use async_trait::async_trait;

pub(crate) use process::kill_orphaned_group;
pub use session::CommandSession;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::format::CliFormat;
use crate::runner::{AgentRunner, AgentSession, AgentSpec};

/// Runs an agent CLI that prints a JSON event stream (SPEC §15).
///
/// The command is taken as given; the runner adds the flags its format needs when they are
/// absent (for Claude `-p`, `--output-format stream-json`, `--verbose`,
/// `--input-format stream-json`; for Codex `--json`; for Gemini `--output-format stream-json`)
/// and passes the prompt the format's way (Claude: the first stream-json user line on stdin,
/// which stays open for messages; Codex and Gemini: an argument, stdin closed).
#[derive(Debug, Clone)]
pub struct CommandRunner {
    program: OsString,
    args: Vec<OsString>,
    format: CliFormat,
    config: AgentConfig,
}

impl CommandRunner {
    /// A runner of `command` (program then arguments) speaking `format`.
    ///
    /// # Errors
    /// [`AgentError::EmptyCommand`] when `command` is empty.
    pub fn new(
        command: impl IntoIterator<Item = impl Into<OsString>>,
        format: CliFormat,
        config: AgentConfig,
    ) -> Result<Self, AgentError> {
        let mut command = command.into_iter().map(Into::into);
        let program = command.next().ok_or(AgentError::EmptyCommand)?;
        Ok(CommandRunner {
            program,
            args: command.collect(),
            format,
            config,
        })
    }

    /// The format it speaks.
    pub fn format(&self) -> CliFormat {
        self.format
    }

    async fn launch(
        &self,
        spec: &AgentSpec,
        resume: Option<(&str, &str)>,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let plan = args::plan(self.format, &self.args, spec, resume)?;
        let session =
            CommandSession::spawn(&self.program, plan, self.format, spec, &self.config).await?;
        Ok(Box::new(session))
    }
}

#[async_trait]
impl AgentRunner for CommandRunner {
    fn name(&self) -> &'static str {
        self.format.as_str()
    }

    /// Only Claude's stream-json input takes messages while the CLI runs.
    fn accepts_messages(&self) -> bool {
        self.format == CliFormat::Claude
    }

    async fn start(&self, spec: &AgentSpec) -> Result<Box<dyn AgentSession>, AgentError> {
        self.launch(spec, None).await
    }

    async fn resume(
        &self,
        spec: &AgentSpec,
        session_id: &str,
        message: &str,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        self.launch(spec, Some((session_id, message))).await
    }
}
