//! Progress of one agent run, from its events (SPEC §7): tokens, tool uses, recent activities.

use serde_json::{Map, Value, json};
use task_core::AgentProgress;

use crate::activity::activity;
use crate::event::{AgentEvent, TurnOutcome};

/// Follows one run of an agent and keeps what its progress and notification report.
///
/// Token accounting is task-core's [`AgentProgress::record_usage`]: the latest message's input
/// (with cache) plus the sum of every message's output. The summary is not this tracker's
/// business: [`merged_into`](Self::merged_into) keeps the summariser's.
#[derive(Debug, Clone, Default)]
pub struct ProgressTracker {
    progress: AgentProgress,
    last_tool_name: Option<String>,
    last_text: Option<String>,
    outcome: Option<TurnOutcome>,
}

/// What applying one event changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// Nothing the progress shows.
    None,
    /// Counters changed (usage, text): update the state, no event.
    Counters,
    /// A tool use was recorded: update the state and emit `task_progress`.
    ToolUse,
    /// The turn ended.
    TurnEnded,
}

impl ProgressTracker {
    /// Applies one event.
    pub fn apply(&mut self, event: &AgentEvent) -> Change {
        match event {
            AgentEvent::Usage(usage) => {
                self.progress.record_usage(message_usage(*usage));
                Change::Counters
            }
            AgentEvent::ToolStarted(tool) => {
                self.progress.record_tool_use(activity(tool));
                self.last_tool_name = Some(tool.name.clone());
                Change::ToolUse
            }
            AgentEvent::Text(text) => {
                self.last_text = Some(text.clone());
                Change::Counters
            }
            AgentEvent::TurnEnded(outcome) => {
                self.outcome = Some(outcome.clone());
                Change::TurnEnded
            }
            // Errors are the executor's business (it surfaces them and bounds a loop of them);
            // init, user turns, a tool's end, and kinds added later change no counter.
            _ => Change::None,
        }
    }

    /// A new turn starts (a message was delivered): the previous outcome is cleared.
    pub fn start_turn(&mut self) {
        self.outcome = None;
    }

    /// The progress so far (its `summary` is always `None`).
    pub fn progress(&self) -> &AgentProgress {
        &self.progress
    }

    /// `progress` with this tracker's counters and activities, and `progress`'s own summary.
    pub fn merged_into(&self, progress: &AgentProgress) -> AgentProgress {
        AgentProgress {
            summary: progress.summary.clone(),
            ..self.progress.clone()
        }
    }

    /// The latest turn's outcome, once it ended.
    pub fn outcome(&self) -> Option<&TurnOutcome> {
        self.outcome.as_ref()
    }

    /// The final text: the turn's `result`, else the last assistant text.
    pub fn result_text(&self) -> Option<String> {
        match &self.outcome {
            Some(TurnOutcome::Success {
                result: Some(result),
            }) => Some(result.clone()),
            _ => self.last_text.clone(),
        }
    }

    /// The name of the latest tool used.
    pub fn last_tool_name(&self) -> Option<&str> {
        self.last_tool_name.as_deref()
    }

    /// The fields of a `task_progress` event, shaped like the reference's: `description` (the
    /// latest activity's text, else `task_description`), `subagent_type`,
    /// `usage {total_tokens, tool_uses, duration_ms}` and `last_tool_name`.
    pub fn event_detail(
        &self,
        task_description: &str,
        subagent_type: &str,
        duration_ms: u64,
    ) -> Map<String, Value> {
        let description = self
            .progress
            .recent_activities
            .as_slice()
            .last()
            .and_then(|a| a.activity_description.clone())
            .unwrap_or_else(|| task_description.to_owned());
        let mut detail = Map::new();
        detail.insert("description".into(), json!(description));
        detail.insert("subagent_type".into(), json!(subagent_type));
        detail.insert(
            "usage".into(),
            json!({
                "total_tokens": self.progress.token_count,
                "tool_uses": self.progress.tool_use_count,
                "duration_ms": duration_ms,
            }),
        );
        if let Some(name) = &self.last_tool_name {
            detail.insert("last_tool_name".into(), json!(name));
        }
        detail
    }
}

/// A message's usage as task-core records it.
pub fn message_usage(usage: agent_stream::Usage) -> task_core::MessageUsage {
    task_core::MessageUsage {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        output_tokens: usage.output_tokens,
    }
}
