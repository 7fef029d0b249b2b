//! Splitting a monitor's byte stream into event lines.

/// Turns arbitrary chunks of bytes into complete lines, one event each.
///
/// A line ends at `\n` (a preceding `\r` is dropped). Bytes after the last newline wait for the
/// next chunk; [`finish`](Self::finish) flushes them at end of stream. A line longer than the
/// limit is cut into pieces of at most that many bytes, never inside a UTF-8 character, so memory
/// stays bounded whatever the producer writes. Invalid UTF-8 becomes U+FFFD, never dropped.
///
/// ```
/// use task_shell::lines::LineSplitter;
/// let mut lines = Vec::new();
/// let mut splitter = LineSplitter::new(1024);
/// splitter.push(b"tick 1\nti", |line| lines.push(line));
/// splitter.push(b"ck 2\r\npartial", |line| lines.push(line));
/// lines.extend(splitter.finish());
/// assert_eq!(lines, ["tick 1", "tick 2", "partial"]);
/// ```
#[derive(Debug)]
pub struct LineSplitter {
    pending: Vec<u8>,
    max_line_bytes: usize,
}

impl LineSplitter {
    /// A splitter that cuts lines longer than `max_line_bytes` (at least 4, so a character fits).
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            pending: Vec::new(),
            max_line_bytes: max_line_bytes.max(4),
        }
    }

    /// Feeds a chunk and calls `emit` with every line it completes, in order.
    pub fn push(&mut self, mut chunk: &[u8], mut emit: impl FnMut(String)) {
        while let Some(at) = memchr::memchr(b'\n', chunk) {
            self.pending.extend_from_slice(&chunk[..at]);
            chunk = &chunk[at + 1..];
            self.emit_overflow(&mut emit);
            if self.pending.last() == Some(&b'\r') {
                self.pending.pop();
            }
            emit(String::from_utf8_lossy(&self.pending).into_owned());
            self.pending.clear();
        }
        self.pending.extend_from_slice(chunk);
        self.emit_overflow(&mut emit);
    }

    /// Returns the unterminated last line, if any bytes are left.
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Some(line)
    }

    /// Emits full-size pieces while the pending line is over the limit.
    fn emit_overflow(&mut self, emit: &mut impl FnMut(String)) {
        while self.pending.len() > self.max_line_bytes {
            let cut = utf8_boundary_at_or_before(&self.pending, self.max_line_bytes);
            let rest = self.pending.split_off(cut);
            emit(String::from_utf8_lossy(&self.pending).into_owned());
            self.pending = rest;
        }
    }
}

/// The largest index `<= at` that does not fall inside a UTF-8 sequence (falls back to `at` when
/// the bytes there are not UTF-8 continuation bytes of a valid character).
fn utf8_boundary_at_or_before(bytes: &[u8], at: usize) -> usize {
    let is_continuation = |b: u8| b & 0b1100_0000 == 0b1000_0000;
    (at.saturating_sub(3)..=at)
        .rev()
        .find(|&i| bytes.get(i).is_none_or(|&b| !is_continuation(b)))
        .filter(|&i| i > 0)
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut lines = Vec::new();
        let mut splitter = LineSplitter::new(max);
        for chunk in chunks {
            splitter.push(chunk, |line| lines.push(line));
        }
        lines.extend(splitter.finish());
        lines
    }

    #[test]
    fn lines_across_chunk_boundaries_come_out_whole_and_in_order() {
        let lines = split_all(&[b"a", b"b\nc", b"d\n\ne\n"], 100);
        assert_eq!(lines, ["ab", "cd", "", "e"]);
    }

    #[test]
    fn crlf_is_one_terminator() {
        assert_eq!(split_all(&[b"x\r", b"\ny\r\n"], 100), ["x", "y"]);
    }

    #[test]
    fn long_lines_are_cut_at_the_limit() {
        assert_eq!(split_all(&[b"abcdefghij\n"], 4), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "aé€😀b\n".as_bytes();
        let lines = split_all(&[text], 4);
        assert_eq!(lines.concat(), "aé€😀b");
        assert!(
            lines.iter().all(|line| !line.contains('\u{FFFD}')),
            "{lines:?}"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        assert_eq!(split_all(&[b"a\xffb\n"], 100), ["a\u{FFFD}b"]);
    }

    #[test]
    fn empty_stream_has_no_lines() {
        assert!(split_all(&[], 100).is_empty());
    }
}
