//! The run's progress as the reference shows it: `workflow_phase` and `workflow_agent`
//! entries, carried by `task_progress` events and kept for the run record and summary.

use serde::Serialize;
use serde_json::{Map, Value, json};
use task_core::{TaskStatus, WorkflowStep};

use super::config::PREVIEW_CHARS;
use super::meta::PhaseMeta;

/// Where an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStage {
    /// Queued or starting.
    Start,
    /// Running and reporting.
    Progress,
    /// Returned (or failed: then it has no `resultPreview`).
    Done,
}

/// A `workflow_agent` entry (field order as the reference writes it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The call's number in the run (1-based).
    pub index: u64,
    /// Its label (`opts.label`, or the start of the prompt).
    pub label: String,
    /// Its phase's number (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_index: Option<usize>,
    /// Its phase's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_title: Option<String>,
    /// The agent's task id, once started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Its model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Where it is.
    pub state: AgentStage,
    /// When its agent started (ms epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// When the call was made (ms epoch).
    pub queued_at: u64,
    /// Which attempt this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The start of its prompt.
    pub prompt_preview: String,
    /// Its last report (ms epoch).
    pub last_progress_at: u64,
    /// Tokens its agent used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Tool calls its agent made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    /// How long its agent ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The start of what it returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_preview: Option<String>,
}

/// The phases, agents and logs of a run.
#[derive(Debug, Default)]
pub(crate) struct Book {
    phases: Vec<PhaseMeta>,
    current: Option<usize>,
    agents: Vec<AgentEntry>,
    pub(crate) logs: Vec<String>,
    pub(crate) total_tokens: u64,
    pub(crate) total_tool_calls: u64,
    phases_announced: bool,
}

impl Book {
    pub(crate) fn new(phases: Vec<PhaseMeta>) -> Book {
        Book {
            phases,
            ..Book::default()
        }
    }

    /// `phase(title)`: the meta phase with that exact title, or a new group.
    pub(crate) fn enter_phase(&mut self, title: &str) -> usize {
        let index = self.phase_index(title);
        self.current = Some(index);
        index
    }

    fn phase_index(&mut self, title: &str) -> usize {
        match self.phases.iter().position(|p| p.title == title) {
            Some(index) => index,
            None => {
                self.phases.push(PhaseMeta {
                    title: title.to_owned(),
                    detail: None,
                    model: None,
                });
                self.phases.len() - 1
            }
        }
    }

    /// Records a new call; its entry.
    pub(crate) fn add_agent(
        &mut self,
        index: u64,
        label: String,
        phase: Option<&str>,
        model: Option<String>,
        prompt: &str,
        now: u64,
    ) -> AgentEntry {
        let phase_index = match phase {
            Some(title) => Some(self.phase_index(title)),
            None => self.current,
        };
        let entry = AgentEntry {
            kind: "workflow_agent",
            index,
            label,
            phase_index: phase_index.map(|i| i + 1),
            phase_title: phase_index
                .and_then(|i| self.phases.get(i))
                .map(|p| p.title.clone()),
            agent_id: None,
            model,
            state: AgentStage::Start,
            started_at: None,
            queued_at: now,
            attempt: None,
            prompt_preview: preview(prompt),
            last_progress_at: now,
            tokens: None,
            tool_calls: None,
            duration_ms: None,
            result_preview: None,
        };
        self.agents.push(entry.clone());
        entry
    }

    /// Changes the entry of call `index`; the changed entry.
    pub(crate) fn update(
        &mut self,
        index: u64,
        change: impl FnOnce(&mut AgentEntry),
    ) -> Option<AgentEntry> {
        let entry = self.agents.iter_mut().find(|e| e.index == index)?;
        change(entry);
        Some(entry.clone())
    }

