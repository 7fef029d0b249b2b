//! Removing finished tasks: `tasks rm`, `tasks prune` and the supervisor's retention policy.
//!
//! A task is removed (its record, its output and its delivery latches) only when nothing can
//! still want it ([`keep_reason`]): it ended, its completion was delivered (or none is due), its
//! final record has been on disk for two sweep intervals (by then the supervisor has evicted it
//! from memory and never writes it again), and it is not an agent or teammate a running
//! supervisor could resume with a message. A task read as live, or whose completion is still
//! deliverable, is never touched; a completion racing with a prune is kept for its reader.

use std::path::Path;

use serde::Serialize;
use task_core::{TaskId, now_ms};

use crate::error::{Error, Result};
use crate::lock;
use crate::notice;
use crate::paths::SessionPaths;
use crate::record::TaskRecord;
use crate::session::Session;

pub use crate::refusal::KeepReason;
pub use crate::retention::{Policy, parse_size};

/// What was removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    /// The task.
    pub id: TaskId,
    /// Bytes of output freed.
    pub bytes: u64,
}

/// Who may still write a task's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// No supervisor runs: nothing writes it.
    Nobody,
    /// A supervisor runs and may still hold the task (for its settle grace after its end).
    Supervisor,
    /// A supervisor runs and has let go of it ([`Session::release`]): it never writes it again.
    Released,
}

/// Why `task` must be kept now, or `None` when it may be removed.
pub fn keep_reason(session: &Session, task: &TaskRecord, writer: Writer) -> Option<KeepReason> {
    if !task.is_terminal() {
        return Some(KeepReason::Live);
    }
    if let Some(due) = &task.notification
        && !notice::is_notified(session.paths(), &task.id(), due)
    {
        return Some(KeepReason::Undelivered);
    }
    if writer == Writer::Supervisor && settles_in(session, task) {
        return Some(KeepReason::Settling);
    }
    (task.task.kind.resumes_on_message() && writer != Writer::Nobody)
        .then_some(KeepReason::Resumable)
}

/// Whether `task`'s final record has been on disk for less than two sweep intervals (its
/// supervisor may still hold it and write it again).
fn settles_in(session: &Session, task: &TaskRecord) -> bool {
    let grace = session.config().sweep_interval * 2;
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    task.written_ms == 0 || now_ms().saturating_sub(task.written_ms) < grace_ms
}

/// Removes the tasks `ids`, each only if [`keep_reason`] allows it; fails on the first that
/// is kept or unknown, before removing anything. A running supervisor is asked to let go of
/// the ended ones first ([`Session::release`]), so a task that ended moments ago is removed at
/// once: `tasks wait ID && tasks rm ID` removes it.
pub fn remove_ids(session: &Session, ids: &[TaskId]) -> Result<Vec<Removed>> {
    let running = lock::is_held(&session.paths().lock())?;
    let tasks = session.tasks_by_id(ids)?;
    let ended: Vec<TaskId> = tasks
        .iter()
        .filter(|t| t.is_terminal())
        .map(TaskRecord::id)
        .collect();
    let released = if running && !ended.is_empty() {
        session.release(&ended)?
    } else {
        Vec::new()
    };
    for task in &tasks {
        let writer = match (running, released.contains(&task.id())) {
            (false, _) => Writer::Nobody,
            (true, true) => Writer::Released,
            (true, false) => Writer::Supervisor,
        };
        if let Some(reason) = keep_reason(session, task, writer) {
            return Err(Error::Kept {
                id: task.id().to_string(),
                reason,
            });
        }
    }
    tasks
        .iter()
        .map(|task| remove(session.paths(), task))
        .collect()
}

