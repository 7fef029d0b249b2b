use std::path::Path;

use proptest::prelude::*;
use task_output::format::{
    MAX_OUTPUT_LENGTH_ENV, TASK_MAX_OUTPUT_DEFAULT, TASK_MAX_OUTPUT_UPPER_LIMIT, format_for_model,
    max_output_length, max_output_length_from_env,
};
use task_output::read::read_tail;
use task_output::utf8::decode_lossy;

use crate::support::{file_with, output_path};

const PATH: &str = "/tmp/tasks/a1b2.output";

fn header() -> String {
    format!("[Truncated. Full output: {PATH}]\n\n")
}

/// Checks the contract of `format_for_model` for `text` and `limit`.
fn check_formatted(text: &str, limit: usize) -> Result<(), TestCaseError> {
    let formatted = format_for_model(text, Path::new(PATH), limit);
    let chars = text.chars().count();
    if chars <= limit {
        prop_assert_eq!(formatted, text);
        return Ok(());
    }
    let header = header();
    let body = formatted.strip_prefix(&header).expect("header");
    prop_assert!(text.ends_with(body));
    prop_assert_eq!(
        body.chars().count(),
        limit.saturating_sub(header.chars().count())
    );
    Ok(())
}

#[test]
fn env_limit_defaults_caps_and_rejects_bad_values() {
    assert_eq!(max_output_length(None), TASK_MAX_OUTPUT_DEFAULT);
    for bad in ["", "x", "0", "-1", "3.5", "1e5"] {
        assert_eq!(
            max_output_length(Some(bad)),
            TASK_MAX_OUTPUT_DEFAULT,
            "{bad:?}"
        );
    }
    assert_eq!(max_output_length(Some("1")), 1);
    assert_eq!(max_output_length(Some("160000")), 160_000);
    for high in ["160001", "1000000000", "100000000000000000000000"] {
        assert_eq!(
            max_output_length(Some(high)),
            TASK_MAX_OUTPUT_UPPER_LIMIT,
            "{high:?}"
        );
    }
}

#[test]
fn env_limit_is_read_from_the_process_environment() {
    // The only test that touches this variable, so nothing races on it.
    let expected = max_output_length(std::env::var(MAX_OUTPUT_LENGTH_ENV).ok().as_deref());
    assert_eq!(max_output_length_from_env(), expected);
}

#[test]
fn truncated_output_has_the_header_and_the_last_characters() {
    let text: String = (0..10_000).map(|i| format!("{i}\n")).collect();
    let formatted = format_for_model(&text, Path::new(PATH), TASK_MAX_OUTPUT_DEFAULT);
    assert_eq!(formatted.chars().count(), TASK_MAX_OUTPUT_DEFAULT);
    assert!(formatted.starts_with(&header()));
    assert!(formatted.ends_with("9998\n9999\n"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn formatting_random_text_keeps_whole_characters(text in "\\PC{0,400}", limit in 0usize..500) {
        check_formatted(&text, limit)?;
    }

    #[test]
    fn formatting_a_tail_of_random_bytes_keeps_whole_characters(
        content in prop::collection::vec(any::<u8>(), 0..3_000),
        tail_bytes in 1usize..3_000,
        limit in 0usize..2_000,
    ) {
        let (dir, _) = output_path();
        let path = file_with(dir.path(), "o", &content);
        let tail = read_tail(&path, tail_bytes).unwrap();
        // The tail body decodes like the end of the whole file: no code point was split.
        let body = match tail.split_once(" of earlier output omitted]\n") {
            Some((_, body)) => body,
            None => tail.as_str(),
        };
        prop_assert!(decode_lossy(&content).ends_with(body));
        check_formatted(&tail, limit)?;
    }
}
