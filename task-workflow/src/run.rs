//! The tokio side of a run: it answers the script's calls (agents through the agent executor,
//! at most `concurrency` at once, unchanged calls from the previous run's journal), reports
//! progress, and ends the task with the run's record, summary and notification.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::{Value, json};
use task_core::{
    AgentExtras, AgentUsage, Delivery, EndReason, Notification, Priority, Registry, TaskEvent,
    TaskId, TaskKind, TaskState, TaskStatus, TerminalStatus, now_ms,
};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, oneshot};

use super::config::{WORKFLOW_AGENT_TYPE, WorkflowConfig};
use super::engine::{AgentCall, ToHost, ToScript};
use super::files::{RunPaths, write_file};
use super::journal::{Journal, JournalRecord, call_key};
use super::meta::Meta;
use super::progress::{AgentEntry, AgentStage, Book, preview};
use task_agent::AgentRunner;
use task_agent::{AgentExecutor, AgentRequest};

/// What a run's agents inherit from its starter.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inherited {
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub(crate) replace_env: bool,
}

/// What a run's record repeats of its start.
#[derive(Debug, Clone)]
pub(crate) struct RunOrigin {
    pub(crate) script: String,
    pub(crate) script_path: PathBuf,
    pub(crate) meta: Meta,
    pub(crate) start_time: u64,
    pub(crate) resumed_from: Option<String>,
}

/// One live run.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) registry: Arc<Registry>,
    pub(crate) agents: AgentExecutor,
    pub(crate) runner: Arc<dyn AgentRunner>,
    pub(crate) config: WorkflowConfig,
    pub(crate) id: TaskId,
    pub(crate) run_id: String,
    pub(crate) paths: RunPaths,
    pub(crate) output_file: PathBuf,
    pub(crate) origin: RunOrigin,
    pub(crate) inherited: Inherited,
    pub(crate) journal: Journal,
    /// The previous run's results, by key.
    pub(crate) cache: HashMap<String, (String, Value)>,
    pub(crate) book: Mutex<Book>,
    /// How many identical calls were made so far, by their first key.
    pub(crate) seen: Mutex<HashMap<String, u32>>,
    /// The run's agent slots (`concurrency` of them).
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) stopped: Arc<AtomicBool>,
    /// Set when the run ends (stopped, or its script finished): no agent starts after it.
    pub(crate) closed: AtomicBool,
    /// Held while an agent is being started, so closing never misses one.
    pub(crate) gate: tokio::sync::Mutex<()>,
    pub(crate) to_script: std::sync::mpsc::Sender<ToScript>,
    pub(crate) spent: Arc<AtomicU64>,
    pub(crate) started: Instant,
}

impl Run {
    /// Answers the script until it finishes.
    pub(crate) async fn drive(self: Arc<Self>, mut from_script: UnboundedReceiver<ToHost>) {
        let mut calls = tokio::task::JoinSet::new();
        let tickets = spawn_dispatcher(Arc::clone(&self.slots));
        while let Some(message) = from_script.recv().await {
            match message {
                ToHost::Agent(call) => {
                    // Keyed, listed and queued for a slot in call order; answered concurrently.
                    let key = self.accept(&call);
                    let slot = (!self.cache.contains_key(&key)).then(|| {
                        let (ticket, slot) = oneshot::channel();
                        let _ = tickets.send(ticket);
                        slot
                    });
                    let run = Arc::clone(&self);
                    calls.spawn(async move { run.answer(call, key, slot).await });
                }
                ToHost::Phase(title) => {
                    let steps = {
                        let mut book = self.book();
                        book.enter_phase(&title);
                        book.steps()
                    };
                    self.update_state(|state| {
                        state.phase = Some(title.clone());
                        state.steps = steps.clone();
                    });
                }
                ToHost::Log(message) => self.book().logs.push(message),
                ToHost::Finished(outcome) => {
                    if !self.stopped.load(Ordering::SeqCst) {
                        // Calls the script never awaited end with it.
                        self.close().await;
                        calls.abort_all();
                        self.finish(outcome);
                    }
                    return;
                }
            }
        }
    }