/// Removes the finished tasks `policy` selects (everything removable for an empty policy).
pub fn prune(session: &Session, policy: &Policy) -> Result<Vec<Removed>> {
    let listing = session.tasks()?;
    let writer = if lock::is_held(&session.paths().lock())? {
        Writer::Supervisor
    } else {
        Writer::Nobody
    };
    let size = |task: &TaskRecord| output_size(&session.output_path(&task.id()));
    let mut total: u64 = listing.tasks.iter().map(size).sum();
    // Removable tasks, the newest end first.
    let mut finished: Vec<&TaskRecord> = listing
        .tasks
        .iter()
        .filter(|t| keep_reason(session, t, writer).is_none())
        .collect();
    finished.sort_by_key(|t| std::cmp::Reverse(t.task.base.end_time.unwrap_or(0)));
    let now = now_ms();
    let filtered = policy.older_than.is_some() || policy.keep_last.is_some();
    let mut removed = Vec::new();
    for (rank, task) in finished.iter().enumerate().rev() {
        let old_enough = policy.older_than.is_none_or(|age| {
            let ended = task.task.base.end_time.unwrap_or(0);
            u128::from(now.saturating_sub(ended)) >= age.as_millis()
        });
        let beyond_kept = policy.keep_last.is_none_or(|keep| rank >= keep);
        let selected = if filtered {
            old_enough && beyond_kept
        } else {
            policy.max_size.is_none()
        };
        let over_budget = policy.max_size.is_some_and(|max| total > max);
        if selected || over_budget {
            let gone = remove(session.paths(), task)?;
            total = total.saturating_sub(gone.bytes);
            removed.push(gone);
        }
    }
    Ok(removed)
}

/// The supervisor's retention: prunes by `config.retention` every `config.retention_interval`,
/// for as long as the supervisor runs. A prune that fails is logged and tried again next time.
pub async fn apply_retention(paths: SessionPaths, config: crate::config::Config) {
    let mut ticks = tokio::time::interval(config.retention_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let policy = config.retention.clone();
    let session = Session::with_config(paths, config);
    loop {
        ticks.tick().await;
        let (session, policy) = (session.clone(), policy.clone());
        match tokio::task::spawn_blocking(move || prune(&session, &policy)).await {
            Ok(Ok(removed)) if !removed.is_empty() => {
                tracing::info!(count = removed.len(), "retention removed finished tasks");
            }
            Ok(Err(error)) => tracing::warn!(%error, "retention could not prune"),
            _ => {}
        }
    }
}

/// Deletes the files of `task`: its output and latches first, its record last (a task whose
/// record is listed always has whatever else it left).
fn remove(paths: &SessionPaths, task: &TaskRecord) -> Result<Removed> {
    let id = task.id();
    let output = paths.output(&id);
    let bytes = output_size(&output);
    remove_if_present(&output)?;
    remove_if_present(&paths.never_notified(&id))?;
    remove_if_present(&paths.ready_marker(&id))?;
    remove_if_present(&paths.queued_start(&id))?;
    remove_if_present(&paths.start_request(&id))?;
    remove_if_present(&paths.end_slot(&id))?;
    if let task_core::TaskKind::Shell(shell) = &task.task.kind
        && shell.batch.is_some()
    {
        // What a batch job's wrapper wrote beside its output (task-slurm's status files).
        for status_file in ["exit", "started"] {
            remove_if_present(&paths.tasks_dir().join(format!("{id}.{status_file}")))?;
        }
    }
    if let Some(ended) = task.task.base.end_time {
        remove_if_present(&paths.hook_ran(&id, ended))?;
        remove_if_present(&paths.hook_output(&id, ended))?;
    }
    if let Some(due) = &task.notification {
        remove_if_present(&paths.notified(&id, due.at_ms))?;
        notice::forget_leases(paths, &id, due.at_ms);
    }
    remove_if_present(&paths.snapshot(&id))?;
    tracing::info!(task = %id, bytes, "removed");
    Ok(Removed { id, bytes })
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", path, e)),
        _ => Ok(()),
    }
}

fn output_size(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| m.len())
}
