//! The poll loop of one remote task: every tick, the session's status, then its new events
//! (appended to the output file), then the completion rules of SPEC §11.

use std::sync::Arc;
use std::time::Duration;

use agent_stream::format::{ClaudeParser, LineParser};
use agent_stream::{AgentEvent, TurnOutcome};
use serde_json::{Map, Value};
use task_core::{RemoteState, RemoteSubtype, TaskId, TaskKind};

use super::{RemoteExecutor, Run};
use crate::api::{SessionStatus, event_id};
use crate::backoff::Backoff;
use crate::error::ApiError;
use crate::eventlog::EventLog;
use crate::notify::RemoteEnd;

/// The poll loop of one task.
pub(crate) struct Follow {
    executor: RemoteExecutor,
    id: TaskId,
    run: Arc<Run>,
    log: EventLog,
    cursor: Option<String>,
    /// How the turn ended, if the last event logged was a `result`.
    last_result: Option<TurnOutcome>,
    idle_polls: u32,
    backoff: Backoff,
}

impl Follow {
    pub(crate) fn new(
        executor: RemoteExecutor,
        id: TaskId,
        run: Arc<Run>,
        last_event: Option<Map<String, Value>>,
    ) -> Self {
        let config = &executor.inner.config;
        let backoff = Backoff::new(config.backoff_base, config.backoff_cap);
        let log = match executor.inner.registry.get(&id) {
            Some(state) => EventLog::new(&state.base.output_file),
            None => EventLog::new(std::path::PathBuf::new()),
        };
        Follow {
            executor,
            id,
            run,
            log,
            cursor: last_event
                .as_ref()
                .and_then(|event| event_id(event).map(str::to_owned)),
            last_result: last_event.as_ref().and_then(turn_end),
            idle_polls: 0,
            backoff,
        }
    }

    /// Polls until the task ends or is killed.
    pub(crate) async fn run(mut self) {
        let mut delay = Duration::ZERO;
        loop {
            tokio::select! {
                () = self.run.stop.notified() => return,
                () = tokio::time::sleep(delay) => {}
            }
            let live = self
                .executor
                .inner
                .registry
                .get(&self.id)
                .is_some_and(|s| !s.status().is_terminal());
            if !live {
                return;
            }
            delay = match self.tick().await {
                Ok(Some(end)) => return self.executor.end(&self.id, end),
                Ok(None) => {
                    self.backoff.succeed();
                    self.executor.inner.config.poll_interval
                }
                Err(error) => match self.fault(error) {
                    Ok(delay) => delay,
                    Err(end) => return self.executor.end(&self.id, end),
                },
            };
        }
    }

    /// A failed tick: the delay before the next one, or the end of the task (an auth failure at
    /// once, a transient fault once it has lasted the outage limit).
    fn fault(&mut self, error: ApiError) -> Result<Duration, RemoteEnd> {
        let limit = self.executor.inner.config.outage_limit;
        if !error.is_transient() {
            return Err(RemoteEnd::Failed(error.to_string()));
        }
        let delay = self.backoff.fail();
        let outage = self.backoff.outage();
        tracing::debug!(task = %self.id, %error, ?delay, "poll failed");
        if outage >= limit {
            return Err(RemoteEnd::Failed(format!(
                "the server was unreachable for {} (last error: {error})",
                task_core::human_duration(outage)
            )));
        }
        Ok(delay)
    }

