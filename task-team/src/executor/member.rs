//! One teammate's loop: its session's events, its mailbox while idle, plan approval, outgoing
//! messages, the end.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use task_core::{AgentProgress, EndReason, TaskId, TaskKind, TaskStatus, TeammateState};
use task_output::mailbox::MailboxReader;
use tokio::sync::{mpsc, oneshot};

use super::{Inner, Member, TeammateEnd, end_silently, request_id};
use crate::{Protocol, TEAM_LEAD, TeamMessage, post, render_turn};
use task_agent::AgentEvent;
use task_agent::budget::RunBudget;
use task_agent::{AgentError, AgentRunner, AgentSpec};
use task_agent::{AgentSession, SessionEnd, SessionEvent};

/// The tool a teammate sends messages with.
const SEND_TOOL: &str = "SendMessage";

/// Where a plan-mode teammate is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// Not in plan mode, or its plan was approved.
    Free,
    /// Its next turn's text is a plan to submit.
    Drafting,
    /// Its plan awaits the lead's answer to this request.
    Awaiting(String),
}

/// A teammate's agent session, and what starts its next one.
pub(super) struct Agent {
    /// The session running now.
    pub(super) session: Box<dyn AgentSession>,
    /// What started it.
    pub(super) runner: Arc<dyn AgentRunner>,
    /// How it was started.
    pub(super) spec: AgentSpec,
}

pub(super) struct MemberRun {
    inner: Arc<Inner>,
    member: Arc<Member>,
    id: TaskId,
    session: Box<dyn AgentSession>,
    runner: Arc<dyn AgentRunner>,
    spec: AgentSpec,
    /// Its session ended after its turn and its runner takes no message while a session runs
    /// (a batch job): it is idle without one, and its next turn resumes the session as a new
    /// run ([`AgentRunner::resume`]).
    between_runs: bool,
    reader: MailboxReader,
    cancel: mpsc::Receiver<oneshot::Sender<()>>,
    plan: Plan,
    /// Messages that arrived while a plan awaited approval, in order.
    held: Vec<TeamMessage>,
    /// A turn is in progress.
    working: bool,
    turn_text: String,
    /// It approved a shutdown: its input is closed and it is ending.
    shutting_down: bool,
    /// The ids of the messages its conversation holds (its transcript's when it was resumed,
    /// and every one handed to it since): a message with one of them is never handed again.
    delivered: HashSet<String>,
    /// The mailbox offset past the turn in progress, committed once that turn ends: a
    /// supervisor killed before then leaves the turn's messages in the mailbox, and the next
    /// one hands on those the transcript does not hold.
    uncommitted: Option<u64>,
    /// Its budgets, from its state ([`TeammateState::budget`]), counted from this run's start.
    budget: RunBudget,
    /// Its tokens in this run, counted as an agent's are.
    usage: AgentProgress,
}

/// Where a teammate's loop starts.
#[derive(Debug)]
pub(super) struct Start {
    /// Its conversation's messages (see [`MemberRun::delivered`]).
    pub(super) delivered: HashSet<String>,
    /// The mailbox offset to commit once the first turn ends (its messages were that turn).
    pub(super) uncommitted: Option<u64>,
    /// Whether it starts in plan mode.
    pub(super) plan_mode: bool,
}

impl MemberRun {
    pub(super) fn new(
        inner: Arc<Inner>,
        member: Arc<Member>,
        id: TaskId,
        agent: Agent,
        reader: MailboxReader,
        cancel: mpsc::Receiver<oneshot::Sender<()>>,
        start: Start,
    ) -> Self {
        let state = inner.registry.get(&id);
        let limits = state.as_ref().and_then(|state| match &state.kind {
            TaskKind::Teammate(teammate) => teammate.budget,
            _ => None,
        });
        // From when this run began (a run its supervisor's death interrupted began then).
        let began = state
            .and_then(|state| state.base.started_at)
            .map_or_else(Instant::now, since);
        let budget = RunBudget::new(limits, Arc::clone(&inner.session_tokens), began);
        MemberRun {
            inner,
            member,
            id,
            session: agent.session,
            runner: agent.runner,
            spec: agent.spec,
            between_runs: false,
            reader,
            cancel,
            plan: if start.plan_mode {
                Plan::Drafting
            } else {
                Plan::Free
            },
            held: Vec::new(),
            working: true,
            turn_text: String::new(),
            shutting_down: false,
            delivered: start.delivered,
            uncommitted: start.uncommitted,
            budget,
            usage: AgentProgress::default(),
        }
    }

