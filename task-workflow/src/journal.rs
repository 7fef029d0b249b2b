//! The run's `journal.jsonl`: a `started` record when an agent starts and a `result` record
//! when it returns, keyed by a stable hash of the call. A resumed run reads its predecessor's
//! journal and answers unchanged calls from it.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::WorkflowError;

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum JournalRecord {
    /// An agent started for the call.
    Started {
        /// The call's key.
        key: String,
        /// The agent's id.
        #[serde(rename = "agentId")]
        agent_id: String,
    },
    /// The call's value.
    Result {
        /// The call's key.
        key: String,
        /// The agent's id.
        #[serde(rename = "agentId")]
        agent_id: String,
        /// What `agent()` returned.
        result: Value,
    },
}

/// The key of a call: `v2:` and the SHA-256 of the prompt, the options (keys sorted) and how
/// many identical calls came before it in the run (so three identical voters stay three).
pub fn call_key(prompt: &str, opts: &Value, occurrence: u32) -> String {
    let canonical = serde_json::json!([prompt, sorted(opts), occurrence]).to_string();
    let digest = Sha256::digest(canonical.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("v2:{hex}")
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The journal being written.
#[derive(Debug)]
pub(crate) struct Journal {
    file: Mutex<File>,
}

impl Journal {
    /// Creates the journal (nothing may be at `path`).
    pub(crate) fn create(path: &Path) -> Result<Journal, WorkflowError> {
        let file = task_output::open::create_output_file(path)?;
        Ok(Journal {
            file: Mutex::new(file),
        })
    }

    /// Appends one record (one write of one line).
    pub(crate) fn append(&self, record: &JournalRecord) {
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        let written = match self.file.lock() {
            Ok(mut file) => file.write_all(&line),
            Err(_) => Ok(()),
        };
        if let Err(error) = written {
            tracing::warn!(%error, "the workflow journal could not be written");
        }
    }
}

/// The results a previous run's journal holds: key → (agent id, result).
pub(crate) fn load_results(path: &Path) -> Result<HashMap<String, (String, Value)>, WorkflowError> {
    let bytes = task_output::open::read_untrusted(path, 256 << 20)?;
    let mut results = HashMap::new();
    task_output::jsonl::each_line(&bytes, usize::MAX, |line| {
        // A torn last line (a killed run) does not parse, and is skipped.
        if let Ok(JournalRecord::Result {
            key,
            agent_id,
            result,
        }) = line.parse()
        {
            results.insert(key, (agent_id, result));
        }
    });
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinguish_calls() {
        let a = call_key("p", &serde_json::json!({"label": "x", "model": "m"}), 0);
        let b = call_key("p", &serde_json::json!({"model": "m", "label": "x"}), 0);
        assert_eq!(a, b);
        assert!(a.starts_with("v2:") && a.len() == 67);
        assert_ne!(a, call_key("p", &serde_json::json!({"label": "x"}), 0));
        assert_ne!(
            a,
            call_key("p", &serde_json::json!({"label": "x", "model": "m"}), 1)
        );
        assert_ne!(
            a,
            call_key("q", &serde_json::json!({"label": "x", "model": "m"}), 0)
        );
    }
}
