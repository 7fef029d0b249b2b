//! Agents placed on a batch system: the agent CLI runs inside a job, its stdout the task's
//! transcript (the job's output file), followed here through delta reads of that shared file;
//! its stderr is kept beside the transcript, as a local CLI's is.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use task_core::batch::{BatchEngine, BatchPhase, BatchSpec, Engines};
use task_protocol::start::Placement;
use tokio::sync::{oneshot, watch};

use super::CommandRunner;
use super::args::LaunchPlan;
use super::session::{Follow, record_turn};
use crate::error::AgentError;
use crate::format::LineParser;
use crate::runner::{AgentRunner, AgentSession, AgentSpec, SessionEnd, SessionEvent};

/// The exit code a session reports for a job the batch system cancelled (as `SIGTERM` would).
const EXIT_CANCELLED: i32 = 143;

/// Runs an agent CLI (as [`CommandRunner`] would run it) as a job of a batch system
/// ([`BatchEngine`]): one job per run, named by the task's id, in the caller's directory and
/// environment, its output appended to the transcript. The transcript's directory (the state
/// root) must be shared with the batch system's nodes.
///
/// A CLI that reads its turns on stdin (Claude's stream-json) gets its first turn from a file
/// beside the transcript and so ends once it has answered: a job takes no message while it
/// runs ([`AgentRunner::accepts_messages`] is `false`), and a message to a stopped agent
/// resumes it as a new job with the CLI's resume flag, in the same task. A time budget is the
/// job's time limit too.
#[derive(Debug, Clone)]
pub struct BatchRunner {
    cli: CommandRunner,
    engine: Arc<dyn BatchEngine>,
    placement: Placement,
    time_limit: Option<Duration>,
}

impl BatchRunner {
    /// `cli` placed on `engine` by `placement`, each job limited to `time_limit`.
    pub fn new(
        cli: CommandRunner,
        engine: Arc<dyn BatchEngine>,
        placement: Placement,
        time_limit: Option<Duration>,
    ) -> Self {
        Self {
            cli,
            engine,
            placement,
            time_limit,
        }
    }

    /// The id of the job of the run `spec` describes, found by its name (the task's id): one
    /// an earlier supervisor submitted without living to record its id.
    async fn job_named(&self, spec: &AgentSpec) -> Result<String, AgentError> {
        let name = job_name(spec)?;
        let found = self.engine.find_by_name(name).await.map_err(batch_error)?;
        let found = found.ok_or_else(|| {
            batch_error(format!(
                "{} knows no job named {name} (it was never submitted, or has been forgotten)",
                self.engine.name()
            ))
        })?;
        Ok(found.job_id)
    }

    async fn launch(
        &self,
        spec: &AgentSpec,
        resume: Option<(&str, &str)>,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let (plan, parser, replay) = self.cli.plan(spec, resume)?;
        let session = BatchSession::submit(self, plan, parser, replay, spec).await?;
        Ok(Box::new(session))
    }
}

