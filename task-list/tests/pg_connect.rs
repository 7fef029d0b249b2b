//! Connecting to PostgreSQL as libpq does (issue #24): Unix-socket hosts in URLs and
//! `key=value` strings (never TLS there), `sslmode` against the private server's TLS
//! (`.ci/postgres.sh start`: a private CA, a certificate for `localhost` only, `ssl = on`), the
//! `PG*` environment and `~/.pgpass`.
//!
//! Every check looks at the server's side of the connection (`pg_stat_activity`,
//! `pg_stat_ssl`), found by a unique `application_name`: whether it came over the socket and
//! whether it is encrypted. The environment is passed to `TaskList::connect_with_env`, so no
//! test changes the process's; `TaskList::connect` reading the real environment is checked in
//! a child process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Fixture, create, fast_config};
use task_list::{Error, PgConfig, PgEnv, StoreConfig, TaskList};

/// What `.ci/postgres.sh start` exports about its server.
struct Server {
    socket_dir: String,
    port: String,
    ca: PathBuf,
    pw_user: String,
    pw_password: String,
    tls_user: String,
}

impl Server {
    /// The server, or `None` (after saying why) when none was started; under CI a missing
    /// server is a failure.
    fn get() -> Option<(Self, Fixture)> {
        let fx = Fixture::postgres()?;
        let var = |name: &str| match std::env::var(name) {
            Ok(value) => Some(value),
            Err(_) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{name} is not set under CI: start the server with .ci/postgres.sh"
                );
                eprintln!("skipped: {name} is not set (start the server with .ci/postgres.sh)");
                None
            }
        };
        let server = Self {
            socket_dir: var("TASKS_TEST_PG_SOCKET_DIR")?,
            port: var("TASKS_TEST_PG_PORT")?,
            ca: PathBuf::from(var("TASKS_TEST_PG_CA")?),
            pw_user: var("TASKS_TEST_PG_PW_USER")?,
            pw_password: var("TASKS_TEST_PG_PW_PASSWORD")?,
            tls_user: var("TASKS_TEST_PG_TLS_USER")?,
        };
        // The test roles work in the test's schema too.
        let schema = schema(&fx);
        fx.sql(&format!(
            "GRANT ALL ON SCHEMA {schema} TO {}, {}",
            server.pw_user, server.tls_user
        ));
        Some((server, fx))
    }

    /// The server certificate: a wrong root for verifying the server (it signed nothing).
    fn wrong_root(&self) -> PathBuf {
        self.ca.with_file_name("server.crt")
    }
}

fn schema(fx: &Fixture) -> String {
    match fx {
        Fixture::Postgres { schema, .. } => schema.clone(),
        Fixture::Files(_) => unreachable!("a PostgreSQL fixture"),
    }
}

