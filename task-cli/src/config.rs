//! Supervisor and client settings: defaults are the SPEC values, overridable per session by
//! `{session}/config.json` and then by environment variables (so tests can shorten them).
//!
//! | key in `config.json`        | environment variable          | default  |
//! |-----------------------------|-------------------------------|----------|
//! | `idle_exit_ms`              | `TASKS_IDLE_EXIT_MS`          | 30 000   |
//! | `stall_check_interval_ms`   | `TASKS_STALL_CHECK_MS`        | 5 000    |
//! | `stall_threshold_ms`        | `TASKS_STALL_THRESHOLD_MS`    | 45 000   |
//! | `size_check_interval_ms`    | `TASKS_SIZE_CHECK_MS`         | 5 000    |
//! | `size_cap_bytes`            | `TASKS_SIZE_CAP_BYTES`        | 5 GiB    |
//! | `start_timeout_ms`          | `TASKS_START_TIMEOUT_MS`      | 5 000    |
//! | `poll_interval_ms`          | `TASKS_POLL_MS`               | 100      |
//! | `sweep_interval_ms`         | `TASKS_SWEEP_MS`              | 1 000    |
//! | `request_timeout`           | `TASKS_REQUEST_TIMEOUT`       | `10s`    |
//! | `agent_command`             | `TASKS_AGENT_COMMAND`         | none     |
//! | `agent_runner`              | `TASKS_AGENT_RUNNER`          | `claude` |
//! | `retention_older_than`      | `TASKS_RETENTION_OLDER_THAN`  | none     |
//! | `retention_keep_last`       | `TASKS_RETENTION_KEEP_LAST`   | none     |
//! | `retention_max_size`        | `TASKS_RETENTION_MAX_SIZE`    | none     |
//! | `retention_interval_ms`     | `TASKS_RETENTION_INTERVAL_MS` | 60 000   |
//! | `remote_server`             | `TASKS_REMOTE_SERVER`         | none     |
//! | `remote_token_file`         | `TASKS_REMOTE_TOKEN_FILE`     | none     |
//! | `remote_poll_interval_ms`   | `TASKS_REMOTE_POLL_MS`        | 1 000    |
//! | `remote_backoff_base_ms`    | `TASKS_REMOTE_BACKOFF_MS`     | 2 000    |
//! | `remote_backoff_cap_ms`     | `TASKS_REMOTE_BACKOFF_CAP_MS` | 16 000   |
//! | `remote_outage_limit_ms`    | `TASKS_REMOTE_OUTAGE_MS`      | 300 000  |
//! | `remote_request_timeout_ms` | `TASKS_REMOTE_REQUEST_MS`     | 30 000   |
//!
//! Retention is off unless one of the `retention_*` limits is set: the supervisor then prunes
//! finished, delivered tasks as `tasks prune` would, every `retention_interval_ms`
//! (`retention_older_than` takes a human duration such as `7d`, `retention_max_size` a size
//! such as `1G`). Nothing is deleted by default that the user did not ask to delete.
//!
//! Millisecond settings take a number; `request_timeout` takes a human duration (`500ms`,
//! `10s`, `1m 30s`; a bare number is milliseconds).
//!
//! The supervisor reads these once when it starts; it inherits the environment of the `tasks`
//! command that started it.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use task_shell::ShellConfig;

use crate::error::{CliError, Result};

/// Settings of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The supervisor exits after this long with no live task and no client.
    pub idle_exit: Duration,
    /// How long a client waits for a supervisor it started to accept connections.
    pub start_timeout: Duration,
    /// How often `wait`, `output --follow` and `--follow` readers look at the files.
    pub poll_interval: Duration,
    /// How often the supervisor retries writes that failed and evicts ended tasks from memory.
    pub sweep_interval: Duration,
    /// How long a client waits for the supervisor's answer; a request answered later is not
    /// carried out at all.
    pub request_timeout: Duration,
    /// The agent CLI the MCP `Agent` tool runs, as a shell would split it (none: no such tool).
    pub agent_command: Option<String>,
    /// That CLI's event format: `claude`, `codex`, `gemini` or `auto`.
    pub agent_runner: Option<String>,
    /// The shell executors' settings (stall and size watchdogs, monitor timeouts).
    pub shell: ShellConfig,
    /// What the supervisor prunes by itself (off: nothing).
    pub retention: crate::prune::Policy,
    /// How often the supervisor applies [`Config::retention`].
    pub retention_interval: Duration,
    /// The sessions server the MCP `Agent` tool uses for `isolation: "remote"` (none: refused).
    pub remote_server: Option<String>,
    /// The file holding that server's bearer token.
    pub remote_token_file: Option<std::path::PathBuf>,
    /// The remote executor's timing (poll, backoff, outage limit, request timeout).
    pub remote: task_remote::RemoteConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            idle_exit: Duration::from_millis(30_000),
            start_timeout: Duration::from_millis(5_000),
            poll_interval: Duration::from_millis(100),
            sweep_interval: Duration::from_millis(1_000),
            request_timeout: Duration::from_secs(10),
            agent_command: None,
            agent_runner: None,
            shell: ShellConfig::default(),
            retention: crate::prune::Policy::default(),
            retention_interval: Duration::from_secs(60),
            remote_server: None,
            remote_token_file: None,
            remote: task_remote::RemoteConfig::default(),
        }
    }
}

