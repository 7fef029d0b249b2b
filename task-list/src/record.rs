//! The task record, exactly as the reference stores it.

use serde::{Deserialize, Serialize};

use crate::id::TaskId;

/// Arbitrary key/value data attached to a task (key order preserved).
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// The `metadata` key that holds a task's priority (the reference keeps unknown metadata keys,
/// so a list with priorities stays readable and writable by it).
pub const PRIORITY_KEY: &str = "priority";

/// The `metadata` key that holds a task's labels (an array of strings).
pub const LABELS_KEY: &str = "labels";

/// The `metadata` key that holds a task's parent (its id, a string, as ids are everywhere in
/// the reference's files).
pub const PARENT_KEY: &str = "parent";

/// The `metadata` key that holds a task's place in the queue (a whole number; lower first).
pub const POSITION_KEY: &str = "position";

/// The distance between the positions of tasks never moved: a task without
/// `metadata.position` stands at `id × POSITION_STEP`, so tasks sit in id order and a moved task
/// fits between two neighbours without renumbering them.
pub const POSITION_STEP: i64 = 1024;

/// The priority of a task without one (priorities go from 0, the highest, to
/// [`LOWEST_PRIORITY`]).
pub const DEFAULT_PRIORITY: u8 = 2;

/// The lowest priority.
pub const LOWEST_PRIORITY: u8 = 4;

/// The status stored in a task file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

impl TaskStatus {
    /// The wire name (`pending`, `in_progress`, `completed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task: the record of SPEC §12, with exactly the reference's fields in the reference's order.
///
/// Serialised as 2-space indented JSON with no trailing newline ([`Task::to_file_json`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The decimal id.
    pub id: TaskId,
    /// Short title.
    pub subject: String,
    /// What needs to be done.
    #[serde(default)]
    pub description: String,
    /// Present-tense form shown while the task is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// The agent that owns the task.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "empty_as_none"
    )]
    pub owner: Option<String>,
    /// Lifecycle status.
    pub status: TaskStatus,
    /// Tasks this one blocks (downstream).
    #[serde(default)]
    pub blocks: Vec<TaskId>,
    /// Tasks that block this one (upstream).
    #[serde(default)]
    pub blocked_by: Vec<TaskId>,
    /// Free-form key/value data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

fn empty_as_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let owner = Option::<String>::deserialize(d)?;
    Ok(owner.filter(|o| !o.is_empty()))
}

impl Task {
    /// A new pending task with no edges.
    pub fn new(id: TaskId, subject: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            id,
            subject: subject.into(),
            description: description.into(),
            active_form: None,
            owner: None,
            status: TaskStatus::Pending,
            blocks: Vec::new(),
            blocked_by: Vec::new(),
            metadata: None,
        }
    }

    /// The file contents the reference writes: 2-space indented JSON, no trailing newline.
    pub fn to_file_json(&self) -> String {
        // Serialising a struct of strings, ids and JSON values into a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parses a task file's contents.
    pub fn from_file_json(text: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(text)
    }

    /// The task's priority, 0 (highest) to [`LOWEST_PRIORITY`]: `metadata.priority` when it is
    /// a whole number (a larger one counts as the lowest), else [`DEFAULT_PRIORITY`].
    pub fn priority(&self) -> u8 {
        self.metadata
            .as_ref()
            .and_then(|m| m.get(PRIORITY_KEY))
            .and_then(serde_json::Value::as_u64)
            .map_or(DEFAULT_PRIORITY, |p| {
                u8::try_from(p.min(u64::from(LOWEST_PRIORITY))).unwrap_or(LOWEST_PRIORITY)
            })
    }

    /// The task's labels: the strings of `metadata.labels` (anything else there is ignored).
    pub fn labels(&self) -> Vec<&str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.get(LABELS_KEY))
            .and_then(serde_json::Value::as_array)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The task's parent: `metadata.parent` when it is an id (a string or a number).
    pub fn parent(&self) -> Option<TaskId> {
        match self.metadata.as_ref()?.get(PARENT_KEY)? {
            serde_json::Value::String(s) => TaskId::parse(s).ok(),
            serde_json::Value::Number(n) => n.as_u64().and_then(|n| TaskId::new(n).ok()),
            _ => None,
        }
    }

    /// The task's place in the queue: `metadata.position` when it is a whole number, else
    /// `id × POSITION_STEP` (so tasks never moved keep their id order).
    pub fn position(&self) -> i64 {
        self.metadata
            .as_ref()
            .and_then(|m| m.get(POSITION_KEY))
            .and_then(serde_json::Value::as_i64)
            .unwrap_or_else(|| default_position(self.id))
    }

    /// The order in which ready tasks are taken: priority (0 first), then position, then id.
    pub fn queue_key(&self) -> (u8, i64, TaskId) {
        (self.priority(), self.position(), self.id)
    }

    /// Whether the reference's TaskList hides this task (`metadata._internal` is truthy).
    pub fn is_internal(&self) -> bool {
        self.metadata
            .as_ref()
            .and_then(|m| m.get("_internal"))
            .is_some_and(|v| !matches!(v, serde_json::Value::Null | serde_json::Value::Bool(false)))
    }
}

/// The position of a task that was never moved.
pub(crate) fn default_position(id: TaskId) -> i64 {
    i64::try_from(id.get())
        .unwrap_or(i64::MAX)
        .saturating_mul(POSITION_STEP)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn serialises_fields_in_reference_order() {
        let mut task = Task::new(TaskId::new(2).unwrap(), "Write API", "second");
        task.active_form = Some("Writing API".into());
        task.blocked_by.push(TaskId::new(1).unwrap());
        let expected = "{\n  \"id\": \"2\",\n  \"subject\": \"Write API\",\n  \"description\": \"second\",\n  \"activeForm\": \"Writing API\",\n  \"status\": \"pending\",\n  \"blocks\": [],\n  \"blockedBy\": [\n    \"1\"\n  ]\n}";
        assert_eq!(task.to_file_json(), expected);
    }

    #[test]
    fn empty_owner_reads_as_none() {
        let task = Task::from_file_json(br#"{"id":"1","subject":"s","description":"","owner":"","status":"pending","blocks":[],"blockedBy":[]}"#).unwrap();
        assert_eq!(task.owner, None);
    }
}
