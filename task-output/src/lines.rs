//! Line splitting shared by the file reads and the pipe-mode ring.

use memchr::{memchr, memrchr_iter};

use crate::utf8::{ceil_char_boundary, decode_lossy};

/// Splits `bytes` into lines without their `\n`, decoded lossily; one trailing `\n` ends the
/// last line rather than starting an empty one, so `"a\nb\n"` gives two lines.
pub(crate) fn split_lines(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes.split(|&b| b == b'\n').map(decode_lossy).collect()
}

/// Where the last `n` lines of `bytes` start (as [`split_lines`] counts them), or `None` when
/// `bytes` holds `n` lines or fewer.
pub(crate) fn last_lines_start(bytes: &[u8], n: usize) -> Option<usize> {
    let end = bytes.len() - usize::from(bytes.last() == Some(&b'\n'));
    let nth = n.checked_sub(1)?;
    memrchr_iter(b'\n', &bytes[..end])
        .nth(nth)
        .map(|newline| newline + 1)
}

/// The last `n` lines of `bytes`, oldest first.
pub(crate) fn last_lines_of(bytes: &[u8], n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    split_lines(&bytes[last_lines_start(bytes, n).unwrap_or(0)..])
}

/// `bytes` without its first line, which was cut at its start: everything after the first `\n`.
/// When no line follows, the cut line itself is kept, from its first character boundary.
pub(crate) fn without_cut_line(bytes: &[u8]) -> &[u8] {
    match memchr(b'\n', bytes) {
        Some(newline) if newline + 1 < bytes.len() => &bytes[newline + 1..],
        _ => &bytes[ceil_char_boundary(bytes, 0)..],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_newline_ends_the_last_line() {
        assert_eq!(split_lines(b"a\nb\n"), ["a", "b"]);
        assert_eq!(split_lines(b"a\n\n"), ["a", ""]);
        assert_eq!(split_lines(b"\n"), [""]);
        assert!(split_lines(b"").is_empty());
    }

    #[test]
    fn last_lines_start_counts_from_the_end() {
        assert_eq!(last_lines_start(b"a\nb\nc\n", 2), Some(2));
        assert_eq!(last_lines_start(b"a\nb\nc", 1), Some(4));
        assert_eq!(last_lines_start(b"a\nb\nc", 3), None);
        assert_eq!(last_lines_start(b"a\nb", 0), None);
        assert_eq!(last_lines_of(b"a\nb\nc\n", 2), ["b", "c"]);
    }

    #[test]
    fn a_cut_line_is_dropped_unless_it_is_the_only_one() {
        assert_eq!(without_cut_line(b"ut\nnext\n"), b"next\n");
        assert_eq!(without_cut_line(b"only line\n"), b"only line\n");
        assert_eq!(without_cut_line(&[0x82, 0xAC, b'x']), b"x");
    }
}
