//! A scripted model server: stands in for a model's HTTP API (Anthropic Messages, OpenAI
//! Responses, Gemini `streamGenerateContent`, each a [`Dialect`]) so that a real agent CLI can
//! run headless with no network and no model. The script says which tools the "model" calls,
//! turn by turn; every request the CLI makes is recorded, so a test reads exactly what the
//! client put in front of its model.
//!
//! A turn of the script is chosen from the conversation the request carries (how many tool
//! results it holds), never from how many requests came before: retries and side requests
//! (titles, classifiers) do not move the script.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One tool call of the model: the MCP server's tool (its bare name: `Bash`) and its input.
#[derive(Debug, Clone)]
pub struct Call {
    pub tool: String,
    pub input: Value,
}

impl Call {
    pub fn new(tool: &str, input: Value) -> Self {
        Self {
            tool: tool.to_owned(),
            input,
        }
    }
}

/// What the model answers at one point of the conversation.
pub struct Turn {
    /// The tool calls it makes (all in one response); none: it answers with text and stops.
    pub calls: Vec<Call>,
    /// Held until this holds (a test's condition: a task has ended), at most a minute.
    pub gate: Option<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl Turn {
    pub fn calls(calls: Vec<Call>) -> Self {
        Self { calls, gate: None }
    }

    pub fn call(tool: &str, input: Value) -> Self {
        Self::calls(vec![Call::new(tool, input)])
    }

    /// This turn is answered only once `gate` holds.
    pub fn after(mut self, gate: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.gate = Some(Box::new(gate));
        self
    }
}

/// The text the model ends with once the script is done.
pub const FINAL_TEXT: &str = "All done.";

/// What the model charges for a request whose conversation holds `results` tool results,
/// `(input, output)` tokens: each request's input larger than the one before (its
/// conversation grew), as a real model's is, so that a count that sums inputs is told from one
/// that takes the latest (SPEC §7).
pub fn charge(results: usize) -> (u64, u64) {
    (1100 + 100 * results as u64, 42)
}

/// An HTTP response.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(value: &Value) -> Self {
        Self {
            status: 200,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    /// Server-sent events, each `(event name, data)`; a `None` name sends a bare `data:` line.
    pub fn sse(events: &[(Option<&str>, Value)]) -> Self {
        let mut body = String::new();
        for (name, data) in events {
            if let Some(name) = name {
                body.push_str(&format!("event: {name}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Self {
            status: 200,
            content_type: "text/event-stream",
            body: body.into_bytes(),
        }
    }

    pub fn not_found() -> Self {
        Self {
            status: 404,
            content_type: "application/json",
            body: br#"{"error":{"message":"not found"}}"#.to_vec(),
        }
    }
}

/// One model API, as one agent CLI speaks it.
pub trait Dialect: Send + Sync + 'static {
    /// The tool's name as this client offers it to its model (`mcp__tasks__Bash`…).
    fn tool_name(&self, server: &str, tool: &str) -> String;
    /// Whether `body` is a turn of the scripted conversation (it offers the MCP server's tools).
    fn is_turn(&self, path: &str, body: &Value, server: &str) -> bool;
    /// How many tool results the conversation in `body` holds.
    fn results(&self, body: &Value) -> usize;
    /// The answer that makes `calls` (or, when empty, ends with [`FINAL_TEXT`]).
    fn answer(&self, calls: &[(String, Value)], step: usize, body: &Value) -> Response;
    /// A minimal answer to a request that is not a scripted turn.
    fn other(&self, path: &str, body: &Value) -> Response;
    /// The conversation of `body` as the model reads it (not the system prompt or tools).
    fn conversation<'a>(&self, body: &'a Value) -> Option<&'a Value>;
}

/// One request the client made.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Value,
    /// Whether it was a turn of the scripted conversation.
    pub turn: bool,
    /// When it arrived.
    pub at: Instant,
}

struct Shared {
    dialect: Box<dyn Dialect>,
    script: Vec<Turn>,
    server: String,
    recorded: Mutex<Vec<Recorded>>,
    closed: AtomicBool,
}

/// The server: listens on 127.0.0.1 until dropped.
pub struct ModelServer {
    port: u16,
    shared: Arc<Shared>,
}

impl ModelServer {
    /// Serves `script` in `dialect` for the tools of the MCP server named `server`.
    pub fn start(dialect: impl Dialect, server: &str, script: Vec<Turn>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local address").port();
        let shared = Arc::new(Shared {
            dialect: Box::new(dialect),
            script,
            server: server.to_owned(),
            recorded: Mutex::default(),
            closed: AtomicBool::new(false),
        });
        let accepting = listener.try_clone().expect("clone the listener");
        let serving = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in accepting.incoming() {
                let Ok(stream) = stream else { return };
                if serving.closed.load(Ordering::SeqCst) {
                    return;
                }
                let shared = Arc::clone(&serving);
                std::thread::spawn(move || {
                    if let Err(error) = serve(&shared, stream) {
                        tracing_free_log(&format!("model server: {error}"));
                    }
                });
            }
        });
        Self { port, shared }
    }

    /// `http://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.shared
            .recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The scripted turns the client asked for, in order.
    pub fn turns(&self) -> Vec<Recorded> {
        self.recorded().into_iter().filter(|r| r.turn).collect()
    }

    /// The conversation of `turn` as the model read it (its messages, not the system prompt or
    /// tools).
    pub fn conversation(&self, turn: &Recorded) -> Value {
        self.shared
            .dialect
            .conversation(&turn.body)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// What the model was given in each turn: the texts of its conversation (tool results,
    /// user and system messages), JSON inside a text decoded.
    pub fn conversation_texts(&self, turn: &Recorded) -> Vec<String> {
        let mut texts = Vec::new();
        if let Some(conversation) = self.shared.dialect.conversation(&turn.body) {
            collect_texts(conversation, &mut texts);
        }
        texts
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        // Wakes the accept loop, which then sees it is closed and ends.
        self.shared.closed.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

#[allow(clippy::print_stderr)]
fn tracing_free_log(line: &str) {
    eprintln!("{line}");
}

/// Every string inside `value`, and inside any string that is itself JSON.
fn collect_texts(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) => collect_texts(&inner, texts),
            _ => texts.push(text.clone()),
        },
        Value::Array(items) => items.iter().for_each(|item| collect_texts(item, texts)),
        Value::Object(map) => map.values().for_each(|item| collect_texts(item, texts)),
        _ => {}
    }
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Option<Request>> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let path = words.next().unwrap_or_default().to_owned();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let (name, value) = (name.to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().unwrap_or(0);
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(&mut reader)?
    } else {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    Ok(Some(Request { method, path, body }))
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

fn serve(shared: &Shared, mut stream: TcpStream) -> std::io::Result<()> {
    let Some(request) = read_request(&stream)? else {
        return Ok(());
    };
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let dialect = &shared.dialect;
    let turn = request.method == "POST" && dialect.is_turn(&request.path, &body, &shared.server);
    shared
        .recorded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Recorded {
            method: request.method,
            path: request.path.clone(),
            body: body.clone(),
            turn,
            at: Instant::now(),
        });
    let response = if turn {
        let step = step_of(&shared.script, dialect.results(&body));
        let calls = match step.and_then(|i| shared.script.get(i)) {
            Some(turn) => {
                if let Some(gate) = &turn.gate {
                    // Answered once the test's condition holds (at most a minute).
                    let _ = super::poll_until(Duration::from_secs(60), || gate().then_some(()));
                }
                turn.calls
                    .iter()
                    .map(|c| (dialect.tool_name(&shared.server, &c.tool), c.input.clone()))
                    .collect()
            }
            None => Vec::new(),
        };
        dialect.answer(&calls, step.unwrap_or(usize::MAX), &body)
    } else {
        dialect.other(&request.path, &body)
    };
    write_response(&mut stream, &response)
}

