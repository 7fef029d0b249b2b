//! A session's events, paged: the agent's transcript read line by line from a byte cursor.
//!
//! An event's id is the byte offset just past its line, so `after_id` is where the next read
//! starts (a delta read: the cost of a page never depends on the transcript's size). A page
//! holds whole lines only, at most [`PageLimits::max_bytes`] of them (always at least one line,
//! up to [`PageLimits::max_line_bytes`]; a longer line becomes an `oversized_event` stub).

use serde_json::{Map, Value, json};
use task_output::jsonl::JsonLines;
use task_protocol::remote_api::EventsPage;

use task_session::Result;

/// Size limits of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// The most transcript bytes one page covers (past the first line).
    pub max_bytes: usize,
    /// The longest line sent whole.
    pub max_line_bytes: usize,
}

impl Default for PageLimits {
    fn default() -> Self {
        PageLimits {
            max_bytes: 256 * 1024,
            max_line_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Reads up to `len` bytes at `offset` (fewer at the end of the transcript).
pub trait Source {
    /// The bytes.
    ///
    /// # Errors
    /// The transcript cannot be read.
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
}

/// The page of events after byte `after`.
///
/// # Errors
/// The transcript cannot be read.
pub fn page(source: &dyn Source, after: u64, limits: PageLimits) -> Result<EventsPage> {
    let chunk = source.read(after, limits.max_bytes)?;
    let mut data = Vec::new();
    let mut lines = JsonLines::new(usize::MAX).starting_at(after);
    lines.push(&chunk, |line| {
        data.extend(line.text().map(|text| event(text, line.end)))
    });
    let mut offset = after + chunk.len() as u64 - lines.pending();
    if offset == after && chunk.len() >= limits.max_bytes {
        // The first line is longer than a page: sent alone, or as a stub past the line limit.
        let long = source.read(after, limits.max_line_bytes)?;
        if let Some(end) = memchr::memchr(b'\n', &long) {
            offset = after + end as u64 + 1;
            data.push(event(&long[..end], offset));
        } else if let Some(next) = skip_line(source, after, &long)? {
            offset = next;
            data.push(stub(next, next - after));
        }
    }
    let has_more = !source.read(offset, 1)?.is_empty();
    let first_id = data.first().and_then(id_of);
    let last_id = data.last().and_then(id_of);
    Ok(EventsPage {
        data,
        has_more,
        first_id,
        last_id,
    })
}

/// The offset past the line that starts at `offset` (whose first bytes are `head`), if it ends.
fn skip_line(source: &dyn Source, offset: u64, head: &[u8]) -> Result<Option<u64>> {
    let mut at = offset + head.len() as u64;
    loop {
        let chunk = source.read(at, 64 * 1024)?;
        if chunk.is_empty() {
            return Ok(None);
        }
        if let Some(end) = memchr::memchr(b'\n', &chunk) {
            return Ok(Some(at + end as u64 + 1));
        }
        at += chunk.len() as u64;
    }
}

/// A transcript line as an event: its JSON object with `id` set, or (for anything else) a
/// `raw` event carrying the text.
fn event(line: &[u8], next: u64) -> Map<String, Value> {
    let mut event = match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => map,
        _ => json!({"type": "raw", "text": String::from_utf8_lossy(line)})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    event.insert("id".into(), Value::String(next.to_string()));
    event
}

fn stub(next: u64, bytes: u64) -> Map<String, Value> {
    let stub = json!({"type": "system", "subtype": "oversized_event", "bytes": bytes,
        "id": next.to_string()});
    stub.as_object().cloned().unwrap_or_default()
}

fn id_of(event: &Map<String, Value>) -> Option<String> {
    event.get("id").and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    struct Bytes(Vec<u8>);

    impl Source for Bytes {
        fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            let start = usize::try_from(offset).unwrap().min(self.0.len());
            let end = (start + len).min(self.0.len());
            Ok(self.0[start..end].to_vec())
        }
    }

    fn ids(page: &EventsPage) -> Vec<String> {
        page.data.iter().filter_map(id_of).collect()
    }

    #[test]
    fn pages_hold_whole_lines_within_the_limit_and_chain_by_cursor() {
        let text = b"{\"type\":\"a\"}\n{\"type\":\"b\"}\nnot json\n{\"type\":\"c\"".to_vec();
        let source = Bytes(text);
        let limits = PageLimits {
            max_bytes: 20,
            max_line_bytes: 100,
        };
        let first = page(&source, 0, limits).unwrap();
        assert_eq!(ids(&first), ["13"]);
        assert!(first.has_more);
        let second = page(&source, 13, limits).unwrap();
        assert_eq!(ids(&second), ["26"]);
        let third = page(&source, 26, limits).unwrap();
        assert_eq!(third.data[0]["type"], "raw");
        assert_eq!(third.data[0]["text"], "not json");
        // The torn last line is not an event yet.
        assert_eq!(ids(&third), ["35"]);
        let last = page(&source, 35, limits).unwrap();
        assert!(last.data.is_empty());
        assert!(last.has_more, "a line is being written");
    }

    #[test]
    fn an_oversized_line_becomes_a_stub_and_the_cursor_moves_past_it() {
        let mut text = vec![b'x'; 300];
        text.extend_from_slice(b"\n{\"type\":\"ok\"}\n");
        let source = Bytes(text);
        let limits = PageLimits {
            max_bytes: 50,
            max_line_bytes: 100,
        };
        let first = page(&source, 0, limits).unwrap();
        assert_eq!(first.data[0]["subtype"], "oversized_event");
        assert_eq!(ids(&first), ["301"]);
        let second = page(&source, 301, limits).unwrap();
        assert_eq!(second.data[0]["type"], "ok");
        assert!(!second.has_more);
    }
}
