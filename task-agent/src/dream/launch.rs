//! Dreams started from requests that crossed a process boundary (`tasks dream`).

use std::sync::Arc;

use task_core::{Caller, Launch, LaunchError, Launched};

use super::{ConsolidationLock, DreamExecutor, DreamRequest};
use crate::config::AgentConfig;
use crate::launch::{command_runner, start_on_runtime};

pub use task_protocol::start::DreamStart;

impl Launch for DreamExecutor {
    type Request = DreamStart;

    /// Takes the lock and registers the dream `pending`; the start spawns its CLI. Another dream
    /// holding the lock is an invalid request (nothing is registered).
    fn launch(&self, start: DreamStart, caller: Caller) -> Result<Launched, LaunchError> {
        let runner = command_runner(start.command, start.runner, AgentConfig::default(), &caller)?;
        let lock = ConsolidationLock::new(start.lock);
        let mut request = DreamRequest::new(Arc::new(runner), start.prompt, lock);
        request.cwd = Some(caller.cwd);
        request.env = caller.env;
        request.replace_env = true;
        request.id = caller.task_id;
        let pending = self.register(request)?;
        Ok(start_on_runtime(pending.id(), async move {
            pending.start().await.map(|_| ())
        }))
    }
}
