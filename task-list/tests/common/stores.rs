//! One test, every store: the file store in a temp dir, and PostgreSQL in a schema of its own
//! (so tests run in parallel) on the server `TASKS_TEST_PG_URL` names.

use std::sync::atomic::{AtomicU64, Ordering};

use task_list::{StoreConfig, Task, TaskId, TaskList};

/// The server for the PostgreSQL cases (`.ci/postgres.sh start` prints it).
pub const PG_URL_ENV: &str = "TASKS_TEST_PG_URL";

/// Where a test's lists live.
pub enum Fixture {
    /// A temp dir of list directories.
    Files(tempfile::TempDir),
    /// A fresh schema, dropped at the end.
    Postgres {
        url: String,
        schema: String,
        admin: Box<std::sync::Mutex<postgres::Client>>,
    },
}

/// Defines `mod NAME { fn files(); fn postgres(); }` running the same body on each store.
#[macro_export]
macro_rules! store_tests {
    ($(fn $name:ident($fx:ident) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn run($fx: &common::Fixture) $body
            #[test]
            fn files() {
                run(&common::Fixture::files());
            }
            #[test]
            fn postgres() {
                if let Some(fx) = common::Fixture::postgres() {
                    run(&fx);
                }
            }
        }
    )*};
}

impl Fixture {
    /// The file store in a new temp dir.
    pub fn files() -> Self {
        Self::Files(tempfile::tempdir().unwrap())
    }

    /// A new schema on the test server; `None` (after saying why) when no server is
    /// configured. Under CI a missing server is a failure, not a skip.
    pub fn postgres() -> Option<Self> {
        let Ok(base) = std::env::var(PG_URL_ENV) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "{PG_URL_ENV} is not set under CI: run `eval \"$(.ci/postgres.sh start)\"`"
            );
            eprintln!("skipped: {PG_URL_ENV} is not set (run `eval \"$(.ci/postgres.sh start)\"`)");
            return None;
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .unwrap();
        let url = schema_url(&base, &schema);
        let admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        Some(Self::Postgres {
            url,
            schema,
            admin: Box::new(std::sync::Mutex::new(admin)),
        })
    }

    /// The store URL (PostgreSQL) or the lists root (files).
    pub fn location(&self) -> String {
        match self {
            Self::Files(dir) => dir.path().display().to_string(),
            Self::Postgres { url, .. } => url.clone(),
        }
    }

    pub fn is_files(&self) -> bool {
        matches!(self, Self::Files(_))
    }

    /// A new handle on the list `list` (fast lock timings).
    pub fn open(&self) -> TaskList {
        self.open_with("list", super::fast_config())
    }

    /// A new handle on `list_id` with `config`.
    pub fn open_with(&self, list_id: &str, config: StoreConfig) -> TaskList {
        match self {
            Self::Files(dir) => TaskList::open(dir.path(), list_id, config).unwrap(),
            Self::Postgres { url, .. } => TaskList::connect(url, list_id, config).unwrap(),
        }
    }

    /// Writes a task record behind the store's back (as a foreign writer could), list `list`.
    pub fn write_raw(&self, task: &Task) {
        self.write_raw_in("list", task);
    }

    /// Writes a task record of `list_id` behind the store's back.
    pub fn write_raw_in(&self, list_id: &str, task: &Task) {
        match self {
            Self::Files(dir) => std::fs::write(
                dir.path().join(list_id).join(task.id.file_name()),
                task.to_file_json(),
            )
            .unwrap(),
            Self::Postgres { .. } => self.execute(
                "UPDATE tasks SET body = $3 WHERE list_id = $1 AND id = $2",
                &[&list_id, &(task.id.get() as i64), &task.to_file_json()],
            ),
        }
    }

    /// Removes a task record behind the store's back, list `list`.
    pub fn remove_raw(&self, id: TaskId) {
        match self {
            Self::Files(dir) => {
                std::fs::remove_file(dir.path().join("list").join(id.file_name())).unwrap()
            }
            Self::Postgres { .. } => self.execute(
                "DELETE FROM tasks WHERE list_id = $1 AND id = $2",
                &[&"list", &(id.get() as i64)],
            ),
        }
    }

    /// Sets the high-water mark behind the store's back, list `list`.
    pub fn set_high_water_mark_raw(&self, mark: u64) {
        match self {
            Self::Files(dir) => std::fs::write(
                dir.path().join("list").join(".highwatermark"),
                mark.to_string(),
            )
            .unwrap(),
            Self::Postgres { .. } => self.execute(
                "UPDATE task_lists SET high_water_mark = $2 WHERE list_id = $1",
                &[&"list", &(mark as i64)],
            ),
        }
    }

    /// Runs a query in the test's schema (PostgreSQL only).
    pub fn sql(&self, query: &str) -> Vec<postgres::Row> {
        self.admin().query(query, &[]).unwrap()
    }

    fn execute(&self, statement: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) {
        self.admin().execute(statement, params).unwrap();
    }

    fn admin(&self) -> std::sync::MutexGuard<'_, postgres::Client> {
        match self {
            Self::Files(_) => panic!("no SQL on the file store"),
            Self::Postgres { admin, .. } => admin.lock().unwrap(),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Self::Postgres { schema, admin, url } = self {
            let drop = format!("DROP SCHEMA {schema} CASCADE");
            let done = admin
                .get_mut()
                .is_ok_and(|admin| admin.batch_execute(&drop).is_ok());
            // After a server restart the admin connection is gone: use a new one.
            if !done && let Ok(mut fresh) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = fresh.batch_execute(&drop);
            }
        }
    }
}

/// `base` with its `search_path` set to `schema`.
pub fn schema_url(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-csearch_path%3D{schema}")
}

/// Restarts the test server (`pg_ctl restart -m fast`, as `postgres` when run as root), which
/// cuts every connection. `false` (after saying why) when `.ci/postgres.sh` did not start it.
pub fn restart_server() -> bool {
    let (Ok(data), Ok(bin)) = (
        std::env::var("TASKS_TEST_PG_DATA"),
        std::env::var("TASKS_TEST_PG_BIN"),
    ) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "TASKS_TEST_PG_DATA/BIN are not set under CI"
        );
        eprintln!(
            "skipped: TASKS_TEST_PG_DATA/BIN not set (start the server with .ci/postgres.sh)"
        );
        return false;
    };
    let pg_ctl = format!("{bin}/pg_ctl");
    let args = [
        "-D",
        data.as_str(),
        "-m",
        "fast",
        "-w",
        "-t",
        "60",
        "restart",
    ];
    let mut command = if rustix::process::geteuid().is_root() {
        let mut c = std::process::Command::new("runuser");
        c.args(["-u", "postgres", "--", &pg_ctl]).args(args);
        c
    } else {
        let mut c = std::process::Command::new(&pg_ctl);
        c.args(args);
        c
    };
    let status = command
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "pg_ctl restart failed: {status}");
    true
}
