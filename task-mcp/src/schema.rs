//! Tool inputs and outputs in the reference harness's shapes (SPEC §13). The input schemas the
//! server advertises are generated from these types; the doc comment of each field is its
//! description, worded as the reference words it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A WebSocket to watch (SPEC §13's `ws` input of `Monitor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct WsTarget {
    /// `ws://` or `wss://` URL
    pub url: String,
    /// Subprotocols to offer
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
}

impl From<WsTarget> for task_protocol::start::WsTarget {
    fn from(target: WsTarget) -> Self {
        Self {
            url: target.url,
            protocols: target.protocols,
        }
    }
}

/// The longest `Bash` and `TaskOutput` timeout, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// The `Bash` timeout when none is given.
pub const DEFAULT_BASH_TIMEOUT_MS: u64 = 120_000;
/// The `TaskOutput` wait when none is given.
pub const DEFAULT_OUTPUT_TIMEOUT_MS: u64 = 30_000;

/// `Bash` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command to execute
    pub command: String,
    /// Optional timeout in milliseconds (max 600000)
    #[schemars(range(min = 1, max = 600_000))]
    pub timeout: Option<u64>,
    /// Clear, concise description of what this command does in active voice. Never use words
    /// like "complex" or "risk" in the description - just describe what it does.
    pub description: Option<String>,
    /// Set to true to run this command in the background. Use TaskOutput to read the output
    /// later.
    pub run_in_background: Option<bool>,
}

/// `Bash` output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BashOutput {
    /// The command's output (stdout and stderr share one file, as in the reference).
    pub stdout: String,
    /// Set when the command was cut short (`Command timed out after …`).
    pub stderr: String,
    /// Whether the command was interrupted (timeout).
    pub interrupted: bool,
    /// The task id of a command started with `run_in_background`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background_task_id: Option<String>,
    /// The exit code of a foreground command that exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

fn default_block() -> bool {
    true
}

fn default_output_timeout() -> u64 {
    DEFAULT_OUTPUT_TIMEOUT_MS
}

/// `TaskOutput` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskOutputInput {
    /// The task ID to get output from
    pub task_id: String,
    /// Whether to wait for completion
    #[serde(default = "default_block")]
    pub block: bool,
    /// Max wait time in ms
    #[serde(default = "default_output_timeout")]
    #[schemars(range(max = 600_000))]
    pub timeout: u64,
}

/// How a `TaskOutput` read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalStatus {
    /// The task has ended; the output is complete.
    Success,
    /// `block` was set and the task did not end within `timeout`.
    Timeout,
    /// `block` was false and the task is still running.
    NotReady,
}

impl RetrievalStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Timeout => "timeout",
            Self::NotReady => "not_ready",
        }
    }
}

/// `TaskOutput` output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskOutputResult {
    /// `success`, `timeout` or `not_ready`.
    pub retrieval_status: RetrievalStatus,
    /// The task and its output so far.
    pub task: Option<TaskView>,
}

/// A background task as `TaskOutput` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskView {
    /// The task id.
    pub task_id: String,
    /// `local_bash` or `monitor_mcp`.
    pub task_type: String,
    /// `pending`, `running`, `completed`, `failed` or `killed`.
    pub status: String,
    /// The task's description.
    pub description: String,
    /// The output, formatted for a model (the end is kept when it is too long).
    pub output: String,
    /// The command's exit code, once it exited.
    #[serde(rename = "exitCode", skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed outside its command (a timeout, the size cap, a dead supervisor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it ended, as its executor recorded it.
    #[serde(rename = "endReason", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub end_reason: Option<task_protocol::EndReason>,
}

/// `TaskStop` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStopInput {
    /// The ID of the background task to stop
    pub task_id: Option<String>,
    /// Deprecated: use task_id instead
    #[schemars(extend("deprecated" = true))]
    pub shell_id: Option<String>,
}

/// `TaskStop` output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskStopOutput {
    /// `Successfully stopped task: {id} ({command})`.
    pub message: String,
    /// The stopped task.
    pub task_id: String,
    /// Its type.
    pub task_type: String,
    /// The command it ran.
    pub command: String,
}

/// `Monitor` input: a command whose stdout lines are events, or a WebSocket whose messages are.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorInput {
    /// Short description of what is being watched, shown in every event notification
    pub description: String,
    /// Stop watching after this many milliseconds (default 300000, max 3600000); ignored when
    /// persistent
    #[schemars(range(max = 3_600_000))]
    pub timeout_ms: Option<u64>,
    /// Keep watching until stopped with TaskStop or the session ends
    #[serde(default)]
    pub persistent: bool,
    /// Shell command to run; each line it prints on stdout is one event
    pub command: Option<String>,
    /// WebSocket to watch instead of a command; each text frame is one event
    pub ws: Option<WsTarget>,
}

