//! Recognising an interactive prompt at the end of a command's output.

use std::sync::LazyLock;

use regex::RegexSet;

/// The prompt patterns of SPEC §5, in the reference's order, all case-insensitive.
pub const PROMPT_PATTERNS: [&str; 7] = [
    r"(?i)\(y/n\)",
    r"(?i)\[y/n\]",
    r"(?i)\(yes/no\)",
    r"(?i)\b(?:Do you|Would you|Shall I|Are you sure|Ready to)\b.*\? *$",
    r"(?i)Press (any key|Enter)",
    r"(?i)Continue\?",
    r"(?i)Overwrite\?",
];

static PROMPTS: LazyLock<Option<RegexSet>> = LazyLock::new(|| RegexSet::new(PROMPT_PATTERNS).ok());

/// The last non-blank line of `text`, without its line terminator.
///
/// Trailing whitespace (including the final newline a prompt usually lacks but a shell may add)
/// is ignored, so `"Continue? [y/N]\n"` and `"Continue? [y/N]"` give the same line.
pub fn last_line(text: &str) -> &str {
    let trimmed = text.trim_end();
    match trimmed.rfind(['\n', '\r']) {
        Some(at) => &trimmed[at + 1..],
        None => trimmed,
    }
}

/// Whether the last line of `tail` looks like a prompt waiting for input (SPEC §5).
///
/// ```
/// use task_shell::prompt::looks_like_prompt;
/// assert!(looks_like_prompt("Downloading...\nContinue? [y/N] "));
/// assert!(!looks_like_prompt("Continue? [y/N]\nok, continuing\n"));
/// ```
pub fn looks_like_prompt(tail: &str) -> bool {
    let line = last_line(tail);
    // The patterns are literals checked by a unit test, so the set always compiles; an
    // impossible failure degrades to "no prompt" rather than a panic.
    PROMPTS.as_ref().is_some_and(|set| set.is_match(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert!(PROMPTS.is_some());
        assert_eq!(
            PROMPTS.as_ref().map(RegexSet::len),
            Some(PROMPT_PATTERNS.len())
        );
    }

    #[test]
    fn each_pattern_matches_its_example() {
        for prompt in [
            "Proceed (y/n)",
            "Proceed (Y/N)?",
            "Install? [Y/n]",
            "Really (yes/no)",
            "Do you want to overwrite the file? ",
            "would you like to continue?",
            "Shall I go on?",
            "Are you sure?",
            "Ready to deploy?  ",
            "Press any key to continue",
            "press Enter when done",
            "Continue? ",
            "Overwrite? config.toml",
        ] {
            assert!(looks_like_prompt(prompt), "{prompt:?} should match");
        }
    }

    #[test]
    fn ordinary_output_does_not_match() {
        for line in [
            "line 42",
            "Do you know what this means. No question.",
            "Downloading 45%",
            "Are you surely done",
            "yes/no",
            "",
        ] {
            assert!(!looks_like_prompt(line), "{line:?} should not match");
        }
    }

    #[test]
    fn directed_question_must_end_the_line() {
        assert!(!looks_like_prompt("Do you want this? then read on"));
    }

    #[test]
    fn only_the_last_line_counts() {
        assert!(!looks_like_prompt("Continue? [y/N]\nline 1\nline 2\n"));
        assert!(looks_like_prompt(
            "line 1\nline 2\nOverwrite existing config? (y/n) "
        ));
        assert!(looks_like_prompt("progress\r\nContinue?\r\n"));
    }

    #[test]
    fn last_line_skips_trailing_blank_lines() {
        assert_eq!(last_line("a\nb\n\n  \n"), "b");
        assert_eq!(last_line("single"), "single");
        assert_eq!(last_line(""), "");
    }
}
