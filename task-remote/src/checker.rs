//! Completion checkers: per subtype, asked every tick whether a remote task is done.

use std::fmt;

use async_trait::async_trait;
use task_core::RemoteState;

/// Decides, from a remote task's data, whether its work is done (SPEC §11): called on every
/// tick of its poll loop, it returns the notification's summary to complete the task, or
/// `None` to keep polling.
#[async_trait]
pub trait CompletionChecker: Send + Sync + fmt::Debug {
    /// The summary if the task is done.
    async fn check(&self, task: &RemoteState) -> Option<String>;
}