/// The turn to answer when the conversation holds `results` tool results: the one after every
/// turn whose calls they answer (none once the script is done, or when they match no turn).
fn step_of(script: &[Turn], results: usize) -> Option<usize> {
    let mut answered = 0;
    for (index, turn) in script.iter().enumerate() {
        if answered == results {
            return Some(index);
        }
        answered += turn.calls.len();
    }
    None
}

fn write_response(stream: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        if response.status == 200 {
            "OK"
        } else {
            "Not Found"
        },
        response.content_type,
        response.body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&response.body)?;
    stream.flush()
}

/// A `<task-notification>` the model was shown: its task id and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub task_id: String,
    pub status: Option<String>,
}

/// Every `<task-notification>` envelope in `texts`.
pub fn notifications_in(texts: &[String]) -> Vec<Seen> {
    let mut seen = Vec::new();
    for text in texts {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("<task-notification>") {
            let after = &rest[start..];
            let end = after
                .find("</task-notification>")
                .map_or(after.len(), |e| e + "</task-notification>".len());
            let envelope = &after[..end];
            if let Some(task_id) = between(envelope, "<task-id>", "</task-id>") {
                seen.push(Seen {
                    task_id: task_id.to_owned(),
                    status: between(envelope, "<status>", "</status>").map(str::to_owned),
                });
            }
            rest = &after[end..];
        }
    }
    seen
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}
