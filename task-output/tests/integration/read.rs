use std::fs;

use proptest::prelude::*;
use task_output::OutputError;
use task_output::read::{
    DEFAULT_MAX_READ_BYTES, PROGRESS_TAIL_BYTES, last_lines, last_lines_within, progress_tail,
    read_delta, read_tail, read_text_delta,
};
use task_output::utf8::decode_lossy;

use crate::support::{file_with, in_forbidden_dir, output_path};

/// The lines of `text` the way the reads define them: one trailing `\n` ends the last line.
fn model_lines(text: &str) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n').map(str::to_owned).collect()
}

fn last_n(lines: &[String], n: usize) -> &[String] {
    &lines[lines.len().saturating_sub(n)..]
}

/// Text with newlines, multi-byte characters and long lines.
fn text_strategy() -> impl Strategy<Value = String> {
    let chars = || prop::sample::select(vec!["a", "z", " ", "é", "€", "😀"]);
    let short_line = prop::collection::vec(chars(), 0..20).prop_map(|chars| chars.concat());
    let long_line = (chars(), 0..3_000usize).prop_map(|(c, n)| c.repeat(n));
    let line = prop_oneof![3 => short_line, 1 => long_line];
    (prop::collection::vec(line, 0..60), any::<bool>()).prop_map(|(lines, trailing)| {
        let mut text = lines.join("\n");
        if trailing {
            text.push('\n');
        }
        text
    })
}

#[test]
fn delta_reads_return_the_requested_range_and_offset() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", b"0123456789");
    let delta = read_delta(&path, 3, 4).unwrap();
    assert_eq!(&delta.bytes[..], b"3456");
    assert_eq!(delta.new_offset, 7);
    let rest = read_delta(&path, 7, DEFAULT_MAX_READ_BYTES).unwrap();
    assert_eq!(&rest.bytes[..], b"789");
    let at_end = read_delta(&path, 10, 4).unwrap();
    assert!(at_end.bytes.is_empty());
    assert_eq!(at_end.new_offset, 10);
}

#[test]
fn delta_read_sees_bytes_appended_since_the_last_read() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", b"first\n");
    let first = read_delta(&path, 0, DEFAULT_MAX_READ_BYTES).unwrap();
    fs::write(&path, b"first\nsecond\n").unwrap();
    let second = read_delta(&path, first.new_offset, DEFAULT_MAX_READ_BYTES).unwrap();
    assert_eq!(&second.bytes[..], b"second\n");
}

#[test]
fn offset_past_the_end_is_a_typed_error() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", b"abc");
    let err = read_delta(&path, 4, 10).unwrap_err();
    let OutputError::OffsetPastEnd { offset, len, .. } = err else {
        panic!("expected OffsetPastEnd, got {err:?}");
    };
    assert_eq!((offset, len), (4, 3));
}

#[test]
fn every_read_of_a_missing_file_is_not_found() {
    let (_dir, path) = output_path();
    let errors = [
        read_delta(&path, 0, 1).unwrap_err(),
        read_text_delta(&path, 0, 1).unwrap_err(),
        read_tail(&path, 1).unwrap_err(),
        last_lines(&path, 1).unwrap_err(),
        progress_tail(&path).unwrap_err(),
    ];
    for err in errors {
        assert!(matches!(err, OutputError::NotFound { .. }), "{err:?}");
        assert_eq!(err.path(), path);
    }
}

#[test]
fn reads_in_a_forbidden_directory_are_permission_denied() {
    in_forbidden_dir(|existing| {
        let err = read_delta(existing, 0, 1).unwrap_err();
        assert!(
            matches!(err, OutputError::PermissionDenied { .. }),
            "{err:?}"
        );
        let err = last_lines(existing, 1).unwrap_err();
        assert!(
            matches!(err, OutputError::PermissionDenied { .. }),
            "{err:?}"
        );
    });
}

#[test]
fn tail_of_a_short_file_is_the_whole_file() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", b"short\n");
    assert_eq!(read_tail(&path, 1024).unwrap(), "short\n");
}

#[test]
fn cut_tail_says_how_much_was_omitted_and_starts_on_a_character() {
    let (dir, _) = output_path();
    let mut content = vec![b'a'; 3 * 1024 - 1];
    content.extend_from_slice("€end".as_bytes()); // The euro sign spans the cut.
    let path = file_with(dir.path(), "o", &content);
    let tail = read_tail(&path, 5).unwrap();
    assert_eq!(tail, "[3KB of earlier output omitted]\nend");
    let tail = read_tail(&path, 6).unwrap();
    assert_eq!(tail, "[3KB of earlier output omitted]\n€end");
}

#[test]
fn last_lines_ignore_one_trailing_newline() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", b"a\nb\n\nc\nd\n");
    assert_eq!(last_lines(&path, 3).unwrap(), ["", "c", "d"]);
    assert_eq!(last_lines(&path, 99).unwrap(), ["a", "b", "", "c", "d"]);
    assert!(last_lines(&path, 0).unwrap().is_empty());
    let empty = file_with(dir.path(), "empty", b"");
    assert!(last_lines(&empty, 5).unwrap().is_empty());
}

#[test]
fn last_lines_cross_scan_blocks() {
    let (dir, _) = output_path();
    let long = "y".repeat(100_000);
    let content = format!("first\n{long}\nx\n{long}\nlast");
    let path = file_with(dir.path(), "o", content.as_bytes());
    assert_eq!(last_lines(&path, 3).unwrap(), ["x", long.as_str(), "last"]);
}

