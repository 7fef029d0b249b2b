//! Line splitting shared by the file reads and the pipe-mode ring.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use memchr::arch::x86_64::sse2::memchr::One as Sse2;

use crate::utf8::{ceil_char_boundary, decode_lossy};

// The newline searches of this crate. On x86_64 they use SSE2, which every x86_64 processor
// has, directly: `memchr`'s top-level functions first ask the processor which vector
// instructions it has (`cpuid` through `std_detect`, a trap under virtualization), a cost a
// short command such as `tasks output ID --tail 5` pays once per process (about 2 % of it).
// `Sse2::new` cannot fail where SSE2 is enabled at compile time; the fallback is `memchr`'s.

/// Where the first `\n` of `bytes` is.
pub(crate) fn first_newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(newline) = Sse2::new(b'\n') {
        return newline.find(bytes);
    }
    memchr::memchr(b'\n', bytes)
}

/// How many `\n` `bytes` holds.
pub(crate) fn count_newlines(bytes: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(newline) = Sse2::new(b'\n') {
        return newline.count(bytes);
    }
    memchr::memchr_iter(b'\n', bytes).count()
}

/// Where the `nth` `\n` of `bytes` from its end is (0: the last one).
pub(crate) fn nth_newline_from_end(bytes: &[u8], nth: usize) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(newline) = Sse2::new(b'\n') {
        return newline.iter(bytes).rev().nth(nth);
    }
    memchr::memrchr_iter(b'\n', bytes).nth(nth)
}

/// How many `\n` the last ones of `bytes` are, counting no more than `max`.
pub(crate) fn count_last_newlines(bytes: &[u8], max: usize) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if let Some(newline) = Sse2::new(b'\n') {
        return newline.iter(bytes).rev().take(max).count();
    }
    memchr::memrchr_iter(b'\n', bytes).take(max).count()
}

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
    nth_newline_from_end(&bytes[..end], nth).map(|newline| newline + 1)
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
    match first_newline(bytes) {
        Some(newline) if newline + 1 < bytes.len() => &bytes[newline + 1..],
        _ => &bytes[ceil_char_boundary(bytes, 0)..],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte strings of every length up to 300 (several vector widths, aligned or not), with
    /// newlines at the edges, in runs, and none at all; positions worked out byte by byte.
    #[test]
    fn the_newline_searches_agree_with_a_byte_by_byte_scan() {
        for len in 0..300usize {
            for pattern in 0..5u8 {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| {
                        let newline = match pattern {
                            0 => false,
                            1 => i % 7 == 3,
                            2 => i == 0 || i + 1 == len,
                            3 => (40..60).contains(&i),
                            _ => i % 97 == 96,
                        };
                        if newline { b'\n' } else { b'x' }
                    })
                    .collect();
                let positions: Vec<usize> = (0..len).filter(|&i| bytes[i] == b'\n').collect();
                assert_eq!(
                    first_newline(&bytes),
                    positions.first().copied(),
                    "{len} {pattern}"
                );
                assert_eq!(count_newlines(&bytes), positions.len(), "{len} {pattern}");
                for nth in 0..4 {
                    let expected = positions.iter().rev().nth(nth).copied();
                    assert_eq!(
                        nth_newline_from_end(&bytes, nth),
                        expected,
                        "{len} {pattern}"
                    );
                    let last = positions.len().min(nth);
                    assert_eq!(count_last_newlines(&bytes, nth), last, "{len} {pattern}");
                }
            }
        }
    }

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