#[async_trait]
impl AgentRunner for BatchRunner {
    fn name(&self) -> &'static str {
        self.cli.name()
    }

    /// A job reads no more input once it runs.
    fn accepts_messages(&self) -> bool {
        false
    }

    fn resumes(&self) -> bool {
        self.cli.resumes()
    }

    fn command(&self) -> Option<&dyn std::any::Any> {
        Some(&self.cli)
    }

    fn batch_engine(&self) -> Option<&'static str> {
        Some(self.engine.name())
    }

    /// Cancels the task's newest job if it has not ended, and waits (a poll interval at a
    /// time, up to the engine's submission timeout) until the batch system says it has.
    async fn end_earlier_runs(&self, spec: &AgentSpec) -> Result<(), AgentError> {
        let name = job_name(spec)?;
        let Some(found) = self.engine.find_by_name(name).await.map_err(batch_error)? else {
            return Ok(());
        };
        let live = |phase: &Option<BatchPhase>| {
            matches!(
                phase,
                Some(BatchPhase::Pending { .. } | BatchPhase::Running)
            )
        };
        if !live(&Some(found.phase)) {
            return Ok(());
        }
        let job = found.job_id;
        tracing::info!(%job, %name, "cancelling the job of a run its supervisor left");
        self.engine.cancel(&job).await.map_err(batch_error)?;
        let deadline = tokio::time::Instant::now() + self.engine.submit_timeout();
        while live(&self.engine.status(&job).await.map_err(batch_error)?) {
            if tokio::time::Instant::now() >= deadline {
                return Err(batch_error(format!(
                    "job {job} of an earlier run of {name} has not ended {} after its cancel",
                    task_core::human_duration(self.engine.submit_timeout())
                )));
            }
            tokio::time::sleep(self.engine.poll_interval()).await;
        }
        Ok(())
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

    async fn follow(
        &self,
        spec: &AgentSpec,
        job: &task_core::BatchJob,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        let mut job = job.clone();
        if job.job_id.is_none() {
            job.job_id = Some(self.job_named(spec).await?);
        }
        Ok(Box::new(BatchSession::taken_over(self, spec, &job)?))
    }
}

/// What runs an agent with `runner` placed by `placement`: where `engines` put it
/// ([`Engines::placement`]: there, else their default placement; `local` is this machine),
/// `runner` itself on this machine, else its agent CLI ([`AgentRunner::command`]) as a
/// [`BatchRunner`] on the engine of that name, each job limited to `time_limit`.
///
/// # Errors
/// [`AgentError::NoBatchEngine`] when `engines` have no engine of that name;
/// [`AgentError::NotPlaceable`] when `runner` runs no agent CLI.
pub fn placed_runner(
    engines: &Engines,
    runner: Arc<dyn AgentRunner>,
    placement: Option<Placement>,
    time_limit: Option<Duration>,
) -> Result<Arc<dyn AgentRunner>, AgentError> {
    let Some(placement) = engines.placement(placement) else {
        return Ok(runner);
    };
    let engine = engines
        .get(placement.engine())
        .ok_or_else(|| AgentError::NoBatchEngine(placement.engine().to_owned()))?;
    let cli = runner
        .command()
        .and_then(|cli| cli.downcast_ref::<CommandRunner>())
        .ok_or(AgentError::NotPlaceable(runner.name()))?
        .clone();
    Ok(Arc::new(BatchRunner::new(
        cli, engine, placement, time_limit,
    )))
}

