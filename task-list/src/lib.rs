//! A concurrent-safe task-list store, file-compatible with the reference agent harness.
//!
//! A task list is the persistent checklist agents and people share: tasks with a subject, a
//! status, an owner and dependencies (`blocks` / `blockedBy`). It is stored exactly as the
//! reference harness stores it — one 2-space JSON file per task in `{lists root}/{list id}/`,
//! plus `.highwatermark` and `.lock` — so this crate and a running reference harness can work
//! on the very same list. It closes the reference's gaps:
//!
//! - every read-modify-write runs under a lock (the reference's `mkdir F.lock` protocol *and* a
//!   kernel `flock`), and every write is atomic (temp file, fsync, rename, fsync of the
//!   directory), so concurrent writers never lose an update;
//! - an edge that would close a cycle, an edge to a missing task and a self-edge are refused;
//! - a malformed file is reported by name and the rest of the list still loads; the directory
//!   is untrusted input: a FIFO, a symlink, a directory, a huge file or an impossible id where a
//!   task file is expected is skipped with a warning, never followed, waited on or read whole
//!   (see [`EntryFault`]);
//! - an append-only audit log (`.events.jsonl`) records every change;
//! - [`TaskList::ready`] explains for every task why it is or is not ready;
//! - [`TaskList::doctor`] finds and repairs asymmetric edges, dangling references, cycles and
//!   high-water-mark drift; [`TaskList::watch`] reports changes without polling.
//!
//! The same list can instead live in PostgreSQL ([`TaskList::connect`] with a `postgres://`
//! URL), for agents on several hosts: the operations, their semantics and their texts are the
//! same (see the README's "Stores").
//!
//! The request and result types ([`CreateRequest`], [`UpdateRequest`], [`UpdateResult`], …)
//! serialise to the reference's tool shapes, and their `model_text` methods render the texts
//! the reference shows its model, so a CLI or an MCP server is a thin layer on top.
//!
//! ```
//! use task_list::{CreateRequest, StoreConfig, TaskList, UpdateRequest};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let list = TaskList::open(root.path(), "my-project", StoreConfig::default())?;
//! let schema = list.create(&CreateRequest::new("Set up schema", "first"))?;
//! assert_eq!(schema.model_text(), "Task #1 created successfully: Set up schema");
//! let api = list.create(&CreateRequest::new("Write API", "second"))?;
//!
//! let mut edge = UpdateRequest::new(api.task.id);
//! edge.add_blocked_by = Some(vec![schema.task.id.to_string()]);
//! assert_eq!(list.update(&edge)?.model_text(), "Updated task #2 blockedBy");
//!
//! // The reverse edge would close a cycle: refused, nothing written.
//! let mut cycle = UpdateRequest::new(schema.task.id);
//! cycle.add_blocked_by = Some(vec!["2".into()]);
//! let refused = list.update(&cycle)?;
//! assert!(!refused.success);
//! assert!(refused.model_text().ends_with("cycle: 2 → 1 → 2"));
//!
//! assert_eq!(list.list()?.model_text(), "#1 [pending] Set up schema\n#2 [pending] Write API [blocked by #1]");
//! assert_eq!(list.ready()?.ready[0].id, schema.task.id);
//! assert!(list.doctor(false)?.is_clean());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod api;
mod audit;
mod backend;
mod cache;
mod config;
mod doctor;
mod entry;
mod error;
mod fsutil;
mod graph;
mod group;
mod hooks;
mod id;
mod inbox;
mod location;
mod lock;
mod mailbox;
mod ops;
mod ownership;
mod pg;
mod ready;
mod record;
mod render;
mod snapshot;
mod store;
mod transfer;
mod tree;
mod txn;
mod update;
mod wal;
mod watch;

pub use api::{
    ClaimFailure, ClaimOptions, ClaimResult, CreateRequest, CreateResult, GetResult, ListEntry,
    ListFilter, ListResult, Placement, StatusChange, TaskDetails, TaskRef, UnassignReason,
    UnassignResult, UpdateRequest, UpdateResult, UpdateStatus,
};
pub use audit::{AUDIT_LOG_FILE, AuditOp, AuditRecord};
pub use config::{HookCommand, HookConfig, LockConfig, PgConfig, StoreConfig, WatchConfig};
pub use doctor::{DoctorReport, Problem};
pub use entry::{EntryFault, EntryKind, FileProblem, QUARANTINE_DIR};
pub use error::{Error, PgSettingsError, Result};
pub use graph::Graph;
pub use hooks::{BLOCKING_EXIT_CODE, HookEvent};
pub use id::{TaskId, sanitize_name};
pub use location::{
    DEFAULT_LIST_ID, EnvValues, Layout, ListIdHints, reference_locks, resolve_list_id,
    resolve_lists_root,
};
pub use mailbox::{INBOX_DIR, MailboxMessage};
pub use pg::PgEnv;
pub use ready::{NotReady, NotReadyReason, ReadyReport, ReadyTask, ready_report};
pub use record::{
    DEFAULT_PRIORITY, LABELS_KEY, LOWEST_PRIORITY, Metadata, PARENT_KEY, POSITION_KEY,
    POSITION_STEP, PRIORITY_KEY, Task, TaskStatus,
};
pub use render::{NO_TASKS, NOTHING_READY, TASK_NOT_FOUND, VERIFICATION_AGENT_TYPE, hash_ids};
pub use snapshot::Snapshot;
pub use store::{Actor, TaskList};
pub use transfer::{EXPORT_FORMAT, ListExport};
pub use tree::TreeGet;
pub use watch::{Change, ListWatcher};

impl TaskList {
    /// Opens the list that the environment names (pure resolution in [`resolve_lists_root`]
    /// and [`resolve_list_id`], reading the real environment).
    pub fn open_from_env(
        layout: Layout,
        hints: ListIdHints<'_>,
        config: StoreConfig,
    ) -> Result<Self> {
        let env = EnvValues::from_env();
        let root = resolve_lists_root(&env, layout)?;
        Self::open(root, &resolve_list_id(&env, layout, hints)?, config)
    }

    /// The dependency graph of the list.
    pub fn graph(&self) -> Result<Graph> {
        Ok(Graph::new(&self.snapshot()?))
    }
}
