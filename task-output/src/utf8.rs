//! UTF-8 helpers: text handed out never splits a code point, and invalid bytes are replaced
//! with U+FFFD rather than dropped.

use std::borrow::Cow;

/// Decodes `bytes` as UTF-8, replacing each invalid sequence with U+FFFD (`�`).
pub fn decode_lossy(bytes: &[u8]) -> String {
    as_str_lossy(bytes).into_owned()
}

/// Like [`decode_lossy`], borrowing `bytes` when they are valid UTF-8 (checked with the fast
/// validator of `std::str::from_utf8` first).
pub fn as_str_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Returns the first index `>= index` that does not point at a UTF-8 continuation byte
/// (clamped to `bytes.len()`): the place to start reading when an offset lands inside a code
/// point. At most three bytes are skipped, so invalid input never causes a long scan.
pub fn ceil_char_boundary(bytes: &[u8], index: usize) -> usize {
    let mut index = index.min(bytes.len());
    let limit = (index + 3).min(bytes.len());
    while index < limit && is_continuation(bytes[index]) {
        index += 1;
    }
    index
}

/// Returns the largest index `<= index` that is a character boundary of `text`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// Returns the length of the longest prefix of `bytes` that does not end inside an incomplete
/// (but so far valid) multi-byte sequence. Bytes after it may be completed by a later read.
pub fn complete_prefix_len(bytes: &[u8]) -> usize {
    let tail_start = bytes.len().saturating_sub(3);
    for (i, &byte) in bytes.iter().enumerate().skip(tail_start).rev() {
        if is_continuation(byte) {
            continue;
        }
        let needed = sequence_len(byte);
        let available = bytes.len() - i;
        let continuation_ok = bytes[i + 1..].iter().all(|&b| is_continuation(b));
        return if needed > available && continuation_ok {
            i
        } else {
            bytes.len()
        };
    }
    bytes.len()
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// The length a sequence starting with `lead` claims to have (1 for ASCII and invalid leads).
fn sequence_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_skips_continuation_bytes_only() {
        let text = "aé€😀".as_bytes(); // 1 + 2 + 3 + 4 bytes
        assert_eq!(ceil_char_boundary(text, 0), 0);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(ceil_char_boundary(text, 4), 6);
        assert_eq!(ceil_char_boundary(text, 7), 10);
        assert_eq!(ceil_char_boundary(text, 99), 10);
        assert_eq!(ceil_char_boundary(&[0x80; 10], 0), 3);
    }

    #[test]
    fn floor_moves_back_to_a_boundary() {
        let text = "a😀b";
        assert_eq!(floor_char_boundary(text, 3), 1);
        assert_eq!(floor_char_boundary(text, 5), 5);
        assert_eq!(floor_char_boundary(text, 50), 6);
    }

    #[test]
    fn complete_prefix_holds_back_only_an_unfinished_sequence() {
        let euro = "€".as_bytes();
        assert_eq!(complete_prefix_len(b"abc"), 3);
        assert_eq!(complete_prefix_len(&[b'a', euro[0], euro[1]]), 1);
        assert_eq!(complete_prefix_len(&[b'a', euro[0], euro[1], euro[2]]), 4);
        assert_eq!(complete_prefix_len(&[b'a', 0xFF]), 2);
        assert_eq!(complete_prefix_len(&[b'a', 0x80, 0x80]), 3);
    }

    #[test]
    fn lossy_decoding_replaces_rather_than_drops() {
        assert_eq!(decode_lossy(b"a\xFFb"), "a\u{FFFD}b");
    }
}
