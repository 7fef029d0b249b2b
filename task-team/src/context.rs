//! The teammate a piece of async code runs for: a tokio task-local, the Rust counterpart of the
//! reference's `AsyncLocalStorage`. Everything a teammate's drive loop runs (its runner's
//! `start`, its session's `next_event` and `send`) sees its identity through [`current`].

use std::future::Future;

use task_core::{TaskId, TeammateIdentity};

/// Who the current code works for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeammateContext {
    /// `name@team` and colour.
    pub identity: TeammateIdentity,
    /// The teammate's task.
    pub task_id: TaskId,
}

tokio::task_local! {
    static TEAMMATE: TeammateContext;
}

/// The teammate the calling async code runs for, if any.
pub fn current() -> Option<TeammateContext> {
    TEAMMATE.try_with(Clone::clone).ok()
}

/// Runs `future` as teammate `context`.
pub async fn scope<F: Future>(context: TeammateContext, future: F) -> F::Output {
    TEAMMATE.scope(context, future).await
}