/// The optional `config.json` of a session; every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    idle_exit_ms: Option<u64>,
    stall_check_interval_ms: Option<u64>,
    stall_threshold_ms: Option<u64>,
    size_check_interval_ms: Option<u64>,
    size_cap_bytes: Option<u64>,
    start_timeout_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    sweep_interval_ms: Option<u64>,
    request_timeout: Option<String>,
    agent_command: Option<String>,
    agent_runner: Option<String>,
    retention_older_than: Option<String>,
    retention_keep_last: Option<u64>,
    retention_max_size: Option<String>,
    retention_interval_ms: Option<u64>,
    remote_server: Option<String>,
    remote_token_file: Option<std::path::PathBuf>,
    remote_poll_interval_ms: Option<u64>,
    remote_backoff_base_ms: Option<u64>,
    remote_backoff_cap_ms: Option<u64>,
    remote_outage_limit_ms: Option<u64>,
    remote_request_timeout_ms: Option<u64>,
}

impl Config {
    /// Loads `config_file` (absent is fine) and applies the environment over it.
    pub fn load(config_file: &Path) -> Result<Self> {
        let file = match crate::untrusted::read_file(
            config_file,
            crate::untrusted::MAX_STATE_FILE_BYTES,
        ) {
            Ok(bytes) => serde_json::from_slice::<ConfigFile>(&bytes).map_err(|e| {
                CliError::CorruptState {
                    path: config_file.to_owned(),
                    reason: e.to_string(),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(CliError::io("read", config_file, e)),
        };
        let env = |name: &str| std::env::var(name).ok();
        Self::from_sources(file, env)
    }

    fn from_sources(file: ConfigFile, env: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let number = |var: &str, from_file: Option<u64>| -> Result<Option<u64>> {
            match env(var) {
                Some(text) => text.trim().parse().map(Some).map_err(|_| {
                    CliError::Invalid(format!("{var}={text:?} is not a non-negative integer"))
                }),
                None => Ok(from_file),
            }
        };
        let ms = |var: &str, from_file: Option<u64>, default: Duration| -> Result<Duration> {
            Ok(number(var, from_file)?.map_or(default, Duration::from_millis))
        };
        let mut config = Config::default();
        config.idle_exit = ms("TASKS_IDLE_EXIT_MS", file.idle_exit_ms, config.idle_exit)?;
        config.start_timeout = ms(
            "TASKS_START_TIMEOUT_MS",
            file.start_timeout_ms,
            config.start_timeout,
        )?;
        config.poll_interval = ms("TASKS_POLL_MS", file.poll_interval_ms, config.poll_interval)?;
        config.sweep_interval = ms(
            "TASKS_SWEEP_MS",
            file.sweep_interval_ms,
            config.sweep_interval,
        )?;
        config.agent_command = env("TASKS_AGENT_COMMAND").or(file.agent_command);
        config.agent_runner = env("TASKS_AGENT_RUNNER").or(file.agent_runner);
        if let Some(text) = env("TASKS_REQUEST_TIMEOUT").or(file.request_timeout) {
            config.request_timeout = parse_duration(&text)
                .map_err(|e| CliError::Invalid(format!("TASKS_REQUEST_TIMEOUT={text:?}: {e}")))?;
        }
        let shell = &mut config.shell;
        shell.stall_check_interval = ms(
            "TASKS_STALL_CHECK_MS",
            file.stall_check_interval_ms,
            shell.stall_check_interval,
        )?;
        shell.stall_threshold = ms(
            "TASKS_STALL_THRESHOLD_MS",
            file.stall_threshold_ms,
            shell.stall_threshold,
        )?;
        shell.size_check_interval = ms(
            "TASKS_SIZE_CHECK_MS",
            file.size_check_interval_ms,
            shell.size_check_interval,
        )?;
        if let Some(cap) = number("TASKS_SIZE_CAP_BYTES", file.size_cap_bytes)? {
            shell.size_cap_bytes = cap;
        }
        let parsed = |var: &str,
                      from_file: Option<String>,
                      parse: fn(&str) -> std::result::Result<u64, String>| {
            env(var)
                .or(from_file)
                .map(|text| {
                    parse(&text).map_err(|e| CliError::Invalid(format!("{var}={text:?}: {e}")))
                })
                .transpose()
        };
        let older_than = parsed(
            "TASKS_RETENTION_OLDER_THAN",
            file.retention_older_than,
            parse_duration_ms,
        )?;
        let keep_last = number("TASKS_RETENTION_KEEP_LAST", file.retention_keep_last)?;
        config.retention = crate::prune::Policy::new(
            older_than.map(Duration::from_millis),
            keep_last.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            parsed(
                "TASKS_RETENTION_MAX_SIZE",
                file.retention_max_size,
                crate::prune::parse_size,
            )?,
        );
        config.retention_interval = ms(
            "TASKS_RETENTION_INTERVAL_MS",
            file.retention_interval_ms,
            config.retention_interval,
        )?;
        config.remote_server = env("TASKS_REMOTE_SERVER").or(file.remote_server);
        config.remote_token_file = env("TASKS_REMOTE_TOKEN_FILE")
            .map(Into::into)
            .or(file.remote_token_file);
        let remote = &mut config.remote;
        let pairs = [
            (
                "TASKS_REMOTE_POLL_MS",
                file.remote_poll_interval_ms,
                &mut remote.poll_interval,
            ),
            (
                "TASKS_REMOTE_BACKOFF_MS",
                file.remote_backoff_base_ms,
                &mut remote.backoff_base,
            ),
            (
                "TASKS_REMOTE_BACKOFF_CAP_MS",
                file.remote_backoff_cap_ms,
                &mut remote.backoff_cap,
            ),
            (
                "TASKS_REMOTE_OUTAGE_MS",
                file.remote_outage_limit_ms,
                &mut remote.outage_limit,
            ),
            (
                "TASKS_REMOTE_REQUEST_MS",
                file.remote_request_timeout_ms,
                &mut remote.request_timeout,
            ),
        ];
        for (var, from_file, slot) in pairs {
            *slot = ms(var, from_file, *slot)?;
        }
        Ok(config)
    }
}

/// A human duration: `500ms`, `10s`, `1m 30s`, `1h30m`, `2d`; a bare number is milliseconds.
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 500ms, 10s, 1m30s, 2h)"))
}

/// [`parse_duration`] in whole milliseconds (for options whose value is kept in ms).
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_duration_ms(text: &str) -> std::result::Result<u64, String> {
    parse_duration(text).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn environment_overrides_the_file_which_overrides_the_defaults() {
        let file = ConfigFile {
            idle_exit_ms: Some(10),
            stall_threshold_ms: Some(20),
            ..ConfigFile::default()
        };
        let env = |name: &str| (name == "TASKS_STALL_THRESHOLD_MS").then(|| "30".to_owned());
        let config = Config::from_sources(file, env).unwrap();
        assert_eq!(config.idle_exit, Duration::from_millis(10));
        assert_eq!(config.shell.stall_threshold, Duration::from_millis(30));
        assert_eq!(config.shell.stall_check_interval, Duration::from_secs(5));
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration(" 1m 30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("250"), Ok(250));
        assert!(parse_duration("soon").unwrap_err().contains("10s"));
        let env = |name: &str| (name == "TASKS_REQUEST_TIMEOUT").then(|| "2s".to_owned());
        let config = Config::from_sources(ConfigFile::default(), env).unwrap();
        assert_eq!(config.request_timeout, Duration::from_secs(2));
    }

    #[test]
    fn retention_is_off_by_default_and_read_like_people_write_it() {
        assert!(Config::default().retention.is_off());
        let file = ConfigFile {
            retention_older_than: Some("7d".into()),
            retention_max_size: Some("1G".into()),
            ..ConfigFile::default()
        };
        let env = |name: &str| (name == "TASKS_RETENTION_KEEP_LAST").then(|| "20".to_owned());
        let config = Config::from_sources(file, env).unwrap();
        let expected = crate::prune::Policy::new(
            Some(Duration::from_secs(7 * 86_400)),
            Some(20),
            Some(1 << 30),
        );
        assert_eq!(config.retention, expected);
        let env = |name: &str| (name == "TASKS_RETENTION_MAX_SIZE").then(|| "lots".to_owned());
        let err = Config::from_sources(ConfigFile::default(), env).unwrap_err();
        assert!(
            err.to_string().contains("TASKS_RETENTION_MAX_SIZE"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_number_is_an_error_naming_the_variable() {
        let env = |name: &str| (name == "TASKS_POLL_MS").then(|| "soon".to_owned());
        let err = Config::from_sources(ConfigFile::default(), env).unwrap_err();
        assert!(err.to_string().contains("TASKS_POLL_MS"), "{err}");
    }

    #[test]
    fn a_missing_file_gives_the_defaults_and_a_malformed_one_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert_eq!(Config::load(&path).unwrap().shell, ShellConfig::default());
        std::fs::write(&path, "{\"idle_exit_ms\": \"x\"}").unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
