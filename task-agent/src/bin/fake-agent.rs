//! `fake-agent`: a scripted agent CLI for tests. **A test tool, not a product.**
//!
//! It speaks Claude Code's stream-json protocol in and out, with no model and no network:
//!
//! ```text
//! fake-agent --script FILE [-p] [--output-format stream-json] [--verbose]   (or --script=FILE)
//!            [--input-format stream-json] [--model M] [--resume SESSION]
//!            [--replay-user-messages] [--turn-signal DIR]
//! ```
//!
//! With `--replay-user-messages` it prints each user line it reads back on stdout as it reads
//! it, before answering, as Claude Code does.
//!
//! With `--turn-signal DIR` it puts a file in DIR (`{pid}-{n}`, holding the turn's text, whole
//! when it appears) as it reads each user turn, before it answers: a test's signal that the turn
//! reached it (to kill its supervisor then).
//!
//! It also takes the command lines the command runner gives Codex and Gemini CLIs, and then
//! prints only what its script says (`raw` lines: the recordings of the real CLIs):
//!
//! ```text
//! fake-agent --script FILE … --json … PROMPT                    (Codex: `exec --json`)
//! fake-agent --script FILE … --json … resume THREAD MESSAGE     (Codex: `exec resume`)
//! fake-agent --script FILE … -p PROMPT                          (Gemini: `-p` without
//!                                                                `--input-format`)
//! ```
//!
//! The prompt (or the resumed message) is the user turn `by_prompt` rules match.
//!
//! In Claude's mode it prints `system/init`, then runs the script's steps, one JSON object a
//! line:
//!
//! | step | what it does |
//! |---|---|
//! | `{"read_user": true}` | reads one stream-json user line from stdin (exits 0 at end of input) |
//! | `{"text": "…", "usage": {…}}` | an assistant message with a text block |
//! | `{"tool": "Bash", "input": {…}, "usage": {…}, "output": "…", "is_error": false}` | an assistant `tool_use`, then its `tool_result` |
//! | `{"result": "…"}` | a `result` line with subtype `success` |
//! | `{"result_error": "error_max_turns", "message": "…"}` | a `result` line with that error subtype |
//! | `{"raw": "…"}` | the text as a line, verbatim (malformed or unknown lines) |
//! | `{"stderr": "…"}` | a line on stderr |
//! | `{"stderr_fill": {"text": "…", "bytes": N}}` | `text` repeated on stderr until N bytes are written (the last copy cut), no newline added |
//! | `{"wait_file": "PATH"}` | sleeps until PATH exists (a test's signal) |
//! | `{"touch": "PATH"}` | creates PATH (a signal to the test) |
//! | `{"spawn": "CMD", "pid_file": "PATH", "setsid": false}` | starts `sh -c CMD` in the background, writing its pid to PATH; with `setsid`, in a session (and process group) of its own |
//! | `{"exit": N}` | exits with code N at once (a crash with no result) |
//! | `{"teammate": true}` | from now on, answers a turn holding a `shutdown_request` by approving it |
//! | `{"by_prompt": [{"if": "…", "steps": […]}, …]}` | runs the steps of the first rule whose `if` is in the last user turn read (`""` matches any) |
//! | `{"forever": {"steps": […], "every_ms": N}}` | runs the steps again and again, N ms apart (default 10), for ever: an agent that never stops working (until a step exits or it is killed) |
//! | `{"reconnect_loop": {"every_ms": N}}` | prints Codex's top-level `{"type":"error","message":"Reconnecting... n/5 (…)"}` every N ms, for ever (its model endpoint is gone) |
//!
//! When the script is done it keeps reading user lines until stdin closes, answering each with
//! `echo: {message}` (a text and a `success` result; with `FAKE_AGENT_ECHO_ENV=NAME` in its
//! environment, `echo: {message} [NAME=value]`, the value of its own `NAME`: a CLI that says
//! which environment it runs in). After a `teammate` step, a turn that
//! holds a team `shutdown_request` is answered first with a `SendMessage` tool use whose
//! message is the approving `shutdown_response` (as a teammate model would). With `--resume` it
//! runs none of the script's steps, only takes its `teammate` mode (a resumed session keeps
//! what it was told to be), and answers (the first user line is the resumed turn). Usage
//! defaults to 100 input and 10 output tokens a message.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("fake-agent: {error}");
            ExitCode::from(2)
        }
    }
}

