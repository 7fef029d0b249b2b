//! A ring of the most recent lines of a byte stream, kept in one buffer.

use std::collections::VecDeque;

use memchr::memrchr;

use crate::utf8::{ceil_char_boundary, decode_lossy};

/// The most recent lines of a stream, bounded by a line count and a byte count.
///
/// Lines live in one byte buffer with a queue of their start offsets, so pushing a chunk costs
/// a copy of (at most) its last `max_lines` lines and a `memchr` over them, with no allocation
/// per line.
#[derive(Debug)]
pub(crate) struct RecentLines {
    buffer: Vec<u8>,
    /// Start offsets in `buffer` of the kept lines; the last one is the line still being written
    /// (empty when the stream ends with `\n`).
    starts: VecDeque<usize>,
    max_lines: usize,
    max_bytes: usize,
}

/// Below this many dead bytes the buffer is not compacted.
const MIN_COMPACT_BYTES: usize = 64 * 1024;

impl RecentLines {
    pub(crate) fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            starts: VecDeque::from([0]),
            max_lines: max_lines.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let (mut part, mut reset) = self.relevant_part(chunk);
        if part.len() > self.max_bytes {
            part = drop_cut_line(&part[part.len() - self.max_bytes..]);
            reset = true;
        }
        if reset {
            self.buffer.clear();
            self.starts.clear();
            self.starts.push_back(0);
        }
        let base = self.buffer.len();
        self.buffer.extend_from_slice(part);
        self.starts
            .extend(memchr::memchr_iter(b'\n', part).map(|newline| base + newline + 1));
        self.trim();
    }

    /// The last `n` complete-or-current lines, oldest first (a line cut by the byte bound
    /// starts at a character boundary).
    pub(crate) fn last(&self, n: usize) -> Vec<String> {
        let mut ends: Vec<usize> = self.starts.iter().skip(1).map(|&start| start - 1).collect();
        ends.push(self.buffer.len());
        let mut lines: Vec<(usize, usize)> = self.starts.iter().copied().zip(ends).collect();
        if lines.last().is_some_and(|&(start, end)| start == end) {
            lines.pop();
        }
        let skip = lines.len().saturating_sub(n);
        lines[skip..]
            .iter()
            .map(|&(start, end)| {
                let line = &self.buffer[start..end];
                decode_lossy(&line[ceil_char_boundary(line, 0)..])
            })
            .collect()
    }

    /// The part of `chunk` that can still matter, and whether it replaces everything kept.
    fn relevant_part<'a>(&self, chunk: &'a [u8]) -> (&'a [u8], bool) {
        let mut end = chunk.len();
        for _ in 0..=self.max_lines {
            match memrchr(b'\n', &chunk[..end]) {
                Some(newline) => end = newline,
                None => return (chunk, false),
            }
        }
        (&chunk[end + 1..], true)
    }

    fn trim(&mut self) {
        // One more start than lines: the (possibly empty) line being written.
        while self.starts.len() > self.max_lines + 1 {
            self.starts.pop_front();
        }
        while self.starts.len() > 1 && self.live_bytes() > self.max_bytes {
            self.starts.pop_front();
        }
        if self.live_bytes() > self.max_bytes
            && let Some(first) = self.starts.front_mut()
        {
            *first = self.buffer.len() - self.max_bytes;
        }
        self.compact();
    }

    fn live_bytes(&self) -> usize {
        self.buffer.len() - self.starts.front().copied().unwrap_or(0)
    }

    fn compact(&mut self) {
        let dead = self.starts.front().copied().unwrap_or(0);
        if dead < MIN_COMPACT_BYTES || dead < self.buffer.len() / 2 {
            return;
        }
        self.buffer.drain(..dead);
        for start in &mut self.starts {
            *start -= dead;
        }
    }
}

/// Drops the (cut) first line of `bytes`, unless it is the only line.
fn drop_cut_line(bytes: &[u8]) -> &[u8] {
    match memchr::memchr(b'\n', bytes) {
        Some(newline) if newline + 1 < bytes.len() => &bytes[newline + 1..],
        _ => bytes,
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
    fn only_the_most_recent_lines_are_kept() {
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
    fn byte_bound_cuts_old_lines_then_the_start_of_a_long_line() {
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
    }

    #[test]
    fn compaction_keeps_offsets_right() {
        let mut ring = RecentLines::new(2, 1 << 20);
        let line = vec![b'x'; 1000];
        for i in 0..500 {
            ring.push(&line);
            ring.push(format!("{i}\n").as_bytes());
        }
        let last = ring.last(1);
        assert_eq!(last.len(), 1);
        assert!(last[0].ends_with("499") && last[0].len() == 1003);
        assert!(ring.buffer.len() < 4 * MIN_COMPACT_BYTES);
    }
}