    /// Stops the run: the script, and every agent it started (none starts after this).
    pub(crate) async fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = self.to_script.send(ToScript::Stop);
        self.close().await;
        self.write_record("killed", &Value::Null, None);
    }

    /// Ends every agent of the run, and lets no other start: calls still queued for a slot
    /// (the slots the killed agents free) find the run closed. Waits for the start under way,
    /// if any, so that its agent is among those killed.
    async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        drop(self.gate.lock().await);
        self.registry.kill_tasks_for_agent(self.id).await;
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a new call (its progress entry) and returns its key.
    fn accept(&self, call: &AgentCall) -> String {
        let key = self.key(call);
        let label = call
            .opts
            .get("label")
            .and_then(Value::as_str)
            .map_or_else(|| default_label(&call.prompt), str::to_owned);
        let model = call
            .opts
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| self.config.default_model.clone());
        let phase = call.opts.get("phase").and_then(Value::as_str);
        let entry = self
            .book()
            .add_agent(call.call, label, phase, model, &call.prompt, now_ms());
        self.report(&entry);
        key
    }

    /// One `agent()` call: from the journal, or a new agent; the script gets its value.
    async fn answer(
        &self,
        call: AgentCall,
        key: String,
        slot: Option<oneshot::Receiver<OwnedSemaphorePermit>>,
    ) {
        let index = call.call;
        let value = match self.cache.get(&key) {
            Some((agent_id, result)) => {
                self.replay(index, &key, agent_id, result);
                Some(result.clone())
            }
            None => match slot {
                Some(slot) => match slot.await {
                    Ok(_permit) => self.run_agent(&call, &key).await,
                    Err(_) => None,
                },
                None => None,
            },
        };
        self.update_state(|state| state.agent_count = state.agent_count.max(index));
        let _ = self.to_script.send(ToScript::Settle {
            call: index,
            value: value.unwrap_or(Value::Null),
        });
    }

    /// The call's key; identical calls get successive occurrences.
    fn key(&self, call: &AgentCall) -> String {
        let first = call_key(&call.prompt, &call.opts, 0);
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let occurrence = seen.entry(first).or_insert(0);
        let key = call_key(&call.prompt, &call.opts, *occurrence);
        *occurrence += 1;
        key
    }

    /// A call the previous run answered: journaled again, reported done at once, no agent.
    fn replay(&self, index: u64, key: &str, agent_id: &str, result: &Value) {
        self.journal.append(&JournalRecord::Started {
            key: key.to_owned(),
            agent_id: agent_id.to_owned(),
        });
        self.journal.append(&JournalRecord::Result {
            key: key.to_owned(),
            agent_id: agent_id.to_owned(),
            result: result.clone(),
        });
        let now = now_ms();
        let entry = self.book().update(index, |entry| {
            entry.agent_id = Some(agent_id.to_owned());
            entry.state = AgentStage::Done;
            entry.started_at = Some(now);
            entry.attempt = Some(1);
            entry.last_progress_at = now;
            entry.tokens = Some(0);
            entry.tool_calls = Some(0);
            entry.duration_ms = Some(0);
            entry.result_preview = Some(result_preview(result));
        });
        if let Some(entry) = entry {
            self.report(&entry);
        }
    }

    /// Starts an agent for the call and waits for its end; its value (`None` if it failed).
    async fn run_agent(&self, call: &AgentCall, key: &str) -> Option<Value> {
        let schema = call.opts.get("schema").filter(|s| s.is_object()).cloned();
        let gate = self.gate.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        let label = self
            .book()
            .update(call.call, |_| {})
            .map(|e| e.label)
            .unwrap_or_default();
        let budget = budget_of(&call.opts);
        // A time budget is a batch job's time limit too.
        let limit = budget
            .and_then(|budget| budget.timeout_ms)
            .map(std::time::Duration::from_millis);
        let placed = super::engine::placement_of(&call.opts).and_then(|placement| {
            task_agent::placed_runner(
                &self.agents.engines(),
                Arc::clone(&self.runner),
                placement,
                limit,
            )
            .map_err(|error| error.to_string())
        });
        let runner = match placed {
            Ok(runner) => runner,
            Err(error) => {
                tracing::warn!(run = %self.run_id, %error, "a workflow agent could not be placed");
                return None;
            }
        };
        let mut request = AgentRequest::new(runner, label, call.prompt.clone());
        request.agent_type = Some(
            call.opts
                .get("agentType")
                .and_then(Value::as_str)
                .unwrap_or(WORKFLOW_AGENT_TYPE)
                .to_owned(),
        );
        request.model = call
            .opts
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        request.cwd.clone_from(&self.inherited.cwd);
        request.env.clone_from(&self.inherited.env);
        request.replace_env = self.inherited.replace_env;
        request.owner_agent_id = Some(self.id);
        request.transcript_dir = Some(self.paths.dir.clone());
        request.spawn_depth = Some(1);
        request.silent = true;
        request.json_schema = schema.as_ref().map(Value::to_string);
        request.budget = budget;
        if call.opts.get("isolation").and_then(Value::as_str) == Some("worktree") {
            request.worktree = Some(task_agent::WorktreeRequest::default());
        }
        let mut events = self.registry.subscribe();
        let pending = match self.agents.register(request) {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(run = %self.run_id, %error, "a workflow agent could not be registered");
                return None;
            }
        };
        let agent_id = pending.id();
        self.journal.append(&JournalRecord::Started {
            key: key.to_owned(),
            agent_id: agent_id.to_string(),
        });
        let started_at = now_ms();
        let entry = self.book().update(call.call, |entry| {
            entry.agent_id = Some(agent_id.to_string());
            entry.started_at = Some(started_at);
            entry.attempt = Some(1);
            entry.last_progress_at = started_at;
        });
        if let Some(entry) = entry {
            self.report(&entry);
        }
        if let Err(error) = pending.start().await {
            tracing::warn!(run = %self.run_id, %error, "a workflow agent did not start");
        }
        drop(gate);
        let ended = self.wait_for(call.call, agent_id, &mut events).await;
        let value = ended
            .as_deref()
            .and_then(|state| agent_value(state, schema.as_ref()));
        if let Some(result) = &value {
            self.journal.append(&JournalRecord::Result {
                key: key.to_owned(),
                agent_id: agent_id.to_string(),
                result: result.clone(),
            });
        }
        let (tokens, tool_calls, output) = ended.as_deref().map_or((0, 0, 0), usage_of);
        self.spent.fetch_add(output, Ordering::Relaxed);
        let now = now_ms();
        let entry = {
            let mut book = self.book();
            book.total_tokens += tokens;
            book.total_tool_calls += tool_calls;
            book.update(call.call, |entry| {
                entry.state = AgentStage::Done;
                entry.last_progress_at = now;
                entry.tokens = Some(tokens);
                entry.tool_calls = Some(tool_calls);
                entry.duration_ms = Some(now.saturating_sub(started_at));
                entry.result_preview = value.as_ref().map(result_preview);
            })
        };
        self.update_state(|state| {
            state.total_tokens += tokens;
            state.total_tool_calls += tool_calls;
        });
        if let Some(entry) = entry {
            self.report(&entry);
        }
        value
    }

    /// Follows agent `agent_id` (call `index`) to its end, reporting its progress; its final
    /// state (`None` if it left the registry unseen).
    async fn wait_for(
        &self,
        index: u64,
        agent_id: TaskId,
        events: &mut broadcast::Receiver<TaskEvent>,
    ) -> Option<Arc<TaskState>> {
        loop {
            let state = self.registry.get(&agent_id)?;
            if state.status().is_terminal() {
                return Some(state);
            }
            match events.recv().await {
                Ok(TaskEvent::TaskProgress { task_id, .. }) if task_id == agent_id => {
                    let (tokens, tool_calls, _) = usage_of(&state);
                    let now = now_ms();
                    let entry = self.book().update(index, |entry| {
                        entry.state = AgentStage::Progress;
                        entry.last_progress_at = now;
                        entry.tokens = Some(tokens);
                        entry.tool_calls = Some(tool_calls);
                    });
                    if let Some(entry) = entry {
                        self.report(&entry);
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// A `task_progress` event for a changed entry, and the task's steps brought up to date.
    fn report(&self, entry: &AgentEntry) {
        let elapsed = millis_since(self.started);
        let (detail, steps) = {
            let mut book = self.book();
            let detail = book.progress_detail(entry, &self.origin.meta.description, elapsed);
            (detail, book.steps())
        };
        self.update_state(|state| state.steps = steps.clone());
        self.registry.emit_progress(&self.id, detail);
    }

    fn update_state(&self, change: impl Fn(&mut task_core::WorkflowState)) {
        let _ = self.registry.update(&self.id, |current| {
            let mut next = current.clone();
            match &mut next.kind {
                TaskKind::Workflow(state) => {
                    change(state);
                    Some(next)
                }
                _ => None,
            }
        });
    }

    /// The script ended: summary, record, status, notification.
    fn finish(&self, outcome: Result<Value, String>) {
        let duration_ms = millis_since(self.started);
        let (status, result, error) = match outcome {
            Ok(value) => (TaskStatus::Completed, value, None),
            Err(error) => (TaskStatus::Failed, Value::Null, Some(error)),
        };
        let (summary, usage) = {
            let mut book = self.book();
            book.close();
            let steps = book.steps();
            self.update_state(|state| state.steps = steps.clone());
            let summary = json!({
                "summary": self.origin.meta.description,
                "agentCount": book.agent_count(),
                "logs": book.logs,
                "result": result,
                "workflowProgress": book.workflow_progress(),
                "totalTokens": book.total_tokens,
                "totalToolCalls": book.total_tool_calls,
            });
            let usage = AgentUsage {
                subagent_tokens: book.total_tokens,
                tool_uses: book.total_tool_calls,
                duration_ms,
                agent_count: Some(book.agent_count()),
            };
            (summary, usage)
        };
        let pretty = serde_json::to_string_pretty(&summary).unwrap_or_default();
        if let Err(error) = write_file(&self.output_file, pretty.as_bytes()) {
            tracing::warn!(run = %self.run_id, %error, "the workflow summary could not be written");
        }
        let status_name = if error.is_some() {
            "failed"
        } else {
            "completed"
        };
        self.write_record(status_name, &result, error.as_deref());
        let reason = match &error {
            None => EndReason::Succeeded,
            Some(message) => EndReason::Errored {
                message: first_line(message),
            },
        };
        let Ok(state) = self.registry.transition_with(&self.id, status, |state| {
            state.base.end_reason = Some(reason.clone());
        }) else {
            return;
        };
        let description = &self.origin.meta.description;
        let (terminal, summary_text, result_text) = match &error {
            None => (
                TerminalStatus::Completed,
                format!("Dynamic workflow \"{description}\" completed"),
                Some(result.to_string()),
            ),
            Some(message) => (
                TerminalStatus::Failed,
                format!(
                    "Dynamic workflow \"{description}\" failed: {}",
                    first_line(message)
                ),
                None,
            ),
        };
        let notification = Notification {
            agent: Some(AgentExtras {
                note: None,
                result: result_text,
                usage: Some(usage),
                worktree: None,
            }),
            ..Notification::for_task(&state, Some(terminal), summary_text)
        };
        self.registry
            .notify_once(&self.id, notification, Delivery::Queue(Priority::Later));
    }

    /// Writes the run record `workflows/{runId}.json`.
    pub(crate) fn write_record(&self, status: &str, result: &Value, error: Option<&str>) {
        let record = {
            let book = self.book();
            let mut record = json!({
                "runId": self.run_id,
                "timestamp": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
                "taskId": self.id,
                "script": self.origin.script,
                "scriptPath": self.origin.script_path,
                "result": result,
                "agentCount": book.agent_count(),
                "logs": book.logs,
                "durationMs": millis_since(self.started),
                "summary": self.origin.meta.description,
                "workflowName": self.origin.meta.name,
                "status": status,
                "startTime": self.origin.start_time,
                "phases": book.phases(),
                "defaultModel": self.config.default_model,
                "workflowProgress": book.workflow_progress(),
                "totalTokens": book.total_tokens,
                "totalToolCalls": book.total_tool_calls,
            });
            if let Some(previous) = &self.origin.resumed_from {
                record["resumedFrom"] = json!(previous);
            }
            if let Some(error) = error {
                record["error"] = json!(error);
            }
            record
        };
        let text = serde_json::to_string(&record).unwrap_or_default();
        if let Err(error) = write_file(&self.paths.record, text.as_bytes()) {
            tracing::warn!(run = %self.run_id, %error, "the workflow record could not be written");
        }
    }
}

/// Hands out agent slots in the order calls were queued (a bare semaphore would serve
/// whichever call's task polls first).
fn spawn_dispatcher(
    slots: Arc<Semaphore>,
) -> tokio::sync::mpsc::UnboundedSender<oneshot::Sender<OwnedSemaphorePermit>> {
    let (tickets, mut queue) =
        tokio::sync::mpsc::unbounded_channel::<oneshot::Sender<OwnedSemaphorePermit>>();
    tokio::spawn(async move {
        while let Some(ticket) = queue.recv().await {
            let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            // A call that went away (the run ended) gives its slot straight back.
            let _ = ticket.send(permit);
        }
    });
    tickets
}

/// The budgets an `agent()` call's `opts` ask for: `maxTurns`, `maxTokens` and `timeout` (ms,
/// as the reference's Bash tool counts its own), if any.
fn budget_of(opts: &Value) -> Option<task_core::AgentBudget> {
    let limit = |name: &str| opts.get(name).and_then(Value::as_u64).filter(|n| *n > 0);
    let budget = task_core::AgentBudget {
        max_tokens: limit("maxTokens"),
        max_turns: limit("maxTurns"),
        timeout_ms: limit("timeout"),
        turns_used: 0,
    };
    (!budget.is_unlimited()).then_some(budget)
}

/// What `agent()` returns for an ended agent: its final text, or with a schema the object it
/// returned if valid; `None` when it failed, was stopped, or broke the schema.
fn agent_value(state: &TaskState, schema: Option<&Value>) -> Option<Value> {
    if state.status() != TaskStatus::Completed {
        return None;
    }
    let TaskKind::Agent(agent) = &state.kind else {
        return None;
    };
    let text = agent.result.clone()?;
    let Some(schema) = schema else {
        return Some(Value::String(text));
    };
    let value: Value = match serde_json::from_str(strip_fence(&text)) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(agent = %state.id(), %error, "structured output is not JSON");
            return None;
        }
    };
    match jsonschema::validator_for(schema) {
        Ok(validator) if validator.is_valid(&value) => Some(value),
        Ok(validator) => {
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            tracing::warn!(agent = %state.id(), ?errors, "structured output does not match its schema");
            None
        }
        Err(error) => {
            tracing::warn!(agent = %state.id(), %error, "opts.schema is not a valid JSON Schema");
            None
        }
    }
}

/// A JSON answer without a Markdown code fence around it.
fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .map_or(trimmed, str::trim)
}

/// (tokens, tool calls, output tokens) of an agent.
fn usage_of(state: &TaskState) -> (u64, u64, u64) {
    match &state.kind {
        TaskKind::Agent(agent) => (
            agent.progress.token_count,
            agent.progress.tool_use_count,
            agent.progress.cumulative_output_tokens,
        ),
        _ => (0, 0, 0),
    }
}

fn result_preview(result: &Value) -> String {
    match result {
        Value::String(text) => preview(text),
        other => preview(&other.to_string()),
    }
}

fn default_label(prompt: &str) -> String {
    prompt
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect()
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

fn millis_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