/// One run of an agent CLI as a batch job.
#[derive(Debug)]
struct BatchSession {
    follow: Follow,
    /// Its job, as the task's state records it.
    job: task_core::BatchJob,
    ended: Option<SessionEnd>,
    /// Asks the job's follower to cancel the job; answered once the batch system reports it
    /// ended.
    cancel: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

impl BatchSession {
    /// Submits the job and starts following it.
    async fn submit(
        runner: &BatchRunner,
        plan: LaunchPlan,
        parser: Box<dyn LineParser>,
        replay: bool,
        spec: &AgentSpec,
    ) -> Result<Self, AgentError> {
        let engine = &runner.engine;
        let name = job_name(spec)?.to_owned();
        let workdir = match &spec.cwd {
            Some(dir) if !dir.is_dir() => {
                return Err(AgentError::MissingWorkingDir { path: dir.clone() });
            }
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|_| AgentError::MissingWorkingDir {
                path: PathBuf::from("."),
            })?,
        };
        // A run before this one in the same task left its records: this job's are its own.
        engine
            .forget_records(&name, &spec.transcript)
            .await
            .map_err(batch_error)?;
        let output_from = std::fs::metadata(&spec.transcript)
            .map(|m| m.len())
            .map_err(|e| task_output::OutputError::from_io(&spec.transcript, e))?;
        let follow = Follow::from_offset(spec, parser, replay, output_from, runner.cli.config());
        if let Some(turn) = &plan.unshown_turn {
            record_turn(&spec.transcript, turn)?;
        }
        let mut words = vec![shell_word(runner.cli.program())];
        words.extend(plan.args.iter().map(|arg| shell_word(arg)));
        let stdin = match &plan.first_turn {
            Some(turn) => shell_word(write_input(&spec.transcript, turn)?.as_os_str()),
            None => "/dev/null".to_owned(),
        };
        let command = format!("exec {} <{stdin}", words.join(" "));
        let mut env: Vec<(String, String)> = if spec.replace_env {
            Vec::new()
        } else {
            std::env::vars().collect()
        };
        env.extend(spec.env.iter().map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        }));
        env.push((task_core::TASK_MARKER_ENV.to_owned(), name.clone()));
        let mut job = BatchSpec::new(
            name,
            command,
            workdir,
            spec.transcript.clone(),
            env,
            runner.placement.clone(),
        );
        job.time_limit = runner.time_limit;
        // Its stderr is kept beside the transcript, as a local CLI's is: the transcript is
        // the CLI's event stream alone.
        let stderr = task_output::transcript::stderr_path(&spec.transcript);
        task_output::open::open_append_creating(&stderr)?;
        job.stderr = Some(stderr);
        let job_id = engine.submit(&job).await.map_err(batch_error)?;
        tracing::info!(job = %job_id, name = %job.name, "agent submitted as a batch job");
        let mut recorded = task_core::BatchJob::new(engine.name());
        recorded.job_id = Some(job_id);
        recorded.output_from = Some(output_from);
        Ok(Self::following(
            engine, recorded, job.name, job.output, follow,
        ))
    }

    /// Follows job `job` of the run `spec` describes, which an earlier supervisor submitted:
    /// its output read again from where it begins.
    fn taken_over(
        runner: &BatchRunner,
        spec: &AgentSpec,
        job: &task_core::BatchJob,
    ) -> Result<Self, AgentError> {
        let name = spec.marker.clone().ok_or_else(|| {
            batch_error("a batch job is named by its task's id, and this run has none")
        })?;
        if job.job_id.is_none() {
            return Err(batch_error("its job's id was never recorded"));
        }
        let (_, parser, replay) = runner.cli.plan(spec, None)?;
        let follow = Follow::from_offset(
            spec,
            parser,
            replay,
            job.output_from.unwrap_or(0),
            runner.cli.config(),
        );
        tracing::info!(job = ?job.job_id, %name, "agent's batch job followed again");
        Ok(Self::following(
            &runner.engine,
            job.clone(),
            name,
            spec.transcript.clone(),
            follow,
        ))
    }

    /// The session of job `job` (its id set), named `name`, its output `output` read by
    /// `follow`: a tokio task follows the job on the batch system until it ends.
    fn following(
        engine: &Arc<dyn BatchEngine>,
        job: task_core::BatchJob,
        name: String,
        output: PathBuf,
        follow: Follow,
    ) -> Self {
        let (exit_tx, exit) = watch::channel(None);
        let (cancel, cancel_asked) = oneshot::channel();
        tokio::spawn(follow_job(
            Arc::clone(engine),
            job.job_id.clone().unwrap_or_default(),
            name,
            output,
            exit_tx,
            cancel_asked,
        ));
        Self {
            follow: follow.with_exit(exit),
            job,
            ended: None,
            cancel: Some(cancel),
        }
    }
}

#[async_trait]
impl AgentSession for BatchSession {
    async fn next_event(&mut self) -> SessionEvent {
        if let Some(end) = &self.ended {
            return SessionEvent::Ended(end.clone());
        }
        match self.follow.next().await {
            Ok(event) => SessionEvent::Agent(event),
            Err(code) => {
                let end = SessionEnd {
                    exit_code: Some(code),
                    ..SessionEnd::default()
                };
                self.ended = Some(end.clone());
                SessionEvent::Ended(end)
            }
        }
    }

