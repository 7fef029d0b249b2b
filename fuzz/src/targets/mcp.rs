//! task-mcp's stdio transport: newline-delimited JSON-RPC from a client, every line bounded
//! and every bad line answered.

use std::cell::OnceCell;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::model::RequestId;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::AsyncWrite;

use task_mcp::transport::BoundedTransport;

thread_local! {
    static RUNTIME: OnceCell<tokio::runtime::Runtime> = const { OnceCell::new() };
}

/// What the transport writes, kept.
#[derive(Debug, Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for Written {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The first byte of the input sets the line limit (1 to 256 bytes, so that oversized lines are
/// common); the rest is what the client writes. The transport hands over at most one message
/// per line and answers every other line at most once, each answer a JSON-RPC error of code
/// -32700 or -32600; every line over the limit is answered, with the `id` of its top-level
/// object when serde finds exactly one `"id"` key in it.
pub fn transport(data: &[u8]) {
    let [limit, input @ ..] = data else {
        return;
    };
    let max_line = 1 + usize::from(*limit);
    let lines: Vec<&[u8]> = {
        let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        lines.pop(); // what follows the last newline is no line: it is never read
        lines
    };
    let written = Written::default();
    let messages = RUNTIME.with(|cell| {
        let runtime = cell.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime")
        });
        runtime.block_on(async {
            let mut transport = BoundedTransport::new(input, written.clone(), max_line);
            let mut messages = 0usize;
            while transport.receive().await.is_some() {
                messages += 1;
                assert!(messages <= lines.len(), "more messages than lines");
            }
            // The answers are written by tasks of their own: let them run.
            for _ in 0..=lines.len() {
                tokio::task::yield_now().await;
            }
            messages
        })
    });
    let output = written.0.lock().unwrap().clone();
    let mut answers = Vec::new();
    for line in output.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let answer: Value = serde_json::from_slice(line).expect("an answer is JSON");
        assert_eq!(answer["jsonrpc"], "2.0");
        let code = answer["error"]["code"].as_i64();
        assert!(matches!(code, Some(-32700 | -32600)), "answered {answer}");
        answers.push(answer);
    }
    assert!(
        messages + answers.len() <= lines.len(),
        "{messages} messages and {} answers for {} lines",
        answers.len(),
        lines.len()
    );
    let oversized: Vec<&&[u8]> = lines.iter().filter(|l| l.len() > max_line).collect();
    assert!(
        answers.len() >= oversized.len(),
        "every oversized line is answered"
    );
    for line in oversized {
        if let Some(id) = sole_top_level_id(line) {
            assert!(
                answers.iter().any(|a| a["id"] == id),
                "no answer carries the id {id} of an oversized line"
            );
        }
    }
}

/// The longest `id` (as written, quotes included) the transport's scan of an oversized line
/// keeps (`MAX_ID_BYTES` in transport.rs): a longer one is dropped, by design.
const MAX_ID_BYTES: usize = 256;

/// The `id` of a line that is a JSON object with a string or numeric `id` at its top level and
/// no other `"id"` anywhere (nor any escape that could spell one), as the answer carries it;
/// `None` also for an id longer than the scan keeps.
fn sole_top_level_id(line: &[u8]) -> Option<Value> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.contains(&b'\\') || line.windows(4).filter(|w| w == b"\"id\"").count() != 1 {
        return None;
    }
    let value: Value = serde_json::from_slice(line).ok()?;
    let id = value.as_object()?.get("id")?;
    if !(id.is_string() || id.is_number()) || id.to_string().len() > MAX_ID_BYTES {
        return None;
    }
    let id: RequestId = serde_json::from_value(id.clone()).ok()?;
    serde_json::to_value(id).ok()
}
