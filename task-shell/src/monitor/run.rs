//! The run of a `monitor_mcp` task: turns its source into events, obeys kill
//! requests and ends the watch at its timeout. Monitors have no stall watchdog (SPEC §6).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use task_core::process::{Child, ChildStdout};
use task_core::{EndReason, TaskId, TaskStatus};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use crate::book::{Book, MonitorEnd};
use crate::control::{
    Control, ControlReceiver, Controls, Outcome, OutcomePost, deadline, kill_and_reap,
};
use crate::lines::LineSplitter;
use crate::monitor::ws::{WsTarget, stream_events};
use crate::output::{append_bytes, append_line};
use crate::process::{EXIT_KILLED, exit_code};

/// Bytes read from a monitor command's stdout at a time.
const READ_CHUNK: usize = 8 * 1024;

/// Where a running monitor's events come from.
#[derive(Debug)]
pub(crate) enum LiveSource {
    /// A command's stdout.
    Process {
        /// The shell running the command.
        child: Child,
        /// Its pid (also its process group).
        pid: u32,
        /// Its stdout pipe.
        stdout: ChildStdout,
    },
    /// A WebSocket.
    Socket(WsTarget),
}

/// Why the watch stopped.
#[derive(Debug)]
enum End {
    /// The command exited with this code after its stdout closed.
    Exited(i32),
    /// The socket was closed by the peer.
    Closed,
    /// The socket failed.
    Broken(String),
    /// Killed on request; the requester is answered once the source is gone.
    Killed(oneshot::Sender<()>),
    /// Its lifetime ran out.
    TimedOut,
}

/// Everything one monitor's run owns.
#[derive(Debug)]
pub(crate) struct MonitorRun {
    pub(crate) id: TaskId,
    pub(crate) source: LiveSource,
    pub(crate) output: PathBuf,
    pub(crate) output_file: File,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_line_bytes: usize,
    pub(crate) control: ControlReceiver,
    pub(crate) outcome: OutcomePost,
}

/// Where events go: the output file (so the watch can be read back) and the notification queue.
#[derive(Debug)]
struct Events<'a> {
    id: TaskId,
    book: &'a Book,
    output: &'a Path,
    file: &'a mut File,
}

impl Events<'_> {
    /// Records raw bytes in the output file.
    fn record(&mut self, bytes: &[u8]) {
        if let Err(error) = append_bytes(self.file, self.output, bytes) {
            tracing::warn!(task = %self.id, %error, "could not record monitor output");
        }
    }

    /// Delivers one event.
    fn emit(&self, line: String) {
        self.book.monitor_event(&self.id, line);
    }
}

impl MonitorRun {
    /// Runs the watch until it ends, records the end and tells the waiting caller.
    pub(crate) async fn drive(self, book: Book, controls: Arc<Controls>) {
        let MonitorRun {
            id,
            mut source,
            output,
            mut output_file,
            timeout,
            max_line_bytes,
            mut control,
            outcome,
        } = self;
        let mut events = Events {
            id,
            book: &book,
            output: &output,
            file: &mut output_file,
        };
        let end = tokio::select! {
            end = watch(&mut source, &mut events, max_line_bytes) => end,
            () = deadline(timeout) => End::TimedOut,
            done = wait_for_kill(&mut control) => {
                book.mark_killed(&id);
                End::Killed(done)
            }
        };
        if let (End::Killed(_) | End::TimedOut, LiveSource::Process { child, pid, .. }) =
            (&end, &mut source)
        {
            kill_and_reap(child, *pid, &id).await;
        }
        controls.close(&id);
        let result = settle(&book, id, &output, end, timeout);
        outcome.post(result);
    }
}

/// Streams events until the source ends by itself.
async fn watch(source: &mut LiveSource, events: &mut Events<'_>, max_line_bytes: usize) -> End {
    match source {
        LiveSource::Process { child, stdout, .. } => {
            let mut splitter = LineSplitter::new(max_line_bytes);
            let mut chunk = Vec::with_capacity(READ_CHUNK);
            loop {
                chunk.clear();
                match stdout.read_buf(&mut chunk).await {
                    Ok(0) => break,
                    Ok(_) => {
                        events.record(&chunk);
                        splitter.push(&chunk, |line| events.emit(line));
                    }
                    Err(error) => {
                        tracing::warn!(task = %events.id, %error, "monitor stdout failed");
                        break;
                    }
                }
            }
            if let Some(line) = splitter.finish() {
                events.emit(line);
            }
            End::Exited(child.wait().await.map_or(EXIT_KILLED, exit_code))
        }
        LiveSource::Socket(target) => {
            let result = stream_events(target, |line| {
                events.record(format!("{line}\n").as_bytes());
                events.emit(line);
            })
            .await;
            result.map_or_else(|error| End::Broken(error.to_string()), |()| End::Closed)
        }
    }
}

/// Records the end in the registry, answers a kill request and builds the caller's outcome.
fn settle(book: &Book, id: TaskId, output: &Path, end: End, limit: Option<Duration>) -> Outcome {
    let (status, reason, message, notify) = match end {
        End::Exited(0) | End::Closed => (
            TaskStatus::Completed,
            EndReason::Exited { code: 0 },
            None,
            Some(MonitorEnd::StreamEnded),
        ),
        End::Exited(code) => (
            TaskStatus::Failed,
            EndReason::Exited { code },
            None,
            Some(MonitorEnd::ScriptFailed(code)),
        ),
        End::Broken(error) => (
            TaskStatus::Failed,
            EndReason::Errored {
                message: error.clone(),
            },
            Some(error),
            Some(MonitorEnd::ScriptFailed(1)),
        ),
        End::TimedOut => (
            TaskStatus::Killed,
            EndReason::timed_out(limit.unwrap_or_default()),
            None,
            Some(MonitorEnd::Stopped),
        ),
        End::Killed(done) => {
            let _ = done.send(());
            (TaskStatus::Killed, EndReason::Killed, None, None)
        }
    };
    let exit_code = reason.exit_code().unwrap_or(1);
    if let Some(message) = &message
        && let Err(error) = append_line(output, message)
    {
        tracing::warn!(task = %id, %error, "could not append the end message");
    }
    let status = match notify {
        Some(end) => book.finish_monitor(&id, status, reason.clone(), end),
        None => status,
    };
    Outcome {
        status,
        exit_code,
        message,
        reason,
    }
}

/// Completes with the reply channel when a kill request arrives (background requests mean
/// nothing to a monitor, which always runs in the background); never completes if the control
/// channel closes.
async fn wait_for_kill(control: &mut ControlReceiver) -> oneshot::Sender<()> {
    loop {
        match control.recv().await {
            Some(Control::Kill { done }) => return done,
            Some(Control::Background) => {}
            None => std::future::pending::<()>().await,
        }
    }
}
