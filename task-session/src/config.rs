//! Supervisor and client settings: defaults are the SPEC values, overridable per session by
//! `{session}/config.json` and then by environment variables (so tests can shorten them).
//!
//! | key in `config.json`        | environment variable          | default  |
//! |-----------------------------|-------------------------------|----------|
//! | `idle_exit_ms`              | `TASKS_IDLE_EXIT_MS`          | 30 000   |
//! | `start_timeout_ms`          | `TASKS_START_TIMEOUT_MS`      | 5 000    |
//! | `poll_interval_ms`          | `TASKS_POLL_MS`               | 100      |
//! | `rescan_interval_ms`        | `TASKS_RESCAN_MS`             | 5 000    |
//! | `sweep_interval_ms`         | `TASKS_SWEEP_MS`              | 1 000    |
//! | `request_timeout`           | `TASKS_REQUEST_TIMEOUT`       | `10s`    |
//! | `delivery_lease_ms`         | `TASKS_DELIVERY_LEASE_MS`     | 30 000   |
//! | `retention_older_than`      | `TASKS_RETENTION_OLDER_THAN`  | none     |
//! | `retention_keep_last`       | `TASKS_RETENTION_KEEP_LAST`   | none     |
//! | `retention_max_size`        | `TASKS_RETENTION_MAX_SIZE`    | none     |
//! | `retention_interval_ms`     | `TASKS_RETENTION_INTERVAL_MS` | 60 000   |
//! | `panel_grace_ms`            | `TASKS_PANEL_GRACE_MS`        | 30 000   |
//! | `parallel_{class}`          | `TASKS_PARALLEL_{CLASS}`      | its executor's |
//! | `group`                     | `TASKS_GROUP`                 | none     |
//! | `clock_offset_ms`           | `TASKS_CLOCK_OFFSET_MS`       | 0        |
//! | `on_end`                    | `TASKS_ON_END`                | none     |
//! | `on_end_timeout_ms`         | `TASKS_ON_END_TIMEOUT_MS`     | 60 000   |
//! | `strays`                    | `TASKS_STRAYS`                | `report` |
//!
//! `parallel_{class}` is how many tasks of a class run at once in one group that has no limit of
//! its own (`tasks group set`; 0: unlimited; see [`crate::queue`]). The executors name the
//! classes and their defaults ([`task_core::Task::admission`]): the standard ones have
//! `parallel_agents` (local and remote agents, teammates; 20) and `parallel_shells` (0). `group` is the group of every task this session's clients start without
//! naming one (so an MCP server's `Bash` tool queues in it). `clock_offset_ms` moves the
//! supervisor's clock for scheduled starts (`--at`, `--delay`) forward: for tests.
//!
//! `on_end` is a command run once at every end of every task (see [`crate::hooks`]); a task
//! started with its own (`tasks run --on-end CMD`) runs that one instead. A hook still running
//! after `on_end_timeout_ms` is killed.
//!
//! `strays` says what the supervisor does with the processes a task leaves running when it ends
//! (see [`crate::strays`]): `report` them, `kill` them, or `ignore` them (no look at all).
//!
//! Every other key of `config.json` belongs to the executors a wiring registers (a shell's
//! stall watchdog, an agent's command line): the session keeps them, with the `TASKS_*`
//! environment, as [`ExecutorSettings`], which the wiring reads with the same rules (the
//! environment over the file over the default) and checks for keys nobody knows.
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

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Settings of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The supervisor exits after this long with no live task and no client.
    pub idle_exit: Duration,
    /// How long a client waits for a supervisor it started to accept connections.
    pub start_timeout: Duration,
    /// How often `wait`, `output --follow` and `--follow` readers look at the files (where a
    /// watch on them cannot be made).
    pub poll_interval: Duration,
    /// How often a reader whose watch on the records works looks at every record anyway: for
    /// what no file change announces (a claim whose reader died or whose lease ran out). Its
    /// watch wakes it for everything else at once.
    pub rescan_interval: Duration,
    /// How often the supervisor retries writes that failed and evicts ended tasks from memory.
    pub sweep_interval: Duration,
    /// How long a client waits for the supervisor's answer; a request answered later is not
    /// carried out at all.
    pub request_timeout: Duration,
    /// How long a reader may take to write out the notifications it claimed before another
    /// reader may deliver them (sooner if it dies: see [`crate::lease`]).
    pub delivery_lease: Duration,
    /// What the supervisor prunes by itself (off: nothing).
    pub retention: crate::retention::Policy,
    /// How often the supervisor applies [`Config::retention`].
    pub retention_interval: Duration,
    /// How long a stopped agent stays in the supervisor's memory (`PANEL_GRACE_MS`); a
    /// message resumes it later too, from its record.
    pub panel_grace: Duration,
    /// The default parallelism of a group with no limit of its own, per class of task.
    pub parallel: crate::queue::ClassLimits,
    /// The group of the tasks started without one (none: `default`).
    pub group: Option<String>,
    /// How far ahead of the system clock the supervisor's clock for scheduled starts runs, in
    /// ms (tests).
    pub clock_offset_ms: u64,
    /// The command run (`sh -c`) at the end of every task with no end hook of its own.
    pub on_end: Option<String>,
    /// How long an end hook may run before it is killed.
    pub on_end_timeout: Duration,
    /// What is done with the processes a task leaves running, for tasks that say nothing.
    pub strays: crate::strays::StrayPolicy,
    /// The settings of the executors, for the wiring to read.
    pub executors: ExecutorSettings,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            idle_exit: Duration::from_millis(30_000),
            start_timeout: Duration::from_millis(5_000),
            poll_interval: Duration::from_millis(100),
            rescan_interval: Duration::from_millis(5_000),
            sweep_interval: Duration::from_millis(1_000),
            request_timeout: Duration::from_secs(10),
            delivery_lease: Duration::from_secs(30),
            retention: crate::retention::Policy::default(),
            retention_interval: Duration::from_secs(60),
            panel_grace: task_core::PANEL_GRACE,
            parallel: crate::queue::ClassLimits::default(),
            group: None,
            clock_offset_ms: 0,
            on_end: None,
            on_end_timeout: Duration::from_secs(60),
            strays: crate::strays::StrayPolicy::Report,
            executors: ExecutorSettings::default(),
        }
    }
}