struct Agent {
    session_id: String,
    stdin: std::io::StdinLock<'static>,
    stdout: std::io::Stdout,
    message_count: u64,
    teammate: bool,
    /// The last user turn read.
    last_user: String,
    /// `--turn-signal`: where each user turn read is signalled.
    turn_signal: Option<String>,
    /// User turns read.
    turns: u64,
    /// `--replay-user-messages`: each user line read is printed back (as Claude does).
    replay_user: bool,
}

fn run() -> Result<u8, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `--flag VALUE` or `--flag=VALUE`.
    let flag = |name: &str| {
        args.iter()
            .enumerate()
            .find_map(|(i, arg)| match arg.strip_prefix(name) {
                Some("") => args.get(i + 1).cloned(),
                Some(rest) => rest.strip_prefix('=').map(str::to_owned),
                None => None,
            })
    };
    let resume = flag("--resume");
    let session_id = resume
        .clone()
        .unwrap_or_else(|| format!("fake-session-{}", std::process::id()));
    let mut agent = Agent {
        session_id,
        stdin: std::io::stdin().lock(),
        stdout: std::io::stdout(),
        message_count: 0,
        teammate: false,
        last_user: String::new(),
        turn_signal: flag("--turn-signal"),
        turns: 0,
        replay_user: args.iter().any(|a| a == "--replay-user-messages"),
    };
    if let Some(prompt) = argument_prompt(&args) {
        // Codex's or Gemini's command line: the script says everything that is printed.
        agent.last_user = prompt;
        let script = flag("--script").ok_or("missing --script FILE")?;
        return agent.run_script(&script);
    }
    agent.emit(
        &json!({"type": "system", "subtype": "init", "session_id": agent.session_id,
        "model": flag("--model").unwrap_or_else(|| "fake-model".into()), "tools": ["Bash", "Read"],
        "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()}),
    )?;
    let text = match (flag("--script"), &resume) {
        (Some(script), _) => {
            std::fs::read_to_string(&script).map_err(|e| format!("{script}: {e}"))?
        }
        (None, Some(_)) => String::new(),
        (None, None) => return Err("missing --script FILE".into()),
    };
    let steps = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| format!("bad step {line}: {e}")));
    for step in steps {
        let step: Value = step?;
        if resume.is_some() {
            // A resumed session remembers what it was told to be, not what it did.
            agent.teammate |= step.get("teammate").is_some();
        } else if let Some(code) = agent.step(&step)? {
            return Ok(code);
        }
    }
    while let Some(message) = agent.read_user()? {
        if agent.teammate
            && let Some(request_id) = shutdown_request_id(&message)
        {
            let response =
                json!({"type": "shutdown_response", "request_id": request_id, "approve": true});
            agent.tool(
                &json!("SendMessage"),
                Some(&json!({"to": "team-lead", "message": response.to_string()})),
                None,
                None,
                None,
            )?;
        }
        let answer = format!("echo: {message}{}", echoed_variable());
        agent.assistant(json!([{"type": "text", "text": answer}]), None)?;
        agent.emit(
            &json!({"type": "result", "subtype": "success", "is_error": false,
            "result": answer, "session_id": agent.session_id, "num_turns": 1, "duration_ms": 1}),
        )?;
    }
    Ok(0)
}

