//! [`Slurm`]: the client, through Slurm's own commands (argv only, no shell in between).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::time::Instant;

use crate::config::SlurmConfig;
use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job::{JobInfo, JobName};
use crate::parse::{is_unknown_job, parse_sbatch_parsable, parse_squeue, squeue_format};
use crate::spec::JobSpec;

/// Submits, looks up and cancels Slurm jobs with `sbatch`, `squeue` and `scancel`.
///
/// `sacct` is not used: it needs Slurm's accounting database, which a cluster may not have.
/// What Slurm forgets (a job ends and, `MinJobAge` seconds later, slurmctld drops it) the
/// job's own exit status file still says ([`JobFiles`](crate::JobFiles)).
#[derive(Clone, Debug)]
pub struct Slurm {
    config: SlurmConfig,
}

/// How a command's environment is made.
enum Env<'a> {
    /// This process's environment (with the configured `SLURM_CONF`).
    Inherit,
    /// Exactly these variables (with `SLURM_CONF`, configured or inherited).
    Exactly(Vec<(&'a str, &'a str)>),
}

impl Slurm {
    /// A client with `config`.
    pub fn new(config: SlurmConfig) -> Self {
        Self { config }
    }

    /// Its configuration.
    pub fn config(&self) -> &SlurmConfig {
        &self.config
    }

