//! The loop that follows one run of an agent: progress, queued messages, the stop, the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use task_core::{
    AgentState, AgentUsage, EndReason, Registry, TaskId, TaskKind, TaskState, TaskStatus,
    UpdateOutcome, Worktree,
};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::budget::RunBudget;
use crate::config::AgentConfig;
use crate::event::{AgentEvent, TurnOutcome};
use crate::notify::{RunEnd, agent_notification};
use crate::progress::{Change, ProgressTracker};
use crate::record::{AgentRecord, Control};
use crate::runner::{AgentSession, SessionEnd, SessionEvent};
use task_worktree::Worktrees;

/// Everything one run needs.
pub(crate) struct Drive {
    pub(crate) registry: Arc<Registry>,
    pub(crate) config: AgentConfig,
    pub(crate) record: Arc<AgentRecord>,
    pub(crate) id: TaskId,
    pub(crate) run: u64,
    pub(crate) session: Box<dyn AgentSession>,
    pub(crate) control: mpsc::Receiver<Control>,
    pub(crate) tracker: ProgressTracker,
    pub(crate) started: Instant,
    /// Messages written to the CLI whose turn has not ended yet: requeued if it dies first.
    pub(crate) in_flight: Vec<String>,
    /// The errors the CLI reported since it last reported anything else.
    pub(crate) errors: ErrorStreak,
    /// Where its worktree (if it runs in one) is removed from once it stops unchanged.
    pub(crate) worktrees: Arc<Worktrees>,
    /// Its budgets.
    pub(crate) budget: RunBudget,
}

/// The errors ([`AgentEvent::Error`]) a CLI reported in a row, with nothing else between them.
#[derive(Debug, Default)]
pub(crate) struct ErrorStreak {
    /// When the first of them came.
    since: Option<Instant>,
    /// How many.
    count: u32,
    /// The latest, in the CLI's words.
    last: Option<String>,
}

impl ErrorStreak {
    fn record(&mut self, message: &str) {
        self.since.get_or_insert_with(Instant::now);
        self.count = self.count.saturating_add(1);
        self.last = Some(message.to_owned());
    }

    /// Something else came: the streak is over. Returns whether there was one.
    fn clear(&mut self) -> bool {
        let had = self.count > 0;
        *self = ErrorStreak::default();
        had
    }

    /// When the run fails if nothing but errors comes until then: `limit` after the first
    /// error, once there were at least two (one error then silence may be a CLI retrying
    /// successfully into a long model request). A limit too large to add means never.
    fn deadline(&self, limit: Duration) -> Option<Instant> {
        self.since
            .filter(|_| self.count >= 2)
            .and_then(|since| since.checked_add(limit))
    }
}

/// The run was killed: the kill already recorded it; the drive only stops the session.
struct Cancelled;

/// How an attempt to stop went.
enum Stopped {
    Done,
    MessageQueued,
}

/// What waiting for the agent's own tasks ended with.
enum Wait {
    Clear,
    MessageQueued,
}

impl Drive {
    /// Follows the run to its end; returns when its processes are gone.
    pub(crate) async fn run(mut self) {
        match self.until_stopped().await {
            Ok(()) => {}
            Err(Cancelled) => self.record.close_control(self.run),
        }
    }

    async fn until_stopped(&mut self) -> Result<(), Cancelled> {
        loop {
            let stuck_at = self.errors.deadline(self.config.error_loop_limit);
            let out_of_time = self.budget.deadline();
            let event = tokio::select! {
                biased;
                control = self.control.recv() => {
                    self.on_control(control).await?;
                    continue;
                }
                // Before the session's events: a CLI that prints errors fast must not starve it.
                () = sleep_until(stuck_at), if stuck_at.is_some() => {
                    self.stuck().await?;
                    return Ok(());
                }
                () = sleep_until(out_of_time), if out_of_time.is_some() => {
                    let reason = self.budget.timed_out();
                    self.over_budget(reason).await?;
                    return Ok(());
                }
                event = self.session.next_event() => event,
            };
            match event {
                SessionEvent::Agent(AgentEvent::TurnEnded(outcome)) => {
                    if self.errors.clear() {
                        self.clear_shown_error();
                    }
                    self.in_flight.clear();
                    self.tracker.apply(&AgentEvent::TurnEnded(outcome));
                    if self.after_turn().await? {
                        return Ok(());
                    }
                }
                SessionEvent::Agent(event) => {
                    if let Some(reason) = self.record_event(event) {
                        self.over_budget(reason).await?;
                        return Ok(());
                    }
                }
                SessionEvent::Ended(end) => {
                    // Messages queued for (or written to) a dead CLI stay pending: a resume
                    // delivers them.
                    let unanswered = std::mem::take(&mut self.in_flight);
                    if !unanswered.is_empty() {
                        self.requeue(unanswered);
                    }
                    let last_error = self.errors.last.take();
                    self.stop_with(crashed(&end, last_error.as_deref()), false)
                        .await?;
                    return Ok(());
                }
            }
        }
    }

