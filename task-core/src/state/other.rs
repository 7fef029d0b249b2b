//! Per-type state of workflows, dreams and remote agents (SPEC §9–11).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::CappedVec;
use crate::TaskStatus;

/// How many turns a dream keeps.
pub const DREAM_TURNS_CAP: usize = 30;

/// One step of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStep {
    /// The step's name.
    pub step: String,
    /// Where the step is.
    pub status: TaskStatus,
    /// Anything else the workflow reports about the step.
    #[serde(flatten)]
    pub detail: Map<String, Value>,
}

/// The data of a `local_workflow` task.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowState {
    /// The steps, in order.
    pub steps: Vec<WorkflowStep>,
    /// The run's id (`wf_…`), the key of its journal and run record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The script's `meta.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_name: Option<String>,
    /// The phase the script is in (its last `phase()` call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// How many `agent()` calls it has made (journal hits included).
    #[serde(default)]
    pub agent_count: u64,
    /// Tokens its agents used.
    #[serde(default)]
    pub total_tokens: u64,
    /// Tool calls its agents made.
    #[serde(default)]
    pub total_tool_calls: u64,
}

/// A dream's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DreamPhase {
    /// Before its first file edit or write.
    #[default]
    Starting,
    /// After it.
    Updating,
}

/// One turn of a dream, for display.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamTurn {
    /// What the dream said.
    pub text: String,
    /// Tool uses in the turn.
    pub tool_use_count: u32,
}

/// The data of a `dream` task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamState {
    /// Starting or updating.
    pub phase: DreamPhase,
    /// How many sessions it reviews.
    pub sessions_reviewing: u32,
    /// Files it edited or wrote.
    #[serde(default)]
    pub files_touched: Vec<String>,
    /// The newest 30 turns.
    #[serde(default)]
    pub turns: CappedVec<DreamTurn, DREAM_TURNS_CAP>,
    /// The consolidation lock's mtime (ms) before this dream took it; restored on kill or failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_mtime: Option<u64>,
}

impl DreamState {
    /// Records a file edit or write: the phase becomes `updating`.
    pub fn record_file_touched(&mut self, path: impl Into<String>) {
        let path = path.into();
        if !self.files_touched.contains(&path) {
            self.files_touched.push(path);
        }
        self.phase = DreamPhase::Updating;
    }
}

pub use task_protocol::start::RemoteSubtype;

/// The data of a `remote_agent` task (mirrors the resume sidecar of SPEC §11).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteState {
    /// Which kind of remote work.
    pub remote_task_type: RemoteSubtype,
    /// The remote session.
    pub session_id: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// The command that started it.
    #[serde(default)]
    pub command: String,
    /// When it was spawned (ms epoch).
    #[serde(default)]
    pub spawned_at: u64,
    /// Whether it is expected to run long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_long_running: Option<bool>,
    /// Consecutive polls that saw the session idle (idle is trusted after 5).
    #[serde(default)]
    pub idle_polls: u32,
    /// Subtype-specific data, passed to the completion checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task_metadata: Option<Value>,
    /// The id of the last event received (the cursor of the next poll).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_id: Option<String>,
    /// How many events have been received.
    #[serde(default)]
    pub events_received: u64,
}
