//! The run of a shell task placed on a batch system: one tokio task that finds or submits its
//! job, follows it every poll interval, obeys kills, and records its end once.

use std::path::PathBuf;
use std::sync::Arc;

use task_core::{EndReason, TaskId, TaskStatus};
use tokio::time::{Instant, MissedTickBehavior};

use super::{BatchEngine, BatchPhase, BatchSpec};
use crate::book::Book;
use crate::control::{Control, ControlReceiver, Controls, Outcome, OutcomePost};
use crate::output::append_line;
use crate::process::EXIT_KILLED;

/// Why the run stopped.
#[derive(Debug)]
enum End {
    /// The job's command exited with this code (the batch system's word, or the job's own
    /// exit file once the batch system forgot it).
    Exited(i32),
    /// The job ended in another state of the batch system's (`FAILED`, `TIMEOUT`, …).
    Batch { state: String, code: Option<i32> },
    /// Cancelled by someone else than this task system.
    Cancelled,
    /// Killed on request (already recorded).
    Killed,
    /// It could not run where its output can be read (not submitted, the state directory not
    /// shared with the node, …).
    Failed(String),
    /// A task its job waited for failed or was killed: it never ran.
    DependencyFailed(TaskId),
}

/// Everything one run owns.
#[derive(Debug)]
pub(crate) struct BatchRun {
    pub(crate) id: TaskId,
    pub(crate) engine: Arc<dyn BatchEngine>,
    /// What to submit when no job of the task exists; `None` for a task taken over from a dead
    /// supervisor, which never submits (its environment is not on disk).
    pub(crate) spec: Option<BatchSpec>,
    /// The job, once known (recorded by a predecessor, found by name, or submitted).
    pub(crate) job_id: Option<String>,
    pub(crate) output: PathBuf,
    pub(crate) control: ControlReceiver,
    pub(crate) outcome: OutcomePost,
}

impl BatchRun {
    /// Follows the task's job until it ends, records the end and tells the waiting caller.
    pub(crate) async fn drive(mut self, book: Book, controls: Arc<Controls>) {
        let end = self.run(&book).await;
        controls.close(&self.id);
        let outcome = self.settle(&book, end);
        self.outcome.post(outcome);
    }

    /// The task's job: recorded, else the newest of its name, else one submitted now.
    /// `Err` is how the task ends without a job to follow.
    async fn job(&mut self, book: &Book) -> Result<String, End> {
        if let Some(job) = &self.job_id {
            return Ok(job.clone());
        }
        let name = self.id.to_string();
        // A job of this name exists when a supervisor died after submitting it and before
        // recording its id: it is taken over, never submitted twice.
        let mut lookups = 0;
        let found = loop {
            lookups += 1;
            match self.engine.find_by_name(&name).await {
                Ok(Some(found)) => break Some(found.job_id),
                Ok(None) => break None,
                Err(error) if lookups < 3 => {
                    tracing::warn!(task = %self.id, %error, "cannot look the job up by name; again");
                    tokio::time::sleep(self.engine.poll_interval()).await;
                }
                Err(error) => {
                    return Err(End::Failed(format!(
                        "cannot tell whether it was submitted already: {error}"
                    )));
                }
            }
        };
        let job = match found {
            Some(job) => {
                tracing::info!(task = %self.id, %job, "its job exists already: followed, not submitted again");
                job
            }
            None => {
                // Ended and forgotten by the batch system: its exit file says how.
                if let Ok(Some(code)) = self.engine.recorded_exit(&name, &self.output).await {
                    return Err(End::Exited(code));
                }
                if self.spec.is_none() {
                    return self.never_submitted(book, &name).await;
                }
                let after = self.dependencies(book).await?;
                let Some(spec) = &mut self.spec else {
                    return self.never_submitted(book, &name).await;
                };
                spec.after = after;
                match self.engine.submit(spec).await {
                    Ok(job) => job,
                    Err(error) => return Err(End::Failed(format!("not submitted: {error}"))),
                }
            }
        };
        book.update_batch(&self.id, |batch| batch.job_id = Some(job.clone()));
        self.job_id = Some(job.clone());
        Ok(job)
    }

