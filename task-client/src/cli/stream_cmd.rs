//! Following tasks like a person: their output streamed as it is written (an agent's as its
//! conversation), then one line saying how each ended (`tasks run|agent --wait` on a terminal,
//! `run --wait --follow`, `tasks wait --follow`);
//! notifications as readable lines (`tasks notifications --format`).

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::json;
use task_core::{TaskId, TaskStatus};

use crate::cli::args::NoticeFormat;
use crate::cli::error::{Result, exit};
use crate::cli::printer::Printer;
use crate::cli::render;
use crate::cli::report::exit_code;
use task_session::notice::Notice;
use task_session::record::TaskRecord;
use task_session::session::Session;

impl NoticeFormat {
    /// The format asked for, else JSON with `--json`, XML for a model or off a terminal, and
    /// text on a terminal.
    pub fn choose(asked: Option<NoticeFormat>, printer: Printer, for_model: bool) -> NoticeFormat {
        match asked {
            Some(format) => format,
            None if printer.is_json() => NoticeFormat::Json,
            None if for_model || !std::io::stdout().is_terminal() => NoticeFormat::Xml,
            None => NoticeFormat::Text,
        }
    }
}

/// `notice` as `format` prints it, one line (an envelope for `Xml`).
pub fn notice_text(notice: &Notice, format: NoticeFormat) -> String {
    match format {
        NoticeFormat::Json => {
            let value = json!({
                "key": notice.key, "taskId": notice.task_id(), "priority": notice.priority,
                "atMs": notice.at_ms, "text": notice.text(), "notification": notice.notification,
            });
            format!("{value}\n")
        }
        NoticeFormat::Xml => format!("{}\n", notice.text()),
        NoticeFormat::Text => format!("{}\n", notice_line(notice)),
    }
}

/// `b1234abcd completed: Background command "make" completed (exit code 0)`; an event says
/// what happened instead of a status.
pub fn notice_line(notice: &Notice) -> String {
    let n = &notice.notification;
    let what = match (&n.status, &n.event) {
        (Some(status), _) => status.as_str().to_owned(),
        (None, Some(_)) => "event".to_owned(),
        (None, None) => "update".to_owned(),
    };
    let detail = n.event.as_deref().unwrap_or(&n.summary);
    format!("{} {what}: {}", n.task_id, render::one_line(detail, 200))
}

/// Whether `run --wait` streams the output (a terminal, or `--follow`) rather than printing the
/// id and the notification a model reads.
pub fn streams(follow: bool, for_model: bool, printer: Printer) -> bool {
    !printer.is_json() && !for_model && (follow || std::io::stdout().is_terminal())
}

/// Streams the output of each of `ids` in turn until it ended, then prints one summary line
/// per task on stderr; delivers their completions with it (the person saw them) when
/// `deliver`. Returns the exit status `wait` gives.
pub fn follow_then_summarize(session: &Session, ids: &[TaskId], deliver: bool) -> Result<u8> {
    let mut code = 0;
    for id in ids {
        follow_output(session, id, 0, task_output::read::DEFAULT_MAX_READ_BYTES)?;
        let task = session.task(id)?;
        // The person saw it end: its completion is delivered with the summary line.
        let line = summary(&task);
        let said = match deliver {
            true => session.deliver_completion(&task, |_| {
                render::warn_plain(&line);
                Ok(())
            })?,
            false => None,
        };
        if said.is_none() {
            render::warn_plain(&line);
        }
        if code == 0 {
            code = exit_code(&task);
        }
    }
    Ok(code)
}

/// One line saying how a task ended: `✓ b1234abcd completed in 1.2s: make`,
/// `✗ b1234abcd failed (exit 2) after 3m 4s: make test`.
pub fn summary(task: &TaskRecord) -> String {
    let base = &task.task.base;
    let mark = match task.status() {
        TaskStatus::Completed => "✓",
        TaskStatus::Pending | TaskStatus::Running => "…",
        _ => "✗",
    };
    let why = task
        .end_reason()
        .filter(|_| task.status() != TaskStatus::Completed)
        .map(|reason| format!(" ({})", reason.short()))
        .unwrap_or_default();
    format!(
        "{mark} {} {}{why} {}: {}",
        base.id,
        task.status().as_str(),
        how_long(base, task_core::now_ms()),
        render::one_line(&base.description, 60)
    )
}

/// How long a task ran, as the summary line and `tasks top` word it: `in 1.2s` (completed),
/// `after 3m 4s` (failed, killed), `for 2.0s` (running); a task still waiting says how long
/// it has waited (`for 4.1s`, its status reading `pending`) and one that ended without ever
/// running says so (`before it ran`). Never the time it spent queued as run time.
pub fn how_long(base: &task_core::TaskStateBase, now: u64) -> String {
    let took = |ms: u64| crate::cli::ps_cmd::took_text(Duration::from_millis(ms));
    match (base.status, base.run_ms(now)) {
        (TaskStatus::Completed, Some(ms)) => format!("in {}", took(ms)),
        (TaskStatus::Running, Some(ms)) => format!("for {}", took(ms)),
        (TaskStatus::Pending | TaskStatus::Running, _) => {
            format!("for {}", took(now.saturating_sub(base.start_time)))
        }
        (_, Some(ms)) => format!("after {}", took(ms)),
        (_, None) => "before it ran".to_owned(),
    }
}

/// Follows the output of `id` from byte `offset` until it ended, as a person reads it: the
/// conversation of a task that holds one (from its start), else the bytes as written.
pub fn follow_output(session: &Session, id: &TaskId, offset: u64, chunk: usize) -> Result<()> {
    let conversation = session.task(id)?.task.base.task_type.holds_conversation();
    if conversation && offset == 0 {
        return crate::cli::transcript::follow(session, id, offset, chunk);
    }
    follow(session, id, offset, chunk).map(drop)
}

/// Prints output as it grows until the task is terminal and everything was printed.
pub fn follow(session: &Session, id: &TaskId, mut offset: u64, max_bytes: usize) -> Result<u8> {
    loop {
        // Look at the status before reading, so the last read sees everything written before
        // the task ended.
        let ended = session.task(id)?.is_terminal();
        offset = print_to_end(session, id, offset, max_bytes)?;
        if ended {
            return Ok(exit::OK);
        }
        std::thread::sleep(session.config().poll_interval);
    }
}

/// Prints the output of `id` from `offset` to its end as it is now, `chunk` bytes at a time;
/// returns the offset reached.
pub fn print_to_end(session: &Session, id: &TaskId, mut offset: u64, chunk: usize) -> Result<u64> {
    loop {
        let delta = session.read_delta(id, offset, chunk)?;
        if delta.bytes.is_empty() {
            return Ok(offset);
        }
        render::out_bytes(&delta.bytes)?;
        offset = delta.new_offset;
    }
}
