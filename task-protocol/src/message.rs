//! Messages to the tasks that take them (agents, teammates, remote agents) as typed values: who
//! a message is for, parsed once where it enters (a command line, a tool call), and what became
//! of it, worded only by the front end that shows it.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{TaskId, TaskStatus};

/// Longest address accepted, in bytes.
const MAX_ADDRESS_LEN: usize = 256;

/// Who a message is for.
///
/// ```
/// use task_protocol::Address;
///
/// assert!(matches!("a1b2c3d4e".parse(), Ok(Address::Task(_))));
/// assert_eq!(
///     "alice@crew".parse::<Address>().unwrap(),
///     Address::Teammate { name: "alice".into(), team: "crew".into() }
/// );
/// assert_eq!("alice".parse::<Address>().unwrap(), Address::Name("alice".into()));
/// assert!("@crew".parse::<Address>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub enum Address {
    /// A task, by id.
    Task(TaskId),
    /// A teammate of a team: `name@team`.
    Teammate {
        /// Its name.
        name: String,
        /// Its team.
        team: String,
    },
    /// A name, which exactly one live agent or teammate must have.
    Name(String),
}

/// Why a text is not an [`Address`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an address ({why}): expected a task id, NAME or NAME@TEAM")]
pub struct AddressError {
    input: String,
    why: &'static str,
}

impl std::str::FromStr for Address {
    type Err = AddressError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |why| AddressError {
            input: text.chars().take(MAX_ADDRESS_LEN).collect(),
            why,
        };
        if text.is_empty() {
            return Err(refuse("it is empty"));
        }
        if text.len() > MAX_ADDRESS_LEN {
            return Err(refuse("it is too long"));
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(refuse("it holds a space or a control character"));
        }
        if let Ok(id) = TaskId::parse(text) {
            return Ok(Address::Task(id));
        }
        match text.split_once('@') {
            None => Ok(Address::Name(text.to_owned())),
            Some((name, team)) if !name.is_empty() && !team.is_empty() && !team.contains('@') => {
                Ok(Address::Teammate {
                    name: name.to_owned(),
                    team: team.to_owned(),
                })
            }
            Some(_) => Err(refuse("NAME@TEAM needs one @ between two names")),
        }
    }
}

impl TryFrom<String> for Address {
    type Error = AddressError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Address> for String {
    fn from(address: Address) -> Self {
        address.to_string()
    }
}

impl From<TaskId> for Address {
    fn from(id: TaskId) -> Self {
        Address::Task(id)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Task(id) => write!(f, "{id}"),
            Address::Teammate { name, team } => write!(f, "{name}@{team}"),
            Address::Name(name) => f.write_str(name),
        }
    }
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageReply {
    /// The task it reached, when one did.
    pub task: Option<TaskId>,
    /// How.
    pub outcome: MessageOutcome,
}

/// How a message reached its task, or why it did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum MessageOutcome {
    /// Queued for a running agent's next turn.
    Queued,
    /// The agent had stopped: it was resumed under the same id with the message.
    Resumed {
        /// How its previous run had ended.
        previous: TaskStatus,
        /// Its output file.
        output_file: PathBuf,
    },
    /// Posted to a teammate's mailbox (handed over at its next idle moment).
    Posted,
    /// Sent on to a remote agent's session.
    Relayed,
    /// Not delivered: its task refused it.
    Refused {
        /// Why, in words for the sender.
        reason: String,
    },
    /// Not delivered: the address names no task that takes messages.
    Unknown {
        /// Why, in words for the sender.
        reason: String,
    },
}

impl MessageReply {
    /// A message that reached `task` this way.
    pub fn reached(task: TaskId, outcome: MessageOutcome) -> Self {
        MessageReply {
            task: Some(task),
            outcome,
        }
    }

    /// A message refused for `reason`.
    pub fn refused(reason: impl Into<String>) -> Self {
        MessageReply {
            task: None,
            outcome: MessageOutcome::Refused {
                reason: reason.into(),
            },
        }
    }