/// A name no other connection has: the connection's `application_name`.
fn app(test: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "pgc-{test}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Connection settings for key=value strings: the application name and the test's schema.
fn kv_tail(app: &str, fx: &Fixture) -> String {
    format!(
        "application_name={app} options='-csearch_path={}'",
        schema(fx)
    )
}

/// The same for URLs.
fn url_tail(app: &str, fx: &Fixture) -> String {
    format!(
        "application_name={app}&options=-csearch_path%3D{}",
        schema(fx)
    )
}

/// Few, quick retries: every failure expected here is final.
fn config() -> StoreConfig {
    StoreConfig {
        pg: PgConfig {
            retries: 1,
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
            connect_timeout: Duration::from_secs(10),
        },
        ..fast_config()
    }
}

/// Connects with `conninfo` in `env`, and writes a task (so both connections are used).
fn connect(conninfo: &str, env: &PgEnv) -> Result<TaskList, Error> {
    let list = TaskList::connect_with_env(conninfo, "list", config(), env)?;
    create(&list, "over this connection");
    Ok(list)
}

/// How the connections named `app` reached the server: (over the Unix socket, encrypted),
/// one entry per connection.
fn transports(fx: &Fixture, app: &str) -> Vec<(bool, bool)> {
    fx.sql(&format!(
        "SELECT a.client_addr IS NULL, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s \
         USING (pid) WHERE a.application_name = '{app}'"
    ))
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

/// Connects, and asserts that every connection came over the socket (or TCP) and is (or is
/// not) encrypted.
fn assert_transport(fx: &Fixture, conninfo: &str, env: &PgEnv, app: &str, expected: (bool, bool)) {
    let list = connect(conninfo, env).unwrap_or_else(|e| panic!("{conninfo}: {e}"));
    let seen = transports(fx, app);
    assert!(!seen.is_empty(), "{conninfo}: no connection named {app}");
    assert!(
        seen.iter().all(|&t| t == expected),
        "{conninfo}: (socket, tls) {seen:?}, expected {expected:?}"
    );
    drop(list);
}

const SOCKET: (bool, bool) = (true, false);
const TCP_PLAIN: (bool, bool) = (false, false);
const TCP_TLS: (bool, bool) = (false, true);

/// An environment with nothing set but a home directory with nothing in it (no
/// `~/.pgpass`, no `~/.postgresql/root.crt`).
fn bare_env(home: &Path) -> PgEnv {
    PgEnv {
        home: Some(home.display().to_string()),
        ..PgEnv::default()
    }
}

#[test]
fn a_unix_socket_url_connects_without_tls_whatever_the_sslmode() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    // `postgresql:///db?host=/dir` failed with "error performing TLS handshake", also with
    // `sslmode=disable`. libpq ignores `sslmode` on a socket: so does the store.
    for sslmode in [
        "",
        "&sslmode=disable",
        "&sslmode=prefer",
        "&sslmode=require",
    ] {
        let app = app("socket-url");
        let url = format!(
            "postgresql:///postgres?host={}&port={}&user=postgres&{}{sslmode}",
            server.socket_dir,
            server.port,
            url_tail(&app, &fx)
        );
        assert_transport(&fx, &url, &bare_env(home.path()), &app, SOCKET);
    }
    // The socket directory percent-encoded in the host part, as libpq also reads it.
    let app = app("socket-url-host");
    let url = format!(
        "postgresql://postgres@{}:{}/postgres?sslmode=verify-full&{}",
        server.socket_dir.replace('/', "%2F"),
        server.port,
        url_tail(&app, &fx)
    );
    assert_transport(&fx, &url, &bare_env(home.path()), &app, SOCKET);
}

#[test]
fn a_key_value_string_connects_over_the_unix_socket() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    for extra in ["", "sslmode=disable", "sslmode=require"] {
        let app = app("socket-kv");
        let conninfo = format!(
            "host={} port={} user=postgres dbname=postgres {} {extra}",
            server.socket_dir,
            server.port,
            kv_tail(&app, &fx)
        );
        assert_transport(&fx, &conninfo, &bare_env(home.path()), &app, SOCKET);
    }
}

#[test]
fn sslmode_disable_connects_without_tls_and_require_with_it() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let env = bare_env(home.path());
    let app_plain = app("tcp-disable");
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable&{}",
        server.port,
        url_tail(&app_plain, &fx)
    );
    assert_transport(&fx, &url, &env, &app_plain, TCP_PLAIN);
    // `require` with no root certificate: encrypted, the (privately signed) certificate
    // accepted unverified, as libpq does.
    for (form, mode) in [("url", "require"), ("kv", "require"), ("kv", "prefer")] {
        let app = app("tcp-tls");
        let conninfo = if form == "url" {
            format!(
                "postgres://postgres@127.0.0.1:{}/postgres?sslmode={mode}&{}",
                server.port,
                url_tail(&app, &fx)
            )
        } else {
            format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres sslmode={mode} {}",
                server.port,
                kv_tail(&app, &fx)
            )
        };
        assert_transport(&fx, &conninfo, &env, &app, TCP_TLS);
    }
}

