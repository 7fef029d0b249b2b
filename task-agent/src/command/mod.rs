//! The command runner: an agent CLI in its own process group, its stdout straight into the
//! transcript file, its events read back from that file by delta reads.

mod args;
mod batch;
mod process;
mod prompt;
mod session;

use std::ffi::OsString;

use agent_stream::session_file::SessionStore;
use async_trait::async_trait;

pub use batch::{BatchRunner, placed_runner};
pub use session::CommandSession;

pub(crate) use prompt::take_prompt;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::format::CliFormat;
use crate::runner::{AgentRunner, AgentSession, AgentSpec};

/// Runs an agent CLI that prints a JSON event stream (SPEC §15).
///
/// The command is taken as given; the runner adds the flags its format needs headless when
/// they are absent (for Claude `-p`, `--output-format stream-json`, `--verbose`,
/// `--input-format stream-json`; for Codex `--json`, `--skip-git-repo-check`; for Gemini
/// `--output-format stream-json`, `--yolo`) and passes the prompt the format's way (Claude:
/// the first stream-json user line on stdin, which stays open for messages; Codex and Gemini:
/// an argument, stdin closed). A stopped Claude agent is resumed with `--resume SESSION`, a
/// Codex one with `resume THREAD MESSAGE` after the given arguments (`codex exec … resume`);
/// Gemini agents cannot be resumed.
///
/// A runner made with [`CommandRunner::detecting`] adds nothing: it runs the command exactly as
/// given (the prompt is part of it, stdin is closed) and learns the format from the first line
/// of the transcript it recognises; it takes no messages and cannot resume.
#[derive(Debug, Clone)]
pub struct CommandRunner {
    program: OsString,
    args: Vec<OsString>,
    /// `None`: detected from the transcript.
    format: Option<CliFormat>,
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
        Self::with_format(command, Some(format), config)
    }

    /// A runner of `command` exactly as given, whose format is detected from its output.
    ///
    /// # Errors
    /// [`AgentError::EmptyCommand`] when `command` is empty.
    pub fn detecting(
        command: impl IntoIterator<Item = impl Into<OsString>>,
        config: AgentConfig,
    ) -> Result<Self, AgentError> {
        Self::with_format(command, None, config)
    }

    fn with_format(
        command: impl IntoIterator<Item = impl Into<OsString>>,
        format: Option<CliFormat>,
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

    /// The format it speaks; `None` when it is detected from the transcript.
    pub fn format(&self) -> Option<CliFormat> {
        self.format
    }

    /// The program.
    pub(crate) fn program(&self) -> &OsString {
        &self.program
    }

    /// Its configuration.
    pub(crate) fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// How to run the CLI for `spec` (`resume`: the session and the message it goes on
    /// with): its arguments and first input, the parser of its stream, and whether that parser
    /// first reads the transcript as it is (a resumed Codex thread).
    pub(crate) fn plan(
        &self,
        spec: &AgentSpec,
        resume: Option<(&str, &str)>,
    ) -> Result<(args::LaunchPlan, Box<dyn crate::format::LineParser>, bool), AgentError> {
        let (plan, parser): (_, Box<dyn crate::format::LineParser>) = match self.format {
            Some(format) => (
                args::plan(format, &self.args, spec, resume)?,
                format.parser(),
            ),
            None if resume.is_some() => return Err(AgentError::ResumeUnsupported("auto")),
            None => (
                args::LaunchPlan {
                    args: self.args.clone(),
                    first_turn: None,
                    unshown_turn: None,
                },
                Box::new(crate::format::DetectingParser::default()),
            ),
        };
        // A resumed Codex thread reports usage totals that include the earlier runs': its
        // parser reads those runs' lines first (the transcript is the task's, appended to by
        // every run), so that it reports only what the new run used.
        let replay = resume.is_some() && self.format == Some(CliFormat::Codex);
        Ok((plan, parser, replay))
    }

    async fn launch(
        &self,
        spec: &AgentSpec,
        resume: Option<(&str, &str)>,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let (plan, parser, replay) = self.plan(spec, resume)?;
        let store = self
            .format
            .and_then(|format| SessionStore::for_format(format, |name| spec.variable(name)));
        let session = CommandSession::spawn(
            &self.program,
            plan,
            parser,
            replay,
            store,
            spec,
            &self.config,
        )
        .await?;
        Ok(Box::new(session))
    }
}

#[async_trait]
impl AgentRunner for CommandRunner {
    fn name(&self) -> &'static str {
        self.format.map_or("auto", CliFormat::as_str)
    }

    /// Only Claude's stream-json input takes messages while the CLI runs (a stopped Codex agent
    /// takes one by being resumed).
    fn accepts_messages(&self) -> bool {
        self.format == Some(CliFormat::Claude)
    }

    /// Gemini's CLI has no resume; nor has a CLI whose format is detected from its output.
    fn resumes(&self) -> bool {
        self.format
            .is_some_and(|format| format != CliFormat::Gemini)
    }

    fn command(&self) -> Option<&CommandRunner> {
        Some(self)
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