    async fn send(&mut self, _message: &str) -> Result<(), AgentError> {
        Err(AgentError::NoInput)
    }

    async fn close_input(&mut self) {}

    fn batch(&self) -> Option<task_core::BatchJob> {
        Some(self.job.clone())
    }

    async fn cancel(&mut self) {
        let (cancelled, ended) = oneshot::channel();
        if let Some(cancel) = self.cancel.take()
            && cancel.send(cancelled).is_ok()
        {
            let _ = ended.await;
        }
    }
}

impl Drop for BatchSession {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            let (cancelled, _) = oneshot::channel();
            let _ = cancel.send(cancelled);
        }
    }
}

/// The name of the jobs of the task `spec` describes: the task's id.
fn job_name(spec: &AgentSpec) -> Result<&str, AgentError> {
    spec.marker
        .as_deref()
        .ok_or_else(|| batch_error("a batch job is named by its task's id, and this run has none"))
}

/// Follows job `job` every poll interval until it ends, then reports its exit code; cancels
/// it when asked first (and reports once it ended).
async fn follow_job(
    engine: Arc<dyn BatchEngine>,
    job: String,
    name: String,
    output: PathBuf,
    exit: watch::Sender<Option<i32>>,
    mut cancel: oneshot::Receiver<oneshot::Sender<()>>,
) {
    // Who waits for the cancelled job to end (nobody when the session was dropped).
    let mut cancelled: Option<Option<oneshot::Sender<()>>> = None;
    let mut failing = 0u32;
    loop {
        let wait = tokio::time::sleep(engine.poll_interval());
        if cancelled.is_some() {
            wait.await;
        } else {
            tokio::select! {
                asked = &mut cancel => {
                    // Asked, or the session dropped without asking: the job goes either way.
                    if let Err(error) = engine.cancel(&job).await {
                        tracing::warn!(%job, %error, "cannot cancel the agent's job");
                    }
                    cancelled = Some(asked.ok());
                }
                () = wait => {}
            }
        }
        let code = match engine.status(&job).await {
            Ok(Some(BatchPhase::Pending { .. } | BatchPhase::Running)) => continue,
            Ok(Some(BatchPhase::Completed)) => 0,
            Ok(Some(BatchPhase::Failed { exit_code, .. })) => exit_code.unwrap_or(1),
            Ok(Some(BatchPhase::Killed | BatchPhase::DependencyFailed)) => EXIT_CANCELLED,
            // Ended and forgotten between two looks: its own record says how.
            Ok(None) => match engine.recorded_exit(&name, &output).await {
                Ok(Some(code)) => code,
                _ => EXIT_CANCELLED,
            },
            Err(error) => {
                failing += 1;
                if failing == 1 || failing.is_power_of_two() {
                    tracing::warn!(%job, %error, failing, "cannot look at the agent's job; again at the next poll");
                }
                continue;
            }
        };
        let _ = exit.send(Some(code));
        if let Some(Some(done)) = cancelled {
            let _ = done.send(());
        }
        return;
    }
}

/// Writes the CLI's first stdin line beside the transcript (private, replaced whole) and
/// returns its path: the job reads it on its node.
fn write_input(transcript: &Path, line: &str) -> Result<PathBuf, AgentError> {
    let mut path = transcript.as_os_str().to_owned();
    path.push(".stdin");
    let path = PathBuf::from(path);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(task_output::OutputError::from_io(&path, e).into()),
    }
    task_output::open::create_output_file(&path)?
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| task_output::OutputError::from_io(&path, e))?;
    Ok(path)
}

/// `word` quoted for `sh`.
fn shell_word(word: &OsStr) -> String {
    format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"))
}

fn batch_error(error: impl std::fmt::Display) -> AgentError {
    AgentError::Batch(error.to_string())
}
