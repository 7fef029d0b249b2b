//! End hooks: a command run once at every end of every task (completed, failed, killed,
//! ended by a limit, or recorded as an orphan by the next supervisor), with the task in its
//! environment.
//!
//! The command is the task's own (`tasks run --on-end CMD`) or the session's
//! ([`Config::on_end`](crate::config::Config::on_end)), kept in every record of the task
//! ([`TaskRecord::on_end`]). It is run by `sh -c CMD` (the user wrote it as shell text); nothing of
//! the task is ever put into that text: the task is described to the hook by its environment
//! only:
//!
//! | variable            | value                                                  |
//! |---------------------|--------------------------------------------------------|
//! | `TASKS_ID`          | the task's id                                          |
//! | `TASKS_TYPE`        | its type (`local_bash`, `local_agent`, …)              |
//! | `TASKS_STATUS`      | `completed`, `failed` or `killed`                      |
//! | `TASKS_END_REASON`  | why, in a few words (`exit 0`, `killed`, `timeout 5s`) |
//! | `TASKS_OUTPUT_FILE` | the path of its output file                            |
//! | `TASKS_DESCRIPTION` | its description                                        |
//!
//! **Never in the way of the notification.** A hook runs only once the end is on disk with its
//! completion notice (the record writer hands it over after that write), on a tokio task of
//! its own: a hook that fails or hangs delays and loses nothing. One still running after
//! [`Config::on_end_timeout`](crate::config::Config::on_end_timeout) is killed with its whole
//! process group. Its stdout and stderr are read through task-output's pipe mode
//! ([`PipeOutput`]): kept in memory up to 8 MiB, then spilled to `{id}.{end}.hook.output` in the
//! tasks directory. Once it ends, `{session}/hooks.log` gets what it printed (all of it, or,
//! once spilled, its last lines and where the rest is), then one line saying how it ended.
//!
//! **Once per end, across supervisors.** A hook's process claims the end's latch
//! `{id}.{end}.hook` with `O_CREAT|O_EXCL` itself, between its `fork` and its `exec`: the
//! one process that creates it runs the command, any other (a record written again, the next
//! supervisor's look at the records it finds ended) exits before its `exec` and the supervisor
//! that started it lets it be. A supervisor starting looks at every ended record with a hook
//! and no latch (its predecessor died between writing the end and running the hook, or ended
//! no orphan) and runs those. A supervisor killed at any point leaves either no latch (the
//! next one runs the hook) or a hook process past its `fork`, which claims the latch and runs
//! it: no end loses its hook and none runs it twice. The hook does not die with the
//! supervisor (no parent-death signal): once started it finishes.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use task_core::TaskState;
use task_output::{PipeConfig, PipeOutput};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::paths::SessionPaths;
use crate::record::TaskRecord;

/// Runs end hooks for one supervisor.
#[derive(Debug, Clone)]
pub(crate) struct Hooks {
    paths: SessionPaths,
    /// The session's own hook, for tasks that bring none.
    default: Option<String>,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
}

