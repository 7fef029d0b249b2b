//! The PostgreSQL store: the same operations as the list directory, on a database shared by
//! any number of hosts.
//!
//! Client: the blocking [`postgres`] crate (it drives `tokio-postgres` on a private
//! current-thread runtime), because this crate's API is blocking and its callers (the CLI, the
//! MCP server through `spawn_blocking`) must not need a runtime of ours. The connection
//! string is taken as libpq takes it ([`conninfo`]: a URL or `key=value`, completed from
//! `PG*` variables and `~/.pgpass`); TLS is rustls, with libpq's `sslmode` ([`tls`]), and
//! never on a Unix socket.
//!
//! Concurrency: every write transaction starts by locking its list's row in `task_lists`
//! (`SELECT … FOR UPDATE`), so writers of one list are serialised exactly as the file store's
//! list lock serialises them, and every check of a claim is made under that lock: one winner
//! per task, on any number of hosts. Reads use a second connection and never wait for writers.
//!
//! Failures: a serialization failure, a deadlock or a lost connection before the commit runs
//! the whole transaction again (at most [`crate::PgConfig::retries`] times, backing off, each
//! retry logged at `warn`). A connection lost *during* `COMMIT` is resolved by looking up the
//! transaction's random token in `task_commits`: found, it committed; not found, it did not and
//! is run again. So an operation is applied once or fails with [`crate::Error::Database`].

mod conninfo;
mod migrate;
mod pgpass;
mod reads;
mod tls;
mod txn;
mod watch;

use std::sync::{Mutex, MutexGuard};

use postgres::Client;
use postgres::error::SqlState;

use crate::backend::StoreTxn;
use crate::config::PgConfig;
use crate::error::{Error, Result};

pub use conninfo::PgEnv;
use conninfo::SslMode;
pub(crate) use watch::PgWatch;

/// The PostgreSQL channel every commit notifies, with the list id as payload.
pub(crate) const CHANGES_CHANNEL: &str = "task_list_changes";

/// One list in a PostgreSQL database: its connection settings and two lazily (re)opened
/// connections, one for write transactions and one for reads.
pub(crate) struct PgStore {
    /// The client crate's settings (its `sslmode` is the first attempt's).
    config: postgres::Config,
    /// libpq's `sslmode`: `prefer` and `allow` may connect a second time.
    ssl: SslMode,
    tls: tls::PgTls,
    /// The connection string without its password, for messages.
    shown: String,
    list_id: String,
    retry: PgConfig,
    /// `false`: commits do not wait for the WAL flush (`synchronous_commit = off`).
    durable: bool,
    writer: Mutex<Option<Client>>,
    reader: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.shown)
            .field("list_id", &self.list_id)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Resolves `conninfo` in `env`, connects, applies the migrations and makes sure the list
    /// exists.
    pub(crate) fn connect(
        conninfo: &str,
        env: &PgEnv,
        list_id: &str,
        retry: PgConfig,
        durable: bool,
    ) -> Result<Self> {
        let conninfo::Target {
            mut config,
            ssl,
            roots,
            shown,
        } = conninfo::resolve(conninfo, env)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(retry.connect_timeout);
        }
        let tls = tls::connector(ssl, &roots).map_err(|source| Error::PgSettings {
            store: shown.clone(),
            source,
        })?;
        let store = Self {
            config,
            ssl,
            tls,
            shown,
            list_id: list_id.to_string(),
            retry,
            durable,
            writer: Mutex::new(None),
            reader: Mutex::new(None),
        };
        store.with_reader("migrate", |client, list_id| {
            migrate::migrate(client)?;
            client.execute(
                "INSERT INTO task_lists (list_id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&list_id],
            )?;
            Ok(())
        })?;
        Ok(store)
    }

    /// The retry settings.
    pub(crate) fn retry_config(&self) -> &PgConfig {
        &self.retry
    }

    /// The list id.
    pub(crate) fn list_id(&self) -> &str {
        &self.list_id
    }

    /// A new connection (for a watcher; call it through [`off_runtime`]).
    pub(crate) fn open_client(&self) -> Result<Client> {
        let mut client = self
            .connect_client()
            .map_err(|e| self.error("connect", e))?;
        if !self.durable {
            // As `StoreConfig::durable = false` on files: still atomic, and a crash of this
            // process loses nothing; a crash of the server's machine may lose the last commits.
            client
                .batch_execute("SET synchronous_commit = off")
                .map_err(|e| self.error("connect", e))?;
        }
        Ok(client)
    }

    /// A connection, made as libpq makes it for the `sslmode`: `prefer` asks for TLS and
    /// connects without it if the server offers none (the client crate does that) or if the
    /// handshake fails; `allow` connects without TLS and, if the server refuses that
    /// connection, again with TLS.
    fn connect_client(&self) -> Result<Client, postgres::Error> {
        use postgres::config::SslMode as Crate;
        let second = |mode: Crate| {
            let mut config = self.config.clone();
            config.ssl_mode(mode);
            config.connect(self.tls.clone())
        };
        match (self.ssl, self.config.connect(self.tls.clone())) {
            (SslMode::Prefer, Err(e)) if tls::is_handshake_failure(&e) => {
                tracing::info!(error = %e, store = self.shown, "TLS handshake failed; connecting without TLS (sslmode=prefer)");
                second(Crate::Disable)
            }
            (SslMode::Allow, Err(e)) if e.as_db_error().is_some() => {
                tracing::info!(error = %e, store = self.shown, "server refused a connection without TLS; connecting with TLS (sslmode=allow)");
                second(Crate::Require)
            }
            (_, result) => result,
        }
    }

    /// Runs `f` on the read connection, reconnecting and retrying on connection loss.
    pub(crate) fn with_reader<T: Send>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut Client, &str) -> Result<T, postgres::Error> + Send,
    ) -> Result<T> {
        off_runtime(|| {
            self.retrying(op, || {
                let mut slot = lock(&self.reader);
                let client = self.connected(&mut slot)?;
                f(client, &self.list_id).map_err(|e| self.dropping(&mut slot, op, e))
            })
        })
    }

    /// Runs `body` in a write transaction (see the module documentation).
    pub(crate) fn write<T: Send>(
        &self,
        body: &mut (dyn FnMut(&mut dyn StoreTxn) -> Result<T> + Send),
    ) -> Result<T> {
        off_runtime(|| self.write_here(body))
    }

    fn write_here<T>(
        &self,
        body: &mut (dyn FnMut(&mut dyn StoreTxn) -> Result<T> + Send),
    ) -> Result<T> {
        self.retrying("write", || {
            let mut slot = lock(&self.writer);
            let client = self.connected(&mut slot)?;
            // A connection found closed here is replaced by `connected` on the next attempt.
            let mut txn =
                txn::PgTxn::begin(self, client).map_err(|e| self.error("begin", e))?;
            let value = body(&mut txn)?;
            let token = txn.token().to_string();
            match txn.finish() {
                Ok(()) => Ok(value),
                Err(txn::Finish::Failed(e)) => Err(self.dropping(&mut slot, "write", e)),
                Err(txn::Finish::Unknown(e)) => {
                    *slot = None;
                    drop(slot);
                    tracing::warn!(error = %e, "connection lost during COMMIT; checking whether it committed");
                    if self.committed(&token)? {
                        Ok(value)
                    } else {
                        Err(self.error("commit", e))
                    }
                }
            }
        })
    }

    /// Whether the transaction `token` committed (looked up on a fresh connection).
    fn committed(&self, token: &str) -> Result<bool> {
        self.with_reader("commit check", |client, _| {
            Ok(client
                .query_opt("SELECT 1 FROM task_commits WHERE token = $1", &[&token])?
                .is_some())
        })
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries are used up.
    fn retrying<T>(&self, op: &'static str, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
        let mut backoff = self.retry.backoff();
        let mut tries = 0;
        loop {
            match attempt() {
                Err(e) if e.is_retryable() && tries < self.retry.retries => {
                    tries += 1;
                    tracing::warn!(op, attempt = tries, error = %e, "retrying a PostgreSQL transaction");
                    std::thread::sleep(backoff.next_delay());
                }
                other => return other,
            }
        }
    }

    /// The open connection in `slot`, opening one if needed.
    fn connected<'s>(&self, slot: &'s mut Option<Client>) -> Result<&'s mut Client> {
        if slot.as_ref().is_some_and(Client::is_closed) {
            *slot = None;
        }
        match slot {
            Some(client) => Ok(client),
            None => Ok(slot.insert(self.open_client()?)),
        }
    }

    /// Converts `e`, forgetting the connection if it is no longer usable.
    fn dropping(&self, slot: &mut Option<Client>, op: &'static str, e: postgres::Error) -> Error {
        if e.is_closed() || retryable(&e) {
            *slot = None;
        }
        self.error(op, e)
    }

    pub(crate) fn error(&self, op: &'static str, source: postgres::Error) -> Error {
        Error::Database {
            op,
            store: self.shown.clone(),
            retryable: retryable(&source),
            source,
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        let clients = [lock(&self.writer).take(), lock(&self.reader).take()];
        off_runtime(move || drop(clients));
    }
}