#[test]
fn verify_ca_checks_the_chain_and_verify_full_the_host_name_too() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let env = bare_env(home.path());
    let kv = |host: &str, app: &str, settings: &str| {
        format!(
            "host={host} port={} user=postgres dbname=postgres {settings} {}",
            server.port,
            kv_tail(app, &fx)
        )
    };
    let ca = server.ca.display().to_string();
    // The certificate names `localhost` only: verify-ca passes on 127.0.0.1, verify-full
    // passes on `localhost` and refuses 127.0.0.1.
    let app1 = app("verify-ca");
    let ok = kv(
        "127.0.0.1",
        &app1,
        &format!("sslmode=verify-ca sslrootcert={ca}"),
    );
    assert_transport(&fx, &ok, &env, &app1, TCP_TLS);
    let app2 = app("verify-full");
    let ok = kv(
        "localhost",
        &app2,
        &format!("sslmode=verify-full sslrootcert='{ca}'"),
    );
    assert_transport(&fx, &ok, &env, &app2, TCP_TLS);
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}&{}",
        server.port,
        ca.replace('/', "%2F"),
        url_tail(&app("refused"), &fx)
    );
    let err = connect(&url, &env).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Database {
                op: "connect",
                retryable: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );

    // A chain that leads to no given root is refused, by every mode that verifies.
    let wrong = server.wrong_root().display().to_string();
    for settings in [
        // No sslrootcert: Mozilla's roots, which did not sign the private CA.
        "sslmode=verify-ca".to_string(),
        format!("sslmode=verify-ca sslrootcert={wrong}"),
        // `require` given a root file verifies the chain (libpq's compatibility rule).
        format!("sslmode=require sslrootcert={wrong}"),
    ] {
        let err = connect(&kv("127.0.0.1", &app("refused"), &settings), &env).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Database {
                    op: "connect",
                    retryable: false,
                    ..
                }
            ),
            "{settings}: {err}"
        );
        assert!(
            err.to_string().contains("UnknownIssuer"),
            "{settings}: {err}"
        );
    }
    // `prefer` falls back to a plain connection when the handshake fails.
    let app3 = app("prefer-fallback");
    let conninfo = kv(
        "127.0.0.1",
        &app3,
        &format!("sslmode=prefer sslrootcert={wrong}"),
    );
    assert_transport(&fx, &conninfo, &env, &app3, TCP_PLAIN);

    // The root file from `~/.postgresql/root.crt`, and from PGSSLROOTCERT.
    let dot = home.path().join(".postgresql");
    std::fs::create_dir(&dot).unwrap();
    std::fs::copy(&server.ca, dot.join("root.crt")).unwrap();
    let app4 = app("home-root");
    let conninfo = kv("127.0.0.1", &app4, "sslmode=verify-ca");
    assert_transport(&fx, &conninfo, &env, &app4, TCP_TLS);
    let other_home = tempfile::tempdir().unwrap();
    let env_root = PgEnv {
        sslrootcert: Some(ca.clone()),
        ..bare_env(other_home.path())
    };
    let app5 = app("env-root");
    let conninfo = kv("localhost", &app5, "sslmode=verify-full");
    assert_transport(&fx, &conninfo, &env_root, &app5, TCP_TLS);
}

#[test]
fn sslmode_allow_connects_with_tls_when_the_server_refuses_a_plain_connection() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let env = bare_env(home.path());
    let kv = |user: &str, app: &str, mode: &str| {
        format!(
            "host=127.0.0.1 port={} user={user} dbname=postgres sslmode={mode} {}",
            server.port,
            kv_tail(app, &fx)
        )
    };
    // The TLS-only role: refused without TLS; `allow` tries plain, then TLS.
    let err = connect(&kv(&server.tls_user, &app("plain"), "disable"), &env).unwrap_err();
    assert!(err.to_string().contains("no encryption"), "{err}");
    let app1 = app("allow-tls");
    assert_transport(
        &fx,
        &kv(&server.tls_user, &app1, "allow"),
        &env,
        &app1,
        TCP_TLS,
    );
    // A role that may connect without TLS gets a plain connection with `allow`.
    let app2 = app("allow-plain");
    assert_transport(&fx, &kv("postgres", &app2, "allow"), &env, &app2, TCP_PLAIN);
}

