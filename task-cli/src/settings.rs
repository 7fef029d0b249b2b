//! The settings of the `tasks` binary's executors, read from the session's
//! [`ExecutorSettings`] (the keys of `config.json` the session layer leaves to its wiring, with
//! the environment over them), as the session's own settings are.
//!
//! | key in `config.json`        | environment variable          | default  |
//! |-----------------------------|-------------------------------|----------|
//! | `stall_check_interval_ms`   | `TASKS_STALL_CHECK_MS`        | 5 000    |
//! | `stall_threshold_ms`        | `TASKS_STALL_THRESHOLD_MS`    | 45 000   |
//! | `size_check_interval_ms`    | `TASKS_SIZE_CHECK_MS`         | 5 000    |
//! | `size_cap_bytes`            | `TASKS_SIZE_CAP_BYTES`        | 5 GiB    |
//! | `agent_command`             | `TASKS_AGENT_COMMAND`         | none     |
//! | `agent_runner`              | `TASKS_AGENT_RUNNER`          | `claude` |
//! | `remote_server`             | `TASKS_REMOTE_SERVER`         | none     |
//! | `remote_token_file`         | `TASKS_REMOTE_TOKEN_FILE`     | none     |
//! | `remote_poll_interval_ms`   | `TASKS_REMOTE_POLL_MS`        | 1 000    |
//! | `remote_backoff_base_ms`    | `TASKS_REMOTE_BACKOFF_MS`     | 2 000    |
//! | `remote_backoff_cap_ms`     | `TASKS_REMOTE_BACKOFF_CAP_MS` | 16 000   |
//! | `remote_outage_limit_ms`    | `TASKS_REMOTE_OUTAGE_MS`      | 300 000  |
//! | `remote_request_timeout_ms` | `TASKS_REMOTE_REQUEST_MS`     | 30 000   |
//! | `team_shutdown_timeout_ms`  | `TASKS_TEAM_SHUTDOWN_MS`      | 60 000   |
//! | `slurm_bin_dir`             | `TASKS_SLURM_BIN_DIR`         | none (`PATH`) |
//! | `slurm_conf`                | `TASKS_SLURM_CONF`            | none (inherited `SLURM_CONF`) |
//! | `slurm_poll_interval_ms`    | `TASKS_SLURM_POLL_MS`         | 1 000    |
//! | `slurm_command_timeout_ms`  | `TASKS_SLURM_COMMAND_TIMEOUT_MS` | 30 000 |
//! | `slurm_start_grace_ms`      | `TASKS_SLURM_START_GRACE_MS`  | 120 000  |
//! | `placement_default`         | `TASKS_PLACEMENT_DEFAULT`     | none (this machine) |
//!
//! `placement_default` (`slurm` or `slurm:PARTITION`; empty: this machine) places every shell
//! (with stdin `/dev/null`) and agent started without `--on`, the MCP tools' included.
//! The session's own keys (idle exit, sweep, retention, …) are task-session's
//! [`Config`](task_session::config::Config).

use std::path::PathBuf;
use std::time::Duration;

use task_remote::RemoteConfig;
use task_session::config::ExecutorSettings;
use task_shell::ShellConfig;
use task_team::TeamConfig;

use task_agent::RunnerFormat;
use task_session::{Error, Result};

/// Every key this module reads (anything else in `config.json` is a mistake).
const KEYS: &[&str] = &[
    "stall_check_interval_ms",
    "stall_threshold_ms",
    "size_check_interval_ms",
    "size_cap_bytes",
    "agent_command",
    "agent_runner",
    "agent_token_budget",
    "agent_max_tokens",
    "agent_max_turns",
    "agent_timeout_ms",
    "remote_server",
    "remote_token_file",
    "remote_poll_interval_ms",
    "remote_backoff_base_ms",
    "remote_backoff_cap_ms",
    "remote_outage_limit_ms",
    "remote_request_timeout_ms",
    "team_shutdown_timeout_ms",
    "slurm_bin_dir",
    "slurm_conf",
    "slurm_poll_interval_ms",
    "slurm_command_timeout_ms",
    "slurm_start_grace_ms",
    "placement_default",
];

/// The Slurm settings: task-slurm's variable, this module's `config.json` key, and whether the
/// key holds a number (else a path).
const SLURM: &[(&str, &str, bool)] = &[
    ("TASKS_SLURM_BIN_DIR", "slurm_bin_dir", false),
    ("TASKS_SLURM_CONF", "slurm_conf", false),
    ("TASKS_SLURM_POLL_MS", "slurm_poll_interval_ms", true),
    (
        "TASKS_SLURM_COMMAND_TIMEOUT_MS",
        "slurm_command_timeout_ms",
        true,
    ),
    ("TASKS_SLURM_START_GRACE_MS", "slurm_start_grace_ms", true),
];