    pub(super) async fn run(mut self) {
        let poll = self.inner.config.mailbox_poll;
        let deadline = self.budget.deadline();
        let out_of_time = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(out_of_time);
        loop {
            let idle = !self.working && !self.shutting_down;
            tokio::select! {
                biased;
                ack = self.cancel.recv() => {
                    self.session.cancel().await;
                    self.finish(TeammateEnd::Terminated);
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                    return;
                }
                event = self.session.next_event(), if !self.between_runs => match event {
                    SessionEvent::Ended(end) if self.awaits_next_run(&end) => {
                        tracing::debug!(id = %self.id, "its run ended after its turn; idle until a message resumes it");
                        self.between_runs = true;
                    }
                    SessionEvent::Ended(end) => {
                        self.ended(end.exit_code);
                        return;
                    }
                    SessionEvent::Agent(event) => {
                        if let Some(reason) = self.on_event(event) {
                            self.over_budget(reason).await;
                            return;
                        }
                    }
                },
                () = &mut out_of_time => {
                    let reason = self.budget.timed_out();
                    self.over_budget(reason).await;
                    return;
                }
                () = self.member.wake.notified(), if idle => {}
                () = tokio::time::sleep(poll), if idle => {}
            }
            if self.working {
                continue;
            }
            if self.shutting_down {
                // Its turn with the approving response is over: it ends with its input.
                self.session.close_input().await;
            } else {
                self.deliver().await;
            }
        }
    }

    /// Applies `event`; the budget it used up, if it did.
    fn on_event(&mut self, event: AgentEvent) -> Option<EndReason> {
        match event {
            AgentEvent::Init { session_id, .. } => {
                self.edit(|t| t.session_id = Some(session_id.clone()))
            }
            AgentEvent::Text(text) => self.turn_text.push_str(&text),
            AgentEvent::ToolStarted(tool) if tool.name == SEND_TOOL => self.outgoing(&tool.input),
            AgentEvent::TurnEnded(_) => self.turn_ended(),
            AgentEvent::Usage(usage) => return self.used(task_agent::message_usage(usage)),
            _ => {}
        }
        None
    }

    /// A model response used `usage`: counted in its turns and tokens; the budget that
    /// reaches, if any.
    fn used(&mut self, usage: task_core::MessageUsage) -> Option<EndReason> {
        self.usage.record_usage(usage);
        let mut turns = 0;
        self.edit(|t| {
            if let Some(budget) = t.budget.as_mut() {
                budget.turns_used += 1;
                turns = budget.turns_used;
            }
        });
        self.budget.check(self.id, 1, self.usage.token_count, turns)
    }

    /// It has used up a budget (`reason` says which): it ends `failed` with that reason, its
    /// agent interrupted, then killed after the grace.
    async fn over_budget(&mut self, reason: EndReason) {
        tracing::info!(id = %self.id, reason = %reason.short(), "teammate stopped at its budget");
        end_silently(&self.inner.registry, self.id, TaskStatus::Failed, reason);
        self.session.cancel().await;
        self.shutting_down = true;
        self.finish(TeammateEnd::Terminated);
    }

    /// The turn is over: submit a plan, or go idle.
    fn turn_ended(&mut self) {
        self.working = false;
        if let Some(end) = self.uncommitted.take() {
            self.commit(end);
        }
        let text = std::mem::take(&mut self.turn_text);
        if self.shutting_down {
            return;
        }
        if self.plan == Plan::Drafting {
            match request_id("plan") {
                Ok(request) => {
                    let ask = Protocol::PlanApprovalRequest {
                        request_id: request.clone(),
                        plan: text,
                    };
                    self.to_lead(&ask);
                    self.plan = Plan::Awaiting(request);
                    self.edit(|t| t.awaiting_plan_approval = true);
                }
                Err(error) => tracing::warn!(id = %self.id, %error, "no plan request id"),
            }
        } else {
            self.to_lead(&Protocol::IdleNotification {
                idle_reason: "available".into(),
            });
        }
        self.set_idle(true);
        self.inner.fire_idle(self.id, &self.member.identity);
    }

