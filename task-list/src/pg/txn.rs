//! A write transaction on PostgreSQL: `BEGIN`, the list's row locked, each task locked as it
//! is read for writing, every change written at once inside the transaction, `COMMIT`.

use std::collections::HashMap;

use postgres::Client;

use crate::audit::AuditRecord;
use crate::backend::StoreTxn;
use crate::error::Result;
use crate::id::TaskId;
use crate::pg::reads::{db_id, insert_audit, parse};
use crate::pg::{CHANGES_CHANNEL, PgStore};
use crate::record::Task;

/// An open transaction; rolled back when dropped unfinished.
pub(crate) struct PgTxn<'a> {
    store: &'a PgStore,
    client: &'a mut Client,
    high_water_mark: u64,
    /// Tasks read or written so far (`None`: absent).
    cache: HashMap<TaskId, Option<Task>>,
    /// Whether anything was written (then the commit is recorded and notified).
    wrote: bool,
    token: String,
    open: bool,
    /// A queued audit insert that failed: the transaction is aborted and must not report success.
    failed: Option<postgres::Error>,
}

/// Why a commit did not succeed.
pub(crate) enum Finish {
    /// It did not commit.
    Failed(postgres::Error),
    /// `COMMIT` failed (a lost connection, a shutdown): it may have committed.
    Unknown(postgres::Error),
}

impl<'a> PgTxn<'a> {
    /// Begins a transaction and locks the list's row.
    pub(crate) fn begin(
        store: &'a PgStore,
        client: &'a mut Client,
    ) -> Result<Self, postgres::Error> {
        client.batch_execute("BEGIN")?;
        let mut txn = Self {
            store,
            client,
            high_water_mark: 0,
            cache: HashMap::new(),
            wrote: false,
            token: token(),
            open: true,
            failed: None,
        };
        let row = txn.client.query_one(
            "SELECT high_water_mark FROM task_lists WHERE list_id = $1 FOR UPDATE",
            &[&store.list_id()],
        )?;
        txn.high_water_mark = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        Ok(txn)
    }

    /// The random token recorded in `task_commits` by a committing write.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Records the commit (when something was written), notifies watchers, and commits.
    pub(crate) fn finish(mut self) -> Result<(), Finish> {
        if let Some(e) = self.failed.take() {
            return Err(Finish::Failed(e));
        }
        if self.wrote {
            self.client
                .execute(
                    "WITH c AS (INSERT INTO task_commits (token, list_id) VALUES ($1, $2))
                     SELECT pg_notify($3, $2)",
                    &[&self.token, &self.store.list_id(), &CHANGES_CHANNEL],
                )
                .map_err(Finish::Failed)?;
        }
        self.open = false;
        // Any failure of COMMIT itself is ambiguous: a server shutting down can report a fatal
        // error (or just close) after the commit is durable but before it says so.
        self.client.batch_execute("COMMIT").map_err(Finish::Unknown)
    }

    fn db<T>(&self, op: &'static str, r: Result<T, postgres::Error>) -> Result<T> {
        r.map_err(|e| self.store.error(op, e))
    }

    fn read(&mut self, id: TaskId, for_update: bool) -> Result<Option<Task>> {
        let sql = if for_update {
            "SELECT body FROM tasks WHERE list_id = $1 AND id = $2 FOR UPDATE"
        } else {
            "SELECT body FROM tasks WHERE list_id = $1 AND id = $2"
        };
        let row = self
            .client
            .query_opt(sql, &[&self.store.list_id(), &db_id(id)]);
        let row = self.db("read", row)?;
        row.map(|row| parse(id, row.get(0))).transpose()
    }
}

impl Drop for PgTxn<'_> {
    fn drop(&mut self) {
        if self.open
            && !self.client.is_closed()
            && let Err(e) = self.client.batch_execute("ROLLBACK")
        {
            tracing::debug!(error = %e, "rollback failed (the connection will be replaced)");
        }
    }
}

impl StoreTxn for PgTxn<'_> {
    fn get(&mut self, id: TaskId) -> Result<Option<&Task>> {
        if !self.cache.contains_key(&id) {
            let task = self.read(id, false)?;
            self.cache.insert(id, task);
        }
        Ok(self.cache.get(&id).and_then(Option::as_ref))
    }

    fn lock(&mut self, id: TaskId) -> Result<Option<Task>> {
        let task = self.read(id, true)?;
        self.cache.insert(id, task.clone());
        Ok(task)
    }

    fn save(&mut self, task: &Task) -> Result<()> {
        let body = task.to_file_json();
        let r = self.client.execute(
            "INSERT INTO tasks (list_id, id, body) VALUES ($1, $2, $3)
             ON CONFLICT (list_id, id) DO UPDATE SET body = EXCLUDED.body",
            &[&self.store.list_id(), &db_id(task.id), &body],
        );
        self.db("save", r)?;
        self.cache.insert(task.id, Some(task.clone()));
        self.wrote = true;
        Ok(())
    }

    fn remove(&mut self, id: TaskId) -> Result<()> {
        let r = self.client.execute(
            "DELETE FROM tasks WHERE list_id = $1 AND id = $2",
            &[&self.store.list_id(), &db_id(id)],
        );
        self.db("delete", r)?;
        self.cache.insert(id, None);
        self.wrote = true;
        Ok(())
    }

    fn raise_high_water_mark(&mut self, id: u64) -> Result<()> {
        if self.high_water_mark < id {
            let r = self.client.execute(
                "UPDATE task_lists SET high_water_mark = $2 WHERE list_id = $1",
                &[
                    &self.store.list_id(),
                    &i64::try_from(id).unwrap_or(i64::MAX),
                ],
            );
            self.db("raise high-water mark", r)?;
            self.high_water_mark = id;
            self.wrote = true;
        }
        Ok(())
    }

    fn next_id(&mut self) -> Result<TaskId> {
        let r = self.client.query_one(
            "SELECT COALESCE(MAX(id), 0) FROM tasks WHERE list_id = $1",
            &[&self.store.list_id()],
        );
        let highest: i64 = self.db("next id", r)?.get(0);
        TaskId::new(
            u64::try_from(highest)
                .unwrap_or(0)
                .max(self.high_water_mark)
                + 1,
        )
    }

    fn task_ids(&mut self) -> Result<Vec<TaskId>> {
        let r = self.client.query(
            "SELECT id FROM tasks WHERE list_id = $1 ORDER BY id",
            &[&self.store.list_id()],
        );
        self.db("list ids", r)?
            .iter()
            .map(|row| TaskId::new(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
            .collect()
    }

    fn record(&mut self, record: AuditRecord) {
        // Queued as a statement now; it commits or rolls back with the rest.
        let r = insert_audit(self.client, self.store.list_id(), &record);
        if let Err(e) = r {
            // The transaction is now aborted: `finish` reports this error and rolls back.
            tracing::warn!(error = %e, "audit insert failed; the transaction will roll back");
            self.failed.get_or_insert(e);
        }
        self.wrote = true;
    }

    fn commit(self: Box<Self>) -> Result<()> {
        let store = self.store;
        match self.finish() {
            Ok(()) => Ok(()),
            Err(Finish::Failed(e) | Finish::Unknown(e)) => Err(store.error("commit", e)),
        }
    }
}

/// 128 random bits, hex.
fn token() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Without randomness, a time-and-pid token still never repeats on one host.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return format!("{:x}-{:x}", now.as_nanos(), std::process::id());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