/// Runs `f` where the blocking client may block: on this thread, or on a scoped one when this
/// thread belongs to a tokio runtime (the client drives its connection on a runtime of its
/// own, which cannot be entered from inside another; its `Drop` needs one too).
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| match scope.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// Serialization failures, deadlocks, shutdowns and lost connections: the transaction did not
/// commit, and running it again may succeed.
fn retryable(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    // A refused certificate or TLS alert: the same on the next attempt (a connection lost
    // during the handshake is an I/O error, below).
    if tls::is_handshake_failure(e) {
        return false;
    }
    match e.code() {
        Some(code) => {
            [
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::T_R_DEADLOCK_DETECTED,
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(code)
                || code.code().starts_with("08")
        }
        // No SQLSTATE: an I/O error (connection refused or reset) or a timeout.
        None => {
            std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
                || e.to_string().contains("timeout")
        }
    }
}

fn lock(mutex: &Mutex<Option<Client>>) -> MutexGuard<'_, Option<Client>> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl crate::backend::DatabaseStore for PgStore {
    fn write_erased(
        &self,
        body: &mut (dyn FnMut(&mut dyn StoreTxn) -> Result<()> + Send),
    ) -> Result<()> {
        PgStore::write(self, body)
    }

    fn get(&self, id: crate::TaskId) -> Result<Option<crate::Task>> {
        PgStore::get(self, id)
    }

    fn snapshot(&self) -> Result<crate::Snapshot> {
        PgStore::snapshot(self)
    }

    fn high_water_mark(&self) -> Result<u64> {
        PgStore::high_water_mark(self)
    }

    fn audit_log(&self) -> Result<(Vec<crate::AuditRecord>, Vec<crate::FileProblem>)> {
        PgStore::audit_log(self)
    }

    fn append_inbox(&self, agent: &str, message: &crate::MailboxMessage) -> Result<()> {
        PgStore::append_inbox(self, agent, message)
    }

    fn inbox(&self, agent: &str) -> Result<Vec<crate::MailboxMessage>> {
        PgStore::inbox(self, agent)
    }

    fn watch(self: std::sync::Arc<Self>) -> Result<Box<dyn crate::backend::ChangeFeed>> {
        Ok(Box::new(PgWatch::start(self)?))
    }
}