    /// Hands the new mailbox messages its conversation does not hold to the idle teammate as
    /// one turn; the cursor is committed when that turn ends (at once if there is none).
    async fn deliver(&mut self) {
        if !self.between_runs && !self.runner.accepts_messages() {
            // Its run takes no input (a batch job): the turn waits for the run's end.
            return;
        }
        let batch = match self.reader.pending::<TeamMessage>() {
            Ok(batch) => batch,
            Err(error) => {
                tracing::warn!(id = %self.id, %error, "mailbox read failed");
                return;
            }
        };
        if batch.messages.is_empty() {
            return;
        }
        let mut turn = Vec::new();
        for delivered in batch.messages {
            let message = delivered.message;
            // A send retried after its supervisor died may be in the mailbox twice.
            if let Some(id) = &message.id
                && !self.delivered.insert(id.clone())
            {
                tracing::debug!(id = %self.id, message = %id, "a message it has had already");
                continue;
            }
            self.sort(message, &mut turn);
        }
        if turn.is_empty() {
            self.commit(batch.end);
        } else {
            if let Err(error) = self.hand(&render_turn(&turn)).await {
                // Not committed: the agent's input is gone and its end follows (or, between
                // runs, the next poll tries again).
                tracing::warn!(id = %self.id, %error, "the turn did not reach the teammate");
                return;
            }
            self.working = true;
            self.uncommitted = Some(batch.end);
            self.set_idle(false);
            self.show(&turn);
        }
    }

    /// Whether the session that ended with `end` leaves the teammate idle rather than ended:
    /// a runner that takes no message while a session runs (a batch job, one run a turn),
    /// a clean exit after its turn, no shutdown under way, and a session to resume.
    fn awaits_next_run(&self, end: &SessionEnd) -> bool {
        !self.runner.accepts_messages()
            && end.exit_code == Some(0)
            && !self.working
            && !self.shutting_down
            && self.session_id().is_some()
    }

    /// The session its agent CLI reported.
    fn session_id(&self) -> Option<String> {
        match &self.inner.registry.get(&self.id)?.kind {
            TaskKind::Teammate(teammate) => teammate.session_id.clone(),
            _ => None,
        }
    }

    /// Hands `turn` to the agent: sent to its session, or, between runs, the first turn of a
    /// new run resuming it.
    async fn hand(&mut self, turn: &str) -> Result<(), AgentError> {
        if !self.between_runs {
            return self.session.send(turn).await;
        }
        let session_id = self.session_id().ok_or(AgentError::NoSession(self.id))?;
        self.session = self.runner.resume(&self.spec, &session_id, turn).await?;
        self.between_runs = false;
        Ok(())
    }

    /// Keeps `turn`'s messages for display, read.
    pub(super) fn show(&self, turn: &[TeamMessage]) {
        if turn.is_empty() {
            return;
        }
        self.edit(|t| {
            for message in turn {
                let mut shown = message.clone();
                shown.read = true;
                t.messages
                    .push(serde_json::to_value(shown).unwrap_or(Value::Null));
            }
        });
    }

    fn commit(&mut self, end: u64) {
        if let Err(error) = self.reader.commit(end) {
            tracing::warn!(id = %self.id, %error, "mailbox cursor not committed");
        }
    }

