//! The prompt a user wrote into an agent command (`claude -p "do X"`, `codex exec "do X"`,
//! `gemini -p "do X"` or `gemini "do X"`), taken out of it so that the runner passes it the
//! format's way (Claude: on stdin, since the runner adds `--input-format stream-json`).
//!
//! - A prompt flag (Claude's `-p`/`--print` followed by an argument not starting with `-`;
//!   Gemini's `-p`/`--prompt` and `--prompt=`) is recognised anywhere in the command.
//! - Positional arguments are prompts only after the CLI itself in the command (an argument
//!   named `claude` or `gemini`, as a program or a path, or Codex's `exec`), so that what a
//!   wrapper takes (`env A=1 claude …`, `sh -c '…' …`) is never mistaken for one. There they
//!   are read as the CLI's own parser reads them: a flag that takes a value takes the next
//!   argument, a list flag (`--allowedTools a b`) every next argument up to one starting with
//!   `-`, `--flag=value` nothing more, and after `--` every argument is positional. The flags
//!   named here are those of Claude Code 2.1, Codex 0.169 and Gemini CLI 0.61; a flag not
//!   named is taken as taking no value.

use std::path::Path;

use crate::error::AgentError;
use crate::format::CliFormat;

/// How one CLI's arguments are read.
struct Grammar {
    /// The argument after which the CLI's own arguments start (matched against its file name).
    anchor: &'static str,
    /// Flags that take one value.
    value: &'static [&'static str],
    /// Flags that take every next argument up to one that starts with `-`.
    list: &'static [&'static str],
    /// Flags followed by the prompt.
    prompt: &'static [&'static str],
    /// The prompt flag stays in the command (Claude's `-p` is print mode; the prompt is the
    /// positional argument after it).
    keep_prompt_flag: bool,
    /// Subcommands after the anchor whose positional arguments are not a prompt (`codex exec
    /// resume THREAD …`).
    no_prompt_after: &'static [&'static str],
    /// Several positional arguments are one prompt joined with spaces (Gemini's `query..`).
    join_positionals: bool,
}

const CLAUDE: Grammar = Grammar {
    anchor: "claude",
    value: &[
        "--output-format",
        "--input-format",
        "--model",
        "--fallback-model",
        "--permission-mode",
        "--permission-prompt-tool",
        "-r",
        "--resume",
        "--session-id",
        "--system-prompt",
        "--system-prompt-file",
        "--append-system-prompt",
        "--append-system-prompt-file",
        "--max-turns",
        "--max-budget-usd",
        "--json-schema",
        "--settings",
        "--setting-sources",
        "--agent",
        "--agents",
        "--debug-file",
    ],
    list: &[
        "--allowedTools",
        "--allowed-tools",
        "--disallowedTools",
        "--disallowed-tools",
        "--tools",
        "--mcp-config",
        "--add-dir",
        "--betas",
        "--plugin-dir",
        "--file",
    ],
    prompt: &["-p", "--print"],
    keep_prompt_flag: true,
    no_prompt_after: &[],
    join_positionals: false,
};

const CODEX: Grammar = Grammar {
    anchor: "exec",
    value: &[
        "-m",
        "--model",
        "-c",
        "--config",
        "-p",
        "--profile",
        "-s",
        "--sandbox",
        "-a",
        "--ask-for-approval",
        "-C",
        "--cd",
        "--add-dir",
        "--output-schema",
        "--color",
        "-o",
        "--output-last-message",
        "--local-provider",
        "--enable",
        "--disable",
    ],
    list: &["-i", "--image"],
    prompt: &[],
    keep_prompt_flag: false,
    no_prompt_after: &["resume", "review", "help"],
    join_positionals: false,
};

