//! task-output: every read over an output file (which holds whatever a task printed) and over
//! a mailbox (which holds whatever its writers appended).

use std::path::Path;

use serde_json::Value;
use task_output::format::format_for_model;
use task_output::mailbox::Mailbox;
use task_output::read::{
    PROGRESS_LAST_LINES, PROGRESS_RECENT_LINES, PROGRESS_TAIL_BYTES, last_lines_within,
    progress_tail, read_delta, read_tail, read_text_delta,
};
use task_output::utf8::decode_lossy;

use crate::scratch;

/// The first bytes of the input choose the sizes of the reads (1 to 64 bytes), how many lines
/// are asked for (0 to 15), and the limit of the model formatting; the rest is the file.
/// Successive delta reads rebuild the file exactly; text deltas rebuild valid UTF-8 exactly and
/// always make progress; the last lines are those of the whole file when the scan covers it;
/// the progress tail counts a small file's lines exactly; formatting for the model never
/// exceeds its limit (or the header's length); a mailbox read ends at a line end.
pub fn reads(data: &[u8]) {
    let [size, lines, limit, body @ ..] = data else {
        return;
    };
    let max = 1 + usize::from(*size) % 64;
    let n = usize::from(*lines) % 16;
    let limit = usize::from(*limit);
    let path = scratch::dir().join("task.output");
    scratch::write(&path, body);
    deltas(&path, body, max);
    text_deltas(&path, body, max.max(4));
    tail(&path, body, max);
    last_lines(&path, body, n, max);
    progress(&path, body);
    model(body, &path, limit);
    mailbox(body, max);
}

fn deltas(path: &Path, body: &[u8], max: usize) {
    let mut rebuilt = Vec::new();
    let mut offset = 0;
    loop {
        let delta = read_delta(path, offset, max).expect("a delta reads");
        assert!(delta.bytes.len() <= max);
        assert_eq!(delta.new_offset, offset + delta.bytes.len() as u64);
        if delta.bytes.is_empty() {
            break;
        }
        rebuilt.extend_from_slice(&delta.bytes);
        offset = delta.new_offset;
    }
    assert_eq!(rebuilt, body, "successive deltas rebuild the file");
    assert!(
        read_delta(path, body.len() as u64 + 1, max).is_err(),
        "past the end is an error"
    );
}

/// Text deltas of at least 4 bytes (a smaller window can hold back a whole code point for
/// ever: no caller reads less than a few KiB).
fn text_deltas(path: &Path, body: &[u8], max: usize) {
    let mut text = String::new();
    let mut offset = 0u64;
    loop {
        let delta = read_text_delta(path, offset, max).expect("a text delta reads");
        assert!(delta.new_offset >= offset, "a text delta never goes back");
        if delta.new_offset == offset {
            assert!(delta.text.is_empty());
            // Only an unfinished code point at the very end is held back.
            assert!(
                body.len() as u64 - offset < 4,
                "a text delta stopped at {offset}"
            );
            break;
        }
        text.push_str(&delta.text);
        offset = delta.new_offset;
    }
    if let Ok(valid) = std::str::from_utf8(body) {
        assert_eq!(text, valid, "text deltas rebuild valid UTF-8 exactly");
    }
}

fn tail(path: &Path, body: &[u8], max: usize) {
    let text = read_tail(path, max).expect("a tail reads");
    if body.len() <= max {
        assert_eq!(text, decode_lossy(body));
    } else {
        assert!(text.starts_with('[') && text.contains("KB of earlier output omitted]\n"));
    }
}

fn last_lines(path: &Path, body: &[u8], n: usize, max: usize) {
    let got = last_lines_within(path, n, max).expect("last lines read");
    assert!(got.len() <= n);
    let whole = last_lines_within(path, n, body.len().max(1)).expect("last lines read");
    let expected: Vec<String> = match body.strip_suffix(b"\n").unwrap_or(body) {
        _ if body.is_empty() || n == 0 => Vec::new(),
        text => {
            let all: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            all[all.len().saturating_sub(n)..]
                .iter()
                .map(|line| decode_lossy(line))
                .collect()
        }
    };
    assert_eq!(whole, expected, "the last lines of a file scanned whole");
}

fn progress(path: &Path, body: &[u8]) {
    let tail = progress_tail(path).expect("a progress tail reads");
    assert!(tail.last_lines.len() <= PROGRESS_LAST_LINES);
    assert!(tail.recent_lines.len() <= PROGRESS_RECENT_LINES);
    assert_eq!(tail.total_bytes, body.len() as u64);
    if body.len() <= PROGRESS_TAIL_BYTES {
        let trimmed = body.strip_suffix(b"\n").unwrap_or(body);
        let lines = match body.is_empty() {
            true => 0,
            false => trimmed.split(|&b| b == b'\n').count() as u64,
        };
        assert_eq!(
            tail.total_lines, lines,
            "a small file's lines are counted exactly"
        );
        assert!(!tail.total_lines_estimated);
    }
}

fn model(body: &[u8], path: &Path, limit: usize) {
    let text = decode_lossy(body);
    let formatted = format_for_model(&text, path, limit);
    let chars = formatted.chars().count();
    let header = format!("[Truncated. Full output: {}]\n\n", path.display());
    assert!(
        chars <= limit.max(header.chars().count()),
        "{chars} chars over the limit {limit}"
    );
    if text.chars().count() <= limit {
        assert_eq!(formatted, text);
    }
}

fn mailbox(body: &[u8], max: usize) {
    let dir = scratch::fresh("mailbox");
    let mailbox = Mailbox::open(&dir, "fuzz").expect("a mailbox");
    scratch::write(mailbox.path(), body);
    let mut offset = 0u64;
    loop {
        let batch = mailbox
            .read_from::<Value>(offset, max)
            .expect("a mailbox reads");
        assert!(batch.end >= offset && batch.end <= body.len() as u64);
        if batch.end > offset {
            assert_eq!(
                body[batch.end as usize - 1],
                b'\n',
                "a batch ends at a line end"
            );
        }
        let mut last = None;
        for message in &batch.messages {
            assert!(last < Some(message.offset), "messages come in order");
            last = Some(message.offset);
        }
        if batch.end == offset {
            break;
        }
        offset = batch.end;
    }
    let _ = mailbox.recent::<Value>(3);
}
