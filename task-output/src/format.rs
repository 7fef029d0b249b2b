//! Truncating output for a language model: keep the end, say where the rest is.

use std::num::IntErrorKind;
use std::path::Path;

/// The default limit, in characters, of text handed to a model.
pub const TASK_MAX_OUTPUT_DEFAULT: usize = 32_000;

/// The highest limit the environment may set.
pub const TASK_MAX_OUTPUT_UPPER_LIMIT: usize = 160_000;

/// The environment variable that overrides [`TASK_MAX_OUTPUT_DEFAULT`].
pub const MAX_OUTPUT_LENGTH_ENV: &str = "TASK_MAX_OUTPUT_LENGTH";

/// Reads the limit from the `TASK_MAX_OUTPUT_LENGTH` environment variable; see
/// [`max_output_length`] for how the value is interpreted.
pub fn max_output_length_from_env() -> usize {
    let value = std::env::var(MAX_OUTPUT_LENGTH_ENV).ok();
    max_output_length(value.as_deref())
}

/// Interprets a `TASK_MAX_OUTPUT_LENGTH` value: unset, not an integer, or `<= 0` gives
/// [`TASK_MAX_OUTPUT_DEFAULT`]; anything above [`TASK_MAX_OUTPUT_UPPER_LIMIT`] gives that limit.
/// Surrounding whitespace is ignored.
pub fn max_output_length(value: Option<&str>) -> usize {
    let Some(value) = value else {
        return TASK_MAX_OUTPUT_DEFAULT;
    };
    match value.trim().parse::<i64>() {
        Ok(limit) if limit <= 0 => TASK_MAX_OUTPUT_DEFAULT,
        Ok(limit) => usize::try_from(limit).map_or(TASK_MAX_OUTPUT_UPPER_LIMIT, |limit| {
            limit.min(TASK_MAX_OUTPUT_UPPER_LIMIT)
        }),
        Err(err) if *err.kind() == IntErrorKind::PosOverflow => TASK_MAX_OUTPUT_UPPER_LIMIT,
        Err(_) => TASK_MAX_OUTPUT_DEFAULT,
    }
}

/// Fits `text` into `limit` characters (Unicode scalar values) for a model.
///
/// Text within the limit is returned unchanged. Longer text becomes the header
/// `[Truncated. Full output: {output_path}]\n\n` followed by the *last* `limit − header length`
/// characters, so the result has at most `max(limit, header length)` characters and never
/// splits a code point.
pub fn format_for_model(text: &str, output_path: &Path, limit: usize) -> String {
    if text.len() <= limit || text.chars().count() <= limit {
        return text.to_owned();
    }
    let header = format!("[Truncated. Full output: {}]\n\n", output_path.display());
    let keep = limit.saturating_sub(header.chars().count());
    let mut formatted = header;
    formatted.push_str(last_chars(text, keep));
    formatted
}

/// The last `n` characters of `text`.
fn last_chars(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    text.char_indices()
        .rev()
        .nth(n - 1)
        .map_or(text, |(start, _)| &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(format_for_model("héllo", Path::new("/o"), 5), "héllo");
    }

    #[test]
    fn long_text_keeps_its_end_after_the_header() {
        let header = "[Truncated. Full output: /o]\n\n";
        let limit = header.len() + 3;
        let formatted = format_for_model(&format!("{}€€€", "x".repeat(50)), Path::new("/o"), limit);
        assert_eq!(formatted, format!("{header}€€€"));
    }

    #[test]
    fn env_limit_bounds() {
        assert_eq!(max_output_length(None), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("abc")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("12abc")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("1.5")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("0")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(max_output_length(Some("-5")), TASK_MAX_OUTPUT_DEFAULT);
        assert_eq!(
            max_output_length(Some("-99999999999999999999")),
            TASK_MAX_OUTPUT_DEFAULT
        );
        assert_eq!(max_output_length(Some("1")), 1);
        assert_eq!(max_output_length(Some(" 5000 ")), 5000);
        assert_eq!(max_output_length(Some("160000")), 160_000);
        assert_eq!(
            max_output_length(Some("160001")),
            TASK_MAX_OUTPUT_UPPER_LIMIT
        );
        assert_eq!(
            max_output_length(Some("99999999999999999999")),
            TASK_MAX_OUTPUT_UPPER_LIMIT
        );
    }
}
