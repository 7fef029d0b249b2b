//! The most recent output of a stream, for showing its last lines: the one bounded line buffer
//! of the workspace (pipe mode's recent lines, an agent CLI's stderr tail).

use crate::lines::{last_lines_of, without_cut_line};

/// The last bytes of a stream (at most `max_bytes`), from which the last lines (at most
/// `max_lines`) are split when asked for.
///
/// Pushing a chunk costs one copy of (at most `max_bytes` of) it and no per-line work; the
/// buffer is compacted once its dead prefix reaches `max_bytes`, so it never exceeds twice
/// that and each byte is moved at most once more.
///
/// ```
/// use task_output::RecentLines;
///
/// let mut recent = RecentLines::new(2, 1024);
/// recent.push(b"one\ntw");
/// recent.push(b"o\nthree\n");
/// assert_eq!(recent.last(5), ["two", "three"]);
/// ```
#[derive(Debug)]
pub struct RecentLines {
    buffer: Vec<u8>,
    /// Where the kept bytes start in `buffer`.
    start: usize,
    /// The byte pushed just before the kept ones, if any: unless it is `\n`, the first kept
    /// line was cut.
    before: Option<u8>,
    max_lines: usize,
    max_bytes: usize,
}

impl RecentLines {
    /// Keeps the last `max_bytes` (at least 1) of the stream, and shows at most `max_lines`.
    pub fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            before: None,
            max_lines,
            max_bytes: max_bytes.max(1),
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.max_bytes {
            let cut_at = chunk.len() - self.max_bytes;
            self.before = match cut_at {
                0 => self.buffer.last().copied().or(self.before),
                _ => Some(chunk[cut_at - 1]),
            };
            self.buffer.clear();
            self.buffer.extend_from_slice(&chunk[cut_at..]);
            self.start = 0;
            return;
        }
        self.buffer.extend_from_slice(chunk);
        if self.buffer.len() - self.start > self.max_bytes {
            self.start = self.buffer.len() - self.max_bytes;
            self.before = Some(self.buffer[self.start - 1]);
        }
        if self.start >= self.max_bytes {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
    }

    /// The last `n` lines (at most `max_lines`), oldest first. A line cut by the byte bound is
    /// left out unless it is the only one, which then starts at a character boundary.
    pub fn last(&self, n: usize) -> Vec<String> {
        let kept = &self.buffer[self.start..];
        let cut = self.before.is_some_and(|byte| byte != b'\n');
        let kept = if cut { without_cut_line(kept) } else { kept };
        last_lines_of(kept, n.min(self.max_lines))
    }

    /// The bytes kept (at most `max_bytes`).
    pub fn kept_bytes(&self) -> usize {
        self.buffer.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(ring: &RecentLines) -> Vec<String> {
        ring.last(usize::MAX)
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut ring = RecentLines::new(10, 1024);
        ring.push(b"one\ntw");
        ring.push(b"o\nthree");
        assert_eq!(lines(&ring), ["one", "two", "three"]);
        ring.push(b"\n");
        assert_eq!(lines(&ring), ["one", "two", "three"]);
        assert_eq!(ring.last(2), ["two", "three"]);
    }

    #[test]
    fn only_the_most_recent_lines_are_returned() {
        let mut ring = RecentLines::new(3, 1024);
        for i in 0..10 {
            ring.push(format!("line {i}\n").as_bytes());
        }
        assert_eq!(lines(&ring), ["line 7", "line 8", "line 9"]);
        let many: String = (10..20).map(|i| format!("line {i}\n")).collect();
        ring.push(many.as_bytes());
        assert_eq!(lines(&ring), ["line 17", "line 18", "line 19"]);
    }

    #[test]
    fn byte_bound_drops_cut_lines_and_cuts_a_single_long_line_on_a_character() {
        let mut ring = RecentLines::new(100, 8);
        ring.push(b"abc\ndef\n");
        assert_eq!(lines(&ring), ["abc", "def"]);
        ring.push(b"ghi\n");
        assert_eq!(lines(&ring), ["def", "ghi"]);
        ring.push(b"jk\nlmnopqrstu\nvw\n");
        assert_eq!(lines(&ring), ["vw"]);
        ring.push(b"0123456789");
        assert_eq!(lines(&ring), ["23456789"]);
        ring.push("é€".as_bytes());
        assert_eq!(lines(&ring), ["789é€"]);
        ring.push(b"x");
        assert_eq!(lines(&ring), ["89é€x"]);
        ring.push(b"\n12345678");
        assert_eq!(lines(&ring), ["12345678"]);
    }

    #[test]
    fn compaction_keeps_the_buffer_within_twice_the_bound() {
        let mut ring = RecentLines::new(2, 4096);
        for i in 0..5000 {
            ring.push(format!("{i}\n").as_bytes());
            assert!(ring.buffer.len() <= 2 * 4096);
        }
        assert_eq!(lines(&ring), ["4998", "4999"]);
    }
}