impl Hooks {
    /// Hooks of the session at `paths` (call inside the runtime that will run them).
    pub(crate) fn new(paths: SessionPaths, default: Option<String>, timeout: Duration) -> Self {
        Self {
            paths,
            default,
            timeout,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// The hook a task with its own `own` (or none) runs at its end.
    pub(crate) fn command_for(&self, own: Option<&String>) -> Option<String> {
        own.or(self.default.as_ref()).cloned()
    }

    /// Runs the hook of `record`'s end, if it has one that no supervisor ran yet; returns at
    /// once (the hook runs on the runtime).
    pub(crate) fn ended(&self, record: &TaskRecord) {
        let (Some(command), Some(ended)) = (&record.on_end, record.task.base.end_time) else {
            return;
        };
        if !record.is_terminal() {
            return;
        }
        let latch = self.paths.hook_ran(&record.id(), ended);
        if latch.exists() {
            return; // a cheap look first; the hook's own claim is what decides
        }
        let run = Run {
            log: self.paths.hooks_log(),
            spill: self.paths.hook_output(&record.id(), ended),
            latch,
            command: command.clone(),
            timeout: self.timeout,
        };
        let task = record.task.clone();
        self.runtime.spawn(async move { run.run(&task).await });
    }

    /// Runs the hooks due among `records`: ended, with a hook no supervisor ran (their
    /// supervisor died before it could).
    pub(crate) fn run_due<'a>(&self, records: impl IntoIterator<Item = &'a TaskRecord>) {
        for record in records {
            let due = record.on_end.is_some()
                && record.is_terminal()
                && record
                    .task
                    .base
                    .end_time
                    .is_some_and(|ended| !self.paths.hook_ran(&record.id(), ended).exists());
            if due {
                self.ended(record);
            }
        }
    }
}

/// One hook to run.
struct Run {
    log: PathBuf,
    /// Where its output goes past what pipe mode keeps in memory.
    spill: PathBuf,
    /// The end's latch, which the hook's process claims before its `exec`.
    latch: PathBuf,
    command: String,
    timeout: Duration,
}

/// How much of a hook's stream is read at a time.
const READ_CHUNK: usize = 64 * 1024;

impl Run {
    async fn run(self, task: &TaskState) {
        let id = task.id();
        let mut output = PipeOutput::new(&self.spill, PipeConfig::default());
        let outcome = match self.spawn(task) {
            Ok(child) => self.wait(child, &mut output).await,
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => return,
            Err(error) if !self.latch.exists() => {
                tracing::error!(task = %id, %error, "cannot claim its end hook: not run");
                return;
            }
            Err(error) => format!("could not start: {error}"),
        };
        if let Err(error) = output.flush().await {
            tracing::warn!(task = %id, %error, "cannot write its end hook's output");
        }
        let mut entry = shown(&output);
        entry.push_str(&format!(
            "{} {id} on-end hook {outcome}\n",
            humantime::format_rfc3339_millis(std::time::SystemTime::now())
        ));
        let appended = task_output::open::open_append_creating(&self.log)
            .map_err(std::io::Error::from)
            .and_then(|mut log| log.write_all(entry.as_bytes()));
        if let Err(error) = appended {
            tracing::warn!(task = %id, %error, "cannot log its end hook");
        }
        tracing::info!(task = %id, "end hook {outcome}");
    }

    /// Starts `sh -c COMMAND` in a process group of its own, the task in its environment,
    /// its stdout and stderr pipes to this process, once its process claimed the latch (an
    /// `AlreadyExists` error: another process has it).
    fn spawn(&self, task: &TaskState) -> std::io::Result<tokio::process::Child> {
        let latch = std::ffi::CString::new(self.latch.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let base = &task.base;
        let reason = base
            .end_reason
            .as_ref()
            .map(task_core::EndReason::short)
            .unwrap_or_default();
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .env("TASKS_ID", base.id.to_string())
            .env("TASKS_TYPE", base.task_type.as_str())
            .env("TASKS_STATUS", base.status.as_str())
            .env("TASKS_END_REASON", reason)
            .env("TASKS_OUTPUT_FILE", &base.output_file)
            .env("TASKS_DESCRIPTION", &base.description)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: `claim` makes one `open` and one `close` system call on memory made before
        // the `fork`: async-signal-safe, as a hook between `fork` and `exec` must be.
        unsafe { command.pre_exec(move || claim(&latch)) };
        tokio::process::Command::from(command).spawn()
    }

    /// Reads the hook's output into `output` and waits for it, up to its timeout, then kills
    /// its process group; how it ended.
    async fn wait(&self, mut child: tokio::process::Child, output: &mut PipeOutput) -> String {
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let ran = async {
            let lost = capture(stdout, stderr, output).await;
            (lost, child.wait().await)
        };
        let (lost, waited) = match tokio::time::timeout(self.timeout, ran).await {
            Ok(ran) => ran,
            Err(_) => {
                if let Some(pid) = child
                    .id()
                    .and_then(|pid| i32::try_from(pid).ok())
                    .and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.wait().await;
                return format!(
                    "killed after its timeout of {}",
                    task_core::human_duration(self.timeout)
                );
            }
        };
        let ended = match waited {
            Ok(status) => match status.code() {
                Some(code) => format!("exited {code}"),
                None => format!("ended by {status}"),
            },
            Err(error) => format!("could not be waited for: {error}"),
        };
        match lost {
            Some(error) => format!("{ended} (its output past what memory holds was lost: {error})"),
            None => ended,
        }
    }
}

/// Creates the latch at `path` (`O_CREAT|O_EXCL|O_NOFOLLOW`), in the hook's process before
/// its `exec`: the one process that creates it runs the hook.
fn claim(path: &std::ffi::CStr) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::from_raw_mode(0o644))
        .map(drop)
        .map_err(Into::into)
}

