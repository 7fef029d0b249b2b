//! The stdio transport of the MCP server: newline-delimited JSON-RPC, with every line bounded and
//! every bad line answered.
//!
//! rmcp's own stdio transport drops a line over its limit with only a log entry (the client then
//! waits forever for its answer), ignores lines that are not JSON, and answers well-formed JSON
//! that is not a valid message (an unknown `method`, say) with an error that has no `id`. This
//! transport reads lines itself, never holding more than the limit of one in memory, and answers:
//!
//! - a line over the limit: `-32600` (invalid request) with the request's `id`, which is found
//!   by a streaming scan of the line's top-level object as it is discarded, wherever the key is
//!   (`-32700`, parse error, with `id: null` when it has none);
//! - a line that is not JSON: `-32700` (parse error), with the `id` if one can be read, else
//!   `null`;
//! - JSON that is not a valid message: `-32600` with its `id`. A notification (no `id`) is never
//!   answered, as JSON-RPC requires.
//!
//! and then goes on serving.

use std::future::Future;
use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::RequestId;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest request line read whole (as rmcp's default): 16 MiB.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC: the line is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// The longest `id` value kept by the scan of an oversized line.
const MAX_ID_BYTES: usize = 256;

/// Told of every answer the transport writes: the request's id, and whether the answer is out
/// (written and flushed) or was lost (the write failed).
pub type AnswerHook = Arc<dyn Fn(&RequestId, bool) + Send + Sync>;

/// A bounded newline-delimited JSON-RPC transport over a reader and a writer.
pub struct BoundedTransport<R, W> {
    lines: LineReader<R>,
    writer: Arc<Mutex<W>>,
    answered: Option<AnswerHook>,
}

impl<R, W> std::fmt::Debug for BoundedTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedTransport")
            .field("max_line_bytes", &self.lines.max)
            .field("answered", &self.answered.is_some())
            .finish_non_exhaustive()
    }
}