const GEMINI: Grammar = Grammar {
    anchor: "gemini",
    value: &[
        "-m",
        "--model",
        "-o",
        "--output-format",
        "--approval-mode",
        "-r",
        "--resume",
        "--delete-session",
        "--proxy",
        "--session-summary",
        "--telemetry-target",
        "--telemetry-otlp-endpoint",
        "--telemetry-otlp-protocol",
        "--telemetry-outfile",
        "-i",
        "--prompt-interactive",
    ],
    list: &[
        "-e",
        "--extensions",
        "--allowed-mcp-server-names",
        "--allowed-tools",
        "--include-directories",
    ],
    prompt: &["-p", "--prompt"],
    keep_prompt_flag: false,
    no_prompt_after: &[],
    join_positionals: true,
};

/// Splits `command` (program, then arguments) into the command without its prompt and the
/// prompt, if it has one.
///
/// # Errors
/// [`AgentError::PromptInCommandTwice`] when the command gives more than one prompt (two
/// positional prompts, or a prompt flag beside a positional prompt).
pub(crate) fn take_prompt(
    format: CliFormat,
    command: &[String],
) -> Result<(Vec<String>, Option<String>), AgentError> {
    let grammar = match format {
        CliFormat::Claude => &CLAUDE,
        CliFormat::Codex => &CODEX,
        CliFormat::Gemini => &GEMINI,
    };
    let is_anchor = |arg: &String| {
        Path::new(arg)
            .file_name()
            .is_some_and(|name| name == grammar.anchor)
    };
    // Positional arguments count only after the anchor; without one, only prompt flags do.
    let anchor = command.iter().position(is_anchor);
    let mut positionals_from = anchor.map_or(usize::MAX, |at| at + 1);
    let mut kept = Vec::with_capacity(command.len());
    // The prompts given with a prompt flag, then the positional ones.
    let mut flagged: Vec<String> = Vec::new();
    let mut positional: Vec<String> = Vec::new();
    let mut rest_positional = false;
    let mut args = command.iter().enumerate().peekable();
    while let Some((at, arg)) = args.next() {
        let counts = at >= positionals_from;
        if rest_positional || at == 0 || arg == "--" || !(arg.starts_with('-') && arg.len() > 1) {
            if !counts || at == 0 {
                kept.push(arg.clone());
            } else if arg == "--" && !rest_positional {
                rest_positional = true;
                kept.push(arg.clone());
            } else if positional.is_empty()
                && !rest_positional
                && grammar.no_prompt_after.contains(&arg.as_str())
            {
                // `codex exec resume THREAD …`: nothing after it is a first prompt.
                positionals_from = usize::MAX;
                kept.push(arg.clone());
            } else {
                positional.push(arg.clone());
            }
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (arg.as_str(), None),
        };
        if grammar.prompt.contains(&flag) {
            if grammar.keep_prompt_flag {
                kept.push(arg.clone());
            }
            match inline {
                Some(value) if !grammar.keep_prompt_flag => flagged.push(value.to_owned()),
                Some(_) => {}
                None => match args.next_if(|(_, next)| !next.starts_with('-')) {
                    Some((_, value)) => flagged.push(value.clone()),
                    None if !grammar.keep_prompt_flag => kept.push(arg.clone()),
                    None => {}
                },
            }
            continue;
        }
        kept.push(arg.clone());
        if !counts || inline.is_some() {
            continue;
        }
        if grammar.value.contains(&flag) {
            kept.extend(args.next().map(|(_, value)| value.clone()));
        } else if grammar.list.contains(&flag) {
            while let Some((_, value)) = args.next_if(|(_, next)| !next.starts_with('-')) {
                kept.push(value.clone());
            }
        }
    }
    if grammar.join_positionals && !positional.is_empty() {
        positional = vec![positional.join(" ")];
    }
    flagged.extend(positional);
    if flagged.len() > 1 {
        return Err(AgentError::PromptInCommandTwice(flagged));
    }
    // No `--` left with nothing after it.
    if rest_positional && kept.last().is_some_and(|last| last == "--") {
        kept.pop();
    }
    Ok((kept, flagged.pop()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn split(format: CliFormat, command: &[&str]) -> (Vec<String>, Option<String>) {
        let command: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        take_prompt(format, &command).unwrap()
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn claude_positional_prompt_is_taken_and_flags_kept() {
        let (command, prompt) = split(
            CliFormat::Claude,
            &[
                "claude",
                "-p",
                "do X",
                "--model",
                "opus",
                "--allowedTools",
                "Bash",
                "Read",
                "--verbose",
            ],
        );
        assert_eq!(prompt.as_deref(), Some("do X"));
        assert_eq!(
            command,
            strings(&[
                "claude",
                "-p",
                "--model",
                "opus",
                "--allowedTools",
                "Bash",
                "Read",
                "--verbose"
            ])
        );
        let (command, prompt) = split(CliFormat::Claude, &["claude", "--model=opus", "-p"]);
        assert_eq!(prompt, None);
        assert_eq!(command, strings(&["claude", "--model=opus", "-p"]));
        let (command, prompt) = split(CliFormat::Claude, &["claude", "-p", "--", "-starts"]);
        assert_eq!(prompt.as_deref(), Some("-starts"));
        assert_eq!(command, strings(&["claude", "-p"]));
    }

    #[test]
    fn codex_prompt_follows_exec_and_a_resume_is_left_alone() {
        let (command, prompt) = split(
            CliFormat::Codex,
            &[
                "codex", "-c", "k=v", "exec", "-m", "gpt-5", "do X", "--json",
            ],
        );
        assert_eq!(prompt.as_deref(), Some("do X"));
        assert_eq!(
            command,
            strings(&["codex", "-c", "k=v", "exec", "-m", "gpt-5", "--json"])
        );
        let given = ["codex", "exec", "resume", "T1", "more"];
        assert_eq!(split(CliFormat::Codex, &given), (strings(&given), None));
    }

    #[test]
    fn gemini_prompt_flag_or_positional_words() {
        let (command, prompt) = split(CliFormat::Gemini, &["gemini", "-m", "pro", "-p", "do X"]);
        assert_eq!(prompt.as_deref(), Some("do X"));
        assert_eq!(command, strings(&["gemini", "-m", "pro"]));
        let (_, prompt) = split(CliFormat::Gemini, &["gemini", "--prompt=do X"]);
        assert_eq!(prompt.as_deref(), Some("do X"));
        let (command, prompt) = split(CliFormat::Gemini, &["gemini", "do", "X", "--yolo"]);
        assert_eq!(prompt.as_deref(), Some("do X"));
        assert_eq!(command, strings(&["gemini", "--yolo"]));
    }

    #[test]
    fn what_a_wrapper_takes_is_never_a_prompt() {
        let given = [
            "sh",
            "-c",
            "exec \"$0\" \"$@\"",
            "fake-agent",
            "--script",
            "s.jsonl",
        ];
        assert_eq!(split(CliFormat::Claude, &given), (strings(&given), None));
        let (command, prompt) = split(
            CliFormat::Claude,
            &["env", "A=1", "/usr/bin/claude", "do X", "--model", "m"],
        );
        assert_eq!(prompt.as_deref(), Some("do X"));
        assert_eq!(
            command,
            strings(&["env", "A=1", "/usr/bin/claude", "--model", "m"])
        );
        let (command, prompt) = split(CliFormat::Claude, &["fake-agent", "--script=s", "-p", "x"]);
        assert_eq!(prompt.as_deref(), Some("x"));
        assert_eq!(command, strings(&["fake-agent", "--script=s", "-p"]));
    }

    #[test]
    fn two_prompts_in_one_command_are_refused() {
        let command = strings(&["gemini", "-p", "one", "two"]);
        let error = take_prompt(CliFormat::Gemini, &command).unwrap_err();
        assert!(matches!(error, AgentError::PromptInCommandTwice(ref p) if p == &["one", "two"]));
        let command = strings(&["claude", "-p", "one", "two"]);
        assert!(take_prompt(CliFormat::Claude, &command).is_err());
    }
}