/// Reads `stdout` and `stderr` to their ends into `output`, a chunk at a time; once spilled,
/// each chunk reaches the disk before the next is read, so memory holds what pipe mode keeps
/// and no more. If the spill cannot be made, the rest is read and dropped: the error.
async fn capture(
    mut stdout: Option<impl AsyncRead + Unpin>,
    mut stderr: Option<impl AsyncRead + Unpin>,
    output: &mut PipeOutput,
) -> Option<task_output::OutputError> {
    let (mut out, mut err) = (vec![0; READ_CHUNK], vec![0; READ_CHUNK]);
    let mut lost = None;
    while stdout.is_some() || stderr.is_some() {
        let (chunk, from_stdout) = tokio::select! {
            read = read_some(&mut stdout, &mut out) => (read.map(|n| &out[..n]), true),
            read = read_some(&mut stderr, &mut err) => (read.map(|n| &err[..n]), false),
        };
        let Some(chunk) = chunk else {
            match from_stdout {
                true => stdout = None,
                false => stderr = None,
            }
            continue;
        };
        if lost.is_some() {
            continue;
        }
        let chunk = Bytes::copy_from_slice(chunk);
        let written = match from_stdout {
            true => output.write_stdout(chunk),
            false => output.write_stderr(chunk),
        };
        match written {
            Ok(()) if output.is_spilled() => lost = output.flush().await.err(),
            Ok(()) => {}
            Err(error) => lost = Some(error),
        }
    }
    lost
}

/// The next bytes of `reader` into `buf`: how many, `None` at its end (or a read error);
/// never ready without a reader.
async fn read_some(reader: &mut Option<impl AsyncRead + Unpin>, buf: &mut [u8]) -> Option<usize> {
    let Some(reader) = reader else {
        return std::future::pending().await;
    };
    match reader.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// What the hooks log shows of a hook's output: all of it (stdout, then stderr) while it was
/// kept in memory; once spilled, its last lines and where the whole of it is.
fn shown(output: &PipeOutput) -> String {
    let mut text = output.stdout();
    text.push_str(&output.stderr());
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use task_core::{ShellState, TaskId, TaskKind, TaskStatus};

    /// A record of a shell ended at `ENDED`, whose hook appends its id to `ran`.
    fn ended_with_hook(paths: &SessionPaths, ran: &std::path::Path) -> TaskRecord {
        let id = TaskId::parse("b12345678").unwrap();
        let output = paths.tasks_dir().join("b12345678.output");
        let kind = TaskKind::Shell(ShellState::default());
        let mut record = TaskRecord::new(TaskState::new(id, "build", output, kind).unwrap());
        record.task.base.status = TaskStatus::Completed;
        record.task.base.end_time = Some(ENDED);
        record.on_end = Some(format!("echo \"$TASKS_ID\" >> '{}'", ran.display()));
        record
    }

    const ENDED: u64 = 1_700_000_000_000;

    fn session() -> (tempfile::TempDir, SessionPaths) {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        (root, paths)
    }

    fn hooks(paths: &SessionPaths) -> Hooks {
        Hooks::new(paths.clone(), None, Duration::from_secs(30))
    }

    /// The lines of `path`, once it has `count` of them (the hooks run on their own).
    fn lines_once(path: &std::path::Path, count: usize) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().count() >= count || std::time::Instant::now() > deadline {
                return text.lines().map(str::to_owned).collect();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_hook_its_supervisor_died_before_starting_is_run_by_the_next_supervisor() {
        let (_root, paths) = session();
        let ran = paths.root().join("ran");
        let record = ended_with_hook(&paths, &ran);
        // The dying supervisor: its runtime never gets to the hook's task.
        let dying = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        dying.block_on(async { hooks(&paths).ended(&record) });
        drop(dying);
        let latch = paths.hook_ran(&record.id(), ENDED);
        assert!(!latch.exists(), "no latch without a hook's process");

        let next = tokio::runtime::Runtime::new().unwrap();
        next.block_on(async { hooks(&paths).run_due([&record]) });
        assert_eq!(lines_once(&ran, 1), ["b12345678"]);
        assert!(latch.exists(), "claimed by the hook that ran");
    }

    #[test]
    fn two_supervisors_claiming_one_end_at_once_run_its_hook_once_and_log_it_once() {
        let (_root, paths) = session();
        let ran = paths.root().join("ran");
        let record = ended_with_hook(&paths, &ran);
        let run = || Run {
            log: paths.hooks_log(),
            spill: paths.hook_output(&record.id(), ENDED),
            latch: paths.hook_ran(&record.id(), ENDED),
            command: record.on_end.clone().unwrap(),
            timeout: Duration::from_secs(30),
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            tokio::join!(run().run(&record.task), run().run(&record.task));
        });
        let ran = std::fs::read_to_string(&ran).unwrap();
        assert_eq!(ran, "b12345678\n");
        let log = std::fs::read_to_string(paths.hooks_log()).unwrap();
        assert_eq!(log.matches("on-end hook").count(), 1, "{log}");
        assert!(log.contains("on-end hook exited 0"), "{log}");
    }
}