#[test]
fn the_pg_environment_fills_what_the_string_leaves_out() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let base = PgEnv {
        port: Some(server.port.clone()),
        user: Some("postgres".into()),
        database: Some("postgres".into()),
        ..bare_env(home.path())
    };
    // Host, port, user and database from the environment: the socket directory.
    let socket_env = PgEnv {
        host: Some(server.socket_dir.clone()),
        ..base.clone()
    };
    let app1 = app("env-socket");
    assert_transport(&fx, &kv_tail(&app1, &fx), &socket_env, &app1, SOCKET);

    // PGSSLMODE where the string gives no sslmode, and never over the string's.
    let tcp_env = PgEnv {
        host: Some("127.0.0.1".into()),
        sslmode: Some("require".into()),
        ..base.clone()
    };
    let app2 = app("env-sslmode");
    assert_transport(&fx, &kv_tail(&app2, &fx), &tcp_env, &app2, TCP_TLS);
    let app3 = app("string-sslmode");
    let conninfo = format!("sslmode=disable {}", kv_tail(&app3, &fx));
    assert_transport(&fx, &conninfo, &tcp_env, &app3, TCP_PLAIN);
    let disable_env = PgEnv {
        sslmode: Some("disable".into()),
        ..tcp_env.clone()
    };
    let app4 = app("env-disable");
    assert_transport(&fx, &kv_tail(&app4, &fx), &disable_env, &app4, TCP_PLAIN);

    // PGPORT for a URL host without a port (the client crate alone would use 5432).
    let app5 = app("env-port");
    let url = format!(
        "postgres://postgres@127.0.0.1/postgres?sslmode=disable&{}",
        url_tail(&app5, &fx)
    );
    assert_transport(&fx, &url, &base, &app5, TCP_PLAIN);

    // PGSSLMODE=verify-full with PGSSLROOTCERT.
    let verify_env = PgEnv {
        host: Some("localhost".into()),
        sslmode: Some("verify-full".into()),
        sslrootcert: Some(server.ca.display().to_string()),
        ..base.clone()
    };
    let app6 = app("env-verify");
    assert_transport(&fx, &kv_tail(&app6, &fx), &verify_env, &app6, TCP_TLS);

    // A bad PGSSLMODE is a typed error, before any connection.
    let bad = PgEnv {
        sslmode: Some("verify".into()),
        ..tcp_env
    };
    let err = connect(&kv_tail(&app("bad"), &fx), &bad).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PgSettings {
                source: task_list::PgSettingsError::InvalidSslMode { .. },
                ..
            }
        ),
        "{err}"
    );
}

