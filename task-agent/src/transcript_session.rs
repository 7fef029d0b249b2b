//! A session with no process: an existing, growing transcript written by someone else (the
//! backgrounded main session).

use std::time::Duration;

use async_trait::async_trait;

use crate::error::AgentError;
use crate::runner::{AgentSession, SessionEnd, SessionEvent};
use crate::tail::{TranscriptTail, poll_backoff};

/// Follows a transcript file until it is closed; takes no messages.
#[derive(Debug)]
pub(crate) struct TranscriptSession {
    tail: TranscriptTail,
    poll: task_output::Backoff,
    closed: bool,
}

impl TranscriptSession {
    pub(crate) fn new(tail: TranscriptTail, poll: Duration) -> Self {
        TranscriptSession {
            tail,
            poll: poll_backoff(poll),
            closed: false,
        }
    }
}

#[async_trait]
impl AgentSession for TranscriptSession {
    async fn next_event(&mut self) -> SessionEvent {
        loop {
            if let Some(event) = self.tail.pop() {
                return SessionEvent::Agent(event);
            }
            if self.closed {
                return SessionEvent::Ended(SessionEnd::default());
            }
            match self.tail.read_new() {
                Ok(0) => tokio::time::sleep(self.poll.next_delay()).await,
                Ok(_) => self.poll.reset(),
                Err(error) => {
                    tracing::warn!(%error, "main-session transcript read failed");
                    tokio::time::sleep(self.poll.next_delay()).await;
                }
            }
        }
    }

    async fn send(&mut self, _message: &str) -> Result<(), AgentError> {
        Err(AgentError::NoInput)
    }

    async fn close_input(&mut self) {
        self.closed = true;
    }

    async fn cancel(&mut self) {
        self.closed = true;
    }
}
