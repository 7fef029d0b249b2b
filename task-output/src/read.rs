//! Reads over a growing output file whose cost depends on what they return, never on the file's
//! size: every read seeks (with `pread`) to the part it needs.
//!
//! These are plain blocking functions; async callers run them in
//! `tokio::task::spawn_blocking`. Reads follow symlinks on purpose, so an output path that
//! [links to a transcript](crate::transcript::link_transcript) reads the transcript; only
//! writes refuse symlinks.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bytes::Bytes;

use crate::OutputError;
use crate::lines::{last_lines_of, split_lines, without_cut_line};
use crate::utf8::{as_str_lossy, ceil_char_boundary, complete_prefix_len, decode_lossy};

/// The default and usual upper bound of one delta or tail read: 8 MiB.
pub const DEFAULT_MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// How many bytes from the end of the file [`progress_tail`] looks at.
pub const PROGRESS_TAIL_BYTES: usize = 4096;

/// How many lines [`ProgressTail::last_lines`] holds.
pub const PROGRESS_LAST_LINES: usize = 5;

/// How many lines [`ProgressTail::recent_lines`] holds.
pub const PROGRESS_RECENT_LINES: usize = 100;

/// Size of the first block the backwards scan of [`last_lines`] reads; each next block doubles,
/// up to [`MAX_SCAN_BLOCK_BYTES`].
const FIRST_SCAN_BLOCK_BYTES: usize = 4 * 1024;

/// Largest block of the backwards scan.
const MAX_SCAN_BLOCK_BYTES: usize = 64 * 1024;

/// The bytes a delta read returned and where the next read should start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    /// The bytes from the requested offset, at most the requested maximum.
    pub bytes: Bytes,
    /// The offset just past `bytes`: pass it to the next [`read_delta`].
    pub new_offset: u64,
}

/// Text decoded from a delta read, with an unfinished trailing code point held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    /// The decoded text; invalid bytes appear as U+FFFD.
    pub text: String,
    /// The offset just past the bytes decoded into `text`: pass it to the next read.
    pub new_offset: u64,
}

/// What a progress display needs from the end of an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressTail {
    /// The last [`PROGRESS_LAST_LINES`] lines (fewer if the tail holds fewer), oldest first.
    pub last_lines: Vec<String>,
    /// The last [`PROGRESS_RECENT_LINES`] lines (fewer if the tail holds fewer), oldest first.
    pub recent_lines: Vec<String>,
    /// The number of lines in the file: exact when the whole file fit in the tail, otherwise
    /// extrapolated from the line density of the tail.
    pub total_lines: u64,
    /// Whether `total_lines` is an estimate.
    pub total_lines_estimated: bool,
    /// The file's size in bytes when it was read.
    pub total_bytes: u64,
}

/// Reads at most `max_bytes` from `path` starting at byte `offset`.
///
/// Reading at the end of the file returns no bytes and the same offset; an offset past the end
/// is [`OutputError::OffsetPastEnd`] (the file was replaced or truncated). Concatenating the
/// bytes of successive reads, each starting at the previous `new_offset`, rebuilds the file
/// exactly.
pub fn read_delta(path: &Path, offset: u64, max_bytes: usize) -> Result<Delta, OutputError> {
    let (file, len) = open_with_len(path)?;
    if offset > len {
        return Err(OutputError::OffsetPastEnd {
            path: path.to_path_buf(),
            offset,
            len,
        });
    }
    let wanted = clamp_len(len - offset, max_bytes);
    let bytes =
        read_exact_at(&file, offset, wanted).map_err(|err| OutputError::from_io(path, err))?;
    let new_offset = offset + bytes.len() as u64;
    Ok(Delta {
        bytes: Bytes::from(bytes),
        new_offset,
    })
}

/// Like [`read_delta`], decoded as text that never splits a code point.
///
/// An `offset` inside a code point moves forward to the next character boundary, and an
/// unfinished multi-byte sequence at the end is held back (`new_offset` points at its first
/// byte) so the next read decodes it whole. Invalid bytes are replaced with U+FFFD.
pub fn read_text_delta(
    path: &Path,
    offset: u64,
    max_bytes: usize,
) -> Result<TextDelta, OutputError> {
    let delta = read_delta(path, offset, max_bytes)?;
    let start = ceil_char_boundary(&delta.bytes, 0);
    let bytes = &delta.bytes[start..];
    let complete = complete_prefix_len(bytes);
    let held_back = (bytes.len() - complete) as u64;
    Ok(TextDelta {
        text: decode_lossy(&bytes[..complete]),
        new_offset: delta.new_offset - held_back,
    })
}

/// Reads the last `max_bytes` (at most) of `path` as text.
///
/// When the file is longer, the text starts with `[{N}KB of earlier output omitted]\n`, where
/// `N` is the number of skipped bytes divided by 1024 and rounded; the cut never splits a code
/// point.
pub fn read_tail(path: &Path, max_bytes: usize) -> Result<String, OutputError> {
    let (file, len) = open_with_len(path)?;
    let wanted = clamp_len(len, max_bytes);
    let start = len - wanted as u64;
    let bytes =
        read_exact_at(&file, start, wanted).map_err(|err| OutputError::from_io(path, err))?;
    if start == 0 {
        return Ok(String::from_utf8(bytes).unwrap_or_else(|err| decode_lossy(err.as_bytes())));
    }
    let skip = ceil_char_boundary(&bytes, 0);
    let omitted_kb = (start + skip as u64 + 512) / 1024;
    let body = as_str_lossy(&bytes[skip..]);
    let mut text = format!("[{omitted_kb}KB of earlier output omitted]\n");
    text.push_str(&body);
    Ok(text)
}