impl Agent {
    /// Runs one step; `Some(code)` to exit.
    fn step(&mut self, step: &Value) -> Result<Option<u8>, String> {
        let get = |key: &str| step.get(key);
        let usage = get("usage");
        if get("read_user").is_some() {
            if self.read_user()?.is_none() {
                return Ok(Some(0));
            }
        } else if let Some(text) = get("text") {
            self.assistant(json!([{"type": "text", "text": text}]), usage)?;
        } else if let Some(tool) = get("tool") {
            self.tool(tool, get("input"), usage, get("output"), get("is_error"))?;
        } else if let Some(result) = get("result") {
            self.emit(
                &json!({"type": "result", "subtype": "success", "is_error": false,
                "result": result, "session_id": self.session_id, "num_turns": 1, "duration_ms": 1}),
            )?;
        } else if let Some(subtype) = get("result_error") {
            self.emit(
                &json!({"type": "result", "subtype": subtype, "is_error": true,
                "result": get("message"), "session_id": self.session_id}),
            )?;
        } else if let Some(raw) = get("raw").and_then(Value::as_str) {
            self.write_line(raw)?;
        } else if let Some(text) = get("stderr").and_then(Value::as_str) {
            eprintln!("{text}");
        } else if let Some(fill) = get("stderr_fill") {
            let text = fill.get("text").and_then(Value::as_str).unwrap_or("x");
            let bytes = fill.get("bytes").and_then(Value::as_u64).unwrap_or(0);
            stderr_fill(text, bytes)?;
        } else if let Some(path) = get("wait_file").and_then(Value::as_str) {
            while !Path::new(path).exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
        } else if let Some(path) = get("touch").and_then(Value::as_str) {
            std::fs::write(path, b"").map_err(|e| format!("{path}: {e}"))?;
        } else if let Some(command) = get("spawn").and_then(Value::as_str) {
            let setsid = get("setsid").and_then(Value::as_bool).unwrap_or(false);
            spawn(command, get("pid_file").and_then(Value::as_str), setsid)?;
        } else if get("teammate").is_some() {
            self.teammate = true;
        } else if let Some(code) = get("exit").and_then(Value::as_u64) {
            return Ok(Some(u8::try_from(code).unwrap_or(1)));
        } else if let Some(rules) = get("by_prompt").and_then(Value::as_array) {
            return self.by_prompt(rules);
        } else if let Some(forever) = get("forever") {
            let steps = forever
                .get("steps")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let every_ms = forever
                .get("every_ms")
                .and_then(Value::as_u64)
                .unwrap_or(10);
            loop {
                for step in &steps {
                    if let Some(code) = self.step(step)? {
                        return Ok(Some(code));
                    }
                }
                std::thread::sleep(Duration::from_millis(every_ms));
            }
        } else if let Some(every) = get("reconnect_loop") {
            let every_ms = every.get("every_ms").and_then(Value::as_u64).unwrap_or(10);
            self.reconnect_loop(Duration::from_millis(every_ms))?;
        } else {
            return Err(format!("unknown step {step}"));
        }
        Ok(None)
    }

    /// Runs a script's steps (Codex's and Gemini's modes: nothing else is printed), then exits.
    fn run_script(&mut self, script: &str) -> Result<u8, String> {
        let text = std::fs::read_to_string(script).map_err(|e| format!("{script}: {e}"))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let step: Value =
                serde_json::from_str(line).map_err(|e| format!("bad step {line}: {e}"))?;
            if let Some(code) = self.step(&step)? {
                return Ok(code);
            }
        }
        Ok(0)
    }

    /// What `codex exec --json` prints while its model endpoint is unreachable: a top-level
    /// error for each attempt, for ever (until the process is killed).
    fn reconnect_loop(&mut self, every: Duration) -> Result<(), String> {
        for attempt in (1..=5).cycle() {
            self.emit(&json!({"type": "error", "message": format!(
                "Reconnecting... {attempt}/5 (stream disconnected before completion: error \
                 sending request for url (http://127.0.0.1:9/v1/responses))")}))?;
            std::thread::sleep(every);
        }
        Ok(())
    }

    /// Runs the steps of the first rule matching the last user turn.
    fn by_prompt(&mut self, rules: &[Value]) -> Result<Option<u8>, String> {
        let rule = rules.iter().find(|rule| {
            rule["if"]
                .as_str()
                .is_some_and(|needle| self.last_user.contains(needle))
        });
        let steps = rule
            .and_then(|rule| rule["steps"].as_array())
            .cloned()
            .unwrap_or_default();
        for step in &steps {
            if let Some(code) = self.step(step)? {
                return Ok(Some(code));
            }
        }
        Ok(None)
    }

    fn tool(
        &mut self,
        name: &Value,
        input: Option<&Value>,
        usage: Option<&Value>,
        output: Option<&Value>,
        is_error: Option<&Value>,
    ) -> Result<(), String> {
        self.message_count += 1;
        let id = format!("toolu_fake_{}", self.message_count);
        let input = input.cloned().unwrap_or_else(|| json!({}));
        self.assistant(
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            usage,
        )?;
        self.emit(&json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": id, "content": output.cloned().unwrap_or_else(|| json!("ok")),
            "is_error": is_error.and_then(Value::as_bool).unwrap_or(false)}]}, "parent_tool_use_id": null}))
    }

    fn assistant(&mut self, content: Value, usage: Option<&Value>) -> Result<(), String> {
        let usage = usage
            .cloned()
            .unwrap_or_else(|| json!({"input_tokens": 100, "output_tokens": 10}));
        self.emit(
            &json!({"type": "assistant", "message": {"role": "assistant", "content": content,
            "usage": usage}, "parent_tool_use_id": null, "session_id": self.session_id}),
        )
    }

    /// One user turn from stdin: its text, or `None` at end of input.
    fn read_user(&mut self) -> Result<Option<String>, String> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdin.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Ok(None);
            }
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if value["type"] == "user" {
                if self.replay_user {
                    self.emit(&value)?;
                }
                let content = &value["message"]["content"];
                let text = content
                    .as_str()
                    .map_or_else(|| content.to_string(), str::to_owned);
                self.last_user.clone_from(&text);
                self.turns += 1;
                if let Some(dir) = &self.turn_signal {
                    let name = format!("{}-{}", std::process::id(), self.turns);
                    let part = Path::new(dir).join(format!(".{name}"));
                    let path = Path::new(dir).join(name);
                    std::fs::write(&part, &text)
                        .and_then(|()| std::fs::rename(&part, &path))
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
                return Ok(Some(text));
            }
        }
    }

    fn emit(&mut self, value: &Value) -> Result<(), String> {
        self.write_line(&value.to_string())
    }

    fn write_line(&mut self, line: &str) -> Result<(), String> {
        let mut out = self.stdout.lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())
    }
}

