//! Reads of a PostgreSQL list (on the read connection) and the row ⇄ record conversions
//! (task ids as `bigint`s, task bodies, audit rows) that the write transaction uses too.

use std::collections::BTreeMap;

use postgres::GenericClient;

use crate::audit::{AuditOp, AuditRecord};
use crate::entry::{EntryFault, FileProblem};
use crate::error::{Error, Result};
use crate::id::TaskId;
use crate::mailbox::MailboxMessage;
use crate::pg::PgStore;
use crate::record::Task;
use crate::snapshot::Snapshot;

impl PgStore {
    /// Every task of the list.
    pub(crate) fn snapshot(&self) -> Result<Snapshot> {
        let rows = self.with_reader("snapshot", |client, list_id| {
            client.query(
                "SELECT id, body FROM tasks WHERE list_id = $1 ORDER BY id",
                &[&list_id],
            )
        })?;
        let mut snapshot = Snapshot {
            tasks: BTreeMap::new(),
            problems: Vec::new(),
        };
        for row in rows {
            let raw: i64 = row.get(0);
            let id = TaskId::new(u64::try_from(raw).unwrap_or(0))?;
            match parse(id, row.get(1)) {
                Ok(task) => {
                    snapshot.tasks.insert(id, task);
                }
                Err(e) => snapshot.problems.push(FileProblem {
                    file: id.file_name(),
                    fault: EntryFault::Malformed {
                        message: e.to_string(),
                    },
                }),
            }
        }
        Ok(snapshot)
    }

    /// One task.
    pub(crate) fn get(&self, id: TaskId) -> Result<Option<Task>> {
        let row = self.with_reader("read", |client, list_id| {
            client.query_opt(
                "SELECT body FROM tasks WHERE list_id = $1 AND id = $2",
                &[&list_id, &db_id(id)],
            )
        })?;
        row.map(|row| parse(id, row.get(0))).transpose()
    }

    /// The high-water mark.
    pub(crate) fn high_water_mark(&self) -> Result<u64> {
        let row = self.with_reader("read high-water mark", |client, list_id| {
            client.query_one(
                "SELECT high_water_mark FROM task_lists WHERE list_id = $1",
                &[&list_id],
            )
        })?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    /// The audit log, oldest first.
    pub(crate) fn audit_log(&self) -> Result<(Vec<AuditRecord>, Vec<FileProblem>)> {
        let rows = self.with_reader("read audit log", |client, list_id| {
            client.query(
                "SELECT seq, time, actor, op, task_id, fields FROM task_audit
                 WHERE list_id = $1 ORDER BY seq",
                &[&list_id],
            )
        })?;
        let mut records = Vec::new();
        let mut problems = Vec::new();
        for row in rows {
            let op: String = row.get(3);
            let fields: serde_json::Value = row.get(5);
            let parsed = serde_json::from_value::<AuditOp>(serde_json::Value::String(op))
                .and_then(|op| Ok((op, serde_json::from_value::<Vec<String>>(fields)?)));
            let task_id = row
                .get::<_, Option<i64>>(4)
                .map(|id| TaskId::new(u64::try_from(id).unwrap_or(0)))
                .transpose();
            match (parsed, task_id) {
                (Ok((op, fields)), Ok(task_id)) => records.push(AuditRecord {
                    time: row.get(1),
                    actor: row.get(2),
                    op,
                    task_id,
                    fields,
                }),
                (parsed, task_id) => problems.push(FileProblem {
                    file: format!("task_audit:{}", row.get::<_, i64>(0)),
                    fault: EntryFault::Malformed {
                        message: parsed
                            .err()
                            .map(|e| e.to_string())
                            .or(task_id.err().map(|e| e.to_string()))
                            .unwrap_or_default(),
                    },
                }),
            }
        }
        Ok((records, problems))
    }

    /// Appends a message to `agent`'s inbox.
    pub(crate) fn append_inbox(&self, agent: &str, message: &MailboxMessage) -> Result<()> {
        let text = serde_json::to_string(message).unwrap_or_default();
        self.with_reader("write inbox", |client, list_id| {
            client.execute(
                "INSERT INTO task_inbox (list_id, agent, message) VALUES ($1, $2, $3)",
                &[&list_id, &agent, &text],
            )
        })?;
        Ok(())
    }

    /// `agent`'s inbox, oldest first (messages that do not parse are skipped).
    pub(crate) fn inbox(&self, agent: &str) -> Result<Vec<MailboxMessage>> {
        let rows = self.with_reader("read inbox", |client, list_id| {
            client.query(
                "SELECT message FROM task_inbox WHERE list_id = $1 AND agent = $2 ORDER BY seq",
                &[&list_id, &agent],
            )
        })?;
        Ok(rows
            .iter()
            .filter_map(|row| serde_json::from_str(row.get(0)).ok())
            .collect())
    }
}

/// Parses a stored task (the reference's file JSON) that must hold task `id`.
pub(crate) fn parse(id: TaskId, body: &str) -> Result<Task> {
    let corrupt = |message: String| Error::Corrupt {
        path: id.file_name().into(),
        message,
    };
    let task = Task::from_file_json(body.as_bytes()).map_err(|e| corrupt(e.to_string()))?;
    if task.id != id {
        return Err(corrupt(format!(
            "row does not match its id {:?}",
            task.id.to_string()
        )));
    }
    Ok(task)
}

/// A task id as the `bigint` it is stored as.
pub(crate) fn db_id(id: TaskId) -> i64 {
    i64::try_from(id.get()).unwrap_or(i64::MAX)
}

/// Inserts an audit record (in the caller's transaction).
pub(crate) fn insert_audit(
    client: &mut impl GenericClient,
    list_id: &str,
    record: &AuditRecord,
) -> Result<u64, postgres::Error> {
    let op = serde_json::to_value(record.op)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let fields = serde_json::Value::from(record.fields.clone());
    client.execute(
        "INSERT INTO task_audit (list_id, time, actor, op, task_id, fields)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &list_id,
            &record.time,
            &record.actor,
            &op,
            &record.task_id.map(db_id),
            &fields,
        ],
    )
}