    /// The CLI has reported nothing but errors for the configured limit (Codex retrying a
    /// model endpoint that is gone, for ever): the run fails with the CLI's last words, and its
    /// processes are stopped. Messages written to it stay pending for a resume.
    async fn stuck(&mut self) -> Result<(), Cancelled> {
        let last = self.errors.last.take().unwrap_or_default();
        let limit = humantime::format_duration(self.config.error_loop_limit);
        let error = format!("{last} (the agent reported only errors for {limit}; stopped)");
        tracing::warn!(id = %self.id, %error, "agent stuck in an error loop");
        let unanswered = std::mem::take(&mut self.in_flight);
        if !unanswered.is_empty() {
            self.requeue(unanswered);
        }
        let end = RunEnd::Failed {
            error: error.clone(),
            reason: EndReason::Errored { message: error },
        };
        self.stop_with(end, false).await?;
        Ok(())
    }

    /// The run has used up a budget (`reason` says which): its CLI is interrupted, then killed
    /// after the kill grace, and the run fails with `reason`. Messages written to it stay
    /// pending for a resume.
    async fn over_budget(&mut self, reason: EndReason) -> Result<(), Cancelled> {
        let error = reason.short();
        tracing::info!(id = %self.id, %error, "agent stopped at its budget");
        let unanswered = std::mem::take(&mut self.in_flight);
        if !unanswered.is_empty() {
            self.requeue(unanswered);
        }
        self.session.cancel().await;
        self.stop_with(RunEnd::Failed { error, reason }, false)
            .await?;
        Ok(())
    }

    /// A cancel is served at once; a queued message waits for the turn's end.
    async fn on_control(&mut self, control: Option<Control>) -> Result<(), Cancelled> {
        if let Some(Control::Cancel(ack)) = control {
            self.session.cancel().await;
            self.settle_worktree().await;
            let _ = ack.send(());
            return Err(Cancelled);
        }
        Ok(())
    }

    /// Applies `event`; the budget it used up, if it did.
    fn record_event(&mut self, event: AgentEvent) -> Option<EndReason> {
        if let AgentEvent::Init { session_id, .. } = &event {
            self.record.set_session_id(session_id.clone());
            // In its state too, so its record holds what resumes it after this process.
            let _ = self
                .registry
                .update(&self.id, |current| match &current.kind {
                    TaskKind::Agent(agent) if agent.session_id.as_ref() != Some(session_id) => {
                        edit_agent(current, |agent| agent.session_id = Some(session_id.clone()))
                    }
                    _ => None,
                });
        }
        if let AgentEvent::Error { message } = &event {
            self.surface_error(message);
            return None;
        }
        if self.errors.clear() {
            self.clear_shown_error();
        }
        let change = self.tracker.apply(&event);
        if change == Change::None {
            return None;
        }
        let response = matches!(event, AgentEvent::Usage(_));
        let text = match &event {
            AgentEvent::Text(text) => Some(text.as_str()),
            _ => None,
        };
        let cap = self.config.display_messages;
        let tracker = &self.tracker;
        let mut turns = 0;
        let _ = self.registry.update(&self.id, |current| {
            edit_agent(current, |agent| {
                agent.progress = tracker.merged_into(&agent.progress);
                if let Some(budget) = agent.budget.as_mut().filter(|_| response) {
                    budget.turns_used += 1;
                }
                turns = agent.budget.map_or(0, |budget| budget.turns_used);
                if let Some(text) = text {
                    agent
                        .messages
                        .push(json!({"role": "assistant", "content": text}));
                    let excess = agent.messages.len().saturating_sub(cap);
                    agent.messages.drain(..excess);
                }
            })
        });
        if change == Change::ToolUse
            && let Some(state) = self.registry.get(&self.id)
        {
            let detail = self.tracker.event_detail(
                &state.base.description,
                &self.record.spec.agent_type,
                self.elapsed_ms(),
            );
            self.registry.emit_progress(&self.id, detail);
        }
        if !response {
            return None;
        }
        let tokens = self.tracker.progress().token_count;
        self.budget.check(self.id, self.run, tokens, turns)
    }

