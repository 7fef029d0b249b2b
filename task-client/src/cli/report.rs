//! What several commands print about the tasks they start, wait for or kill: the id of a
//! started task, its notification once it ended and the exit status that mirrors it, what a
//! kill did.

use std::time::Duration;

use serde_json::json;
use task_core::{TaskId, TaskStatus};

use crate::cli::error::{CliError, Result, exit};
use crate::cli::printer::Printer;
use crate::cli::render::Spinner;
use task_session::notice::Notice;
use task_session::protocol::KillReport;
use task_session::record::TaskRecord;
use task_session::session::{Session, WaitOutcome};

/// Prints the id of a started task (with its output file in `--json`).
pub fn print_started(session: &Session, id: TaskId, printer: Printer) -> Result<u8> {
    let value = json!({ "id": id, "outputFile": session.paths().output(&id) });
    printer.emit(&value, &format!("{id}\n"))?;
    Ok(exit::OK)
}

/// Waits for a started task to end, prints its notification and returns its exit status.
pub fn wait_and_report(session: &Session, id: TaskId, printer: Printer) -> Result<u8> {
    let WaitOutcome::Ended(tasks) = wait_with_spinner(session, &[id], None, printer)? else {
        return Ok(exit::WAIT_TIMEOUT);
    };
    let task = &tasks[0];
    let report = |notice: Option<&Notice>| {
        let value = json!({
            "id": id, "status": task.status(), "exitCode": task.exit_code(),
            "endReason": task.end_reason(),
            "notification": notice.map(Notice::text),
        });
        let text = notice.map_or_else(String::new, |n| format!("{}\n", n.text()));
        printer.deliver(&value, &text)
    };
    // Marked delivered only once printed.
    let delivered = session.deliver_completion(task, |notices| report(notices.first().copied()));
    match delivered {
        Ok(Some(_)) => {}
        Ok(None) => {
            report(None).map(|()| true).or_else(ignore_closed_pipe)?;
        }
        Err(task_session::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(error) => return Err(error.into()),
    }
    Ok(exit_code(task))
}

/// Waits for `ids`, with a spinner on stderr when it is a terminal (and not `--json`).
pub fn wait_with_spinner(
    session: &Session,
    ids: &[TaskId],
    timeout: Option<Duration>,
    printer: Printer,
) -> Result<WaitOutcome> {
    let mut spinner = Spinner::new(!printer.is_json());
    let outcome = session.wait(ids, timeout, |tasks| {
        let live = tasks.iter().filter(|t| !t.is_terminal()).count();
        spinner.tick(&format!("waiting for {live} task(s)"));
    });
    spinner.clear();
    Ok(outcome?)
}

/// A reader that closed its end of the pipe is not an error (`tasks wait | head -1`); what
/// was not written is not delivered. True when the write went through.
pub fn ignore_closed_pipe(error: std::io::Error) -> Result<bool> {
    match error.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(false),
        _ => Err(CliError::io("write", "standard output", error)),
    }
}

/// The exit status `wait` mirrors: the command's own code, 137 when killed, 143 when timed out,
/// 1 for a failure without one (a dead supervisor, an agent's error), 124 for a task still live.
pub fn exit_code(task: &TaskRecord) -> u8 {
    match task.status() {
        TaskStatus::Completed => exit::OK,
        TaskStatus::Killed => exit::KILLED,
        TaskStatus::Failed => task
            .end_reason()
            .and_then(task_core::EndReason::exit_code)
            .and_then(|c| u8::try_from(c).ok())
            .filter(|&c| c != 0)
            .unwrap_or(1),
        TaskStatus::Pending | TaskStatus::Running => exit::WAIT_TIMEOUT,
    }
}

/// Prints what a kill did to each task: `b1234abcd killed` (`--json`: the reports).
pub fn print_kills(reports: &[KillReport], printer: Printer) -> Result<u8> {
    let text: String = reports
        .iter()
        .map(|r| format!("{} {}\n", r.id, r.result.as_str()))
        .collect();
    printer.emit(&reports, &text)?;
    Ok(exit::OK)
}
