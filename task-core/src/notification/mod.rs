//! The `<task-notification>` envelope of SPEC §3, its summaries, and the priority queue.

mod queue;
pub mod summary;
mod xml;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use queue::{NotificationQueue, Priority};
pub use xml::sanitize;

use crate::{TaskId, TaskState, TaskType, TerminalStatus};

/// What the reference puts before an envelope when it hands one to its model as a user turn.
pub const MODEL_FRAMING: &str = "[SYSTEM NOTIFICATION - NOT USER INPUT]\n\
This is an automated background-task event, NOT a message from the user.\n\
Do NOT interpret this as user acknowledgement, confirmation, or response to any pending question.";

/// The `<note>` of an agent's completion (version 2.1.197 wording).
pub const AGENT_RESUME_NOTE: &str = "A task-notification fires each time this agent stops with no live background children of its own. The user can send it another message and resume it, so the same task-id may notify more than once.";

/// The `<note>` of an agent whose runner cannot resume it (Gemini's CLI): no promise that a
/// message resumes it.
pub const AGENT_FINAL_NOTE: &str = "A task-notification fires when this agent stops. Its runner cannot resume it: a message will not continue it; start a new agent to go on.";

/// What an agent's notification adds after `<summary>`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentExtras {
    /// `<note>`: usually [`AGENT_RESUME_NOTE`]; [`AGENT_FINAL_NOTE`] when it cannot resume.
    pub note: Option<String>,
    /// `<result>`: the agent's final text.
    pub result: Option<String>,
    /// `<usage>`.
    pub usage: Option<AgentUsage>,
    /// `<worktree>`, if it ran in a git worktree.
    pub worktree: Option<crate::Worktree>,
}

/// The `<usage>` block of an agent notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentUsage {
    /// `<subagent_tokens>` (the 2.1.88 source's `<total_tokens>`).
    pub subagent_tokens: u64,
    /// `<tool_uses>`.
    pub tool_uses: u64,
    /// `<duration_ms>`.
    pub duration_ms: u64,
    /// `<agent_count>`: how many agents a workflow ran (first in `<usage>`; workflows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_count: Option<u64>,
}

/// One notification for the model: the envelope's fields, and who it is for.
///
/// Build one with [`Notification::for_task`] (or [`Notification::stall`]), then either pass it
/// to [`Registry::notify_once`](crate::Registry::notify_once) (terminal notifications, exactly
/// once per task) or enqueue it directly (monitor events, stall warnings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// `<task-id>`.
    pub task_id: TaskId,
    /// `<tool-use-id>`, omitted when absent.
    pub tool_use_id: Option<String>,
    /// `<task-type>`, shown only when set (the generic notifier and remote agents).
    pub task_type: Option<TaskType>,
    /// `<output-file>`.
    pub output_file: PathBuf,
    /// `<status>`, absent for stall warnings and monitor events.
    pub status: Option<TerminalStatus>,
    /// `<summary>`: one line.
    pub summary: String,
    /// `<event>`: a monitor's event line, after `<summary>`.
    pub event: Option<String>,
    /// The agent blocks, after `<summary>`.
    pub agent: Option<AgentExtras>,
    /// Text after the closing tag (the stall warning's `Last output:` block).
    pub trailer: Option<String>,
    /// The agent this notification is for (`None`: the main session). Not rendered; used to
    /// drop an agent's queued notifications when it ends.
    pub agent_id: Option<TaskId>,
}

impl Notification {
    /// A bare notification: id, output file and summary; everything else absent.
    pub fn new(
        task_id: TaskId,
        output_file: impl Into<PathBuf>,
        summary: impl Into<String>,
    ) -> Self {
        Notification {
            task_id,
            tool_use_id: None,
            task_type: None,
            output_file: output_file.into(),
            status: None,
            summary: summary.into(),
            event: None,
            agent: None,
            trailer: None,
            agent_id: None,
        }
    }

