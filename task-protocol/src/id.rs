//! Task identity: the seven task types and the validated, unpredictable task id.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The number of random characters after an id's one-letter prefix.
const RANDOM_LEN: usize = 8;
/// The length of every task id: a prefix letter plus 8 random characters.
pub const TASK_ID_LEN: usize = 1 + RANDOM_LEN;
/// The alphabet of an id's random part.
const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// The prefix of the main session's id (a `local_agent` with agentType `main-session`).
const MAIN_SESSION_PREFIX: u8 = b's';

/// The kind of work a background task does (SPEC §1). Serialized in snake_case (`local_bash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    /// A shell command (`b`), run by task-shell.
    LocalBash,
    /// A sub-agent or the backgrounded main session (`a`, `s`), run by task-agent.
    LocalAgent,
    /// A session on a remote agent service (`r`), run by task-remote.
    RemoteAgent,
    /// A teammate agent living in this process (`t`), run by task-agent.
    InProcessTeammate,
    /// A multi-step workflow (`w`), run by task-agent.
    LocalWorkflow,
    /// A watch whose every event is one notification (`m`), run by task-shell.
    MonitorMcp,
    /// A background memory-consolidation agent (`d`), run by task-agent.
    Dream,
}

impl TaskType {
    /// Every task type, in the order of SPEC §1.
    pub const ALL: [TaskType; 7] = [
        TaskType::LocalBash,
        TaskType::LocalAgent,
        TaskType::RemoteAgent,
        TaskType::InProcessTeammate,
        TaskType::LocalWorkflow,
        TaskType::MonitorMcp,
        TaskType::Dream,
    ];

    /// The one-letter prefix of this type's ids.
    pub const fn prefix(self) -> char {
        self.prefix_byte() as char
    }

    /// The name used in JSON and in notifications (`local_bash`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskType::LocalBash => "local_bash",
            TaskType::LocalAgent => "local_agent",
            TaskType::RemoteAgent => "remote_agent",
            TaskType::InProcessTeammate => "in_process_teammate",
            TaskType::LocalWorkflow => "local_workflow",
            TaskType::MonitorMcp => "monitor_mcp",
            TaskType::Dream => "dream",
        }
    }

    /// Whether a task of this type keeps a conversation as its output: an agent's transcript
    /// (an agent, the main session, a workflow's agents, a teammate, a dream) or a remote
    /// session's events. Readers show such output as a conversation, not as raw lines.
    pub const fn holds_conversation(self) -> bool {
        matches!(
            self,
            TaskType::LocalAgent
                | TaskType::RemoteAgent
                | TaskType::InProcessTeammate
                | TaskType::Dream
        )
    }

    const fn prefix_byte(self) -> u8 {
        match self {
            TaskType::LocalBash => b'b',
            TaskType::LocalAgent => b'a',
            TaskType::RemoteAgent => b'r',
            TaskType::InProcessTeammate => b't',
            TaskType::LocalWorkflow => b'w',
            TaskType::MonitorMcp => b'm',
            TaskType::Dream => b'd',
        }
    }

    fn from_prefix(prefix: u8) -> Option<TaskType> {
        if prefix == MAIN_SESSION_PREFIX {
            return Some(TaskType::LocalAgent);
        }
        TaskType::ALL
            .into_iter()
            .find(|t| t.prefix_byte() == prefix)
    }
}

impl fmt::Display for TaskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a string is not a task id, or why one could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The string does not have exactly nine characters.
    #[error(
        "invalid task id {input:?}: expected 9 characters (a type letter and 8 of [0-9a-z]), got {len}"
    )]
    Length {
        /// The rejected input (lossy, for the message).
        input: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A character outside `[0-9a-z]`, or a digit in the prefix position.
    #[error(
        "invalid task id {input:?}: character {position} is not allowed (expected ^[a-z][0-9a-z]{{8}}$)"
    )]
    Character {
        /// The rejected input.
        input: String,
        /// The zero-based position of the first bad character.
        position: usize,
    },
    /// The first letter is not the prefix of any task type.
    #[error(
        "invalid task id {input:?}: {prefix:?} is not a task type prefix (b, a, s, r, t, w, m, d)"
    )]
    UnknownPrefix {
        /// The rejected input.
        input: String,
        /// The unknown prefix letter.
        prefix: char,
    },
    /// The operating system's random number generator failed.
    #[error("could not draw a task id from the OS random number generator: {0}")]
    Entropy(String),
}

