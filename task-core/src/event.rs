//! SDK-style events about tasks, broadcast to whoever subscribes.

use bytes::Bytes;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::{TaskId, TaskStatus, TaskType, TerminalStatus};

/// The status a `task_notification` event reports (`stopped` for a killed task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SdkStatus {
    /// The task completed.
    Completed,
    /// The task failed.
    Failed,
    /// The task was killed.
    Stopped,
}

impl From<TerminalStatus> for SdkStatus {
    fn from(status: TerminalStatus) -> Self {
        match status {
            TerminalStatus::Completed => SdkStatus::Completed,
            TerminalStatus::Failed => SdkStatus::Failed,
            TerminalStatus::Killed => SdkStatus::Stopped,
        }
    }
}

/// The fields a `task_updated` event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskPatch {
    /// The new status.
    pub status: TaskStatus,
    /// The end time, once terminal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<u64>,
}

/// An event about a task. Serialized as the reference's stream-json `system` events
/// (`{"subtype": "task_started", "task_id": …}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskEvent {
    /// A task was registered (not emitted again when it is resumed).
    TaskStarted {
        /// The task.
        task_id: TaskId,
        /// The tool call that started it.
        tool_use_id: Option<String>,
        /// Its description.
        description: String,
        /// Its type.
        task_type: TaskType,
    },
    /// A task's status or end time changed.
    TaskUpdated {
        /// The task.
        task_id: TaskId,
        /// What changed.
        patch: TaskPatch,
    },
    /// An executor reported progress (agent tool uses, workflow steps, …).
    TaskProgress {
        /// The task.
        task_id: TaskId,
        /// The tool call that started it.
        tool_use_id: Option<String>,
        /// Executor-specific fields (`description`, `usage`, `last_tool_name`, `steps`, …).
        #[serde(flatten)]
        detail: Map<String, Value>,
    },
    /// New output was read from a running task's output file by the poll loop.
    TaskOutput {
        /// The task.
        task_id: TaskId,
        /// Where `bytes` start in the output file.
        offset: u64,
        /// The bytes read (serialized as lossy UTF-8 text).
        #[serde(serialize_with = "lossy_text")]
        bytes: Bytes,
    },
    /// A task's one notification was settled (delivered or, for kills and dreams, suppressed).
    TaskNotification {
        /// The task.
        task_id: TaskId,
        /// The tool call that started it.
        tool_use_id: Option<String>,
        /// How it ended (`stopped` when killed).
        status: Option<SdkStatus>,
        /// Its output file.
        output_file: String,
        /// The notification's summary.
        summary: String,
        /// Whether the notification was queued for delivery; `false` when it was settled
        /// silently, so no completion notice follows. Not part of the reference's event.
        #[serde(skip)]
        queued: bool,
    },
    /// A task left the registry.
    TaskEvicted {
        /// The task.
        task_id: TaskId,
    },
}

impl TaskEvent {
    /// The task the event is about.
    pub fn task_id(&self) -> TaskId {
        match self {
            TaskEvent::TaskStarted { task_id, .. }
            | TaskEvent::TaskUpdated { task_id, .. }
            | TaskEvent::TaskProgress { task_id, .. }
            | TaskEvent::TaskOutput { task_id, .. }
            | TaskEvent::TaskNotification { task_id, .. }
            | TaskEvent::TaskEvicted { task_id } => *task_id,
        }
    }
}

fn lossy_text<S: Serializer>(bytes: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn events_serialize_like_the_reference_stream() {
        let task_id = TaskId::parse("b0yxxsjnb").unwrap();
        let started = TaskEvent::TaskStarted {
            task_id,
            tool_use_id: Some("toolu_000004".into()),
            description: "long sleeper".into(),
            task_type: TaskType::LocalBash,
        };
        assert_eq!(
            serde_json::to_string(&started).unwrap(),
            r#"{"subtype":"task_started","task_id":"b0yxxsjnb","tool_use_id":"toolu_000004","description":"long sleeper","task_type":"local_bash"}"#
        );
        let updated = TaskEvent::TaskUpdated {
            task_id,
            patch: TaskPatch {
                status: TaskStatus::Killed,
                end_time: Some(1795314324258),
            },
        };
        assert_eq!(
            serde_json::to_string(&updated).unwrap(),
            r#"{"subtype":"task_updated","task_id":"b0yxxsjnb","patch":{"status":"killed","end_time":1795314324258}}"#
        );
        let notified = TaskEvent::TaskNotification {
            task_id,
            tool_use_id: Some("toolu_000004".into()),
            status: Some(TerminalStatus::Killed.into()),
            output_file: String::new(),
            summary: "long sleeper".into(),
            queued: true,
        };
        assert_eq!(
            serde_json::to_string(&notified).unwrap(),
            r#"{"subtype":"task_notification","task_id":"b0yxxsjnb","tool_use_id":"toolu_000004","status":"stopped","output_file":"","summary":"long sleeper"}"#
        );
    }
}