/// The settings of the executors the `tasks` binary wires.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Settings {
    /// The shell executors' settings (stall and size watchdogs, monitor timeouts).
    pub shell: ShellConfig,
    /// The agent CLI the MCP `Agent` tool runs, as a shell would split it (none: no such tool).
    pub agent_command: Option<String>,
    /// That CLI's event format (`claude`, `codex`, `gemini` or `auto`; Claude's when unset).
    pub agent_runner: RunnerFormat,
    /// The most tokens every agent of the session may use together (none: no budget).
    pub agent_token_budget: Option<u64>,
    /// The budgets of every agent started without its own (none: unlimited).
    pub agent_budget: Option<task_core::AgentBudget>,
    /// The sessions server the MCP `Agent` tool uses for `isolation: "remote"` (none: refused).
    pub remote_server: Option<String>,
    /// The file holding that server's bearer token.
    pub remote_token_file: Option<PathBuf>,
    /// The remote executor's timing (poll, backoff, outage limit, request timeout).
    pub remote: RemoteConfig,
    /// The teammates' settings (how long one asked to shut down has to approve).
    pub team: TeamConfig,
    /// The Slurm placement's settings as task-slurm's `TASKS_SLURM_*` variables (each from the
    /// environment, else from its `config.json` key), for `SlurmConfig::from_vars`.
    pub slurm: std::collections::BTreeMap<String, String>,
    /// Where shells and agents started without a placement run (none: this machine).
    pub placement_default: Option<task_shell::launch::Placement>,
}

impl Settings {
    /// Reads the settings from `from`; a key of `config.json` that no one knows is an error.
    pub fn read(from: &ExecutorSettings) -> Result<Self> {
        from.check_known(KEYS)?;
        let mut settings = Settings::default();
        let shell = &mut settings.shell;
        let ms = |var: &str, key: &str, default: Duration| from.millis(var, key, default);
        shell.stall_check_interval = ms(
            "TASKS_STALL_CHECK_MS",
            "stall_check_interval_ms",
            shell.stall_check_interval,
        )?;
        shell.stall_threshold = ms(
            "TASKS_STALL_THRESHOLD_MS",
            "stall_threshold_ms",
            shell.stall_threshold,
        )?;
        shell.size_check_interval = ms(
            "TASKS_SIZE_CHECK_MS",
            "size_check_interval_ms",
            shell.size_check_interval,
        )?;
        if let Some(cap) = from.number("TASKS_SIZE_CAP_BYTES", "size_cap_bytes")? {
            shell.size_cap_bytes = cap;
        }
        settings.agent_command = from.text("TASKS_AGENT_COMMAND", "agent_command")?;
        if let Some(name) = from.text("TASKS_AGENT_RUNNER", "agent_runner")?
            && !name.is_empty()
        {
            settings.agent_runner = serde_json::from_value(serde_json::Value::String(name))
                .map_err(|_| {
                    Error::Invalid(
                        "agent_runner (TASKS_AGENT_RUNNER): expected claude, codex, gemini or auto"
                            .into(),
                    )
                })?;
        }
        settings.agent_token_budget =
            from.number("TASKS_AGENT_TOKEN_BUDGET", "agent_token_budget")?;
        let budget = task_core::AgentBudget {
            max_tokens: from.number("TASKS_AGENT_MAX_TOKENS", "agent_max_tokens")?,
            max_turns: from.number("TASKS_AGENT_MAX_TURNS", "agent_max_turns")?,
            timeout_ms: from.number("TASKS_AGENT_TIMEOUT_MS", "agent_timeout_ms")?,
            turns_used: 0,
        };
        settings.agent_budget = (!budget.is_unlimited()).then_some(budget);
        settings.remote_server = from.text("TASKS_REMOTE_SERVER", "remote_server")?;
        settings.remote_token_file = from
            .text("TASKS_REMOTE_TOKEN_FILE", "remote_token_file")?
            .map(PathBuf::from);
        let remote = &mut settings.remote;
        let timings = [
            (
                "TASKS_REMOTE_POLL_MS",
                "remote_poll_interval_ms",
                &mut remote.poll_interval,
            ),
            (
                "TASKS_REMOTE_BACKOFF_MS",
                "remote_backoff_base_ms",
                &mut remote.backoff_base,
            ),
            (
                "TASKS_REMOTE_BACKOFF_CAP_MS",
                "remote_backoff_cap_ms",
                &mut remote.backoff_cap,
            ),
            (
                "TASKS_REMOTE_OUTAGE_MS",
                "remote_outage_limit_ms",
                &mut remote.outage_limit,
            ),
            (
                "TASKS_REMOTE_REQUEST_MS",
                "remote_request_timeout_ms",
                &mut remote.request_timeout,
            ),
        ];
        for (var, key, slot) in timings {
            *slot = ms(var, key, *slot)?;
        }
        settings.team.shutdown_timeout = ms(
            "TASKS_TEAM_SHUTDOWN_MS",
            "team_shutdown_timeout_ms",
            settings.team.shutdown_timeout,
        )?;
        for &(var, key, numeric) in SLURM {
            let value = if numeric {
                from.number(var, key)?.map(|n| n.to_string())
            } else {
                from.text(var, key)?
            };
            if let Some(value) = value {
                settings.slurm.insert(var.to_owned(), value);
            }
        }
        if let Some(text) = from.text("TASKS_PLACEMENT_DEFAULT", "placement_default")?
            && !text.is_empty()
        {
            let placement = task_shell::launch::Placement::parse(&text).map_err(|reason| {
                Error::Invalid(format!(
                    "placement_default (TASKS_PLACEMENT_DEFAULT): {reason}"
                ))
            })?;
            settings.placement_default = Some(placement);
        }
        Ok(settings)
    }

