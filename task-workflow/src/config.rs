//! The limits and defaults of workflow runs (the reference's values).

use std::path::PathBuf;

/// Concurrent `agent()` calls of one run at most: min(this, cores − 2), at least 1.
pub const MAX_CONCURRENT_AGENTS: usize = 16;
/// `agent()` calls of one run at most.
pub const MAX_AGENTS_PER_RUN: u64 = 1000;
/// Items of one `parallel()` / `pipeline()` call at most.
pub const MAX_ITEMS_PER_CALL: usize = 4096;
/// The agent type of a workflow's agents.
pub const WORKFLOW_AGENT_TYPE: &str = "workflow-subagent";
/// How many characters of a prompt or result a progress entry shows.
pub const PREVIEW_CHARS: usize = 200;

/// How workflow runs are limited.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkflowConfig {
    /// Concurrent agents of one run (the rest queue).
    pub concurrency: usize,
    /// `agent()` calls of one run.
    pub max_agents: u64,
    /// Items of one `parallel()` / `pipeline()` call.
    pub max_items: usize,
    /// The JavaScript heap of one run, in bytes.
    pub engine_memory_bytes: usize,
    /// The JavaScript stack of one run, in bytes.
    pub engine_stack_bytes: usize,
    /// The model shown in progress entries when a call names none.
    pub default_model: Option<String>,
    /// Where `workflow("name")` and named runs look for `{name}.js`.
    pub workflow_dirs: Vec<PathBuf>,
}

impl Default for WorkflowConfig {
    fn default() -> Self {
        WorkflowConfig {
            concurrency: default_concurrency(),
            max_agents: MAX_AGENTS_PER_RUN,
            max_items: MAX_ITEMS_PER_CALL,
            engine_memory_bytes: 256 << 20,
            engine_stack_bytes: 1 << 20,
            default_model: None,
            workflow_dirs: Vec::new(),
        }
    }
}

/// min(16, cores − 2), at least 1.
pub fn default_concurrency() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_sub(2).clamp(1, MAX_CONCURRENT_AGENTS)
}
