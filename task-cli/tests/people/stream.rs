//! Following like a person: output streamed as it is written, then a one-line summary;
//! notifications as readable lines on a terminal, XML elsewhere.

use std::process::Stdio;

use crate::sandbox::Sandbox;
use crate::support::DEADLINE;

#[test]
fn run_wait_follow_streams_output_as_it_is_written_then_summarizes() {
    let sandbox = Sandbox::new();
    let gate = sandbox.root().join("gate");
    let script = format!(
        "echo first; while [ ! -e {} ]; do sleep 0.01; done; echo last; exit 4",
        gate.display()
    );
    let mut child = sandbox
        .command(&["run", "--wait", "--follow", "--", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let received = crate::sandbox::stdout_lines(&mut child);
    // The first line arrives while the task is still running (it waits for the gate).
    assert_eq!(received.recv_timeout(DEADLINE).unwrap(), "first");
    std::fs::write(&gate, "").unwrap();
    assert_eq!(received.recv_timeout(DEADLINE).unwrap(), "last");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(4));
    let summary = String::from_utf8(output.stderr).unwrap();
    let line = summary.lines().last().unwrap();
    assert!(line.starts_with("✗ b"), "{summary}");
    assert!(line.contains("failed (exit 4) after"), "{summary}");
    // The person saw the ending: it is not delivered again.
    assert_eq!(sandbox.ok(&["notifications"]), "");
}

#[test]
fn wait_follow_streams_a_started_task_then_summarizes() {
    let sandbox = Sandbox::new();
    let id = sandbox.start("echo one; echo two");
    let output = sandbox.run(&["wait", "--follow", &id]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "one\ntwo\n");
    let summary = String::from_utf8(output.stderr).unwrap();
    assert!(
        summary.starts_with(&format!("✓ {id} completed in ")),
        "{summary}"
    );
    assert!(
        summary.trim_end().ends_with(": echo one; echo two"),
        "{summary}"
    );
}

#[test]
fn notifications_are_lines_on_a_terminal_and_xml_elsewhere() {
    let sandbox = Sandbox::new();
    let first = sandbox.start("echo hi");
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &first]).status.code(),
        Some(0)
    );
    let text = sandbox.ok(&["notifications", "--format", "text"]);
    assert_eq!(
        text,
        format!("{first} completed: Background command \"echo hi\" completed (exit code 0)\n")
    );
    let second = sandbox.start("exit 3");
    assert_eq!(
        sandbox
            .run(&["wait", "--no-deliver", &second])
            .status
            .code(),
        Some(3)
    );
    // Off a terminal (a pipe, as here) the default stays the envelope a model reads.
    let xml = sandbox.ok(&["notifications"]);
    assert!(xml.starts_with("<task-notification>\n"), "{xml}");
    assert!(
        xml.contains(&format!("<task-id>{second}</task-id>")),
        "{xml}"
    );
    // On a terminal, readable lines by default; --for-model keeps XML.
    let third = sandbox.start("true");
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &third]).status.code(),
        Some(0)
    );
    let seen = sandbox.on_terminal("notifications", false);
    assert!(
        seen.starts_with(&format!("{third} completed: ")),
        "{seen:?}"
    );
    assert!(!seen.contains('<'), "{seen:?}");
}

/// A scripted agent's command line (shell words, for a terminal): it uses a tool, says
/// `All counted.` and ends its turn with the result `3 files`.
pub fn counting_agent(sandbox: &Sandbox) -> String {
    let script = sandbox.script(
        "count.jsonl",
        &[
            serde_json::json!({"read_user": true}),
            serde_json::json!({"tool": "Bash", "input": {"command": "ls", "description": "List files"},
                               "output": "a\nb\nc"}),
            serde_json::json!({"text": "All counted."}),
            serde_json::json!({"result": "3 files"}),
        ],
    );
    let fake = crate::support::fake_agent();
    format!("-- {} --script {script}", fake.display())
}

#[test]
fn agent_wait_on_a_terminal_shows_the_conversation_and_how_it_ended() {
    let sandbox = Sandbox::for_agents();
    let command = counting_agent(&sandbox);
    let seen = sandbox.on_terminal(
        &format!("agent --prompt 'count them' --wait {command}"),
        true,
    );
    // What a person reads: the conversation and a summary line, not the model's envelope
    // (#41.7: the XML envelope was printed on a terminal too).
    assert!(!seen.contains("<task-notification>"), "{seen}");
    for part in [
        "> count them",
        "  → ",
        "List files",
        "All counted.",
        "✓ 3 files",
    ] {
        assert!(seen.contains(part), "{part} in {seen}");
    }
    assert!(seen.contains(" completed in "), "{seen}");
    // Off a terminal (a script, a model), the notification.
    let mut args = vec!["agent", "--prompt", "count them", "--wait"];
    args.extend(command.split(' '));
    let piped = sandbox.ok(&args);
    assert!(piped.contains("<task-notification>"), "{piped}");
}
