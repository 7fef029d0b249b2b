//! Parsers that are private to their crate, compiled here from their crate's own source file
//! (`#[path]`), so the code fuzzed is the code shipped without widening any crate's API. If a
//! file below starts to use more of its crate than the shims here provide, this module stops
//! compiling: add the shim (or make the parser public) rather than copying code.

/// What `task-workflow/src/meta.rs` uses from its parent module.
mod error {
    pub(crate) use task_workflow::WorkflowError;
}

/// task-workflow's `meta` parser (`pub(crate)` there).
#[path = "../../../task-workflow/src/meta.rs"]
#[allow(dead_code)] // only `parse` and the types it returns are used
pub(crate) mod meta;
