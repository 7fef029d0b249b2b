//! The conversation view ([`agent_stream::conversation`]) of real transcripts, golden: the
//! recordings of the Codex and Gemini CLIs (`tests/fixtures/codex-cli`, `gemini-cli`) and a
//! named agent's transcript written by the reference harness, resumed by a message.
#![allow(clippy::unwrap_used)]

use agent_stream::conversation::{entries, text};
use task_agent::format::user_turn_line;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn render(name: &str) -> String {
    text(&entries(&fixture(name)))
}

#[test]
fn a_codex_run_shows_its_commands_the_failed_one_with_its_exit_code_and_output() {
    assert_eq!(
        render("codex-cli/codex-exec.jsonl"),
        "Looking at the workspace first.\n\
         \x20 → Running echo hello from the codex rig; printf 'files: '; ls | wc -l\n\
         \x20 → Running echo failing on purpose >&2; exit 3\n\
         \x20   (the tool failed: exit code 3: failing on purpose)\n\
         Codex rig finished: hello printed, the second command exited 3.\n\
         ✓ Codex rig finished: hello printed, the second command exited 3.\n"
    );
}

#[test]
fn a_codex_error_and_failed_turn_show_the_clis_own_words() {
    let refused = r#"{"error": {"message": "scripted: the model refused this request", "type": "invalid_request_error", "code": null}}"#;
    assert_eq!(
        render("codex-cli/codex-exec-failed.jsonl"),
        format!("  → Running echo before the failure\n  ! {refused}\n✗ {refused}\n")
    );
}

#[test]
fn the_user_turns_the_runner_records_show_between_codex_turns() {
    // What the runner writes before each `codex exec` (the CLI does not echo its prompt).
    let recording = String::from_utf8(fixture("codex-cli/codex-exec-then-resume.jsonl")).unwrap();
    let mut turns = recording.split_inclusive("\n").collect::<Vec<_>>();
    let second = turns
        .iter()
        .rposition(|l| l.contains("thread.started"))
        .unwrap();
    let (first_prompt, second_prompt) = (user_turn_line("run one"), user_turn_line("and again"));
    let second_prompt = format!("{second_prompt}\n");
    turns.insert(second, &second_prompt);
    let transcript = format!("{first_prompt}\n{}", turns.concat());
    assert_eq!(
        text(&entries(transcript.as_bytes())),
        "> run one\n  → Running echo one\nfirst turn done\n✓ first turn done\n\
         > and again\nsecond turn done\n✓ second turn done\n"
    );
}

#[test]
fn a_gemini_run_shows_the_users_prompt_and_whole_messages_not_fragments() {
    assert_eq!(
        render("gemini-cli/gemini-stream.jsonl"),
        "> say hello, then fail once\n\
         Looking at the workspace first.\n\
         \x20 → Running say hello\n\
         \x20 → Running fail on purpose\n\
         Gemini rig finished: hello printed, the second command exited 3.\n\
         ✓ Gemini rig finished: hello printed, the second command exited 3.\n"
    );
}

#[test]
fn a_gemini_tool_error_shows_its_reason() {
    assert_eq!(
        render("gemini-stream.jsonl")
            .lines()
            .filter(|l| l.contains("failed"))
            .collect::<Vec<_>>(),
        ["    (the tool failed: no such file)"]
    );
}

#[test]
fn a_reference_transcript_shows_the_prompt_the_tools_and_the_coordinators_message() {
    let shown = render("named-agent-resumed.jsonl");
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "> SUBAGENT-MARK look around",
            "  → Running sub work",
            "  → SendMessage",
            "ok",
            "> The coordinator sent a message while you were working:",
            "> please also check the README",
        ]
    );
    assert_eq!(lines.last(), Some(&"ok2"));
}
