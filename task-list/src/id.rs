//! Task ids and name sanitising.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A task id: the decimal counter the reference uses ("1", "2", …).
///
/// Validated on construction, so a `TaskId` is always safe to put in a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(u64);

impl TaskId {
    /// The largest id, 2^53 − 1: the reference's ids are JavaScript numbers, exact up to here.
    pub const MAX: u64 = crate::entry::MAX_TASK_ID;

    /// Parses a decimal id such as `"12"` (ASCII digits, no leading zero, at most
    /// [`TaskId::MAX`]).
    pub fn parse(text: &str) -> Result<Self> {
        let valid = !text.is_empty()
            && text.len() <= 16
            && !text.starts_with('0')
            && text.bytes().all(|b| b.is_ascii_digit());
        match text.parse::<u64>() {
            Ok(n) if valid => Self::new(n).map_err(|_| Error::InvalidId(text.to_string())),
            _ => Err(Error::InvalidId(text.to_string())),
        }
    }

    /// Wraps a number from 1 to [`TaskId::MAX`].
    pub fn new(n: u64) -> Result<Self> {
        match n {
            1..=Self::MAX => Ok(Self(n)),
            _ => Err(Error::InvalidId(n.to_string())),
        }
    }

    /// The numeric value.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The task's file name, `{id}.json`.
    pub fn file_name(self) -> String {
        format!("{}.json", self.0)
    }

    /// Recognises a task file name (`{digits}.json`), as the reference does.
    pub fn from_file_name(name: &str) -> Option<Self> {
        name.strip_suffix(".json")
            .and_then(|stem| Self::parse(stem).ok())
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl TryFrom<String> for TaskId {
    type Error = Error;
    fn try_from(text: String) -> Result<Self> {
        Self::parse(&text)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> Self {
        id.to_string()
    }
}

impl std::str::FromStr for TaskId {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        Self::parse(text)
    }
}

/// Sanitises a list id or agent name the way the reference does: every character outside
/// `[a-zA-Z0-9_-]` becomes `-`. An empty result is an error.
pub fn sanitize_name(name: &str) -> Result<String> {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.is_empty() {
        return Err(Error::InvalidName(name.to_string()));
    }
    Ok(clean)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_decimal_ids_only() {
        assert_eq!(TaskId::parse("12").unwrap().get(), 12);
        assert_eq!(
            TaskId::parse("9007199254740991").unwrap().get(),
            TaskId::MAX
        );
        for bad in [
            "9007199254740992",
            "9223372036854775808",
            "",
            "0",
            "-1",
            "1a",
            "01",
            "../1",
            " 1",
            "99999999999999999999",
        ] {
            assert!(TaskId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn recognises_task_file_names() {
        assert_eq!(TaskId::from_file_name("7.json"), TaskId::new(7).ok());
        assert_eq!(TaskId::from_file_name(".7.json.tmp"), None);
        assert_eq!(TaskId::from_file_name(".events.jsonl"), None);
    }

    #[test]
    fn sanitises_like_the_reference() {
        assert_eq!(sanitize_name("my team/../x y").unwrap(), "my-team----x-y");
        assert_eq!(sanitize_name("a_b-C9").unwrap(), "a_b-C9");
        assert!(sanitize_name("").is_err());
    }
}