#[test]
fn last_lines_within_a_scan_limit_cut_the_oldest_line_on_a_character() {
    let (dir, _) = output_path();
    let path = file_with(dir.path(), "o", "€€€\nab\n".as_bytes());
    // The last 8 bytes start inside the second euro sign: the cut moves past it.
    assert_eq!(last_lines_within(&path, 5, 8).unwrap(), ["€", "ab"]);
}

#[test]
fn progress_tail_of_a_small_file_is_exact() {
    let (dir, _) = output_path();
    let content: String = (1..=150).map(|i| format!("{i}\n")).collect();
    let path = file_with(dir.path(), "o", content.as_bytes());
    let progress = progress_tail(&path).unwrap();
    assert_eq!(progress.last_lines, ["146", "147", "148", "149", "150"]);
    assert_eq!(progress.recent_lines.len(), 100);
    assert_eq!(progress.recent_lines[0], "51");
    assert_eq!(progress.total_lines, 150);
    assert!(!progress.total_lines_estimated);
    assert_eq!(progress.total_bytes, content.len() as u64);
}

#[test]
fn progress_tail_of_a_large_file_estimates_the_line_count() {
    let (dir, _) = output_path();
    let content: String = (0..10_000)
        .map(|i| format!("line number {i:04}\n"))
        .collect();
    let path = file_with(dir.path(), "o", content.as_bytes());
    let progress = progress_tail(&path).unwrap();
    assert!(progress.total_lines_estimated);
    assert!(
        (9_900..=10_100).contains(&progress.total_lines),
        "{}",
        progress.total_lines
    );
    assert_eq!(progress.last_lines.len(), 5);
    assert_eq!(progress.recent_lines.len(), 100);
    let model = model_lines(&content);
    assert_eq!(progress.recent_lines, last_n(&model, 100));
}

#[test]
fn progress_tail_drops_a_line_cut_by_the_window_but_keeps_a_single_long_line() {
    let (dir, _) = output_path();
    let long = "z".repeat(2 * PROGRESS_TAIL_BYTES);
    let path = file_with(dir.path(), "o", format!("{long}\nshort\n").as_bytes());
    assert_eq!(progress_tail(&path).unwrap().recent_lines, ["short"]);
    let path = file_with(dir.path(), "p", format!("{long}\n").as_bytes());
    let only = progress_tail(&path).unwrap().recent_lines;
    assert_eq!(only, [&long[long.len() - PROGRESS_TAIL_BYTES + 1..]]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn successive_delta_reads_rebuild_the_file(
        content in prop::collection::vec(any::<u8>(), 0..20_000),
        sizes in prop::collection::vec(1usize..5_000, 1..40),
    ) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", &content);
        let mut rebuilt = Vec::new();
        let mut offset = 0;
        for size in sizes.iter().cycle() {
            let delta = read_delta(&path, offset, *size).unwrap();
            prop_assert_eq!(delta.new_offset, offset + delta.bytes.len() as u64);
            prop_assert!(delta.bytes.len() <= *size);
            if delta.bytes.is_empty() {
                break;
            }
            rebuilt.extend_from_slice(&delta.bytes);
            offset = delta.new_offset;
        }
        prop_assert_eq!(rebuilt, content);
    }

    #[test]
    fn a_delta_read_at_any_offset_returns_that_range(
        content in prop::collection::vec(any::<u8>(), 0..5_000),
        offset_fraction in 0.0f64..=1.0,
        size in 0usize..6_000,
    ) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", &content);
        let offset = (content.len() as f64 * offset_fraction) as usize;
        let delta = read_delta(&path, offset as u64, size).unwrap();
        let end = (offset + size).min(content.len());
        prop_assert_eq!(&delta.bytes[..], &content[offset..end]);
    }

    #[test]
    fn successive_text_deltas_rebuild_valid_text(
        text in text_strategy(),
        sizes in prop::collection::vec(4usize..3_000, 1..20),
    ) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", text.as_bytes());
        let mut rebuilt = String::new();
        let mut offset = 0;
        for size in sizes.iter().cycle() {
            let delta = read_text_delta(&path, offset, *size).unwrap();
            if delta.new_offset == offset {
                break;
            }
            rebuilt.push_str(&delta.text);
            offset = delta.new_offset;
        }
        prop_assert_eq!(rebuilt, text);
    }

    #[test]
    fn last_lines_match_a_forward_split(text in text_strategy(), n in 0usize..70) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", text.as_bytes());
        let model = model_lines(&text);
        prop_assert_eq!(last_lines(&path, n).unwrap(), last_n(&model, n));
    }

    #[test]
    fn last_lines_of_random_bytes_match_lossy_decoding(
        content in prop::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..3_000),
        n in 1usize..20,
    ) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", &content);
        let model = model_lines(&decode_lossy(&content));
        prop_assert_eq!(last_lines(&path, n).unwrap(), last_n(&model, n));
    }

    #[test]
    fn progress_tail_lines_are_the_files_last_lines(text in text_strategy()) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", text.as_bytes());
        let progress = progress_tail(&path).unwrap();
        let model = model_lines(&text);
        let recent = &progress.recent_lines;
        let replacement = char::REPLACEMENT_CHARACTER;
        prop_assert!(!recent.iter().any(|line| line.contains(replacement)));
        if let Some((first, rest)) = recent.split_first() {
            // Every line but the oldest is whole; the oldest may be a cut single line.
            prop_assert_eq!(rest, last_n(&model, rest.len()));
            let whole = &model[model.len() - recent.len()];
            prop_assert!(whole.ends_with(first.as_str()));
        }
        prop_assert_eq!(&progress.last_lines[..], last_n(recent, 5));
        if text.len() <= PROGRESS_TAIL_BYTES {
            prop_assert_eq!(progress.total_lines, model.len() as u64);
        }
    }
}