/// The keys of `config.json` the session layer does not read itself, and the `TASKS_*`
/// environment: what the executors of a wiring are configured from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutorSettings {
    file: BTreeMap<String, Value>,
    env: BTreeMap<String, String>,
}

impl ExecutorSettings {
    /// Settings from `file`'s keys and the environment variables `env` (tests build them
    /// directly; [`Config::load`] takes the process's environment).
    pub fn new(
        file: impl IntoIterator<Item = (String, Value)>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        Self {
            file: file.into_iter().collect(),
            env: env.into_iter().collect(),
        }
    }

    /// The text of `var` in the environment, or else of `key` in the file.
    ///
    /// # Errors
    /// The file's value for `key` is not a string.
    pub fn text(&self, var: &str, key: &str) -> Result<Option<String>> {
        if let Some(text) = self.env.get(var) {
            return Ok(Some(text.clone()));
        }
        match self.file.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(Error::Invalid(format!(
                "config.json: {key} must be a string, not {other}"
            ))),
        }
    }

    /// The non-negative integer of `var` in the environment, or else of `key` in the file.
    ///
    /// # Errors
    /// Either is not a non-negative integer.
    pub fn number(&self, var: &str, key: &str) -> Result<Option<u64>> {
        if let Some(text) = self.env.get(var) {
            return text.trim().parse().map(Some).map_err(|_| {
                Error::Invalid(format!("{var}={text:?} is not a non-negative integer"))
            });
        }
        match self.file.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                Error::Invalid(format!(
                    "config.json: {key} must be a non-negative integer, not {value}"
                ))
            }),
        }
    }

    /// Milliseconds from `var` or `key` ([`ExecutorSettings::number`]), or `default`.
    ///
    /// # Errors
    /// As [`ExecutorSettings::number`].
    pub fn millis(&self, var: &str, key: &str, default: Duration) -> Result<Duration> {
        Ok(self
            .number(var, key)?
            .map_or(default, Duration::from_millis))
    }

    /// Fails on a key of the file that is none of `known` (a typo would otherwise be ignored).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the first unknown key.
    pub fn check_known(&self, known: &[&str]) -> Result<()> {
        match self.file.keys().find(|key| !known.contains(&key.as_str())) {
            Some(key) => Err(Error::Invalid(format!("config.json: unknown key {key:?}"))),
            None => Ok(()),
        }
    }
}

/// The optional `config.json` of a session; every key is optional.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    idle_exit_ms: Option<u64>,
    start_timeout_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    rescan_interval_ms: Option<u64>,
    sweep_interval_ms: Option<u64>,
    request_timeout: Option<String>,
    delivery_lease_ms: Option<u64>,
    retention_older_than: Option<String>,
    retention_keep_last: Option<u64>,
    retention_max_size: Option<String>,
    retention_interval_ms: Option<u64>,
    panel_grace_ms: Option<u64>,
    group: Option<String>,
    clock_offset_ms: Option<u64>,
    on_end: Option<String>,
    on_end_timeout_ms: Option<u64>,
    strays: Option<String>,
    /// Everything else: the executors' keys.
    #[serde(flatten)]
    executors: BTreeMap<String, Value>,
}