    /// An error the CLI reported while it runs: shown in the state (`error`, until the CLI
    /// reports something else) and as a `task_progress` event whose description is the CLI's
    /// words; counted towards the error loop limit.
    fn surface_error(&mut self, message: &str) {
        self.errors.record(message);
        tracing::debug!(id = %self.id, message, "agent CLI reported an error");
        let _ = self.registry.update(&self.id, |current| {
            edit_agent(current, |agent| agent.error = Some(message.to_owned()))
        });
        if let Some(state) = self.registry.get(&self.id) {
            let mut detail = self.tracker.event_detail(
                &state.base.description,
                &self.record.spec.agent_type,
                self.elapsed_ms(),
            );
            detail.insert("description".into(), json!(message));
            detail.insert("error".into(), json!(message));
            self.registry.emit_progress(&self.id, detail);
        }
    }

    /// The CLI is past its errors: the state stops showing the last one.
    fn clear_shown_error(&self) {
        let _ = self.registry.update(&self.id, |current| {
            edit_agent(current, |agent| agent.error = None)
        });
    }

    /// After a turn: deliver queued messages as the next turn (returns `false`), or stop the
    /// agent once its own tasks are done (returns `true`).
    async fn after_turn(&mut self) -> Result<bool, Cancelled> {
        // Once a delivery failed (the CLI closed its input), queued messages stay pending for a
        // resume instead of being retried.
        let mut deliverable = true;
        loop {
            if deliverable && let Some(messages) = self.take_pending() {
                match self.session.send(&messages.join("\n\n")).await {
                    Ok(()) => {
                        self.in_flight = messages;
                        self.tracker.start_turn();
                        return Ok(false);
                    }
                    Err(error) => {
                        tracing::warn!(id = %self.id, %error, "queued message not delivered");
                        self.requeue(messages);
                        deliverable = false;
                    }
                }
            }
            while let Wait::MessageQueued = self.wait_for_own_tasks().await? {
                if deliverable {
                    break;
                }
            }
            if deliverable && self.has_pending() {
                continue;
            }
            let end = self.outcome_end();
            if let Stopped::Done = self.stop_with(end, deliverable).await? {
                return Ok(true);
            }
        }
    }

    fn has_pending(&self) -> bool {
        self.registry.get(&self.id).is_some_and(|state| {
            matches!(&state.kind, TaskKind::Agent(agent) if !agent.pending_messages.is_empty())
        })
    }

    /// Ends the run with `end`, unless `yield_to_messages` and a message was queued meanwhile
    /// (the caller then delivers it). A run the kill already ended waits for the kill's cancel.
    async fn stop_with(
        &mut self,
        end: RunEnd,
        yield_to_messages: bool,
    ) -> Result<Stopped, Cancelled> {
        let record = Arc::clone(&self.record);
        let _serialised = record.lifecycle.lock().await;
        // Decided before the end is recorded, so that its notification (written with the end)
        // names the worktree only if it is kept.
        let unchanged = unchanged_worktree(Arc::clone(&self.registry), self.id).await;
        match self.try_end(&end, yield_to_messages, unchanged.is_some()) {
            EndAttempt::Ended(state) => {
                self.finish(&state, &end, unchanged).await;
                Ok(Stopped::Done)
            }
            EndAttempt::MessageQueued => Ok(Stopped::MessageQueued),
            EndAttempt::AlreadyOver => {
                self.await_cancel().await;
                Err(Cancelled)
            }
        }
    }

