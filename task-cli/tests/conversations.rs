//! Every agent-like task's output reads as one conversation (issue #23 item 5): an agent, a
//! teammate, a dream and a workflow's agent, each run by task-agent's scripted `fake-agent`
//! (Claude Code's stream-json; the remote agent's case is in `remote.rs`). `tasks output ID`
//! shows the user's own messages, the tools (a failed one with the CLI's reason), what the
//! agent said and how its turn ended; `--tail N` is the last N of those entries, `--follow`
//! and `--for-model` show the same, and only `--json` gives the transcript as it is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::agent_sandbox::Sandbox;
use support::{eventually, fake_agent};

/// The last three entries every script below ends with.
const LAST_THREE: &str = "    (the tool failed: Claude requested permissions to use Bash, but you haven't granted it yet.)\n\
                          Nothing could run.\n\
                          ✓ blocked\n";

impl Sandbox {
    /// A script whose turn runs a tool the CLI's permission mode denies, says so and ends.
    fn denied_script(&self) -> String {
        self.script(
            "denied.jsonl",
            &[
                json!({"read_user": true}),
                json!({"tool": "Bash", "input": {"command": "rm -rf build", "description": "Clean the build"},
                       "output": "Claude requested permissions to use Bash, but you haven't granted it yet.",
                       "is_error": true}),
                json!({"text": "Nothing could run."}),
                json!({"result": "blocked"}),
            ],
        )
    }

    fn started(&self, args: &[&str]) -> String {
        let fake = fake_agent();
        let script = self.denied_script();
        let all = [args, &["--", fake.to_str().unwrap(), "--script", &script]].concat();
        self.ok(&all).lines().next().unwrap().trim().to_owned()
    }

    /// Waits until the task's turn has ended (its transcript holds the result).
    fn answered(&self, id: &str) {
        eventually(&format!("{id} answered"), || {
            let raw: Value = serde_json::from_str(&self.ok(&["output", id, "--json"])).ok()?;
            raw["output"]
                .as_str()?
                .contains("\"type\":\"result\"")
                .then_some(())
        });
    }

    /// Checks every reading mode of a conversation whose first turn was `prompt`.
    fn assert_reads_as_a_conversation(&self, id: &str, prompt: &str) {
        self.answered(id);
        let tail = self.ok(&["output", id, "--tail", "3"]);
        assert_eq!(tail, LAST_THREE, "{id}");
        let whole = self.ok(&["output", id]);
        assert!(whole.contains(&format!("> {prompt}\n")), "{id}: {whole}");
        assert!(
            whole.contains("  → Running Clean the build\n"),
            "{id}: {whole}"
        );
        assert!(whole.ends_with(LAST_THREE), "{id}: {whole}");
        assert!(!whole.contains("\"type\""), "{id}: {whole}");
        let for_model = self.ok(&["output", id, "--for-model"]);
        assert!(for_model.contains(LAST_THREE), "{id}: {for_model}");
        assert!(!for_model.contains("\"type\""), "{id}: {for_model}");
        let raw: Value = serde_json::from_str(&self.ok(&["output", id, "--json"])).unwrap();
        assert!(
            raw["output"].as_str().unwrap().contains("\"tool_result\""),
            "{id}: --json is the transcript as it is"
        );
    }
}

#[test]
fn an_agents_output_is_its_conversation_with_the_users_messages_in_every_mode() {
    let sandbox = Sandbox::for_agents();
    let id = sandbox.started(&["agent", "--name", "cleaner", "--prompt", "clean the build"]);
    sandbox.assert_reads_as_a_conversation(&id, "clean the build");
    // Followed to its end, it reads the same, whoever follows it (#41.7: `wait --follow`
    // streamed the raw JSON lines).
    let followed = sandbox.ok(&["output", &id, "--follow"]);
    assert_eq!(followed, sandbox.ok(&["output", &id]));
    let waited = sandbox.run(&["wait", "--follow", "--no-deliver", &id]);
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
    assert_eq!(String::from_utf8(waited.stdout).unwrap(), followed);
    let said = String::from_utf8(waited.stderr).unwrap();
    assert!(said.starts_with(&format!("✓ {id} completed in ")), "{said}");

    // A message the user sends resumes it; the conversation holds it, then the answer.
    sandbox.ok(&["send", "cleaner", "why not?"]);
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &id]).status.code(),
        Some(0)
    );
    let tail = eventually("the answer to the message", || {
        let tail = sandbox.ok(&["output", &id, "--tail", "3"]);
        tail.contains("echo: why not?").then_some(tail)
    });
    assert_eq!(tail, "> why not?\necho: why not?\n✓ echo: why not?\n");
}

#[test]
fn a_teammates_output_is_its_conversation() {
    let sandbox = Sandbox::for_agents();
    let id = sandbox.started(&["team", "spawn", "kit@crew", "--prompt", "tidy the docs"]);
    sandbox.assert_reads_as_a_conversation(&id, "tidy the docs");
    sandbox.ok(&["kill", &id]);
}

#[test]
fn a_dreams_output_is_its_conversation() {
    let sandbox = Sandbox::for_agents();
    let lock = sandbox.path("memory/.consolidate-lock");
    let id = sandbox.started(&["dream", "--lock", lock.to_str().unwrap()]);
    let whole = eventually("the dream's turn", || {
        let whole = sandbox.ok(&["output", &id]);
        whole.ends_with(LAST_THREE).then_some(whole)
    });
    // A dream's prompt is the consolidation prompt; it starts the conversation.
    assert!(whole.starts_with("> "), "{whole}");
    assert_eq!(sandbox.ok(&["output", &id, "--tail", "3"]), LAST_THREE);
}

#[test]
fn a_workflow_agents_output_is_its_conversation() {
    let sandbox = Sandbox::for_agents();
    let flow = sandbox.path("flow.js");
    std::fs::write(
        &flow,
        "export const meta = { name: 'one', description: 'one agent' }\nreturn await agent('sweep the floor')\n",
    )
    .unwrap();
    let run = sandbox.started(&["workflow", "run", flow.to_str().unwrap()]);
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &run]).status.code(),
        Some(0)
    );
    // Its agent's end, settled silently, is written on its own (not in the run's end): look
    // until it is listed.
    let agent = eventually("the workflow's agent listed", || {
        let all = sandbox.json(&["ps", "--all"]);
        all.as_array()?
            .iter()
            .find(|t| t["type"] == "local_agent")
            .cloned()
    });
    let id = agent["id"].as_str().unwrap();
    sandbox.assert_reads_as_a_conversation(id, "sweep the floor");
}