    /// A notification about `task`: its id, tool use, output file and owner agent, the given
    /// status and summary, and `<task-type>` for remote agents (as the reference shows it).
    pub fn for_task(
        task: &TaskState,
        status: Option<TerminalStatus>,
        summary: impl Into<String>,
    ) -> Self {
        let base = &task.base;
        Notification {
            tool_use_id: base.tool_use_id.clone(),
            task_type: (base.task_type == TaskType::RemoteAgent).then_some(base.task_type),
            status,
            agent_id: task.owner_agent_id(),
            ..Notification::new(base.id, base.output_file.clone(), summary)
        }
    }

    /// The completion of a task ended as an orphan ([`TaskState::end_as_orphan`]): `failed`,
    /// with the summary of [`summary::orphaned`].
    pub fn orphaned(task: &TaskState) -> Self {
        let summary = summary::orphaned(task.base.task_type, &task.base.description);
        Notification::for_task(task, Some(TerminalStatus::Failed), summary)
    }

    /// The stall warning for a shell task that seems to wait for input: no `<status>`, and
    /// the last output (trailing whitespace trimmed, as the reference shows it) with the
    /// advice after the closing tag. Deliver it with [`Priority::Next`].
    pub fn stall(task: &TaskState, last_output: &str) -> Self {
        Notification {
            trailer: Some(format!(
                "Last output:\n{}\n\n{}",
                last_output.trim_end(),
                summary::STALL_ADVICE
            )),
            ..Notification::for_task(task, None, summary::stall(&task.base.description))
        }
    }

    /// The envelope exactly as SPEC §3 lays it out: one element a line, absent fields
    /// omitted, every value sanitized and escaped; the trailer (escaped too) after the
    /// closing tag. No trailing newline.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(256 + self.summary.len());
        out.push_str("<task-notification>\n");
        push_element(&mut out, "task-id", self.task_id.as_str());
        if let Some(tool_use_id) = &self.tool_use_id {
            push_element(&mut out, "tool-use-id", tool_use_id);
        }
        if let Some(task_type) = self.task_type {
            push_element(&mut out, "task-type", task_type.as_str());
        }
        push_element(&mut out, "output-file", &self.output_file.to_string_lossy());
        if let Some(status) = self.status {
            push_element(&mut out, "status", status.as_str());
        }
        push_element(&mut out, "summary", &self.summary);
        if let Some(event) = &self.event {
            push_element(&mut out, "event", event);
        }
        if let Some(agent) = &self.agent {
            push_agent_extras(&mut out, agent);
        }
        out.push_str("</task-notification>");
        if let Some(trailer) = &self.trailer {
            out.push('\n');
            xml::push_escaped(&mut out, trailer);
        }
        out
    }

    /// [`MODEL_FRAMING`], a blank line, then the envelope: the user-turn text the reference
    /// sends its model.
    pub fn render_for_model(&self) -> String {
        format!("{MODEL_FRAMING}\n\n{}", self.render())
    }
}

fn push_agent_extras(out: &mut String, agent: &AgentExtras) {
    if let Some(note) = &agent.note {
        push_element(out, "note", note);
    }
    if let Some(result) = &agent.result {
        push_element(out, "result", result);
    }
    if let Some(usage) = agent.usage {
        out.push_str("<usage>");
        if let Some(count) = usage.agent_count {
            out.push_str(&format!("<agent_count>{count}</agent_count>"));
        }
        out.push_str(&format!(
            "<subagent_tokens>{}</subagent_tokens><tool_uses>{}</tool_uses><duration_ms>{}</duration_ms></usage>\n",
            usage.subagent_tokens, usage.tool_uses, usage.duration_ms
        ));
    }
    if let Some(worktree) = &agent.worktree {
        out.push_str("<worktree>");
        push_inline(out, "worktreePath", &worktree.worktree_path);
        push_inline(out, "worktreeBranch", &worktree.worktree_branch);
        out.push_str("</worktree>\n");
    }
}

/// `<tag>{escaped value}</tag>\n`
fn push_element(out: &mut String, tag: &str, value: &str) {
    push_inline(out, tag, value);
    out.push('\n');
}

/// `<tag>{escaped value}</tag>`
fn push_inline(out: &mut String, tag: &str, value: &str) {
    out.push('<');
    out.push_str(tag);
    out.push('>');
    xml::push_escaped(out, value);
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}