    /// A message whose address names no task that takes messages.
    pub fn unknown(reason: impl Into<String>) -> Self {
        MessageReply {
            task: None,
            outcome: MessageOutcome::Unknown {
                reason: reason.into(),
            },
        }
    }

    /// Whether it reached its task.
    pub fn delivered(&self) -> bool {
        !matches!(
            self.outcome,
            MessageOutcome::Refused { .. } | MessageOutcome::Unknown { .. }
        )
    }

    /// Whether its address named no task that takes messages.
    pub fn addressed_nobody(&self) -> bool {
        matches!(self.outcome, MessageOutcome::Unknown { .. })
    }

    /// What became of the message sent to `to`, in the reference's words where it has them
    /// (a resume, an unknown name); this project's for a message queued to a running agent
    /// (`Message queued for {to}; it will be delivered at its next turn.`).
    pub fn text(&self, to: &Address) -> String {
        match &self.outcome {
            MessageOutcome::Queued => {
                format!("Message queued for {to}; it will be delivered at its next turn.")
            }
            MessageOutcome::Resumed {
                previous,
                output_file,
            } => format!(
                "Agent \"{to}\" was stopped ({previous}); resumed it in the background with your \
                 message. You'll be notified when it finishes. Output: {}",
                output_file.display()
            ),
            MessageOutcome::Posted => format!("Message sent to {to}'s inbox"),
            MessageOutcome::Relayed => format!("Message sent to remote agent {to}."),
            MessageOutcome::Refused { reason } | MessageOutcome::Unknown { reason } => {
                reason.clone()
            }
        }
    }

    /// The result of the reference's `SendMessage {to, message}` tool:
    /// `{"success", "message", "resumedAgentId"?}`.
    pub fn model_result(&self, to: &Address) -> serde_json::Value {
        let mut result = serde_json::json!({
            "success": self.delivered(),
            "message": self.text(to),
        });
        if let (MessageOutcome::Resumed { .. }, Some(id)) = (&self.outcome, self.task) {
            result["resumedAgentId"] = id.as_str().into();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn addresses_parse_once_and_print_as_given() {
        for text in ["b12345678", "alice@crew", "alice"] {
            let address: Address = text.parse().unwrap();
            assert_eq!(address.to_string(), text);
            let json = serde_json::to_string(&address).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Address>(&json).unwrap(), address);
        }
    }

    #[test]
    fn malformed_addresses_are_refused_by_name() {
        for (text, why) in [
            ("", "empty"),
            ("a@b@c", "one @"),
            ("alice@", "one @"),
            ("al ice", "space"),
            ("a\u{7}", "control"),
        ] {
            let error = text.parse::<Address>().unwrap_err().to_string();
            assert!(error.contains(why), "{text:?}: {error}");
        }
        let long = "x".repeat(MAX_ADDRESS_LEN + 1);
        assert!(long.parse::<Address>().unwrap_err().to_string().len() < 2 * MAX_ADDRESS_LEN);
        assert!(serde_json::from_str::<Address>("\"@crew\"").is_err());
    }

    #[test]
    fn replies_word_the_reference_results() {
        let id = TaskId::parse("a12345678").unwrap();
        let to: Address = "researcher".parse().unwrap();
        let resumed = MessageReply::reached(
            id,
            MessageOutcome::Resumed {
                previous: TaskStatus::Completed,
                output_file: "/tmp/a12345678.output".into(),
            },
        );
        let result = resumed.model_result(&to);
        assert_eq!(result["success"], true);
        assert_eq!(result["resumedAgentId"], "a12345678");
        assert!(
            result["message"]
                .as_str()
                .unwrap()
                .starts_with("Agent \"researcher\" was stopped (completed); resumed it")
        );
        let refused = MessageReply::refused("No agent named 'x' is currently addressable.");
        assert!(!refused.delivered());
        assert_eq!(
            refused.model_result(&to),
            serde_json::json!({"success": false, "message": "No agent named 'x' is currently addressable."})
        );
        let wire = serde_json::to_value(&resumed).unwrap();
        assert_eq!(wire["outcome"]["outcome"], "resumed");
        assert_eq!(
            serde_json::from_value::<MessageReply>(wire).unwrap(),
            resumed
        );
    }
}
