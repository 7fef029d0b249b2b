//! `export` / `import`: a whole list as one JSON document, to move it between stores (files ⇄
//! PostgreSQL) without losing ids, edges, owners, metadata or audit history.

use serde::{Deserialize, Serialize};

use crate::audit::AuditRecord;
use crate::error::{Error, Result};
use crate::id::TaskId;
use crate::record::Task;
use crate::store::TaskList;

/// The `format` of an export this crate writes and reads.
pub const EXPORT_FORMAT: &str = "tasks-list-export/1";

/// A whole list: every task as stored, the high-water mark and the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListExport {
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// The list it was exported from.
    pub list_id: String,
    /// The highest id ever issued (0 if none was ever recorded).
    pub high_water_mark: u64,
    /// The tasks, by id, exactly as stored.
    pub tasks: Vec<Task>,
    /// The audit log, oldest first.
    pub audit: Vec<AuditRecord>,
}

impl TaskList {
    /// The whole list, for [`TaskList::import`] into another list or store. A task file that
    /// does not parse or cannot be opened is an error here (an export that silently dropped a
    /// task would not be lossless); an entry that can never hold a task (a FIFO, a symlink, a
    /// directory, a file over [`crate::StoreConfig::max_task_file_bytes`], an invalid id: see
    /// [`crate::EntryFault::may_hold_a_task`]) is skipped with a warning, as by every other reader.
    pub fn export(&self) -> Result<ListExport> {
        let snapshot = self.snapshot()?;
        if let Some(problem) = snapshot.problems.iter().find(|p| p.fault.may_hold_a_task()) {
            return Err(Error::Corrupt {
                path: self.dir().join(&problem.file),
                message: problem.fault.to_string(),
            });
        }
        let (audit, _torn) = self.audit_log()?;
        Ok(ListExport {
            format: EXPORT_FORMAT.to_string(),
            list_id: self.list_id().to_string(),
            high_water_mark: self.high_water_mark()?,
            tasks: snapshot.tasks.into_values().collect(),
            audit,
        })
    }

    /// Writes an export into this list, in one transaction: the tasks with their ids, edges,
    /// owners and metadata, the high-water mark, and the audit records as they were (no record
    /// of the import itself is added). Refused unless the list has no task and no audit
    /// history; returns how many tasks were imported.
    pub fn import(&self, export: &ListExport) -> Result<usize> {
        if export.format != EXPORT_FORMAT {
            return Err(Error::InvalidExport(format!(
                "format {:?}, expected {EXPORT_FORMAT:?}",
                export.format
            )));
        }
        if export.high_water_mark > TaskId::MAX {
            return Err(Error::InvalidExport(format!(
                "high-water mark {} is beyond the largest task id, {}",
                export.high_water_mark,
                TaskId::MAX
            )));
        }
        // It reads the audit log itself: in no shared transaction.
        self.write_alone(true, |txn| {
            let tasks = txn.task_ids()?.len();
            let records = self.audit_log()?.0.len();
            if tasks > 0 || records > 0 {
                return Err(Error::ImportTargetNotEmpty {
                    list: self.list_id().to_string(),
                    tasks,
                    records,
                });
            }
            for task in &export.tasks {
                txn.save(task)?;
            }
            txn.raise_high_water_mark(export.high_water_mark)?;
            for record in &export.audit {
                txn.record(record.clone());
            }
            Ok(export.tasks.len())
        })
    }
}
