//! A remote task's event log: its output file, one event (a JSON object) per line, appended as
//! pages arrive. The log is the cursor's truth: after a crash the last whole line names the
//! last event received, and a torn last line is cut off, so no event is ever written twice.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use serde_json::{Map, Value};
use task_output::OutputError;
use task_output::open::open_output_append;

use crate::api::event_id;

/// How far back from the end the last line is looked for.
const LAST_LINE_WINDOW: u64 = 4 * 1024 * 1024;

/// Appends events to an output file.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
}

impl EventLog {
    /// The log at `path` (the file must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        EventLog { path: path.into() }
    }

    /// Appends `events`, one line each, in one write.
    ///
    /// # Errors
    /// The file cannot be opened (or is a symlink now) or written.
    pub fn append(&self, events: &[Map<String, Value>]) -> Result<(), OutputError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for event in events {
            // A map of JSON values always serializes.
            if serde_json::to_writer(&mut buf, event).is_ok() {
                buf.push(b'\n');
            }
        }
        let mut file = open_output_append(&self.path)?;
        file.write_all(&buf)
            .map_err(|e| OutputError::from_io(&self.path, e))
    }

    /// Cuts a torn last line (a crash mid-append) and returns the id of the last event logged.
    ///
    /// # Errors
    /// The file cannot be read or truncated.
    pub fn recover_cursor(&self) -> Result<Option<String>, OutputError> {
        Ok(self
            .recover_last()?
            .and_then(|event| event_id(&event).map(str::to_owned)))
    }

    /// Cuts a torn last line (a crash mid-append) and returns the last event logged.
    ///
    /// # Errors
    /// The file cannot be read or truncated.
    pub fn recover_last(&self) -> Result<Option<Map<String, Value>>, OutputError> {
        let io = |e| OutputError::from_io(&self.path, e);
        let file = task_output::open::NoFollow::read_write().open(&self.path)?;
        let len = file.metadata().map_err(io)?.len();
        let start = len.saturating_sub(LAST_LINE_WINDOW);
        let mut tail = vec![0u8; usize::try_from(len - start).unwrap_or(0)];
        file.read_exact_at(&mut tail, start).map_err(io)?;
        let whole = match tail.iter().rposition(|&b| b == b'\n') {
            Some(end) => end + 1,
            None if start == 0 => 0,
            None => return Ok(None),
        };
        if whole < tail.len() {
            let keep = start + whole as u64;
            tracing::warn!(path = %self.path.display(), keep, len, "cutting a torn last event");
            file.set_len(keep).map_err(io)?;
        }
        let lines = &tail[..whole];
        let last = lines[..whole.saturating_sub(1)]
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap_or_default();
        Ok(serde_json::from_slice::<Map<String, Value>>(last).ok())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn event(id: &str) -> Map<String, Value> {
        json!({"id": id, "type": "assistant"})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn the_cursor_is_the_last_whole_event_and_a_torn_line_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.output");
        std::fs::write(&path, b"").unwrap();
        let log = EventLog::new(&path);
        assert_eq!(log.recover_cursor().unwrap(), None);
        log.append(&[event("1"), event("2")]).unwrap();
        assert_eq!(log.recover_cursor().unwrap().as_deref(), Some("2"));
        let mut file = open_output_append(&path).unwrap();
        file.write_all(br#"{"id":"3","ty"#).unwrap();
        assert_eq!(log.recover_cursor().unwrap().as_deref(), Some("2"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.ends_with('\n'));
    }
}