fn spawn(command: &str, pid_file: Option<&str>, setsid: bool) -> Result<(), String> {
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    if setsid {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child before `exec`; `setsid` is one raw
        // system call, async-signal-safe.
        unsafe {
            sh.pre_exec(|| {
                rustix::process::setsid()?;
                Ok(())
            });
        }
    }
    let child = sh.spawn().map_err(|e| format!("spawn {command}: {e}"))?;
    if let Some(path) = pid_file {
        std::fs::write(path, child.id().to_string()).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

/// Writes `text` to stderr over and over until `bytes` bytes are written (the last copy cut):
/// one line as long as asked for, in writes of at most 64 KiB.
fn stderr_fill(text: &str, bytes: u64) -> Result<(), String> {
    const WRITE: usize = 64 * 1024;
    let text = if text.is_empty() { "x" } else { text };
    let block: Vec<u8> = text.bytes().cycle().take(WRITE.max(text.len())).collect();
    let mut left = bytes;
    let mut err = std::io::stderr().lock();
    let mut at = 0;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(WRITE);
        // Continue the pattern where the last write left it.
        let start = at % text.len();
        let chunk = &block[start..];
        let n = n.min(chunk.len());
        err.write_all(&chunk[..n]).map_err(|e| e.to_string())?;
        at += n;
        left -= n as u64;
    }
    err.flush().map_err(|e| e.to_string())
}

/// The prompt of a Codex (`--json … PROMPT`, `--json … resume THREAD MESSAGE`) or Gemini
/// (`-p PROMPT` without `--input-format`) command line; `None` for Claude's.
fn argument_prompt(args: &[String]) -> Option<String> {
    let has = |name: &str| args.iter().any(|a| a == name);
    if has("--json") {
        return args.last().cloned();
    }
    if has("-p") && !has("--input-format") {
        let at = args.iter().position(|a| a == "-p")?;
        return args.get(at + 1).cloned();
    }
    None
}

/// The `request_id` of a team `shutdown_request` in a user turn, if it holds one.
fn shutdown_request_id(message: &str) -> Option<String> {
    let start = message.find(r#"{"type":"shutdown_request""#)?;
    let value = serde_json::Deserializer::from_str(&message[start..])
        .into_iter::<Value>()
        .next()?
        .ok()?;
    value["request_id"].as_str().map(str::to_owned)
}

/// ` [NAME=value]` when `FAKE_AGENT_ECHO_ENV` names a variable (`value` empty when it is unset),
/// else nothing.
fn echoed_variable() -> String {
    match std::env::var("FAKE_AGENT_ECHO_ENV") {
        Ok(name) if !name.is_empty() => {
            let value = std::env::var(&name).unwrap_or_default();
            format!(" [{name}={value}]")
        }
        _ => String::new(),
    }
}