    /// Puts one incoming message in this turn, among the held ones, or acts on it.
    fn sort(&mut self, message: TeamMessage, turn: &mut Vec<TeamMessage>) {
        let awaiting = match &self.plan {
            Plan::Awaiting(request) => Some(request.clone()),
            _ => None,
        };
        match (message.as_protocol(), awaiting) {
            (
                Some(Protocol::PlanApprovalResponse {
                    request_id,
                    approve,
                    feedback,
                }),
                Some(awaited),
            ) if request_id == awaited => {
                self.edit(|t| t.awaiting_plan_approval = false);
                if approve {
                    self.plan = Plan::Free;
                    turn.push(message);
                    turn.append(&mut self.held);
                } else {
                    self.plan = Plan::Drafting;
                    let feedback = feedback.unwrap_or_default();
                    tracing::debug!(id = %self.id, %feedback, "plan rejected");
                    turn.push(message);
                }
            }
            (_, Some(_)) => self.held.push(message),
            (_, None) => turn.push(message),
        }
    }

    /// The teammate called `SendMessage {to, message, summary?}`: post it.
    fn outgoing(&mut self, input: &Value) {
        let (Some(to), Some(text)) = (
            input.get("to").and_then(Value::as_str),
            input.get("message").and_then(Value::as_str),
        ) else {
            return;
        };
        let summary = input
            .get("summary")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let message =
            TeamMessage::new(&self.member.identity.agent_name, text).with_summary(summary);
        let team = self.member.identity.team_name.clone();
        let to = if to == "main" { TEAM_LEAD } else { to };
        let to = to.split_once('@').map_or(to, |(name, _)| name);
        if let Err(error) = post(&self.inner.teams_root, &team, to, &message) {
            tracing::warn!(id = %self.id, %error, to, "teammate message not posted");
            return;
        }
        self.inner.wake(to, &team);
        if let Some(Protocol::ShutdownResponse { approve: true, .. }) = message.as_protocol() {
            self.shutting_down = true;
        }
    }

    fn to_lead(&self, message: &Protocol) {
        let identity = &self.member.identity;
        let posted = post(
            &self.inner.teams_root,
            &identity.team_name,
            TEAM_LEAD,
            &TeamMessage::protocol(&identity.agent_name, message),
        );
        if let Err(error) = posted {
            tracing::warn!(id = %self.id, %error, "message to the lead not posted");
        }
    }

    /// The agent's process is gone: after an approved shutdown that is `completed`.
    fn ended(mut self, exit_code: Option<i32>) {
        let (status, reason, how) = match (self.shutting_down, exit_code) {
            (true, _) => (
                TaskStatus::Completed,
                EndReason::Succeeded,
                TeammateEnd::Shutdown,
            ),
            (false, Some(0)) => (
                TaskStatus::Completed,
                EndReason::Exited { code: 0 },
                TeammateEnd::Terminated,
            ),
            (false, code) => (
                TaskStatus::Failed,
                EndReason::Exited {
                    code: code.unwrap_or(-1),
                },
                TeammateEnd::Terminated,
            ),
        };
        end_silently(&self.inner.registry, self.id, status, reason);
        self.shutting_down = true;
        self.finish(how);
    }

    fn finish(&self, how: TeammateEnd) {
        self.member.idle.send_replace(false);
        self.inner.ended(self.id, &self.member.identity, how);
    }

    /// Records idle or working, tells `until_idle` waiters, and emits a `task_progress` so
    /// observers (a supervisor's records, `ps`) see it.
    fn set_idle(&self, idle: bool) {
        self.edit(|t| t.is_idle = idle);
        self.member.idle.send_replace(idle);
        let mut detail = serde_json::Map::new();
        detail.insert("is_idle".into(), Value::Bool(idle));
        self.inner.registry.emit_progress(&self.id, detail);
    }

    fn edit(&self, mut change: impl FnMut(&mut TeammateState)) {
        let _ = self.inner.registry.update(&self.id, |current| {
            let mut next = current.clone();
            match &mut next.kind {
                TaskKind::Teammate(t) if !current.status().is_terminal() => change(t),
                _ => return None,
            }
            Some(next)
        });
    }
}

/// The instant of `at_ms` (ms epoch) on this process's monotonic clock: now, less the time
/// since then (now for a time ahead of the clock).
fn since(at_ms: u64) -> Instant {
    let ago = Duration::from_millis(task_core::now_ms().saturating_sub(at_ms));
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}