    /// `drop_worktree`: the worktree is unchanged and goes; the ended state no longer names it.
    fn try_end(&self, end: &RunEnd, yield_to_messages: bool, drop_worktree: bool) -> EndAttempt {
        let mut queued = false;
        let tracker = &self.tracker;
        let status = TaskStatus::from(end.status());
        let outcome = self.registry.update(&self.id, |current| {
            if current.status().is_terminal() {
                return None;
            }
            let TaskKind::Agent(agent) = &current.kind else {
                return None;
            };
            if yield_to_messages && !agent.pending_messages.is_empty() {
                queued = true;
                return None;
            }
            let mut next = current.clone();
            next.base.status = status;
            if let TaskKind::Agent(agent) = &mut next.kind {
                agent.process = None;
                if drop_worktree {
                    agent.worktree = None;
                }
                agent.progress = tracker.merged_into(&agent.progress);
                match end {
                    RunEnd::Finished(result) => {
                        agent.result.clone_from(result);
                        agent.error = None;
                    }
                    RunEnd::Failed { error, .. } => agent.error = Some(error.clone()),
                }
            }
            next.base.end_reason = Some(end.reason());
            Some(next)
        });
        match outcome {
            Ok(UpdateOutcome::Written(state)) => EndAttempt::Ended(state),
            _ if queued => EndAttempt::MessageQueued,
            _ => EndAttempt::AlreadyOver,
        }
    }

    /// The run is over in the registry: let the CLI exit, notify, clean up its orphans, remove
    /// its worktree if `unchanged` names it.
    async fn finish(&mut self, state: &TaskState, end: &RunEnd, unchanged: Option<Worktree>) {
        self.session.close_input().await;
        let drained = tokio::time::timeout(self.config.kill_grace, async {
            while !matches!(self.session.next_event().await, SessionEvent::Ended(_)) {}
        })
        .await;
        if drained.is_err() {
            self.session.cancel().await;
        }
        self.record.close_control(self.run);
        let usage = AgentUsage {
            subagent_tokens: self.tracker.progress().token_count,
            tool_uses: self.tracker.progress().tool_use_count,
            duration_ms: self.elapsed_ms(),
            agent_count: None,
        };
        let notification = agent_notification(state, end, usage, self.record.runner.resumes());
        self.registry
            .notify_once(&self.id, notification, self.record.delivery());
        self.registry.kill_tasks_for_agent(self.id).await;
        // After the notice, which the end's record waits for.
        if let Some(worktree) = unchanged {
            let worktrees = Arc::clone(&self.worktrees);
            remove_worktree(Arc::clone(&self.registry), worktrees, self.id, worktree).await;
        }
    }

    /// Its processes are gone: its worktree, if unchanged, goes (see
    /// [`settle_worktree`](crate::worktree::settle_worktree)). Returns its state after that.
    fn settle_worktree(&self) -> impl Future<Output = ()> + Send + use<> {
        let registry = Arc::clone(&self.registry);
        let worktrees = Arc::clone(&self.worktrees);
        let id = self.id;
        let settled = tokio::task::spawn_blocking(move || {
            crate::worktree::settle_worktree(&registry, &worktrees, &id)
        });
        async move {
            let _ = settled.await;
        }
    }

    async fn await_cancel(&mut self) {
        while let Some(control) = self.control.recv().await {
            if self.on_control(Some(control)).await.is_err() {
                return;
            }
        }
    }

    /// Waits until no task owned by this agent is running; a queued message interrupts.
    async fn wait_for_own_tasks(&mut self) -> Result<Wait, Cancelled> {
        let mut events = self.registry.subscribe();
        let mut announced = false;
        loop {
            let live = self.live_tasks();
            if live == 0 {
                return Ok(Wait::Clear);
            }
            if !announced {
                announced = true;
                self.announce_wait(live);
            }
            tokio::select! {
                biased;
                control = self.control.recv() => {
                    self.on_control(control).await?;
                    return Ok(Wait::MessageQueued);
                }
                event = events.recv() => {
                    if let Err(RecvError::Closed) = event {
                        return Ok(Wait::Clear);
                    }
                }
            }
        }
    }

    /// How many tasks this agent owns that are still running or waiting (queued ones too).
    fn live_tasks(&self) -> usize {
        self.registry.live_tasks_of(self.id).len()
    }

    /// A `task_progress` saying the turn is over but the agent waits for its own tasks.
    fn announce_wait(&self, live: usize) {
        let Some(state) = self.registry.get(&self.id) else {
            return;
        };
        let mut detail = self.tracker.event_detail(
            &state.base.description,
            &self.record.spec.agent_type,
            self.elapsed_ms(),
        );
        let plural = if live == 1 { "" } else { "s" };
        detail.insert(
            "description".into(),
            json!(format!("Waiting for {live} background task{plural}")),
        );
        detail.insert("waiting_tasks".into(), json!(live));
        self.registry.emit_progress(&self.id, detail);
    }