/// Writes a password file with `mode`.
fn write_pgpass(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_password_comes_from_pgpass_when_neither_the_string_nor_pgpassword_gives_one() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (user, password, port) = (&server.pw_user, &server.pw_password, &server.port);
    let tcp = |app: &str| {
        format!(
            "host=127.0.0.1 port={port} user={user} dbname=postgres {}",
            kv_tail(app, &fx)
        )
    };
    let env = bare_env(home.path());
    // No password anywhere: the server asks for one and gets none.
    let err = connect(&tcp(&app("none")), &env).unwrap_err();
    assert!(err.to_string().contains("password missing"), "{err}");

    // ~/.pgpass: the first matching line (wildcards, a comment and non-matching lines
    // before it).
    let pgpass = home.path().join(".pgpass");
    let text = format!(
        "# tasks test\n\
         127.0.0.1:{port}:otherdb:{user}:wrong\n\
         127.0.0.1:1:*:{user}:wrong\n\
         127.0.0.1:{port}:*:{user}:{password}\n\
         {}:{port}:postgres:{user}:{password}\n\
         *:*:*:*:wrong\n",
        server.socket_dir
    );
    write_pgpass(&pgpass, &text, 0o600);
    let app1 = app("pgpass-tcp");
    assert_transport(&fx, &tcp(&app1), &env, &app1, TCP_TLS);
    // The socket directory goes by its path.
    let app2 = app("pgpass-socket");
    let socket = format!(
        "postgresql:///postgres?host={}&port={port}&user={user}&{}",
        server.socket_dir,
        url_tail(&app2, &fx)
    );
    assert_transport(&fx, &socket, &env, &app2, SOCKET);

    // A file its group or others may read is ignored, as libpq ignores it.
    write_pgpass(&pgpass, &text, 0o644);
    let err = connect(&tcp(&app("readable")), &env).unwrap_err();
    assert!(err.to_string().contains("password missing"), "{err}");

    // PGPASSFILE instead of ~/.pgpass.
    let elsewhere = home.path().join("elsewhere");
    write_pgpass(&elsewhere, &text, 0o600);
    let passfile_env = PgEnv {
        passfile: Some(elsewhere.display().to_string()),
        ..env.clone()
    };
    let app3 = app("pgpassfile");
    assert_transport(&fx, &tcp(&app3), &passfile_env, &app3, TCP_TLS);

    // A wrong password in the file is the server's refusal; PGPASSWORD comes before the
    // file, and a password in the string before both.
    write_pgpass(&elsewhere, &format!("*:*:*:{user}:wrong\n"), 0o600);
    let err = connect(&tcp(&app("wrong")), &passfile_env).unwrap_err();
    assert!(
        err.to_string().contains("password authentication failed"),
        "{err}"
    );
    let with_env_password = PgEnv {
        password: Some(password.clone()),
        ..passfile_env.clone()
    };
    let app4 = app("pgpassword");
    assert_transport(&fx, &tcp(&app4), &with_env_password, &app4, TCP_TLS);
    let wrong_env_password = PgEnv {
        password: Some("wrong".into()),
        ..passfile_env
    };
    let app5 = app("string-password");
    let conninfo = format!("{} password={password}", tcp(&app5));
    assert_transport(&fx, &conninfo, &wrong_env_password, &app5, TCP_TLS);
}

/// Set for the child process of `connect_reads_the_process_environment`.
const CHILD_ENV: &str = "TASK_LIST_PG_CONNECT_CHILD";

#[test]
fn connect_reads_the_process_environment() {
    let Some((server, fx)) = Server::get() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let pgpass = home.path().join("pgpass");
    write_pgpass(
        &pgpass,
        &format!(
            "{}:{}:postgres:{}:{}\n",
            server.socket_dir, server.port, server.pw_user, server.pw_password
        ),
        0o600,
    );
    let app = app("process-env");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", "process_environment_child", "--nocapture"]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PG") {
            child.env_remove(name);
        }
    }
    let status = child
        .env(CHILD_ENV, format!("{}|{}", kv_tail(&app, &fx), app))
        .env("HOME", home.path())
        .env("PGHOST", &server.socket_dir)
        .env("PGPORT", &server.port)
        .env("PGUSER", &server.pw_user)
        .env("PGDATABASE", "postgres")
        .env("PGPASSFILE", &pgpass)
        .env("PGSSLMODE", "require")
        .status()
        .unwrap();
    assert!(status.success(), "the child failed: {status}");
}

/// The child: `TaskList::connect` with only the application name and schema in the string;
/// host (the socket), port, user, database and password (from the password file) come from
/// its environment. It checks its own connection.
#[test]
fn process_environment_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (conninfo, app) = spec.split_once('|').unwrap();
    let list = TaskList::connect(conninfo, "list", config()).unwrap();
    create(&list, "from the environment");
    let admin = std::env::var("TASKS_TEST_PG_URL").unwrap();
    let mut admin = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    let rows = admin
        .query(
            "SELECT a.client_addr IS NULL, s.ssl, a.usename::text FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let (socket, tls, user): (bool, bool, String) = (row.get(0), row.get(1), row.get(2));
        assert!(socket && !tls, "socket {socket}, tls {tls}");
        assert_eq!(user, std::env::var("PGUSER").unwrap());
    }
}
