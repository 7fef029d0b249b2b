//! A task named the way a person names it (issue #41, item 9), through the built `tasks`
//! binary: every command that takes a task takes its id, its name (an agent's `--name`) or a
//! unique prefix of its id of at least 3 characters; a prefix that starts several ids is refused
//! naming them, an unknown name or prefix is the unknown-task error, and text that is none of
//! these (a path, a space) is refused as malformed before anything is looked up.
//!
//! An agent that must stay live until the test lets it go waits for a file the test creates
//! (fake-agent's `wait_file`); a shell reads a line of its stdin (`--stdin pipe`): nothing here
//! waits on a timer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::agent_sandbox::Sandbox;
use support::{eventually, fake_agent};

impl Sandbox {
    /// Starts fake-agent with `script` as an agent with `options`; returns its id.
    fn named_agent(&self, options: &[&str], script: &str) -> String {
        let fake = fake_agent();
        let mut args = vec!["agent"];
        args.extend_from_slice(options);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.ok(&args).lines().next().unwrap().to_owned()
    }

    /// A shell that runs until [`Sandbox::release`]: once this returns it is running.
    fn held_shell(&self) -> String {
        let id = self
            .ok(&["run", "--stdin", "pipe", "--", "read line; echo got $line"])
            .trim()
            .to_owned();
        eventually("the shell running", || {
            (self.listed(&id)["status"] == "running").then_some(())
        });
        id
    }

    fn release(&self, shell: &str) {
        self.ok(&["input", shell, "go"]);
    }

    /// `tasks ARGS`: its exit code and stderr.
    fn refused(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = self.run(args);
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    }

    /// Writes a record of a task `id` that never existed, copied from the record of `like`
    /// (a real one): what a prefix is resolved against is the session's records.
    fn record_like(&self, like: &str, id: &str) {
        let dir = self.path("default/tasks");
        let text = std::fs::read_to_string(dir.join(format!("{like}.json"))).unwrap();
        let mut record: Value = serde_json::from_str(&text).unwrap();
        record["task"]["id"] = json!(id);
        let output = dir.join(format!("{id}.output"));
        record["task"]["outputFile"] = json!(output);
        std::fs::write(&output, "").unwrap();
        std::fs::write(dir.join(format!("{id}.json")), record.to_string()).unwrap();
    }
}

#[test]
fn output_wait_and_kill_take_an_agents_name() {
    let sandbox = Sandbox::for_agents();
    let gate = sandbox.path("gate");
    let script = sandbox.script(
        "writer.jsonl",
        &[
            json!({"read_user": true}),
            json!({"text": "the first draft"}),
            json!({"wait_file": gate.display().to_string()}),
            json!({"result": "written"}),
        ],
    );
    let writer = sandbox.named_agent(&["--name", "writer", "--prompt", "write"], &script);
    eventually("the writer's first text", || {
        sandbox
            .ok(&["output", "writer"])
            .contains("the first draft")
            .then_some(())
    });
    // Its record names it, and `ps` shows the id the name stands for.
    assert_eq!(sandbox.listed(&writer)["kind"]["agent"]["name"], "writer");
    std::fs::write(&gate, "").unwrap();
    let waited = sandbox.run(&["wait", "--no-deliver", "writer"]);
    assert_eq!(waited.status.code(), Some(0), "{waited:?}");
    let text = String::from_utf8(waited.stdout).unwrap();
    assert!(text.starts_with(&format!("{writer} completed")), "{text}");

    let forever = sandbox.script(
        "sleeper.jsonl",
        &[
            json!({"read_user": true}),
            json!({"wait_file": sandbox.path("never").display().to_string()}),
        ],
    );
    let sleeper = sandbox.named_agent(&["--name", "sleeper", "--prompt", "sleep"], &forever);
    eventually("the sleeper running", || {
        (sandbox.listed(&sleeper)["status"] == "running").then_some(())
    });
    let killed: Value = sandbox.json(&["kill", "sleeper"]);
    assert!(killed.to_string().contains(&sleeper), "{killed}");
    eventually("the sleeper killed", || {
        (sandbox.listed(&sleeper)["status"] == "killed").then_some(())
    });
    // The writer is untouched by a kill of another name.
    assert_eq!(sandbox.listed(&writer)["status"], "completed");

    let (code, stderr) = sandbox.refused(&["output", "nobody"]);
    assert_eq!(code, Some(66), "{stderr}");
    assert!(stderr.contains("no task nobody"), "{stderr}");
}

#[test]
fn output_wait_kill_and_input_take_a_unique_prefix() {
    let sandbox = Sandbox::new();
    let shell = sandbox.held_shell();
    let prefix = &shell[..4];
    sandbox.release(prefix);
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", prefix]).status.code(),
        Some(0)
    );
    assert_eq!(sandbox.ok(&["output", prefix]), "got go\n");

    let other = sandbox.held_shell();
    // Three characters are enough, unless both ids happen to start with the same three.
    let short = if shell.starts_with(&other[..3]) {
        &other[..6]
    } else {
        &other[..3]
    };
    let killed = sandbox.run(&["kill", short]);
    assert!(killed.status.success(), "{killed:?}");
    eventually("the prefix's task killed", || {
        (sandbox.listed(&other)["status"] == "killed").then_some(())
    });
    // A prefix of a full id plus one more character is no id and no prefix of one.
    let (code, _) = sandbox.refused(&["output", &format!("{shell}x")]);
    assert_eq!(code, Some(66));
}

#[test]
fn an_ambiguous_prefix_is_refused_naming_every_task_it_could_be() {
    let sandbox = Sandbox::new();
    let real = sandbox.ok(&["run", "--wait", "--", "true"]);
    let real = real.lines().next().unwrap().to_owned();
    sandbox.record_like(&real, "bqq000001");
    sandbox.record_like(&real, "bqq000002");
    for command in [["output"], ["wait"], ["kill"]] {
        let mut args = command.to_vec();
        args.push("bqq");
        let (code, stderr) = sandbox.refused(&args);
        assert_eq!(code, Some(65), "{args:?}: {stderr}");
        assert!(
            stderr.contains("ambiguous")
                && stderr.contains("bqq000001")
                && stderr.contains("bqq000002"),
            "{args:?}: {stderr}"
        );
    }
    // Still ambiguous one character on; a whole id is itself.
    assert_eq!(sandbox.refused(&["output", "bqq000"]).0, Some(65));
    assert!(sandbox.run(&["output", "bqq000002"]).status.success());
    let longer = sandbox.run(&["output", "bqq0000011"]);
    assert_eq!(longer.status.code(), Some(66), "no such id, no such prefix");
}

#[test]
fn malformed_text_is_refused_before_anything_is_looked_up() {
    let sandbox = Sandbox::new();
    let shell = sandbox.held_shell();
    for bad in [
        "two words",
        "@crew",
        "a@b@c",
        "",
        "../../etc/passwd",
        "a/b",
        ".hidden",
    ] {
        for command in ["output", "wait", "kill", "input"] {
            let mut args = vec![command, bad];
            if command == "input" {
                args.push("text");
            }
            let (code, stderr) = sandbox.refused(&args);
            assert_eq!(code, Some(65), "{args:?}: {stderr}");
            assert!(stderr.contains("malformed task id"), "{args:?}: {stderr}");
            assert!(!stderr.contains("root:"), "{args:?}: {stderr}");
        }
    }
    // Two characters are too few for a prefix.
    let (code, _) = sandbox.refused(&["output", &shell[..2]]);
    assert_eq!(code, Some(66));
    sandbox.release(&shell);
}