/// A task id: a type prefix and eight characters of `[0-9a-z]` drawn from the OS CSPRNG.
///
/// Every value of this type is valid (`^[a-z][0-9a-z]{8}$` with a known prefix), so it is safe
/// to build a path from it. It is `Copy`, and serializes as its string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId([u8; TASK_ID_LEN]);

impl TaskId {
    /// A new unpredictable id for a task of `task_type`.
    pub fn generate(task_type: TaskType) -> Result<TaskId, IdError> {
        Self::random_with_prefix(task_type.prefix_byte())
    }

    /// A new id for the backgrounded main session (prefix `s`, type `local_agent`).
    pub fn main_session() -> Result<TaskId, IdError> {
        Self::random_with_prefix(MAIN_SESSION_PREFIX)
    }

    /// Parses an id that came from outside (CLI argument, MCP call, file name).
    pub fn parse(input: &str) -> Result<TaskId, IdError> {
        let bytes = input.as_bytes();
        let id: [u8; TASK_ID_LEN] = bytes.try_into().map_err(|_| IdError::Length {
            input: input.to_owned(),
            len: bytes.len(),
        })?;
        if let Some(position) = id
            .iter()
            .enumerate()
            .position(|(i, &b)| !(b.is_ascii_lowercase() || (i > 0 && b.is_ascii_digit())))
        {
            return Err(IdError::Character {
                input: input.to_owned(),
                position,
            });
        }
        if TaskType::from_prefix(id[0]).is_none() {
            return Err(IdError::UnknownPrefix {
                input: input.to_owned(),
                prefix: id[0] as char,
            });
        }
        Ok(TaskId(id))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        // Every constructor admits ASCII only, so this never takes the fallback.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The type this id's prefix stands for (`s` is a `local_agent`).
    pub fn task_type(&self) -> TaskType {
        TaskType::from_prefix(self.0[0]).unwrap_or(TaskType::LocalAgent)
    }

    /// Whether this is a main-session id (prefix `s`).
    pub fn is_main_session(&self) -> bool {
        self.0[0] == MAIN_SESSION_PREFIX
    }

    /// A fresh id for a message sent to a task (`msg-` and eight random characters of the
    /// id alphabet): what lets its delivery drop a repeat (a send retried after its supervisor
    /// died carries the same id).
    ///
    /// # Errors
    /// [`IdError::Entropy`] when the system has no randomness to give.
    pub fn message_id() -> Result<String, IdError> {
        let random = Self::random_with_prefix(b'-')?;
        Ok(format!("msg{}", random.as_str()))
    }

    fn random_with_prefix(prefix: u8) -> Result<TaskId, IdError> {
        let mut id = [prefix; TASK_ID_LEN];
        let mut filled = 1;
        // Rejection sampling: bytes ≥ 252 (= 7 × 36) are redrawn so every character is
        // equally likely (the reference's plain `% 36` favours the first 4 characters).
        while filled < TASK_ID_LEN {
            let mut random = [0u8; 16];
            getrandom::fill(&mut random).map_err(|e| IdError::Entropy(e.to_string()))?;
            for byte in random.into_iter().filter(|&b| b < 252) {
                if filled == TASK_ID_LEN {
                    break;
                }
                id[filled] = ALPHABET[usize::from(byte % 36)];
                filled += 1;
            }
        }
        Ok(TaskId(id))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({})", self.as_str())
    }
}

impl FromStr for TaskId {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskId::parse(s)
    }
}

