//! The schema, as embedded versioned migrations applied at connect.
//!
//! Each migration runs in its own transaction under a transaction-scoped advisory lock, so two
//! clients connecting at once to a fresh database apply each migration exactly once (the second
//! waits, then finds it recorded). Applied versions are kept in `task_list_migrations`.

use postgres::Client;

/// `(version, SQL)`, in order. Never edit a released migration: append a new one.
const MIGRATIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE task_lists (
        list_id text PRIMARY KEY,
        high_water_mark bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE tasks (
        list_id text NOT NULL REFERENCES task_lists ON DELETE CASCADE,
        id bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (list_id, id)
    );
    CREATE TABLE task_audit (
        seq bigserial PRIMARY KEY,
        list_id text NOT NULL,
        time text NOT NULL,
        actor text NOT NULL,
        op text NOT NULL,
        task_id bigint,
        fields jsonb NOT NULL
    );
    CREATE INDEX task_audit_by_list ON task_audit (list_id, seq);
    CREATE TABLE task_inbox (
        seq bigserial PRIMARY KEY,
        list_id text NOT NULL,
        agent text NOT NULL,
        message text NOT NULL
    );
    CREATE INDEX task_inbox_by_agent ON task_inbox (list_id, agent, seq);
    CREATE TABLE task_commits (
        token text PRIMARY KEY,
        list_id text NOT NULL,
        committed_at timestamptz NOT NULL DEFAULT now()
    );",
)];

/// An arbitrary, fixed key for `pg_advisory_xact_lock` ("tasklist" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x7461_736b_6c69_7374;

/// Applies every migration not yet recorded; returns how many were applied.
pub(crate) fn migrate(client: &mut Client) -> Result<usize, postgres::Error> {
    // The common case, a schema already current, costs one query and no lock. (Before the
    // first migration the table does not exist and this fails: then migrate.)
    let latest = MIGRATIONS.last().map(|(version, _)| *version);
    if let Ok(row) = client.query_one("SELECT max(version) FROM task_list_migrations", &[])
        && row.get::<_, Option<i32>>(0) == latest
    {
        return Ok(0);
    }
    let mut txn = client.transaction()?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS task_list_migrations (
            version integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )?;
    let applied: Vec<i32> = txn
        .query("SELECT version FROM task_list_migrations", &[])?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut count = 0;
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tracing::info!(version, "applying task-list schema migration");
        txn.batch_execute(sql)?;
        txn.execute(
            "INSERT INTO task_list_migrations (version) VALUES ($1)",
            &[version],
        )?;
        count += 1;
    }
    txn.commit()?;
    Ok(count)
}