    /// The jobs to submit this one after: the jobs of the tasks the queue handed over
    /// ([`task_core::BatchJob::after`]), but those whose task completed since (the batch
    /// system may have forgotten their job already). `Err` when one failed or was killed.
    async fn dependencies(&self, book: &Book) -> Result<Vec<String>, End> {
        let handed_over = book
            .batch(&self.id)
            .map(|batch| batch.after)
            .unwrap_or_default();
        let mut jobs = Vec::new();
        for dependency in handed_over {
            match book
                .registry()
                .get(&dependency.task)
                .map(|state| state.status())
            {
                Some(TaskStatus::Completed) => {}
                Some(TaskStatus::Failed | TaskStatus::Killed) => {
                    return Err(End::DependencyFailed(dependency.task));
                }
                _ => jobs.push(dependency.job_id),
            }
        }
        Ok(jobs)
    }

    /// Which of the tasks this job waited for failed: one recorded failed or killed, else one
    /// whose job the engine reports ended otherwise than completed, else the first.
    async fn failed_dependency(&self, book: &Book) -> Option<TaskId> {
        let after = book.batch(&self.id)?.after;
        let recorded = after.iter().find(|dependency| {
            book.registry().get(&dependency.task).is_some_and(|state| {
                matches!(state.status(), TaskStatus::Failed | TaskStatus::Killed)
            })
        });
        if let Some(dependency) = recorded {
            return Some(dependency.task);
        }
        for dependency in &after {
            if let Ok(Some(phase)) = self.engine.status(&dependency.job_id).await
                && !matches!(
                    phase,
                    BatchPhase::Completed | BatchPhase::Running | BatchPhase::Pending { .. }
                )
            {
                return Some(dependency.task);
            }
        }
        after.first().map(|dependency| dependency.task)
    }

    /// A task taken over whose job cannot be found: its predecessor may have died while its
    /// submission was in flight, so it looks once more after the longest a submission takes.
    async fn never_submitted(&mut self, book: &Book, name: &str) -> Result<String, End> {
        let wait = tokio::time::sleep(self.engine.submit_timeout());
        tokio::pin!(wait);
        loop {
            tokio::select! {
                () = &mut wait => break,
                Some(control) = self.control.recv() => match control {
                    // No job is known: one that shows up by name now is cancelled.
                    Control::Kill { done } => {
                        book.mark_killed(&self.id);
                        if let Ok(Some(found)) = self.engine.find_by_name(name).await
                            && let Err(error) = self.engine.cancel(&found.job_id).await
                        {
                            tracing::warn!(task = %self.id, job = %found.job_id, %error, "cannot cancel its job");
                        }
                        let _ = done.send(());
                        return Err(End::Killed);
                    }
                    Control::Background => {}
                },
            }
        }
        match self.engine.find_by_name(name).await {
            Ok(Some(found)) => Ok(found.job_id),
            Ok(None) => match self.engine.recorded_exit(name, &self.output).await {
                Ok(Some(code)) => Err(End::Exited(code)),
                _ => Err(End::Failed(format!(
                    "its supervisor died before submitting it: {} knows no job named {name}",
                    self.engine.name()
                ))),
            },
            Err(error) => Err(End::Failed(format!(
                "its supervisor died around its submission and its job cannot be looked up: {error}"
            ))),
        }
    }