impl AsRef<str> for TaskId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Serialize for TaskId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for TaskId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TaskId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[a-z][0-9a-z]{8}$",
            "description": "A task id: its type's letter, then 8 characters of [0-9a-z]."
        })
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        TaskId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Reads an optional task id where older or hand-written files may hold other text (or
/// `null`): anything that is not a task id reads as `None`, with a warning, instead of making
/// the whole file unreadable. For `#[serde(deserialize_with = "…")]` on an `Option<TaskId>`.
///
/// # Errors
/// Only when the value is not a string or `null` at all.
pub fn lenient_task_id<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<TaskId>, D::Error> {
    let text = <Option<std::borrow::Cow<'de, str>>>::deserialize(deserializer)?;
    Ok(text.and_then(|text| match TaskId::parse(&text) {
        Ok(id) => Some(id),
        Err(error) => {
            tracing::warn!(%error, "not a task id: read as none");
            None
        }
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_lenient_task_id_reads_other_text_as_none() {
        #[derive(Deserialize)]
        struct Owned {
            #[serde(default, deserialize_with = "lenient_task_id")]
            owner: Option<TaskId>,
        }
        let read = |json: &str| serde_json::from_str::<Owned>(json).unwrap().owner;
        assert_eq!(
            read(r#"{"owner":"a12345678"}"#),
            Some(TaskId::parse("a12345678").unwrap())
        );
        assert_eq!(read(r#"{"owner":"agent-one"}"#), None);
        assert_eq!(read(r#"{"owner":null}"#), None);
        assert_eq!(read("{}"), None);
        assert!(serde_json::from_str::<Owned>(r#"{"owner":3}"#).is_err());
    }

    #[test]
    fn generated_ids_have_the_type_prefix_and_parse_back() {
        for task_type in TaskType::ALL {
            let id = TaskId::generate(task_type).unwrap();
            assert_eq!(id.as_str().chars().next(), Some(task_type.prefix()));
            assert_eq!(id.task_type(), task_type);
            assert_eq!(TaskId::parse(id.as_str()).unwrap(), id);
        }
    }

    #[test]
    fn main_session_ids_start_with_s_and_are_local_agents() {
        let id = TaskId::main_session().unwrap();
        assert!(id.as_str().starts_with('s'));
        assert!(id.is_main_session());
        assert_eq!(id.task_type(), TaskType::LocalAgent);
    }

    #[test]
    fn generated_ids_differ() {
        let ids: std::collections::HashSet<_> = (0..1000)
            .map(|_| TaskId::generate(TaskType::LocalBash).unwrap())
            .collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn generated_ids_use_every_alphabet_character() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            seen.extend(TaskId::generate(TaskType::Dream).unwrap().as_str()[1..].chars());
        }
        assert_eq!(seen.len(), 36);
    }

    #[test]
    fn parse_rejects_malformed_ids_with_a_reason() {
        assert!(matches!(
            TaskId::parse(""),
            Err(IdError::Length { len: 0, .. })
        ));
        assert!(matches!(
            TaskId::parse("b1234567"),
            Err(IdError::Length { len: 8, .. })
        ));
        assert!(matches!(
            TaskId::parse("b123456789"),
            Err(IdError::Length { .. })
        ));
        assert!(matches!(
            TaskId::parse("../../etc"),
            Err(IdError::Character { position: 0, .. })
        ));
        assert!(matches!(
            TaskId::parse("b1234/678"),
            Err(IdError::Character { position: 5, .. })
        ));
        assert!(matches!(
            TaskId::parse("B12345678"),
            Err(IdError::Character { position: 0, .. })
        ));
        assert!(matches!(
            TaskId::parse("1abcdefgh"),
            Err(IdError::Character { position: 0, .. })
        ));
        assert!(matches!(
            TaskId::parse("bABCDEFGH"),
            Err(IdError::Character { position: 1, .. })
        ));
        assert!(matches!(
            TaskId::parse("x12345678"),
            Err(IdError::UnknownPrefix { prefix: 'x', .. })
        ));
        // Nine bytes but not nine ASCII characters.
        assert!(matches!(
            TaskId::parse("bé345678"),
            Err(IdError::Character { .. })
        ));
    }

    #[test]
    fn serde_round_trips_and_validates() {
        let id = TaskId::parse("bsubuniyr").unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"bsubuniyr\"");
        assert_eq!(serde_json::from_str::<TaskId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<TaskId>("\"../evil00\"").is_err());
    }

    #[test]
    fn task_type_serde_names_are_snake_case() {
        for task_type in TaskType::ALL {
            let json = serde_json::to_string(&task_type).unwrap();
            assert_eq!(json, format!("\"{}\"", task_type.as_str()));
        }
    }
}