    /// The configured agent CLI (its command line split as a shell would) and its format, or
    /// why there is none usable (the text a tool or command refuses with).
    pub fn agent_runner_command(&self) -> std::result::Result<(Vec<String>, RunnerFormat), String> {
        let line = self
            .agent_command
            .as_deref()
            .ok_or("no agent command is configured (TASKS_AGENT_COMMAND or agent_command)")?;
        let command = shlex::split(line)
            .filter(|words| !words.is_empty())
            .ok_or_else(|| format!("agent command {line:?} is not a command line"))?;
        Ok((command, self.agent_runner))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn settings(file: &str, env: &[(&str, &str)]) -> Result<Settings> {
        let file: serde_json::Map<String, serde_json::Value> = serde_json::from_str(file).unwrap();
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Settings::read(&ExecutorSettings::new(file, env))
    }

    #[test]
    fn slurm_settings_come_from_the_file_under_the_environment() {
        let read = settings(
            r#"{"slurm_poll_interval_ms": 250, "slurm_conf": "/etc/slurm/a.conf"}"#,
            &[("TASKS_SLURM_CONF", "/etc/slurm/b.conf")],
        )
        .unwrap();
        assert_eq!(read.slurm["TASKS_SLURM_POLL_MS"], "250");
        assert_eq!(read.slurm["TASKS_SLURM_CONF"], "/etc/slurm/b.conf");
        assert!(!read.slurm.contains_key("TASKS_SLURM_BIN_DIR"));
        assert!(settings(r#"{"slurm_poll_interval_ms": "1s"}"#, &[]).is_err());
        let placed = settings(
            r#"{"placement_default": "slurm"}"#,
            &[("TASKS_PLACEMENT_DEFAULT", "slurm:gpu")],
        )
        .unwrap();
        assert_eq!(
            placed.placement_default,
            Some(task_shell::launch::Placement::parse("slurm:gpu").unwrap())
        );
        assert_eq!(
            settings(r#"{"placement_default": ""}"#, &[])
                .unwrap()
                .placement_default,
            None
        );
        assert!(settings(r#"{"placement_default": "k8s"}"#, &[]).is_err());
    }

    #[test]
    fn environment_overrides_the_file_which_overrides_the_defaults() {
        let read = settings(
            r#"{"stall_threshold_ms": 20, "remote_poll_interval_ms": 7}"#,
            &[("TASKS_STALL_THRESHOLD_MS", "30")],
        )
        .unwrap();
        assert_eq!(read.shell.stall_threshold, Duration::from_millis(30));
        assert_eq!(read.shell.stall_check_interval, Duration::from_secs(5));
        assert_eq!(read.remote.poll_interval, Duration::from_millis(7));
        assert_eq!(read.agent_command, None);
    }

    #[test]
    fn an_unknown_key_or_a_bad_value_is_an_error_naming_it() {
        let err = settings(r#"{"stal_threshold_ms": 20}"#, &[]).unwrap_err();
        assert!(err.to_string().contains("stal_threshold_ms"), "{err}");
        let err = settings("{}", &[("TASKS_SIZE_CAP_BYTES", "big")]).unwrap_err();
        assert!(err.to_string().contains("TASKS_SIZE_CAP_BYTES"), "{err}");
        let err = settings(r#"{"agent_command": 3}"#, &[]).unwrap_err();
        assert!(err.to_string().contains("agent_command"), "{err}");
    }
}