    /// Submits `spec` with `sbatch`, its wrapper script on `sbatch`'s stdin, and returns the
    /// job's id.
    ///
    /// `sbatch` runs with exactly the spec's environment ([`JobSpec::job_env`]) and
    /// `--export=ALL`, so the job gets that environment and nothing of this process's.
    /// Each `afterok` dependency is looked up first: Slurm takes a dependency on a job it does
    /// not know as satisfied and would start the job at once, so that is refused
    /// ([`Error::UnknownDependency`]). (A dependency that ages out between that look and
    /// `sbatch` is not caught: `MinJobAge` is minutes on a real cluster.)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`], [`Error::UnknownDependency`], and the errors of running a
    /// command ([`Error::CommandFailed`] with `sbatch`'s message when Slurm refuses the job;
    /// after [`Error::CommandTimeout`] the job may or may not exist: look it up by name).
    pub async fn submit(&self, spec: &JobSpec) -> Result<JobId> {
        spec.validate()?;
        for dep in &spec.after_ok {
            if self.job(*dep).await?.is_none() {
                return Err(Error::UnknownDependency(*dep));
            }
        }
        let args = spec.sbatch_args();
        let output = self
            .run(
                "sbatch",
                &args,
                Some(spec.batch_script()),
                Env::Exactly(spec.job_env().collect()),
            )
            .await?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(failed("sbatch", &output));
        }
        let id = parse_sbatch_parsable(&stdout)?;
        tracing::info!(job = %id, name = %spec.name, "submitted Slurm job");
        Ok(id)
    }

    /// The job with id `id`, `None` when Slurm does not know it (never submitted, or ended and
    /// dropped by slurmctld after `MinJobAge`).
    ///
    /// # Errors
    ///
    /// The errors of running `squeue` and [`Error::Parse`].
    pub async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        let jobs = self.jobs(&[id]).await?;
        Ok(jobs.into_iter().find(|job| job.id == id))
    }

    /// The jobs of `ids` that Slurm knows, with one `squeue`; a job it does not know (never
    /// submitted, or ended and dropped after `MinJobAge`) is not among them. No ids, no
    /// command.
    ///
    /// # Errors
    ///
    /// The errors of running `squeue` and [`Error::Parse`].
    pub async fn jobs(&self, ids: &[JobId]) -> Result<Vec<JobInfo>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = ids.iter().map(JobId::to_string).collect();
        let args = [
            "--noheader".to_owned(),
            "--states=all".to_owned(),
            format!("--jobs={}", list.join(",")),
            format!("--Format={}", squeue_format()),
        ];
        let output = self.run("squeue", &args, None, Env::Inherit).await?;
        if !output.status.success() {
            // Slurm 22.05 fails so only when it knows none of the jobs asked for (one id);
            // of several, it lists those it knows.
            if is_unknown_job(&String::from_utf8_lossy(&output.stderr)) {
                return Ok(Vec::new());
            }
            return Err(failed("squeue", &output));
        }
        parse_squeue(&String::from_utf8_lossy(&output.stdout))
    }

    /// This user's newest job (the highest id) named `name`, in any state Slurm still
    /// remembers; `None` when there is none. For finding a job again after a crash: jobs are
    /// named by their task's id.
    ///
    /// # Errors
    ///
    /// The errors of running `squeue` and [`Error::Parse`].
    pub async fn find_by_name(&self, name: &JobName) -> Result<Option<JobInfo>> {
        let args = [
            "--noheader".to_owned(),
            "--states=all".to_owned(),
            "--me".to_owned(),
            format!("--name={name}"),
            format!("--Format={}", squeue_format()),
        ];
        let output = self.run("squeue", &args, None, Env::Inherit).await?;
        if !output.status.success() {
            return Err(failed("squeue", &output));
        }
        let jobs = parse_squeue(&String::from_utf8_lossy(&output.stdout))?;
        Ok(jobs
            .into_iter()
            .filter(|job| job.name == name.as_str())
            .max_by_key(|job| job.id))
    }

    /// Cancels job `id` with `scancel`: Slurm signals every process of every step, the batch
    /// script's included (`SIGTERM`, then `SIGKILL` after the cluster's `KillWait`).
    /// Cancelling a job that already ended, or that Slurm no longer knows, is not an error.
    /// (`--full` is not needed: it widens `scancel --signal` to the batch script, and a plain
    /// cancel ends the batch step already.)
    ///
    /// Slurm finds a job's processes through its process tracking plugin; with
    /// `proctrack/linuxproc` a process that leaves the job's process tree (a daemon) escapes.
    ///
    /// # Errors
    ///
    /// The errors of running `scancel`.
    pub async fn cancel(&self, id: JobId) -> Result<()> {
        let output = self
            .run("scancel", &[id.to_string()], None, Env::Inherit)
            .await?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success()
            || is_unknown_job(&stderr)
            || stderr.contains("already completing or completed")
        {
            tracing::info!(job = %id, "cancelled Slurm job");
            return Ok(());
        }
        Err(failed("scancel", &output))
    }

    /// Looks at job `id` every [`SlurmConfig::poll_interval`] until `done` says yes (given the
    /// job, or `None` once Slurm no longer knows it), and returns what `done` accepted.
    ///
    /// # Errors
    ///
    /// [`Error::WaitTimeout`] when `done` has not said yes within `timeout`, and the errors of
    /// [`Slurm::job`].
    pub async fn wait_for(
        &self,
        id: JobId,
        timeout: Duration,
        mut done: impl FnMut(Option<&JobInfo>) -> bool,
    ) -> Result<Option<JobInfo>> {
        let deadline = Instant::now() + timeout;
        loop {
            let job = self.job(id).await?;
            if done(job.as_ref()) {
                return Ok(job);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::WaitTimeout { id, after: timeout });
            }
            tokio::time::sleep(self.config.poll_interval.min(deadline - now)).await;
        }
    }

    /// The executable of Slurm command `name`.
    fn program(&self, name: &'static str) -> Result<PathBuf> {
        if let Some(dir) = &self.config.bin_dir {
            let path = dir.join(name);
            return if path.is_file() {
                Ok(path)
            } else {
                Err(Error::CommandNotFound { command: name })
            };
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
            .ok_or(Error::CommandNotFound { command: name })
    }

    /// Runs one command to its end (or the command timeout), `stdin` written to it.
    async fn run(
        &self,
        name: &'static str,
        args: &[String],
        stdin: Option<String>,
        env: Env<'_>,
    ) -> Result<Output> {
        let program = self.program(name)?;
        let mut command = Command::new(&program);
        command
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let inherited_conf: Option<OsString> = std::env::var_os("SLURM_CONF");
        match env {
            Env::Inherit => {}
            Env::Exactly(vars) => {
                command.env_clear().envs(vars);
                if let Some(conf) = &inherited_conf {
                    command.env("SLURM_CONF", conf);
                }
            }
        }
        if let Some(conf) = &self.config.slurm_conf {
            command.env("SLURM_CONF", conf);
        }
        tracing::debug!(command = %program.display(), ?args, "running Slurm command");
        let mut child = command.spawn().map_err(|source| Error::Spawn {
            program: program.clone(),
            source,
        })?;
        let input = child.stdin.take();
        let finish = async move {
            if let (Some(mut pipe), Some(text)) = (input, stdin) {
                // A command that exits without reading its stdin closes the pipe: its exit
                // status says what went wrong, not this write.
                if let Err(e) = pipe.write_all(text.as_bytes()).await {
                    tracing::debug!(command = name, error = %e, "stdin not fully written");
                }
                drop(pipe);
            }
            child.wait_with_output().await
        };
        match tokio::time::timeout(self.config.command_timeout, finish).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(source)) => Err(Error::Spawn { program, source }),
            Err(_) => {
                tracing::warn!(command = name, after = ?self.config.command_timeout, "Slurm command timed out; killed");
                Err(Error::CommandTimeout {
                    command: name,
                    after: self.config.command_timeout,
                })
            }
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn failed(command: &'static str, output: &Output) -> Error {
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    tracing::warn!(command, status = %output.status, %stderr, "Slurm command failed");
    Error::CommandFailed {
        command,
        status: output.status.to_string(),
        stderr,
    }
}