impl Config {
    /// Loads `config_file` (absent is fine) and applies the environment over it.
    pub fn load(config_file: &Path) -> Result<Self> {
        let file = match task_output::open::read_untrusted(
            config_file,
            crate::paths::MAX_STATE_FILE_BYTES,
        ) {
            Ok(bytes) => {
                serde_json::from_slice::<ConfigFile>(&bytes).map_err(|e| Error::CorruptState {
                    path: config_file.to_owned(),
                    reason: e.to_string(),
                })?
            }
            Err(task_output::OutputError::NotFound { .. }) => ConfigFile::default(),
            Err(e) => return Err(Error::io("read", config_file, e.into())),
        };
        let env = std::env::vars().filter(|(name, _)| name.starts_with("TASKS_"));
        Self::from_sources(file, env)
    }

    fn from_sources(
        mut file: ConfigFile,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self> {
        let env: BTreeMap<String, String> = env.into_iter().collect();
        let number = |var: &str, from_file: Option<u64>| -> Result<Option<u64>> {
            match env.get(var) {
                Some(text) => text.trim().parse().map(Some).map_err(|_| {
                    Error::Invalid(format!("{var}={text:?} is not a non-negative integer"))
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
        config.rescan_interval = ms(
            "TASKS_RESCAN_MS",
            file.rescan_interval_ms,
            config.rescan_interval,
        )?;
        config.sweep_interval = ms(
            "TASKS_SWEEP_MS",
            file.sweep_interval_ms,
            config.sweep_interval,
        )?;
        config.delivery_lease = ms(
            "TASKS_DELIVERY_LEASE_MS",
            file.delivery_lease_ms,
            config.delivery_lease,
        )?;
        config.panel_grace = ms(
            "TASKS_PANEL_GRACE_MS",
            file.panel_grace_ms,
            config.panel_grace,
        )?;
        if let Some(text) = env
            .get("TASKS_REQUEST_TIMEOUT")
            .cloned()
            .or(file.request_timeout)
        {
            config.request_timeout = parse_duration(&text)
                .map_err(|e| Error::Invalid(format!("TASKS_REQUEST_TIMEOUT={text:?}: {e}")))?;
        }
        let parsed = |var: &str,
                      from_file: Option<String>,
                      parse: fn(&str) -> std::result::Result<u64, String>| {
            env.get(var)
                .cloned()
                .or(from_file)
                .map(|text| {
                    parse(&text).map_err(|e| Error::Invalid(format!("{var}={text:?}: {e}")))
                })
                .transpose()
        };
        let older_than = parsed(
            "TASKS_RETENTION_OLDER_THAN",
            file.retention_older_than,
            parse_duration_ms,
        )?;
        let keep_last = number("TASKS_RETENTION_KEEP_LAST", file.retention_keep_last)?;
        config.retention = crate::retention::Policy::new(
            older_than.map(Duration::from_millis),
            keep_last.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            parsed(
                "TASKS_RETENTION_MAX_SIZE",
                file.retention_max_size,
                crate::retention::parse_size,
            )?,
        );
        config.retention_interval = ms(
            "TASKS_RETENTION_INTERVAL_MS",
            file.retention_interval_ms,
            config.retention_interval,
        )?;
        config.parallel = class_limits(&mut file.executors, &env)?;
        config.clock_offset_ms =
            number("TASKS_CLOCK_OFFSET_MS", file.clock_offset_ms)?.unwrap_or(0);
        config.group = env
            .get("TASKS_GROUP")
            .cloned()
            .or(file.group)
            .filter(|group| !group.is_empty());
        if let Some(group) = &config.group {
            crate::placement::validate_group(group)
                .map_err(|e| Error::Invalid(format!("TASKS_GROUP={group:?}: {e}")))?;
        }
        config.on_end = env
            .get("TASKS_ON_END")
            .cloned()
            .or(file.on_end)
            .filter(|command| !command.trim().is_empty());
        config.on_end_timeout = ms(
            "TASKS_ON_END_TIMEOUT_MS",
            file.on_end_timeout_ms,
            config.on_end_timeout,
        )?;
        if let Some(text) = env.get("TASKS_STRAYS").cloned().or(file.strays) {
            config.strays = text
                .parse()
                .map_err(|e| Error::Invalid(format!("TASKS_STRAYS={text:?}: {e}")))?;
        }
        config.executors = ExecutorSettings {
            file: file.executors,
            env,
        };
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

/// The class limits of `file`'s `parallel_{class}` keys (taken out of it: they are no
/// executor's) and of `env`'s `TASKS_PARALLEL_{CLASS}`, the environment's over the file's.
fn class_limits(
    file: &mut BTreeMap<String, Value>,
    env: &BTreeMap<String, String>,
) -> Result<crate::queue::ClassLimits> {
    const KEY: &str = "parallel_";
    const VAR: &str = "TASKS_PARALLEL_";
    let limit = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let mut limits = crate::queue::ClassLimits::default();
    let keys: Vec<String> = file
        .keys()
        .filter(|k| k.starts_with(KEY))
        .cloned()
        .collect();
    for key in keys {
        let value = file.remove(&key).unwrap_or_default();
        let n = value.as_u64().ok_or_else(|| {
            Error::Invalid(format!(
                "config.json: {key} is {value}, not a non-negative integer"
            ))
        })?;
        limits.set(&key[KEY.len()..], limit(n));
    }
    for (var, text) in env.range(VAR.to_owned()..) {
        let Some(class) = var.strip_prefix(VAR) else {
            break;
        };
        let n = text
            .trim()
            .parse()
            .map_err(|_| Error::Invalid(format!("{var}={text:?} is not a non-negative integer")))?;
        limits.set(&class.to_ascii_lowercase(), limit(n));
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn env(name: &str, value: &str) -> Vec<(String, String)> {
        vec![(name.to_owned(), value.to_owned())]
    }

    #[test]
    fn environment_overrides_the_file_which_overrides_the_defaults() {
        let file: ConfigFile = serde_json::from_str(
            r#"{"idle_exit_ms": 10, "sweep_interval_ms": 20, "stall_threshold_ms": 20,
                "rescan_interval_ms": 700}"#,
        )
        .unwrap();
        let config = Config::from_sources(file, env("TASKS_SWEEP_MS", "30")).unwrap();
        assert_eq!(config.idle_exit, Duration::from_millis(10));
        assert_eq!(config.sweep_interval, Duration::from_millis(30));
        assert_eq!(config.poll_interval, Duration::from_millis(100));
        assert_eq!(config.rescan_interval, Duration::from_millis(700));
        assert_eq!(Config::default().rescan_interval, Duration::from_secs(5));
        let executors = &config.executors;
        let default = Duration::from_secs(5);
        let read = |var| {
            executors
                .millis(var, "stall_threshold_ms", default)
                .unwrap()
        };
        assert_eq!(read("TASKS_STALL_THRESHOLD_MS"), Duration::from_millis(20));
        let executors = ExecutorSettings::new(
            executors.file.clone(),
            env("TASKS_STALL_THRESHOLD_MS", "40"),
        );
        let read = executors.millis("TASKS_STALL_THRESHOLD_MS", "stall_threshold_ms", default);
        assert_eq!(read.unwrap(), Duration::from_millis(40));
        assert!(executors.check_known(&["stall_threshold_ms"]).is_ok());
        let err = executors.check_known(&["agent_command"]).unwrap_err();
        assert!(err.to_string().contains("stall_threshold_ms"), "{err}");
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
        let config =
            Config::from_sources(ConfigFile::default(), env("TASKS_REQUEST_TIMEOUT", "2s"))
                .unwrap();
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
        let config = Config::from_sources(file, env("TASKS_RETENTION_KEEP_LAST", "20")).unwrap();
        let expected = crate::retention::Policy::new(
            Some(Duration::from_secs(7 * 86_400)),
            Some(20),
            Some(1 << 30),
        );
        assert_eq!(config.retention, expected);
        let err = Config::from_sources(
            ConfigFile::default(),
            env("TASKS_RETENTION_MAX_SIZE", "lots"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("TASKS_RETENTION_MAX_SIZE"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_number_is_an_error_naming_the_variable() {
        let err =
            Config::from_sources(ConfigFile::default(), env("TASKS_POLL_MS", "soon")).unwrap_err();
        assert!(err.to_string().contains("TASKS_POLL_MS"), "{err}");
    }

    #[test]
    fn a_missing_file_gives_the_defaults_and_a_malformed_one_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        assert_eq!(
            Config::load(&path).unwrap().idle_exit,
            Config::default().idle_exit
        );
        std::fs::write(&path, "{\"idle_exit_ms\": \"x\"}").unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
