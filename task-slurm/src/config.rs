//! [`SlurmConfig`]: where Slurm's commands are and how long to wait on them.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// How this crate reaches Slurm, and its clocks.
///
/// | Field | Environment ([`SlurmConfig::from_env`]) | Default |
/// |---|---|---|
/// | `bin_dir` | `TASKS_SLURM_BIN_DIR` | none: `sbatch` and the others are looked up in `PATH` |
/// | `slurm_conf` | `TASKS_SLURM_CONF` | none: the commands inherit `SLURM_CONF` (or use Slurm's default) |
/// | `poll_interval` | `TASKS_SLURM_POLL_MS` | 1 000 ms |
/// | `command_timeout` | `TASKS_SLURM_COMMAND_TIMEOUT_MS` | 30 000 ms |
/// | `start_grace` | `TASKS_SLURM_START_GRACE_MS` | 120 000 ms |
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlurmConfig {
    /// The directory holding `sbatch`, `squeue` and `scancel`; `None` looks them up in `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// `SLURM_CONF` for every command; `None` leaves the inherited one alone.
    pub slurm_conf: Option<PathBuf>,
    /// Between two looks at a job in [`Slurm::wait_for`](crate::Slurm::wait_for).
    pub poll_interval: Duration,
    /// The longest one command may take; then it is killed and the call fails with
    /// [`Error::CommandTimeout`].
    pub command_timeout: Duration,
    /// How long a job may run without its start marker before its node is taken not to share
    /// the state directory ([`JobFiles::check_started`](crate::JobFiles::check_started)).
    pub start_grace: Duration,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        Self {
            bin_dir: None,
            slurm_conf: None,
            poll_interval: Duration::from_secs(1),
            command_timeout: Duration::from_secs(30),
            start_grace: Duration::from_secs(120),
        }
    }
}

impl SlurmConfig {
    /// The defaults, overridden by the `TASKS_SLURM_*` variables of this process (the table
    /// above).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] for a duration that is not a whole number of milliseconds
    /// (or is zero) or an empty path.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`SlurmConfig::from_env`], reading the variables through `var`.
    ///
    /// # Errors
    ///
    /// As [`SlurmConfig::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = Self::default();
        let path = |name: &'static str| -> Result<Option<PathBuf>> {
            match var(name) {
                None => Ok(None),
                Some(value) if value.is_empty() => Err(Error::InvalidSetting {
                    name,
                    value,
                    reason: "an empty path",
                }),
                Some(value) => Ok(Some(PathBuf::from(value))),
            }
        };
        let millis = |name: &'static str| -> Result<Option<Duration>> {
            let Some(value) = var(name) else {
                return Ok(None);
            };
            match value.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms))),
                _ => Err(Error::InvalidSetting {
                    name,
                    value,
                    reason: "a positive whole number of milliseconds",
                }),
            }
        };
        if let Some(dir) = path("TASKS_SLURM_BIN_DIR")? {
            config.bin_dir = Some(dir);
        }
        if let Some(conf) = path("TASKS_SLURM_CONF")? {
            config.slurm_conf = Some(conf);
        }
        if let Some(d) = millis("TASKS_SLURM_POLL_MS")? {
            config.poll_interval = d;
        }
        if let Some(d) = millis("TASKS_SLURM_COMMAND_TIMEOUT_MS")? {
            config.command_timeout = d;
        }
        if let Some(d) = millis("TASKS_SLURM_START_GRACE_MS")? {
            config.start_grace = d;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn variables_override_the_defaults_and_bad_ones_are_errors() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            SlurmConfig::from_vars(vars(&[])).unwrap(),
            SlurmConfig::default()
        );
        let c = SlurmConfig::from_vars(vars(&[
            ("TASKS_SLURM_BIN_DIR", "/opt/slurm/bin"),
            ("TASKS_SLURM_CONF", "/etc/slurm/x.conf"),
            ("TASKS_SLURM_POLL_MS", "250"),
            ("TASKS_SLURM_COMMAND_TIMEOUT_MS", "5000"),
            ("TASKS_SLURM_START_GRACE_MS", "9000"),
        ]))
        .unwrap();
        assert_eq!(c.bin_dir, Some(PathBuf::from("/opt/slurm/bin")));
        assert_eq!(c.slurm_conf, Some(PathBuf::from("/etc/slurm/x.conf")));
        assert_eq!(c.poll_interval, Duration::from_millis(250));
        assert_eq!(c.command_timeout, Duration::from_secs(5));
        assert_eq!(c.start_grace, Duration::from_secs(9));
        for bad in [
            &[("TASKS_SLURM_POLL_MS", "1s")][..],
            &[("TASKS_SLURM_POLL_MS", "0")],
            &[("TASKS_SLURM_BIN_DIR", "")],
        ] {
            let bad: &'static [(&'static str, &'static str)] = bad;
            assert!(matches!(
                SlurmConfig::from_vars(vars(bad)),
                Err(Error::InvalidSetting { .. })
            ));
        }
    }
}
