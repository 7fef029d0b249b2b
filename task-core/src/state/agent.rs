//! Per-type state of agents, the main session and teammates (SPEC §7, §8).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CappedVec;

/// How many recent tool activities an agent's progress keeps.
pub const RECENT_ACTIVITIES_CAP: usize = 5;
/// How many messages a teammate keeps for display (`TEAMMATE_MESSAGES_UI_CAP`).
pub const TEAMMATE_MESSAGES_CAP: usize = 50;

/// One tool use, as shown in an agent's progress.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolActivity {
    /// The tool's name (`Bash`, `Read`, …).
    pub tool_name: String,
    /// The tool's input.
    #[serde(default)]
    pub input: Value,
    /// A human description ("Reading /etc/hostname").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_description: Option<String>,
    /// Whether the tool searches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_search: Option<bool>,
    /// Whether the tool reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_read: Option<bool>,
}

/// Token usage of one model message, as the API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MessageUsage {
    /// Input tokens: cumulative per turn (already contains all earlier context).
    pub input_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Output tokens of this message alone.
    #[serde(default)]
    pub output_tokens: u64,
}

/// What an agent has done so far.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProgress {
    /// Tool uses so far.
    pub tool_use_count: u64,
    /// `latest_input_tokens + cumulative_output_tokens`.
    pub token_count: u64,
    /// Input tokens (with cache) of the latest message.
    #[serde(default)]
    pub latest_input_tokens: u64,
    /// Sum of output tokens over all messages.
    #[serde(default)]
    pub cumulative_output_tokens: u64,
    /// The last five tool activities.
    #[serde(default)]
    pub recent_activities: CappedVec<ToolActivity, RECENT_ACTIVITIES_CAP>,
    /// The summariser's 1–2 sentence summary; progress updates never touch it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl AgentProgress {
    /// Accounts one message's usage (SPEC §7): inputs are cumulative per turn, so only the
    /// latest counts; outputs are per message, so they add up. The counts come from an agent
    /// CLI's output, so they saturate rather than overflow.
    pub fn record_usage(&mut self, usage: MessageUsage) {
        self.latest_input_tokens = usage
            .input_tokens
            .saturating_add(usage.cache_creation_input_tokens)
            .saturating_add(usage.cache_read_input_tokens);
        self.cumulative_output_tokens = self
            .cumulative_output_tokens
            .saturating_add(usage.output_tokens);
        self.token_count = self
            .latest_input_tokens
            .saturating_add(self.cumulative_output_tokens);
    }

    /// Records one tool use.
    pub fn record_tool_use(&mut self, activity: ToolActivity) {
        self.tool_use_count += 1;
        self.recent_activities.push(activity);
    }
}

/// A git worktree an agent ran in (task-worktree's record of it).
pub use task_worktree::Worktree;

/// The data of a `local_agent` task (a sub-agent or the backgrounded main session).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    /// The agent's id (for messages and orphan cleanup of its shells).
    pub agent_id: String,
    /// The name it can be addressed by (`tasks agent --name`), if it was given one. Absent
    /// from records written before it was kept here (its start record still has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The prompt it was started with.
    pub prompt: String,
    /// `general-purpose`, `main-session`, …
    pub agent_type: String,
    /// The model, if not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the agent runs in the background.
    #[serde(default)]
    pub is_backgrounded: bool,
    /// Messages sent to the agent while it was busy, delivered at its next turn.
    #[serde(default)]
    pub pending_messages: Vec<String>,
    /// Progress counters and the summary.
    #[serde(default)]
    pub progress: AgentProgress,
    /// Transcript messages held for display (carried forward on resume).
    #[serde(default)]
    pub messages: Vec<Value>,
    /// Whether `messages` were loaded from the transcript on disk (carried forward on resume).
    #[serde(default)]
    pub disk_loaded: bool,
    /// The final text, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The error, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The worktree it ran in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<Box<Worktree>>,
    /// The process group of its agent CLI while it may be alive (none for an agent without a
    /// process, such as the backgrounded main session), for orphan reaping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<super::ShellProcess>,
    /// Its agent CLI's session, once the CLI said it (Claude's `system/init`, Codex's
    /// `thread.started`, Gemini's `init`): what resumes its conversation with a message once
    /// the executor that ran it no longer holds it (evicted, or run by an earlier supervisor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The budgets it runs under, and the turns it used (its tokens are its progress's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AgentBudget>,
    /// The batch job its run is, when its agent CLI runs on a batch system (`--on slurm`):
    /// the run outlives its supervisor, and the next one follows the job from where its
    /// output begins ([`BatchJob::output_from`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Box<super::BatchJob>>,
}

pub use task_protocol::start::AgentBudget;

/// A teammate's identity: `agentName@teamName`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeammateIdentity {
    /// The agent's name in the team.
    pub agent_name: String,
    /// The team's name.
    pub team_name: String,
    /// Display color.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

/// The data of an `in_process_teammate` task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeammateState {
    /// Who the teammate is.
    pub identity: TeammateIdentity,
    /// The teammate's agent id.
    #[serde(default)]
    pub agent_id: String,
    /// Running but waiting for work.
    #[serde(default)]
    pub is_idle: bool,
    /// Whether a plan awaits the leader's approval.
    #[serde(default)]
    pub awaiting_plan_approval: bool,
    /// Messages kept for display: the newest 50.
    #[serde(default)]
    pub messages: CappedVec<Value, TEAMMATE_MESSAGES_CAP>,
    /// Messages waiting for the teammate's next turn (carried forward on resume).
    #[serde(default)]
    pub pending_messages: Vec<String>,
    /// Its agent CLI's session, once the CLI said it (`system/init`): what resumes its
    /// conversation after its supervisor died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The process group of its agent CLI, for reaping what a dead supervisor left before
    /// the teammate is resumed or ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<super::ShellProcess>,
    /// When the lead asked it to shut down (ms since the epoch): from then on it has a bounded
    /// time to approve before it is ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_requested_at: Option<u64>,
    /// The git worktree it runs in (`tasks team spawn --worktree`); kept after it ends only
    /// when it has changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<Box<Worktree>>,
    /// The budgets it runs under (`tasks team spawn --max-tokens/--max-turns/--timeout`), and
    /// the turns it used in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AgentBudget>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_from_a_hostile_cli_saturate_instead_of_overflowing() {
        // An agent CLI's `usage` block is untrusted input: found with the agent_stream fuzz
        // target, which panicked on it (fuzz/regressions/agent_stream/usage-overflow.jsonl).
        let mut progress = AgentProgress::default();
        progress.record_usage(MessageUsage {
            input_tokens: u64::MAX,
            cache_read_input_tokens: 1,
            output_tokens: u64::MAX,
            ..MessageUsage::default()
        });
        progress.record_usage(MessageUsage {
            output_tokens: 5,
            ..MessageUsage::default()
        });
        assert_eq!(progress.latest_input_tokens, 0);
        assert_eq!(progress.cumulative_output_tokens, u64::MAX);
        assert_eq!(progress.token_count, u64::MAX);
    }
}