impl<R, W> BoundedTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading requests from `read` (lines of at most `max_line_bytes`) and writing
    /// answers to `write`.
    pub fn new(read: R, write: W, max_line_bytes: usize) -> Self {
        Self {
            lines: LineReader::new(read, max_line_bytes),
            writer: Arc::new(Mutex::new(write)),
            answered: None,
        }
    }

    /// Calls `hook` after each answer to a request is written and flushed (or failed to be):
    /// what the answer carried counts as delivered only then.
    #[must_use]
    pub fn on_answer(mut self, hook: AnswerHook) -> Self {
        self.answered = Some(hook);
        self
    }

    /// Queues an error answer. It is written by a task of its own, so a `receive` cancelled by
    /// the service loop cannot lose it; the writer's lock keeps lines whole.
    fn answer_error(&self, id: Option<RequestId>, code: i64, message: String) {
        let answer =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let writer = Arc::clone(&self.writer);
        tokio::spawn(async move {
            if let Err(error) = write_message(&writer, &answer).await {
                tracing::warn!(%error, "could not answer a bad request line");
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for BoundedTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        let answered = self.answered.clone();
        async move {
            let written = write_message(&writer, &item).await;
            if let (Some(hook), rmcp::model::JsonRpcMessage::Response(response)) = (answered, &item)
            {
                hook(&response.id, written.is_ok());
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.lines.next().await {
                Ok(Line::Whole(bytes)) => match parse(&bytes) {
                    Parsed::Message(message) => return Some(*message),
                    Parsed::Skip => {}
                    Parsed::Bad { id, code, message } => self.answer_error(id, code, message),
                },
                Ok(Line::Oversized { len, id }) => {
                    tracing::warn!(len, "request line over the limit");
                    let message = format!(
                        "request line of {len} bytes exceeds the limit of {} bytes",
                        self.lines.max
                    );
                    let code = if id.is_some() {
                        INVALID_REQUEST
                    } else {
                        PARSE_ERROR
                    };
                    self.answer_error(id, code, message);
                }
                Ok(Line::Eof) => return None,
                Err(error) => {
                    tracing::error!(%error, "could not read a request");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.shutdown().await
    }
}

async fn write_message<W: AsyncWrite + Unpin>(
    writer: &Mutex<W>,
    message: &impl serde::Serialize,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut writer = writer.lock().await;
    writer.write_all(&line).await?;
    writer.flush().await
}

/// What a whole line holds.
enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do: a blank line, or a notification that is not a valid message.
    Skip,
    /// Answer with this error.
    Bad {
        id: Option<RequestId>,
        code: i64,
        message: String,
    },
}

fn parse(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.trim_ascii().is_empty() {
        return Parsed::Skip;
    }
    let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Parsed::Message(Box::new(message)),
        Err(error) => error,
    };
    match serde_json::from_slice::<Value>(line) {
        Ok(value) => {
            let id = value.get("id").and_then(request_id);
            if id.is_none() && value.get("method").is_some() && value.get("id").is_none() {
                tracing::debug!(%error, "ignoring an invalid notification");
                return Parsed::Skip;
            }
            Parsed::Bad {
                id,
                code: INVALID_REQUEST,
                message: format!("invalid request: {error}"),
            }
        }
        Err(_) => {
            let mut scan = IdScan::default();
            scan.feed(line);
            Parsed::Bad {
                id: scan.id(),
                code: PARSE_ERROR,
                message: format!("parse error: {error}"),
            }
        }
    }
}

/// A JSON-RPC id: a number or a string (anything else is no id).
fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(_) | Value::String(_) => serde_json::from_value(value.clone()).ok(),
        _ => None,
    }
}

/// One line of input.
#[derive(Debug)]
enum Line {
    /// A line within the limit, without its newline.
    Whole(Vec<u8>),
    /// A line over the limit (discarded), and the `id` its top-level object has, if found.
    Oversized { len: usize, id: Option<RequestId> },
    /// The peer closed its end.
    Eof,
}

/// Reads newline-terminated lines, never buffering more than `max` bytes of one.
///
/// Cancel-safe: the partial line lives in `self`, and bytes are consumed from the reader only
/// after they were stored, with no await in between.
#[derive(Debug)]
struct LineReader<R> {
    read: BufReader<R>,
    max: usize,
    line: Vec<u8>,
    oversized: Option<(usize, IdScan)>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(read: R, max: usize) -> Self {
        Self {
            read: BufReader::new(read),
            max,
            line: Vec::new(),
            oversized: None,
        }
    }

    async fn next(&mut self) -> io::Result<Line> {
        loop {
            let buf = self.read.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Line::Eof);
            }
            let end = buf.iter().position(|&b| b == b'\n');
            let chunk = &buf[..end.unwrap_or(buf.len())];
            match &mut self.oversized {
                Some((len, scan)) => {
                    *len += chunk.len();
                    scan.feed(chunk);
                }
                None if self.line.len() + chunk.len() > self.max => {
                    let mut scan = IdScan::default();
                    scan.feed(&self.line);
                    scan.feed(chunk);
                    self.oversized = Some((self.line.len() + chunk.len(), scan));
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(chunk),
            }
            let consumed = end.map_or(buf.len(), |at| at + 1);
            self.read.consume(consumed);
            if end.is_some() {
                return Ok(match self.oversized.take() {
                    Some((len, scan)) => Line::Oversized { len, id: scan.id() },
                    None => Line::Whole(std::mem::take(&mut self.line)),
                });
            }
        }
    }
}

/// Finds the `id` member of a JSON object's top level in a stream of bytes, in bounded memory:
/// tracks nesting and strings, and keeps only the current top-level key and the `id` value.
#[derive(Debug, Default)]
struct IdScan {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At the top level, the next string is a key.
    expect_key: bool,
    /// The top-level key being read, while it is short enough to be `id`.
    key: Option<Vec<u8>>,
    /// The last top-level key was `id` and its `:` has been seen: the value comes next.
    id_value_next: bool,
    /// The last top-level key was `id`, its `:` not seen yet.
    id_key_seen: bool,
    /// The raw `id` value being read.
    value: Option<Vec<u8>>,
    /// The first complete raw `id` value.
    found: Option<Vec<u8>>,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.byte(byte);
        }
    }

    fn byte(&mut self, byte: u8) {
        if self.in_string {
            self.string_byte(byte);
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.expect_key = false;
                    self.key = Some(Vec::new());
                } else if self.depth == 1 && self.id_value_next {
                    self.value = Some(vec![b'"']);
                }
            }
            b'{' | b'[' => {
                self.end_value();
                self.id_value_next = false;
                self.depth += 1;
                self.expect_key = self.depth == 1 && byte == b'{';
            }
            b'}' | b']' => {
                self.end_value();
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.id_value_next = std::mem::take(&mut self.id_key_seen);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.expect_key = true;
            }
            b' ' | b'\t' | b'\r' | b'\n' => self.end_value(),
            _ if self.depth == 1 => {
                if let Some(value) = &mut self.value {
                    push_bounded(value, byte);
                } else if self.id_value_next {
                    self.value = Some(vec![byte]);
                }
            }
            _ => {}
        }
    }

    fn string_byte(&mut self, byte: u8) {
        if let Some(value) = &mut self.value {
            push_bounded(value, byte);
        }
        if self.escaped {
            self.escaped = false;
            self.push_key(byte);
            return;
        }
        match byte {
            b'\\' => {
                self.escaped = true;
                self.push_key(byte);
            }
            b'"' => {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.id_key_seen = key == b"id";
                }
                if self.value.is_some() {
                    self.end_value();
                }
            }
            _ => self.push_key(byte),
        }
    }

    fn push_key(&mut self, byte: u8) {
        if let Some(key) = &mut self.key {
            key.push(byte);
            if key.len() > 2 {
                // Not `id`: stop keeping it, but remember a key is being read.
                key.clear();
                key.extend_from_slice(b"...");
            }
        }
    }

    /// Ends the `id` value being read, if any, keeping the first one found.
    fn end_value(&mut self) {
        if let Some(value) = self.value.take() {
            self.id_value_next = false;
            if self.found.is_none() && value.len() <= MAX_ID_BYTES {
                self.found = Some(value);
            }
        }
    }

    /// The id found, if it is a number or a string.
    fn id(mut self) -> Option<RequestId> {
        self.end_value();
        let raw = self.found?;
        let value: Value = serde_json::from_slice(&raw).ok()?;
        request_id(&value)
    }
}