    /// The `task_progress` detail for `changed` entries (the phases go with the first one).
    pub(crate) fn progress_detail(
        &mut self,
        changed: &AgentEntry,
        summary: &str,
        elapsed_ms: u64,
    ) -> Map<String, Value> {
        let mut entries = Vec::new();
        if !std::mem::replace(&mut self.phases_announced, true) {
            entries.extend(self.phase_entries());
        }
        entries.push(json!(changed));
        let description = match &changed.phase_title {
            Some(phase) => format!("{phase}: {}", changed.label),
            None => changed.label.clone(),
        };
        let detail = json!({
            "description": description,
            "usage": {"total_tokens": self.total_tokens, "tool_uses": self.total_tool_calls,
                      "duration_ms": elapsed_ms},
            "last_tool_name": changed.label,
            "summary": summary,
            "workflow_progress": entries,
        });
        match detail {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn phase_entries(&self) -> Vec<Value> {
        self.phases
            .iter()
            .enumerate()
            .map(|(i, p)| json!({"type": "workflow_phase", "index": i + 1, "title": p.title}))
            .collect()
    }

    /// Every phase, then every agent's latest entry (the record's `workflowProgress`).
    pub(crate) fn workflow_progress(&self) -> Vec<Value> {
        let mut entries = self.phase_entries();
        entries.extend(self.agents.iter().map(|e| json!(e)));
        entries
    }

    /// The phases as `meta.phases` lists them (plus groups `phase()` added).
    pub(crate) fn phases(&self) -> &[PhaseMeta] {
        &self.phases
    }

    /// How many calls were made.
    pub(crate) fn agent_count(&self) -> u64 {
        self.agents.len() as u64
    }

    /// The script has ended: no phase is current any more.
    pub(crate) fn close(&mut self) {
        self.current = None;
    }

    /// The run as the task's steps (what `tasks top` draws as a tree): each phase in order with
    /// its agents, then the agents called outside any phase. A phase is running while it is
    /// the current one or has an agent not done, completed once it has agents and all are
    /// done, pending before that.
    pub(crate) fn steps(&self) -> Vec<WorkflowStep> {
        let mut steps: Vec<WorkflowStep> = (0..self.phases.len())
            .map(|i| self.step(&self.phases[i].title, Some(i + 1)))
            .collect();
        if self.agents.iter().any(|a| a.phase_index.is_none()) {
            steps.push(self.step("agents", None));
        }
        steps
    }

    fn step(&self, title: &str, phase: Option<usize>) -> WorkflowStep {
        let agents: Vec<&AgentEntry> = self
            .agents
            .iter()
            .filter(|a| a.phase_index == phase)
            .collect();
        let current = phase.is_some() && self.current.map(|c| c + 1) == phase;
        let all_done = !agents.is_empty() && agents.iter().all(|a| a.state == AgentStage::Done);
        let status = match (current, all_done, agents.is_empty()) {
            (false, true, _) => TaskStatus::Completed,
            (true, _, _) | (_, _, false) => TaskStatus::Running,
            (false, false, true) => TaskStatus::Pending,
        };
        let agents: Vec<Value> = agents.iter().map(|a| a.as_step_agent()).collect();
        let mut detail = Map::new();
        detail.insert("agents".into(), Value::Array(agents));
        WorkflowStep {
            step: title.to_owned(),
            status,
            detail,
        }
    }
}

impl AgentEntry {
    /// The entry as one agent of a step: its label, task id and where it is (`queued`,
    /// `running`, `done`, or `failed`: done without a result).
    fn as_step_agent(&self) -> Value {
        let status = match (self.state, &self.result_preview) {
            (AgentStage::Start, _) => "queued",
            (AgentStage::Progress, _) => "running",
            (AgentStage::Done, Some(_)) => "done",
            (AgentStage::Done, None) => "failed",
        };
        json!({"name": self.label, "id": self.agent_id, "status": status})
    }
}

/// The first [`PREVIEW_CHARS`] characters of `text`.
pub(crate) fn preview(text: &str) -> String {
    text.chars().take(PREVIEW_CHARS).collect()
}