    /// Takes the queued messages out of the state, atomically.
    fn take_pending(&self) -> Option<Vec<String>> {
        let mut taken = Vec::new();
        let _ = self.registry.update(&self.id, |current| {
            taken.clear();
            edit_agent(current, |agent| {
                taken = std::mem::take(&mut agent.pending_messages);
            })
            .filter(|_| !taken.is_empty())
        });
        (!taken.is_empty()).then_some(taken)
    }

    fn requeue(&self, messages: Vec<String>) {
        let _ = self.registry.update(&self.id, |current| {
            edit_agent(current, |agent| {
                let mut all = messages.clone();
                all.append(&mut agent.pending_messages);
                agent.pending_messages = all;
            })
        });
    }

    fn outcome_end(&self) -> RunEnd {
        match self.tracker.outcome() {
            Some(outcome @ TurnOutcome::Error { .. }) => {
                let message = outcome.error_text().unwrap_or_default();
                RunEnd::Failed {
                    error: message.clone(),
                    reason: EndReason::Errored { message },
                }
            }
            _ => RunEnd::Finished(self.tracker.result_text()),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

enum EndAttempt {
    Ended(std::sync::Arc<TaskState>),
    MessageQueued,
    AlreadyOver,
}

/// `current` with its agent data edited by `edit`; `None` if it is not an agent.
fn edit_agent(current: &TaskState, edit: impl FnOnce(&mut AgentState)) -> Option<TaskState> {
    let mut next = current.clone();
    match &mut next.kind {
        TaskKind::Agent(agent) => edit(agent),
        _ => return None,
    }
    Some(next)
}

/// The failure of a CLI that exited without ending its turn: its exit code, the error it
/// reported last (if the errors were the last thing it reported) and its last stderr lines.
fn crashed(end: &SessionEnd, last_error: Option<&str>) -> RunEnd {
    let code = end
        .exit_code
        .map_or_else(|| "unknown".to_owned(), |c| c.to_string());
    let mut error = format!("agent exited with code {code} without a result");
    if let Some(last_error) = last_error {
        error.push_str(": ");
        error.push_str(last_error);
    }
    if let Some(first) = &end.stderr_first {
        error.push_str(": ");
        error.push_str(first);
        error.push_str(" …");
    }
    if !end.stderr_tail.is_empty() {
        error.push_str(if end.stderr_first.is_some() {
            " "
        } else {
            ": "
        });
        error.push_str(&end.stderr_tail.join(" / "));
    }
    RunEnd::Failed {
        error,
        reason: end
            .exit_code
            .map_or(EndReason::Exited { code: -1 }, |code| EndReason::Exited {
                code,
            }),
    }
}

/// Sleeps until `deadline` (at once when it is `None`; the caller does not poll it then).
async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
    }
}

/// Its worktree, if it runs in one that holds no changes.
async fn unchanged_worktree(registry: Arc<Registry>, id: TaskId) -> Option<Worktree> {
    let worktree = match registry.get(&id).as_deref().map(|state| &state.kind) {
        Some(TaskKind::Agent(agent)) => agent.worktree.clone()?,
        _ => return None,
    };
    let checked = worktree.clone();
    let changes = tokio::task::spawn_blocking(move || task_worktree::changes(&checked)).await;
    match changes {
        Ok(Ok(changes)) if !changes.any() => Some(*worktree),
        Ok(Ok(_)) => None,
        Ok(Err(error)) => {
            tracing::warn!(%id, %error, "worktree kept: its changes are unknown");
            None
        }
        Err(error) => {
            tracing::warn!(%id, %error, "worktree kept: its check did not run");
            None
        }
    }
}

/// Removes the worktree found unchanged at the end; if it changed since (the CLI wrote
/// something on its way out), it is kept and named in the state again.
async fn remove_worktree(
    registry: Arc<Registry>,
    worktrees: Arc<Worktrees>,
    id: TaskId,
    worktree: Worktree,
) {
    let removed = {
        let worktree = worktree.clone();
        tokio::task::spawn_blocking(move || worktrees.remove_unchanged(&worktree))
            .await
            .unwrap_or(false)
    };
    if !removed {
        let _ = registry.update(&id, |current| {
            edit_agent(current, |agent| {
                agent.worktree = Some(Box::new(worktree.clone()))
            })
        });
    }
}