/// Returns the last `n` lines of `path`, oldest first, without their `\n`.
///
/// The file is scanned backwards from its end with `memrchr`, so the cost is the size of those
/// lines, not of the file; the scan stops after [`DEFAULT_MAX_READ_BYTES`] (see
/// [`last_lines_within`]). A final `\n` does not start an extra empty line.
pub fn last_lines(path: &Path, n: usize) -> Result<Vec<String>, OutputError> {
    last_lines_within(path, n, DEFAULT_MAX_READ_BYTES)
}

/// Like [`last_lines`], scanning at most `max_scan_bytes` from the end. If the lines are longer
/// than that, the oldest returned line is cut at its start (at a character boundary).
pub fn last_lines_within(
    path: &Path,
    n: usize,
    max_scan_bytes: usize,
) -> Result<Vec<String>, OutputError> {
    let (file, len) = open_with_len(path)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let tail = scan_back_for_lines(&file, len, n, max_scan_bytes)
        .map_err(|err| OutputError::from_io(path, err))?;
    Ok(last_lines_of(&tail, n))
}

/// Reads the last [`PROGRESS_TAIL_BYTES`] of `path` and returns its last lines and an estimate
/// of the total line count.
///
/// A line cut by the start of the window is left out, unless it is the only line there.
pub fn progress_tail(path: &Path) -> Result<ProgressTail, OutputError> {
    let (file, len) = open_with_len(path)?;
    // One extra byte tells whether the window starts at the beginning of a line.
    let wanted = clamp_len(len, PROGRESS_TAIL_BYTES + 1);
    let start = len - wanted as u64;
    let window =
        read_exact_at(&file, start, wanted).map_err(|err| OutputError::from_io(path, err))?;
    let whole_file = start == 0;
    let text = match window.split_first() {
        Some((&before, rest)) if !whole_file && before != b'\n' => without_cut_line(rest),
        Some((_, rest)) if !whole_file => rest,
        _ => &window[..],
    };
    let mut lines = split_lines(text);
    let total_lines = if whole_file {
        lines.len() as u64
    } else {
        estimate_total_lines(&window, len)
    };
    let recent_lines = lines.split_off(lines.len().saturating_sub(PROGRESS_RECENT_LINES));
    let last_lines =
        recent_lines[recent_lines.len().saturating_sub(PROGRESS_LAST_LINES)..].to_vec();
    Ok(ProgressTail {
        last_lines,
        recent_lines,
        total_lines,
        total_lines_estimated: !whole_file,
        total_bytes: len,
    })
}

/// Extrapolates the newline density of `window` (the end of a file of `len` bytes) to the file.
fn estimate_total_lines(window: &[u8], len: u64) -> u64 {
    let newlines = crate::lines::count_newlines(window) as u64;
    let window_len = window.len().max(1) as u64;
    let estimate = (u128::from(newlines) * u128::from(len) + u128::from(window_len / 2))
        / u128::from(window_len);
    u64::try_from(estimate).unwrap_or(u64::MAX).max(1)
}

/// Scans backwards from the end of `file` until `n` lines are found (a trailing `\n`
/// excluded), the start of the file, or `max_scan` bytes; returns the bytes scanned, which end
/// with those lines. Blocks grow from 4 KiB to 64 KiB, so short lines cost small reads.
fn scan_back_for_lines(file: &File, len: u64, n: usize, max_scan: usize) -> io::Result<Vec<u8>> {
    let floor = len.saturating_sub(max_scan as u64);
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let mut block_start = len;
    let mut block_len = FIRST_SCAN_BLOCK_BYTES;
    let mut newlines = 0;
    while block_start > floor {
        let read_len = clamp_len(block_start - floor, block_len);
        block_start -= read_len as u64;
        let block = read_exact_at(file, block_start, read_len)?;
        let counted = if blocks.is_empty() {
            block.strip_suffix(b"\n").unwrap_or(&block)
        } else {
            &block[..]
        };
        newlines += crate::lines::count_last_newlines(counted, n - newlines);
        blocks.push(block);
        if newlines == n {
            return Ok(join_reversed(blocks));
        }
        block_len = (block_len * 2).min(MAX_SCAN_BLOCK_BYTES);
    }
    let mut tail = join_reversed(blocks);
    if floor > 0 {
        tail.drain(..ceil_char_boundary(&tail, 0));
    }
    Ok(tail)
}

fn join_reversed(blocks: Vec<Vec<u8>>) -> Vec<u8> {
    let mut blocks = blocks.into_iter().rev();
    let mut joined = blocks.next().unwrap_or_default();
    for block in blocks {
        joined.extend_from_slice(&block);
    }
    joined
}

fn open_with_len(path: &Path) -> Result<(File, u64), OutputError> {
    let file = File::open(path).map_err(|err| OutputError::from_io(path, err))?;
    let len = file
        .metadata()
        .map_err(|err| OutputError::from_io(path, err))?
        .len();
    Ok((file, len))
}

/// `available` as a `usize`, at most `max`.
fn clamp_len(available: u64, max: usize) -> usize {
    usize::try_from(available).map_or(max, |available| available.min(max))
}

/// Reads up to `len` bytes at `offset`, stopping early only at end of file.
fn read_exact_at(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}
