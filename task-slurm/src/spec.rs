//! What to submit: [`JobSpec`], and the batch script and `sbatch` arguments made from it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::files::JobFiles;
use crate::id::JobId;
use crate::job::JobName;

/// The exit code of a job whose wrapper could not write its start marker (the state directory
/// is not writable, or not there, on the job's node); the command was not run.
pub const EXIT_NO_START_MARKER: i32 = 125;

/// One job to submit: a command (argv, no shell of ours in between), where it runs and where
/// its output and status files go, and what it asks of Slurm.
///
/// The job runs a generated batch script (the *wrapper*, see [`JobSpec::batch_script`]) that
/// writes a start marker, runs the command, and writes the command's exit status to
/// `NAME.exit` beside the output file (write to a temporary file, then rename), so the status
/// survives Slurm forgetting the job. The output file and the status files are written on
/// the job's node and read here: the directory holding them must be on a filesystem both
/// see.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct JobSpec {
    /// The job's name (the task's id); it also names the status files.
    pub name: JobName,
    /// The program and its arguments. The program is looked up in the job's `PATH`.
    pub command: Vec<String>,
    /// The job's working directory (`--chdir`), absolute.
    pub workdir: PathBuf,
    /// The file the job's stdout (and stderr, unless [`JobSpec::error`] is set) is appended to
    /// (`--output`, `--open-mode=append`), absolute. Its directory also holds the status
    /// files.
    pub output: PathBuf,
    /// A separate file for stderr (`--error`), absolute.
    pub error: Option<PathBuf>,
    /// The job's environment, exactly (plus the `SLURM_*` variables Slurm sets in every job).
    /// Empty unless filled: see [`JobSpec::with_current_env`]. Variables named `SBATCH_*` or
    /// `SLURM_*` are not passed (they would steer `sbatch` itself).
    pub env: Vec<(String, String)>,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time`, rounded up to whole minutes.
    pub time_limit: Option<Duration>,
    /// `--dependency=afterok:…`: start only after these jobs completed successfully.
    pub after_ok: Vec<JobId>,
    /// `--cpus-per-task`.
    pub cpus_per_task: Option<u32>,
    /// More `sbatch` options, passed as given after the ones above (before the script).
    pub extra_args: Vec<String>,
}

impl JobSpec {
    /// A job running `command` (program and arguments) in `workdir`, appending its output to
    /// `output`, with an empty environment and Slurm's defaults for everything else.
    pub fn new(
        name: JobName,
        command: Vec<String>,
        workdir: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name,
            command,
            workdir: workdir.into(),
            output: output.into(),
            error: None,
            env: Vec::new(),
            partition: None,
            time_limit: None,
            after_ok: Vec::new(),
            cpus_per_task: None,
            extra_args: Vec::new(),
        }
    }

    /// A job running `script` with `/bin/sh -c` (the job's shell, on its node).
    pub fn shell(
        name: JobName,
        script: &str,
        workdir: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
    ) -> Self {
        Self::new(
            name,
            vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()],
            workdir,
            output,
        )
    }

    /// Adds this process's environment (all of it but `SBATCH_*` and `SLURM_*`, and names or
    /// values that are not UTF-8).
    #[must_use]
    pub fn with_current_env(mut self) -> Self {
        self.env
            .extend(std::env::vars_os().filter_map(|(name, value)| {
                Some((name.into_string().ok()?, value.into_string().ok()?))
            }));
        self
    }

    /// Sets one environment variable (replacing an earlier value).
    #[must_use]
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.env.retain(|(n, _)| *n != name);
        self.env.push((name, value.into()));
        self
    }

    /// Sets a separate stderr file.
    #[must_use]
    pub fn with_error(mut self, error: impl Into<PathBuf>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Sets the partition.
    #[must_use]
    pub fn with_partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Sets the time limit.
    #[must_use]
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Adds an `afterok` dependency.
    #[must_use]
    pub fn with_after_ok(mut self, id: JobId) -> Self {
        self.after_ok.push(id);
        self
    }

    /// Sets the CPUs per task.
    #[must_use]
    pub fn with_cpus_per_task(mut self, cpus: u32) -> Self {
        self.cpus_per_task = Some(cpus);
        self
    }

    /// Adds an `sbatch` option.
    #[must_use]
    pub fn with_extra_arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// The job's status files: `NAME.exit` and `NAME.started` in the output file's directory.
    pub fn files(&self) -> JobFiles {
        let dir = self.output.parent().unwrap_or(Path::new("/"));
        JobFiles::in_dir(dir, &self.name)
    }

    /// The environment passed to `sbatch` (and so to the job): [`JobSpec::env`] without the
    /// `SBATCH_*` and `SLURM_*` variables.
    pub fn job_env(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env
            .iter()
            .filter(|(name, _)| !name.starts_with("SBATCH_") && !name.starts_with("SLURM_"))
            .map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Checks what Slurm or the wrapper could not carry: an empty command, relative paths,
    /// paths with a backslash or a newline (Slurm's file name patterns), NUL bytes, bad
    /// variable names, a zero CPU count.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] naming the first problem.
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: String| Err(Error::InvalidSpec(what));
        if self.command.is_empty() || self.command[0].is_empty() {
            return invalid("empty command".to_owned());
        }
        if let Some(arg) = self.command.iter().find(|a| a.contains('\0')) {
            return invalid(format!("command argument {arg:?} holds a NUL byte"));
        }
        let mut paths = vec![("workdir", &self.workdir), ("output", &self.output)];
        if let Some(error) = &self.error {
            paths.push(("error", error));
        }
        for (what, path) in paths {
            let Some(text) = path.to_str() else {
                return invalid(format!("{what} path {path:?} is not UTF-8"));
            };
            if !path.is_absolute() {
                return invalid(format!("{what} path {text:?} is not absolute"));
            }
            if text.contains(['\\', '\n', '\0']) {
                return invalid(format!(
                    "{what} path {text:?} holds a backslash, a newline or a NUL byte"
                ));
            }
        }
        if self.output.parent().is_none() {
            return invalid("output path has no directory".to_owned());
        }
        for (name, value) in &self.env {
            let valid_name = !name.is_empty()
                && !name.as_bytes()[0].is_ascii_digit()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_name {
                return invalid(format!("environment variable name {name:?}"));
            }
            if value.contains('\0') {
                return invalid(format!("environment variable {name} holds a NUL byte"));
            }
        }
        if self.cpus_per_task == Some(0) {
            return invalid("zero CPUs per task".to_owned());
        }
        if let Some(p) = &self.partition
            && (p.is_empty() || p.contains(['\0', '\n']))
        {
            return invalid(format!("partition {p:?}"));
        }
        if let Some(arg) = self.extra_args.iter().find(|a| a.contains('\0')) {
            return invalid(format!("sbatch argument {arg:?} holds a NUL byte"));
        }
        Ok(())
    }

    /// `sbatch`'s arguments (without the program): `--parsable`, the job's options, and no
    /// script (the batch script goes to its stdin). Call [`JobSpec::validate`] first.
    pub fn sbatch_args(&self) -> Vec<String> {
        let mut args = vec![
            "--parsable".to_owned(),
            format!("--job-name={}", self.name),
            format!("--output={}", file_pattern(&self.output)),
        ];
        if let Some(error) = &self.error {
            args.push(format!("--error={}", file_pattern(error)));
        }
        args.push("--open-mode=append".to_owned());
        args.push(format!("--chdir={}", self.workdir.display()));
        // The job's environment is sbatch's, which is exactly `job_env` (see `Slurm::submit`).
        args.push("--export=ALL".to_owned());
        if let Some(partition) = &self.partition {
            args.push(format!("--partition={partition}"));
        }
        if let Some(limit) = self.time_limit {
            args.push(format!("--time={}", minutes_rounded_up(limit)));
        }
        if !self.after_ok.is_empty() {
            let ids: Vec<String> = self.after_ok.iter().map(JobId::to_string).collect();
            args.push(format!("--dependency=afterok:{}", ids.join(":")));
        }
        if let Some(cpus) = self.cpus_per_task {
            args.push(format!("--cpus-per-task={cpus}"));
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// The batch script: the wrapper around [`JobSpec::command`].
    ///
    /// On its node, the wrapper
    /// 1. writes the start marker `NAME.started` (`SLURM_JOB_ID SLURMD_NODENAME PID`) through
    ///    a temporary file and a rename; if it cannot, it says so on stderr and exits
    ///    [`EXIT_NO_START_MARKER`] without running the command;
    /// 2. runs the command, its arguments quoted for the shell;
    /// 3. writes the command's exit status, as `sh` reports it (the exit code, or 128+N for
    ///    a command killed by signal N), and a newline to `NAME.exit`, through a temporary
    ///    file and a rename, then exits with that status.
    ///
    /// `SIGTERM` (`scancel`, a time limit) reaches the command as well as the wrapper; the
    /// wrapper outlives it, waits for the command to end and records its status. A wrapper
    /// ended by `SIGKILL` records nothing.
    pub fn batch_script(&self) -> String {
        let files = self.files();
        let command: Vec<String> = self.command.iter().map(|a| sh_quote(a)).collect();
        format!(
            r#"#!/bin/sh
# The task-slurm wrapper of job {name}: records its start, runs the command, records its exit
# status (through a temporary file and a rename, so a reader never sees half of it).
terminated=
trap 'terminated=1' TERM
started={started}
exit_file={exit_file}
mv_=/bin/mv
[ -x "$mv_" ] || mv_=/usr/bin/mv
if ! {{ printf '%s %s %s\n' "${{SLURM_JOB_ID:-}}" "${{SLURMD_NODENAME:-}}" "$$" >"$started.$$.tmp" &&
    "$mv_" -f "$started.$$.tmp" "$started"; }}; then
    printf 'task-slurm: cannot write the start marker %s on node %s: is its directory shared with this node?\n' \
        "$started" "${{SLURMD_NODENAME:-?}}" >&2
    exit {no_marker}
fi
if [ -n "$terminated" ]; then
    status=143
else
    {command}
    status=$?
fi
printf '%s\n' "$status" >"$exit_file.$$.tmp" && "$mv_" -f "$exit_file.$$.tmp" "$exit_file"
exit "$status"
"#,
            name = self.name,
            started = sh_quote(&files.started.to_string_lossy()),
            exit_file = sh_quote(&files.exit.to_string_lossy()),
            no_marker = EXIT_NO_START_MARKER,
            command = command.join(" "),
        )
    }
}

/// Quotes `s` for a POSIX shell: single quotes, each `'` as `'\''`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A path as Slurm's `--output`/`--error` file name pattern: `%` doubled (Slurm would expand
/// `%j` and the like). Backslashes are refused by [`JobSpec::validate`] (a backslash turns
/// the expansion off and is removed).
fn file_pattern(path: &Path) -> String {
    path.to_string_lossy().replace('%', "%%")
}

fn minutes_rounded_up(limit: Duration) -> u64 {
    let secs = limit.as_secs() + u64::from(limit.subsec_nanos() > 0);
    secs.div_ceil(60).max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec() -> JobSpec {
        JobSpec::new(
            JobName::new("t-1").unwrap(),
            vec!["echo".into(), "it's".into()],
            "/work",
            "/state/out%j.log",
        )
    }

    #[test]
    fn arguments_name_every_option() {
        let s = spec()
            .with_error("/state/err")
            .with_partition("debug")
            .with_time_limit(Duration::from_secs(61))
            .with_after_ok(JobId(3))
            .with_after_ok(JobId(4))
            .with_cpus_per_task(2)
            .with_extra_arg("--hold");
        s.validate().unwrap();
        assert_eq!(
            s.sbatch_args(),
            [
                "--parsable",
                "--job-name=t-1",
                "--output=/state/out%%j.log",
                "--error=/state/err",
                "--open-mode=append",
                "--chdir=/work",
                "--export=ALL",
                "--partition=debug",
                "--time=2",
                "--dependency=afterok:3:4",
                "--cpus-per-task=2",
                "--hold",
            ]
        );
    }

    #[test]
    fn time_limits_round_up_to_a_minute() {
        assert_eq!(minutes_rounded_up(Duration::from_secs(0)), 1);
        assert_eq!(minutes_rounded_up(Duration::from_secs(60)), 1);
        assert_eq!(minutes_rounded_up(Duration::from_millis(60_001)), 2);
    }

    #[test]
    fn the_script_quotes_the_command_and_names_the_status_files() {
        let script = spec().batch_script();
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains("    'echo' 'it'\\''s'\n"));
        assert!(script.contains("started='/state/t-1.started'\n"));
        assert!(script.contains("exit_file='/state/t-1.exit'\n"));
    }

    /// The script run by `sh` here, as a node would: the files appear, the status is passed on.
    #[test]
    fn the_script_runs_under_sh_and_records_start_and_exit() {
        let dir = tempfile::tempdir().unwrap();
        let spec = JobSpec::shell(
            JobName::new("local").unwrap(),
            "echo \"$1\"; exit 4",
            dir.path(),
            dir.path().join("local.out"),
        );
        let script = dir.path().join("script.sh");
        std::fs::write(&script, spec.batch_script()).unwrap();
        let out = std::process::Command::new("/bin/sh")
            .arg(&script)
            .env("SLURM_JOB_ID", "12")
            .env("SLURMD_NODENAME", "node1")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        let files = spec.files();
        assert_eq!(std::fs::read_to_string(&files.exit).unwrap(), "4\n");
        let marker = std::fs::read_to_string(&files.started).unwrap();
        assert!(marker.starts_with("12 node1 "), "{marker:?}");
        // Nothing else left: the temporary files were renamed into place.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["local.exit", "local.started", "script.sh"]);
    }

    /// A directory the wrapper cannot write to: it says so and does not run the command.
    #[test]
    fn without_its_start_marker_the_command_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not-there");
        let spec = JobSpec::shell(
            JobName::new("local").unwrap(),
            &format!("touch '{}/ran'", dir.path().display()),
            dir.path(),
            missing.join("local.out"),
        );
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(spec.batch_script())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(EXIT_NO_START_MARKER), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write the start marker"));
        assert!(!dir.path().join("ran").exists());
    }

    #[test]
    fn the_environment_leaves_out_slurm_s_own_variables() {
        let s = spec()
            .with_env("A", "1")
            .with_env("SLURM_JOB_ID", "9")
            .with_env("SBATCH_PARTITION", "x")
            .with_env("A", "2");
        let env: Vec<_> = s.job_env().collect();
        assert_eq!(env, [("A", "2")]);
    }

    #[test]
    fn invalid_specs_are_refused() {
        let mut s = spec();
        s.workdir = "relative".into();
        assert!(s.validate().is_err());
        let mut s = spec();
        s.command.clear();
        assert!(s.validate().is_err());
        let mut s = spec();
        s.output = "/a\\b".into();
        assert!(s.validate().is_err());
        assert!(spec().with_env("1A", "x").validate().is_err());
        assert!(spec().with_env("A-B", "x").validate().is_err());
        assert!(spec().with_env("A", "x\0").validate().is_err());
        assert!(spec().with_cpus_per_task(0).validate().is_err());
        assert!(
            spec()
                .with_env("A", "multi\nline 'value'")
                .validate()
                .is_ok()
        );
    }
}