/// `Monitor` output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitorOutput {
    /// The monitor's task id.
    pub task_id: String,
    /// How long it watches, in milliseconds (0 when persistent).
    pub timeout_ms: u64,
    /// Set when the monitor lives until stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub persistent: bool,
}

/// `TaskCreate` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskCreateInput {
    /// A brief title for the task
    pub subject: String,
    /// What needs to be done
    pub description: String,
    /// Present continuous form shown in spinner when in_progress (e.g., "Running tests")
    pub active_form: Option<String>,
    /// Arbitrary metadata to attach to the task
    pub metadata: Option<Map<String, Value>>,
}

/// `TaskGet` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskGetInput {
    /// The ID of the task to retrieve
    pub task_id: String,
}

/// The statuses `TaskUpdate` may set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum UpdateStatusInput {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Remove the task (its id is never reused).
    Deleted,
}

/// `TaskUpdate` input.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskUpdateInput {
    /// The ID of the task to update
    pub task_id: String,
    /// New subject for the task
    pub subject: Option<String>,
    /// New description for the task
    pub description: Option<String>,
    /// Present continuous form shown in spinner when in_progress (e.g., "Running tests")
    pub active_form: Option<String>,
    /// New status for the task
    pub status: Option<UpdateStatusInput>,
    /// Task IDs that this task blocks
    pub add_blocks: Option<Vec<String>>,
    /// Task IDs that block this task
    pub add_blocked_by: Option<Vec<String>>,
    /// New owner for the task
    pub owner: Option<String>,
    /// Metadata keys to merge into the task. Set a key to null to delete it.
    pub metadata: Option<Map<String, Value>>,
}

/// `TaskClaim` input (this harness's tool; the reference has none): claim one task, or with
/// `next` the best ready one; or, with `removeBlockedBy`/`removeBlocks` and no owner, remove
/// dependencies of `taskId`, and with `before`/`after` move it next to another task (the
/// reference's `TaskUpdate` schema has no way to do either, and must keep it).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskClaimInput {
    /// The agent that claims the task (its new owner); required to claim, absent to remove dependencies
    pub owner: Option<String>,
    /// The ID of the task to claim or whose dependencies to remove (omit it with next: true)
    pub task_id: Option<String>,
    /// Claim the best ready task (pending, unowned, every blocker and child completed): highest priority (metadata.priority, 0 first, default 2), then lowest metadata.position, then lowest ID
    #[serde(default)]
    pub next: bool,
    /// Refuse if the owner already has an unfinished task
    #[serde(default)]
    pub check_busy: bool,
    /// Task IDs that no longer block taskId (the edge is removed from both tasks; no claim)
    pub remove_blocked_by: Option<Vec<String>>,
    /// Task IDs that taskId no longer blocks (the edge is removed from both tasks; no claim)
    pub remove_blocks: Option<Vec<String>>,
    /// Move taskId just before this task in the queue order (its metadata.position; no claim)
    pub before: Option<String>,
    /// Move taskId just after this task in the queue order (its metadata.position; no claim)
    pub after: Option<String>,
}

/// `TaskList` input: none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskListInput {}

/// `Agent` input (the reference's schema).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    /// A short (3-5 word) description of the task
    pub description: String,
    /// The task for the agent to perform
    pub prompt: String,
    /// The type of specialized agent to use for this task
    pub subagent_type: Option<String>,
    /// Optional model override for this agent. If omitted, the agent CLI's own default.
    pub model: Option<AgentModel>,
    /// Set to true to run this agent in the background. You will be notified when it completes.
    pub run_in_background: Option<bool>,
    /// Isolation mode. "worktree" creates a temporary git worktree (from the current HEAD, on a
    /// new branch) so the agent works on an isolated copy of the repo; removed if unchanged.
    /// "remote" runs it on the configured sessions server.
    pub isolation: Option<Isolation>,
}

/// The models `Agent` accepts (the reference's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentModel {
    /// sonnet
    Sonnet,
    /// opus
    Opus,
    /// haiku
    Haiku,
    /// fable
    Fable,
}

impl AgentModel {
    /// The name passed to the agent CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentModel::Sonnet => "sonnet",
            AgentModel::Opus => "opus",
            AgentModel::Haiku => "haiku",
            AgentModel::Fable => "fable",
        }
    }
}

/// The isolation modes `Agent` names (the reference's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A temporary git worktree.
    Worktree,
    /// A remote environment.
    Remote,
}

/// `SendMessage` input (the reference's schema).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageInput {
    /// Recipient: an agent's name or id
    pub to: String,
    /// Plain text message content
    pub message: String,
    /// A 5-10 word summary shown as a preview in the UI
    #[schemars(length(max = 200))]
    pub summary: Option<String>,
}