    async fn run(&mut self, book: &Book) -> End {
        let job = match self.job(book).await {
            Ok(job) => job,
            Err(end) => return end,
        };
        let name = self.id.to_string();
        let mut tick = tokio::time::interval(self.engine.poll_interval());
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut running_since: Option<Instant> = None;
        let mut started = false;
        let mut failing = 0u32;
        loop {
            tokio::select! {
                Some(control) = self.control.recv() => match control {
                    Control::Kill { done } => {
                        book.mark_killed(&self.id);
                        if let Err(error) = self.engine.cancel(&job).await {
                            tracing::warn!(task = %self.id, %job, %error, "cannot cancel its job");
                        }
                        let _ = done.send(());
                        return End::Killed;
                    }
                    Control::Background => {}
                },
                _ = tick.tick() => {
                    let phase = match self.engine.status(&job).await {
                        Ok(phase) => {
                            failing = 0;
                            phase
                        }
                        Err(error) => {
                            failing += 1;
                            if failing == 1 || failing.is_power_of_two() {
                                tracing::warn!(task = %self.id, %job, %error, failing, "cannot look at its job; again at the next poll");
                            }
                            continue;
                        }
                    };
                    match phase {
                        None => return self.forgotten(&job, &name).await,
                        Some(BatchPhase::Pending { reason }) => {
                            book.update_batch(&self.id, |batch| batch.waiting = reason.clone());
                        }
                        Some(BatchPhase::Running) => {
                            let since = *running_since.get_or_insert_with(|| {
                                book.mark_running_batch(&self.id);
                                Instant::now()
                            });
                            if !started {
                                match self.engine.started(&name, &self.output).await {
                                    Ok(true) => started = true,
                                    Ok(false) if since.elapsed() >= self.engine.start_grace() => {
                                        if let Err(error) = self.engine.cancel(&job).await {
                                            tracing::warn!(task = %self.id, %job, %error, "cannot cancel its job");
                                        }
                                        return End::Failed(format!(
                                            "the state root is not shared with the node: {} job {job} ran {} s without its start marker beside {}",
                                            self.engine.name(),
                                            since.elapsed().as_secs(),
                                            self.output.display()
                                        ));
                                    }
                                    Ok(false) => {}
                                    Err(error) => tracing::warn!(task = %self.id, %error, "cannot read its start marker"),
                                }
                            }
                        }
                        Some(BatchPhase::Completed) => return End::Exited(0),
                        Some(BatchPhase::Failed { state, exit_code }) => {
                            let code = match exit_code {
                                Some(code) => Some(code),
                                None => self.engine.recorded_exit(&name, &self.output).await.ok().flatten(),
                            };
                            return End::Batch { state, code };
                        }
                        Some(BatchPhase::Killed) => return End::Cancelled,
                        Some(BatchPhase::DependencyFailed) => {
                            // Slurm keeps such a job pending for ever: cancelled, and ended as
                            // the queue ends a task whose dependency failed.
                            if let Err(error) = self.engine.cancel(&job).await {
                                tracing::warn!(task = %self.id, %job, %error, "cannot cancel its job");
                            }
                            return match self.failed_dependency(book).await {
                                Some(dependency) => End::DependencyFailed(dependency),
                                None => End::Failed(format!(
                                    "{} will never start job {job}: a job it waits for did not complete",
                                    self.engine.name()
                                )),
                            };
                        }
                    }
                }
            }
        }
    }

    /// A job the batch system no longer knows: ended as its exit file says, never guessed.
    async fn forgotten(&self, job: &str, name: &str) -> End {
        match self.engine.recorded_exit(name, &self.output).await {
            Ok(Some(code)) => End::Exited(code),
            Ok(None) => End::Batch {
                state: "UNKNOWN".into(),
                code: None,
            },
            Err(error) => End::Failed(format!(
                "{} forgot job {job} and its exit status cannot be read: {error}",
                self.engine.name()
            )),
        }
    }

    /// Records the end in the registry and builds the caller's outcome.
    fn settle(&self, book: &Book, end: End) -> Outcome {
        let engine = self.engine.name().to_owned();
        let mut note = None;
        let (reason, status) = match end {
            End::Killed => (EndReason::Killed, TaskStatus::Killed),
            End::Cancelled => (EndReason::Killed, book.finish_cancelled(&self.id)),
            End::Exited(code) => {
                let reason = EndReason::Exited { code };
                // It ran (perhaps between two looks): pending, running, then its end.
                book.mark_running_batch(&self.id);
                (reason.clone(), book.finish_shell(&self.id, reason))
            }
            End::Batch { state, code } => {
                if state == "UNKNOWN" {
                    note = Some(format!(
                        "tasks: {engine} no longer knows job {} and it left no exit status",
                        self.job_id.as_deref().unwrap_or("?")
                    ));
                }
                let reason = EndReason::BatchJob {
                    engine,
                    state,
                    code,
                };
                book.mark_running_batch(&self.id);
                (reason.clone(), book.finish_shell(&self.id, reason))
            }
            End::DependencyFailed(id) => {
                let reason = EndReason::DependencyFailed { id };
                (reason.clone(), book.finish_shell(&self.id, reason))
            }
            End::Failed(error) => {
                note = Some(format!("tasks: {error}"));
                let reason = EndReason::SpawnFailed { error };
                (reason.clone(), book.finish_shell(&self.id, reason))
            }
        };
        // A command that failed with an exit code of its own said why in its output already;
        // one that never ran for a failed dependency leaves its output empty, as in the queue.
        let plain_failure = matches!(&reason, EndReason::BatchJob { state, code: Some(_), .. } if state == "FAILED")
            || matches!(reason, EndReason::DependencyFailed { .. });
        let message = note.or_else(|| reason.stderr_note().filter(|_| !plain_failure));
        if let Some(message) = &message
            && let Err(error) = append_line(&self.output, message)
        {
            tracing::warn!(task = %self.id, %error, "could not append the end message");
        }
        Outcome {
            status,
            exit_code: reason.exit_code().unwrap_or(EXIT_KILLED),
            message,
            reason,
        }
    }
}