/// Appends `byte` unless `value` is already past the longest id kept (then it is dropped later).
fn push_bounded(value: &mut Vec<u8>, byte: u8) {
    if value.len() <= MAX_ID_BYTES {
        value.push(byte);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scan(text: &str) -> Option<RequestId> {
        let mut scan = IdScan::default();
        scan.feed(text.as_bytes());
        scan.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            scan(r#"{"params":{"id":1,"x":[{"id":2}]},"method":"m","id":"abc"}"#),
            Some(RequestId::String("abc".into()))
        );
        assert_eq!(
            scan(r#"{ "id" : -3 , "method":"m"}"#),
            Some(RequestId::Number(-3))
        );
        assert_eq!(
            scan(r#"{"method":"a\"id\":5","id":"q\"x"}"#),
            Some(RequestId::String("q\"x".into()))
        );
    }

    #[test]
    fn no_id_or_a_bad_one_is_none() {
        assert_eq!(scan(r#"{"method":"m","params":{"id":1}}"#), None);
        assert_eq!(scan(r#"{"id":null,"method":"m"}"#), None);
        assert_eq!(scan(r#"{"id":{"a":1},"method":"m"}"#), None);
        assert_eq!(scan(r#"[{"id":1}]"#), None);
        assert_eq!(scan("not json at all"), None);
        assert_eq!(scan(r#"{"idx":4,"method":"m"}"#), None);
    }

    #[test]
    fn an_id_split_across_chunks_is_found() {
        let text = r#"{"method":"m","params":{"big":"xxxx"},"id":12345}"#;
        for split in 0..text.len() {
            let mut scan = IdScan::default();
            scan.feed(&text.as_bytes()[..split]);
            scan.feed(&text.as_bytes()[split..]);
            assert_eq!(
                scan.id(),
                Some(RequestId::Number(12345)),
                "split at {split}"
            );
        }
    }

    #[tokio::test]
    async fn lines_over_the_limit_are_reported_with_their_id_and_reading_goes_on() {
        let big = "y".repeat(100);
        let input = format!(
            "{{\"id\":1,\"method\":\"a\"}}\n{{\"params\":\"{big}\",\"id\":2}}\n{{\"id\":3}}\n"
        );
        let mut lines = LineReader::new(input.as_bytes(), 40);
        assert!(
            matches!(lines.next().await.unwrap(), Line::Whole(l) if l == br#"{"id":1,"method":"a"}"#)
        );
        match lines.next().await.unwrap() {
            Line::Oversized { len, id } => {
                assert_eq!(len, big.len() + 20);
                assert_eq!(id, Some(RequestId::Number(2)));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(lines.next().await.unwrap(), Line::Whole(l) if l == br#"{"id":3}"#));
        assert!(matches!(lines.next().await.unwrap(), Line::Eof));
    }

    #[test]
    fn bad_lines_are_answered_with_their_id_and_notifications_are_not() {
        match parse(br#"{"jsonrpc":"2.0","id":9,"method":42}"#) {
            Parsed::Bad { id, code, .. } => {
                assert_eq!((id, code), (Some(RequestId::Number(9)), INVALID_REQUEST));
            }
            _ => panic!("not answered"),
        }
        match parse(br#"{"jsonrpc":"2.0","id":"s1","method":"x",,}"#) {
            Parsed::Bad { id, code, .. } => {
                assert_eq!(
                    (id, code),
                    (Some(RequestId::String("s1".into())), PARSE_ERROR)
                );
            }
            _ => panic!("not answered"),
        }
        assert!(matches!(
            parse(b"garbage"),
            Parsed::Bad {
                id: None,
                code: PARSE_ERROR,
                ..
            }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":7}"#),
            Parsed::Skip
        ));
        assert!(matches!(parse(b"  \r"), Parsed::Skip));
    }
}
