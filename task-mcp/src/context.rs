//! What every tool call shares: the session and the task list; the guard of a foreground run;
//! and the two ways a call can fail.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use task_list::TaskList;
use task_protocol::TaskId;
use tokio::time::Instant;

use crate::McpSettings;
use crate::error::{McpError, Result};
use task_client::AsyncSession;
use task_session::record::TaskRecord;
use task_session::session::Session;

use crate::Deliverer;
use crate::client::MESSAGE_KEY;
use crate::outbox::Outbox;
use crate::text;

/// The state of one MCP server.
#[derive(Debug)]
pub(crate) struct Context {
    /// The session whose tasks the tools start and read.
    pub session: Session,
    /// Its async client: the tools' starts, kills, messages and record reads.
    pub client: AsyncSession,
    /// The task list the `Task*` list tools work on.
    pub list: TaskList,
    /// Whether pushed notifications deliver, or only announce, pending envelopes.
    pub delivery: Deliverer,
    /// The executors' settings of the session (the agent command, the remote server).
    pub settings: McpSettings,
    /// The notifications tool results carry, until the results are written out.
    pub outbox: Arc<Outbox>,
}

impl Context {
    /// A context over `session` and `list`.
    pub fn new(
        session: Session,
        list: TaskList,
        delivery: Deliverer,
        settings: McpSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            client: AsyncSession::new(session.clone()),
            session,
            list,
            delivery,
            settings,
            outbox: Arc::default(),
        })
    }

    /// Guards the foreground run `id` until the returned guard is finished: a guard dropped
    /// unfinished (a call the client cancelled) kills the task.
    pub fn foreground(self: &Arc<Self>, id: TaskId) -> ForegroundGuard {
        ForegroundGuard {
            context: Arc::clone(self),
            id,
            finished: false,
        }
    }

    /// The snapshot of one task, read off the async threads.
    pub async fn task(&self, id: TaskId) -> Result<TaskRecord, McpError> {
        Ok(self.client.task(id).await?)
    }

    /// Waits until `id` is terminal or `limit` passes; the flag says whether it ended.
    pub async fn wait_terminal(
        &self,
        id: TaskId,
        limit: Duration,
    ) -> Result<(TaskRecord, bool), McpError> {
        let deadline = Instant::now() + limit;
        loop {
            let task = self.task(id).await?;
            if task.is_terminal() {
                return Ok((task, true));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok((task, false));
            }
            tokio::time::sleep(self.session.config().poll_interval.min(deadline - now)).await;
        }
    }
}

/// Keeps a task marked as foreground; see [`Context::foreground`].
#[derive(Debug)]
pub(crate) struct ForegroundGuard {
    context: Arc<Context>,
    id: TaskId,
    finished: bool,
}

impl ForegroundGuard {
    /// The call is done with the task (it ended).
    pub fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for ForegroundGuard {
    fn drop(&mut self) {
        if !self.finished {
            let (client, id) = (self.context.client.clone(), self.id);
            tracing::info!(task = %id, "foreground call abandoned: killing its task");
            tokio::spawn(async move {
                if let Err(error) = client.kill(&[id]).await {
                    tracing::warn!(task = %id, %error, "could not kill an abandoned foreground task");
                }
            });
        }
    }
}

/// Runs blocking session work on the blocking pool.
pub(crate) async fn blocking<T, E>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T>
where
    T: Send + 'static,
    E: Into<McpError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| McpError::Blocking(e.to_string()))?
        .map_err(Into::into)
}

/// Why a tool call failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The request itself is wrong (a malformed id, an argument out of range): a JSON-RPC error.
    Protocol(ErrorData),
    /// The tool ran and failed; the model reads the text (`isError: true`).
    Tool(String),
}

impl Failure {
    /// An invalid-argument error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Failure::Protocol(ErrorData::invalid_params(message.into(), None))
    }
}

impl From<task_session::Error> for Failure {
    fn from(error: task_session::Error) -> Self {
        match error {
            task_session::Error::MalformedId { .. } => Failure::invalid(error.to_string()),
            task_session::Error::UnknownTask { id, .. } => Failure::Tool(text::no_such_task(&id)),
            other => Failure::Tool(other.to_string()),
        }
    }
}

impl From<McpError> for Failure {
    fn from(error: McpError) -> Self {
        match error {
            McpError::Session(error) => error.into(),
            other => Failure::Tool(other.to_string()),
        }
    }
}

impl From<task_list::Error> for Failure {
    fn from(error: task_list::Error) -> Self {
        match error {
            task_list::Error::InvalidId(_) => Failure::invalid(error.to_string()),
            other => Failure::Tool(other.to_string()),
        }
    }
}

/// A successful tool result: the text for the model and the reference's JSON shape.
#[derive(Debug)]
pub(crate) struct Reply {
    /// What the model reads.
    pub text: String,
    /// `structuredContent`.
    pub structured: serde_json::Value,
}

impl Reply {
    /// A reply whose structured content is `shape`.
    pub fn new(text: String, shape: &impl Serialize) -> Result<Self, Failure> {
        let structured = serde_json::to_value(shape)
            .map_err(|e| Failure::Tool(format!("internal error: cannot encode a result: {e}")))?;
        Ok(Self { text, structured })
    }

    /// A reply whose text says what `shape` alone does not (the reference's "Command running
    /// in background with ID: …" of a start): the structure carries the text too, under
    /// [`MESSAGE_KEY`], for clients that show their model only `structuredContent`.
    pub fn announcing(text: String, shape: &impl Serialize) -> Result<Self, Failure> {
        let mut reply = Self::new(text, shape)?;
        if let serde_json::Value::Object(map) = &mut reply.structured {
            map.insert(MESSAGE_KEY.to_owned(), reply.text.clone().into());
        }
        Ok(reply)
    }
}

/// The MCP answer of a tool call.
pub(crate) fn into_response(outcome: Result<Reply, Failure>) -> Result<CallToolResult, ErrorData> {
    match outcome {
        Ok(reply) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(reply.text)]);
            result.structured_content = Some(reply.structured);
            Ok(result)
        }
        Err(Failure::Tool(message)) => Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        Err(Failure::Protocol(error)) => Err(error),
    }
}
