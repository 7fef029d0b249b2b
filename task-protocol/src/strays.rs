//! What the supervisor does with the processes a task leaves running when it ends (its
//! *strays*), as a start or a session's settings ask.

use serde::{Deserialize, Serialize};

/// What the supervisor does with the processes a task leaves running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StrayPolicy {
    /// Records them and says so in the task's completion (the default).
    #[default]
    Report,
    /// Kills them when the task ends.
    Kill,
    /// Does not look for them (no `/proc` scan at the task's end).
    Ignore,
}

impl std::str::FromStr for StrayPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "report" => Ok(Self::Report),
            "kill" => Ok(Self::Kill),
            "ignore" => Ok(Self::Ignore),
            other => Err(format!("{other:?}: expected report, kill or ignore")),
        }
    }
}
