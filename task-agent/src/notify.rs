//! The notifications an agent sends when it stops (SPEC §3, §7; the reference's 2.1.197 form).

use task_core::summary::{self, AgentEnd};
use task_core::{
    AGENT_FINAL_NOTE, AGENT_RESUME_NOTE, AgentExtras, AgentUsage, EndReason, Notification,
    TaskState, TerminalStatus,
};

/// How an agent run ended, with what its notification reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// It finished; its final text.
    Finished(Option<String>),
    /// It failed.
    Failed {
        /// The error, in one line.
        error: String,
        /// Why, as recorded in the task's state.
        reason: EndReason,
    },
}

impl RunEnd {
    /// The end reason recorded in the task's state.
    pub fn reason(&self) -> EndReason {
        match self {
            RunEnd::Finished(_) => EndReason::Succeeded,
            RunEnd::Failed { reason, .. } => reason.clone(),
        }
    }

    /// The terminal status this end gives the task.
    pub fn status(&self) -> TerminalStatus {
        match self {
            RunEnd::Finished(_) => TerminalStatus::Completed,
            RunEnd::Failed { .. } => TerminalStatus::Failed,
        }
    }
}

/// The notification of an agent that stopped: `Agent "{desc}" finished` with the `<note>`,
/// `<result>` and `<usage>`, or `Agent "{desc}" failed: {error}` with the note and usage. The
/// note promises a resume only when its runner `resumes`.
pub fn agent_notification(
    task: &TaskState,
    end: &RunEnd,
    usage: AgentUsage,
    resumes: bool,
) -> Notification {
    let description = &task.base.description;
    let (summary, result) = match end {
        RunEnd::Finished(result) => (
            summary::agent(description, AgentEnd::Finished),
            result.clone(),
        ),
        RunEnd::Failed { error, .. } => (
            summary::agent(description, AgentEnd::Failed(Some(error))),
            None,
        ),
    };
    let worktree = match &task.kind {
        task_core::TaskKind::Agent(agent) => agent.worktree.as_deref().cloned(),
        _ => None,
    };
    Notification {
        agent: Some(AgentExtras {
            note: Some(
                if resumes {
                    AGENT_RESUME_NOTE
                } else {
                    AGENT_FINAL_NOTE
                }
                .to_owned(),
            ),
            result,
            usage: Some(usage),
            worktree,
        }),
        ..Notification::for_task(task, Some(end.status()), summary)
    }
}

/// The SDK-only notification of a killed agent (`Agent "{desc}" was stopped`); it is never
/// queued for the model.
pub fn stopped_notification(task: &TaskState) -> Notification {
    let summary = summary::agent(&task.base.description, AgentEnd::Stopped);
    Notification::for_task(task, Some(TerminalStatus::Killed), summary)
}