    /// One tick: `Some(end)` when the task is done.
    async fn tick(&mut self) -> Result<Option<RemoteEnd>, ApiError> {
        let session = self.run.client.status(&self.run.session_id).await?;
        self.drain_events().await?;
        let state = self.remote_state();
        let subtype = state
            .as_ref()
            .map(|s| s.remote_task_type)
            .unwrap_or_default();
        match session.session_status {
            SessionStatus::Archived => {
                return Ok(Some(RemoteEnd::Failed(
                    "the remote session was archived".into(),
                )));
            }
            SessionStatus::Idle => self.idle_polls += 1,
            SessionStatus::Running | SessionStatus::RequiresAction => self.idle_polls = 0,
        }
        if subtype == RemoteSubtype::RemoteAgent
            && session.session_status == SessionStatus::Idle
            && let Some(outcome) = &self.last_result
        {
            return Ok(Some(result_end(outcome)));
        }
        if let Some(state) = &state {
            let checker = self
                .executor
                .inner
                .checkers
                .get(&subtype)
                .map(|c| Arc::clone(c.value()));
            if let Some(checker) = checker
                && let Some(summary) = checker.check(state).await
            {
                return Ok(Some(RemoteEnd::Checked(summary)));
            }
            let timeout = self.executor.inner.config.review_timeout;
            let age = task_core::now_ms().saturating_sub(state.spawned_at);
            if subtype == RemoteSubtype::Ultrareview && Duration::from_millis(age) >= timeout {
                return Ok(Some(RemoteEnd::TimedOut(timeout)));
            }
        }
        if self.idle_polls >= self.executor.inner.config.idle_polls_trusted {
            return Ok(Some(RemoteEnd::Completed(None)));
        }
        self.record_idle_polls();
        Ok(None)
    }

    /// Fetches every page of events after the cursor, appending each page to the log before the
    /// cursor moves past it.
    async fn drain_events(&mut self) -> Result<(), ApiError> {
        loop {
            let page = self
                .run
                .client
                .events(&self.run.session_id, self.cursor.as_deref())
                .await?;
            let fresh = self.skip_seen(page.data);
            if let Some(last) = fresh.last() {
                let cursor = event_id(last).map(str::to_owned).or(page.last_id.clone());
                self.last_result = turn_end(last);
                if let Err(error) = self.log.append(&fresh) {
                    return Err(ApiError::Transient(format!("cannot log events: {error}")));
                }
                self.idle_polls = 0;
                self.cursor = cursor;
                self.record_events(fresh.len());
            }
            if !page.has_more || fresh.is_empty() {
                return Ok(());
            }
        }
    }

    /// Drops events up to and including the cursor, if a server sent them again.
    fn skip_seen(&self, events: Vec<Map<String, Value>>) -> Vec<Map<String, Value>> {
        let Some(cursor) = self.cursor.as_deref() else {
            return events;
        };
        match events.iter().position(|e| event_id(e) == Some(cursor)) {
            Some(seen) => events.into_iter().skip(seen + 1).collect(),
            None => events,
        }
    }

    fn remote_state(&self) -> Option<RemoteState> {
        let state = self.executor.inner.registry.get(&self.id)?;
        match &state.kind {
            TaskKind::Remote(remote) => Some((**remote).clone()),
            _ => None,
        }
    }

    fn record_events(&self, count: usize) {
        let cursor = self.cursor.clone();
        self.update(|remote| {
            remote.last_event_id.clone_from(&cursor);
            remote.events_received += count as u64;
            true
        });
    }

    fn record_idle_polls(&self) {
        let idle = self.idle_polls;
        self.update(|remote| {
            let changed = remote.idle_polls != idle;
            remote.idle_polls = idle;
            changed
        });
    }

    /// Applies `change` to the task's remote data; `change` says whether it changed anything.
    fn update(&self, change: impl Fn(&mut RemoteState) -> bool) {
        let _ = self.executor.inner.registry.update(&self.id, |current| {
            let mut next = current.clone();
            match &mut next.kind {
                TaskKind::Remote(remote) if !current.status().is_terminal() => {
                    change(remote).then_some(next)
                }
                _ => None,
            }
        });
    }
}

/// How the turn ended, if `event` is a `result` (a remote session's events are Claude's
/// stream-json: agent-stream's Claude parser reads them).
fn turn_end(event: &Map<String, Value>) -> Option<TurnOutcome> {
    let line = serde_json::to_vec(event).ok()?;
    let mut events = Vec::new();
    ClaudeParser::default()
        .parse_line(&line, &mut events)
        .ok()?;
    events.into_iter().find_map(|event| match event {
        AgentEvent::TurnEnded(outcome) => Some(outcome),
        _ => None,
    })
}

/// The end a `result` event gives: completed with its text, or failed with it.
fn result_end(outcome: &TurnOutcome) -> RemoteEnd {
    match outcome {
        TurnOutcome::Success { result } => RemoteEnd::Completed(result.clone()),
        failed => RemoteEnd::Failed(failed.error_text().unwrap_or_default()),
    }
}
