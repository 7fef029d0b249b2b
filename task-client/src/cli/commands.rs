//! The short commands that are one function each (`run`, `output`, `wait`, `kill`,
//! `notifications`) and [`execute_short`], which runs any short command: parse ids, call the
//! session layer, print.

use std::time::Duration;

use serde_json::json;
use task_core::TaskId;
use task_protocol::start::ShellStart;

use crate::cli::args::{
    Globals, KillArgs, NotificationsArgs, OutputArgs, RunArgs, ShortCommand, WaitArgs,
};
use crate::cli::error::{CliError, Result, exit};

use crate::cli::printer::Printer;
use crate::cli::render;
use crate::cli::report::{
    exit_code, ignore_closed_pipe, print_kills, print_started, wait_and_report, wait_with_spinner,
};
use task_session::changes::RecordChanges;
use task_session::notice::{Leased, Notice};
use task_session::paths::SessionPaths;
use task_session::session::{Session, WaitOutcome};

/// Runs a short command (in `tasks` and in `tasksd`): `open_list` opens the task list it names
/// (only `tasksd`'s reaches a database).
///
/// # Example
///
/// `tasks --root DIR list --lists-root DIR --list api create -q "Write the API"`, as the
/// `tasks` executable runs it: the list is made in the files of the lists root, and no
/// supervisor is started.
///
/// ```
/// use clap::Parser;
/// use task_client::cli::args::ShortCli;
/// use task_client::cli::{commands, list_open};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let root = dir.path().to_str().ok_or("a temporary directory that is not UTF-8")?;
/// let words = ["tasks", "--root", root, "list", "--lists-root", root, "--list", "api"];
/// let words = words.into_iter().chain(["create", "-q", "Write the API"]);
/// let cli = ShortCli::try_parse_from(words)?;
/// let code = commands::execute_short(&cli.globals, cli.command, list_open::open_files)?;
/// assert_eq!(code, 0);
/// assert!(dir.path().join("api/1.json").is_file());
/// # Ok(())
/// # }
/// ```
pub fn execute_short(
    globals: &Globals,
    command: ShortCommand,
    open_list: crate::cli::list_open::Opener,
) -> Result<u8> {
    let paths = || SessionPaths::resolve(globals.root.clone(), globals.session.clone());
    let session = || paths().and_then(crate::cli::daemon::session);
    let printer = Printer::new(globals.json);
    match command {
        ShortCommand::Run(args) => run(&session()?, *args, printer),
        ShortCommand::Ps(args) => crate::cli::ps_cmd::ps(&session()?, &args, printer),
        ShortCommand::Status => crate::cli::status_cmd::status(paths()?, printer),
        ShortCommand::Output(args) => output(&session()?, &args, printer),
        ShortCommand::Wait(args) => wait(&session()?, &args, printer),
        ShortCommand::Kill(args) => kill(&session()?, &args, printer),
        ShortCommand::Notifications(args) => notifications(&session()?, &args, printer),
        ShortCommand::List(args) => {
            crate::cli::list_cmd::execute(&paths()?, *args, printer, open_list)
        }
    }
}

/// Turns `tasks run -- …` arguments into shell text: one argument is taken as shell text
/// (`tasks run -- 'make | tee log'`); several are quoted word by word, so nothing in them is
/// interpreted by the shell.
pub fn shell_text(words: &[String]) -> String {
    match words {
        [single] => single.clone(),
        _ => words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl crate::cli::args::ScheduleArgs {
    /// The schedule these options ask for (`--at` read by this machine's clock; each `--after`
    /// task resolved in `session` as every id a person gives: [`Session::resolve`]).
    pub fn to_schedule(&self, session: &Session) -> Result<task_session::queue::Schedule> {
        let at_ms = self
            .at
            .as_deref()
            .map(|at| task_session::queue::parse_at(at, task_core::now_ms()))
            .transpose()
            .map_err(|e| CliError::invalid(format!("--at {e}")))?;
        if let Some(group) = &self.group {
            task_session::queue::validate_group(group)?;
        }
        Ok(task_session::queue::Schedule {
            group: self.group.clone(),
            priority: self.priority,
            after: session.resolve_all(&self.after)?,
            at_ms,
            delay_ms: self.delay,
            ready: None,
        })
    }
}

impl crate::cli::args::ReadyArgs {
    /// The readiness check asked for, if any.
    pub fn check(&self) -> Option<task_session::ready::ReadyCheck> {
        use task_session::ready::ReadyCheck;
        if let Some(pattern) = &self.pattern {
            return Some(ReadyCheck::Line {
                pattern: pattern.clone(),
            });
        }
        if let Some(port) = self.ready_port {
            return Some(ReadyCheck::Port { port });
        }
        self.ready_http.clone().map(|url| ReadyCheck::Http { url })
    }
}

/// `tasks wait --ready ID`.
fn wait_ready(session: &Session, args: &WaitArgs, printer: Printer) -> Result<u8> {
    use task_session::session::ReadyOutcome;
    let [id] = session.resolve_all(&args.ids)?[..] else {
        return Err(CliError::invalid("wait --ready takes one task id".into()));
    };
    let outcome = session.wait_ready(&id, args.timeout.map(Duration::from_millis))?;
    let (word, code) = match &outcome {
        ReadyOutcome::Ready => ("ready".to_owned(), exit::OK),
        ReadyOutcome::Ended(task) => (
            format!("ended before it was ready ({})", task.status().as_str()),
            1,
        ),
        ReadyOutcome::TimedOut => ("not ready yet".to_owned(), exit::WAIT_TIMEOUT),
    };
    let value = json!({ "id": id, "ready": code == exit::OK, "outcome": word });
    printer.emit(&value, &format!("{id} {word}\n"))?;
    Ok(code)
}

fn run(session: &Session, args: RunArgs, printer: Printer) -> Result<u8> {
    let command = shell_text(&args.command);
    let mut caller = Session::caller()?;
    if args.agent_id.is_some() {
        caller.agent_id = args.agent_id;
    }
    let placement = args.on.placement();
    let start = ShellStart {
        description: args.description.unwrap_or_else(|| command.clone()),
        command,
        timeout_ms: args.timeout,
        stdin: args.stdin.into(),
        placement,
    };
    let mut schedule = args.schedule.to_schedule(session)?;
    schedule.ready = args.ready.check();
    if let Some(check) = &schedule.ready {
        task_session::ready::validate(check)?;
    }
    let id = session.start_with(start, caller, schedule, args.ends.into())?;
    if args.wait && crate::cli::stream_cmd::streams(args.follow, args.for_model, printer) {
        return crate::cli::stream_cmd::follow_then_summarize(session, &[id], true);
    }
    started(session, id, args.wait, printer)
}

/// Prints a started task's id; with `wait`, waits for it to end, prints its notification and
/// returns its exit status.
pub fn started(session: &Session, id: TaskId, wait: bool, printer: Printer) -> Result<u8> {
    if !wait {
        return print_started(session, id, printer);
    }
    printer.text(&format!("{id}\n"))?;
    wait_and_report(session, id, printer)
}

/// Prints the stderr kept beside the transcript of agent `id` (its output file is a symlink
/// to the transcript).
fn print_stderr(session: &Session, id: &TaskId, printer: Printer) -> Result<u8> {
    let output = session.output_path(id);
    let none = || {
        crate::cli::error::CliError::invalid(format!(
            "task {id} keeps no stderr: only agents and teammates do"
        ))
    };
    let transcript = std::fs::read_link(&output).map_err(|_| none())?;
    let transcript = output
        .parent()
        .map_or(transcript.clone(), |dir| dir.join(&transcript));
    let path = task_output::transcript::stderr_path(&transcript);
    let limit = task_output::transcript::MAX_KEPT_STDERR_BYTES + 4096;
    let text = match task_output::open::read_untrusted(&path, limit) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(task_output::OutputError::NotFound { .. }) => String::new(),
        Err(error) => {
            return Err(crate::cli::error::CliError::io(
                "read",
                &path,
                std::io::Error::other(error),
            ));
        }
    };
    printer
        .emit(&json!({ "id": id, "stderr": text }), &text)
        .map(|()| exit::OK)
}

/// `tasks output`: without `--max-bytes` prints everything from the offset to the end (streamed
/// in chunks, so a huge output never sits in memory whole); with it, one read, and a line on
/// stderr saying how many bytes are left and the `--offset` that continues, so output is never
/// cut silently.
fn output(session: &Session, args: &OutputArgs, printer: Printer) -> Result<u8> {
    let id = session.resolve(&args.id)?;
    let chunk = args
        .max_bytes
        .map_or(task_output::read::DEFAULT_MAX_READ_BYTES, |m| {
            usize::try_from(m).unwrap_or(usize::MAX)
        });
    // An agent-like task's output reads as its conversation (for a model too), but in JSON
    // and by byte ranges.
    let task = session.task(&id)?;
    if args.stderr {
        return print_stderr(session, &id, printer);
    }
    let holds_conversation = task.task.base.task_type.holds_conversation();
    let conversation = holds_conversation && !printer.is_json();
    if args.for_model {
        let text = if holds_conversation {
            crate::cli::transcript::for_model(session, &id)?
        } else {
            session.output_for_model(&id)?
        };
        let value = json!({ "id": id, "output": text });
        return printer.emit(&value, &text).map(|()| exit::OK);
    }
    if let Some(lines) = args.tail {
        if conversation {
            return crate::cli::transcript::print_last(session, &id, lines).map(|()| exit::OK);
        }
        let lines = session.tail_of(&task, lines)?;
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let value = json!({ "id": id, "lines": lines });
        return printer.emit(&value, &text).map(|()| exit::OK);
    }
    let offset = args.offset.unwrap_or(0);
    let conversation = conversation && args.max_bytes.is_none();
    if args.follow {
        if conversation {
            return crate::cli::stream_cmd::follow_output(session, &id, offset, chunk)
                .map(|()| exit::OK);
        }
        return crate::cli::stream_cmd::follow(session, &id, offset, chunk);
    }
    if conversation && offset == 0 {
        return crate::cli::transcript::print_whole(session, &id).map(|()| exit::OK);
    }
    let new_offset = if printer.is_json() {
        let delta = session.read_text_delta(&id, offset, chunk)?;
        let status = session.task(&id)?.status();
        let remaining = output_left(session, &id, delta.new_offset)?;
        let value = json!({
            "id": id, "offset": offset, "newOffset": delta.new_offset,
            "remainingBytes": remaining, "status": status, "output": delta.text,
        });
        printer.emit(&value, "")?;
        delta.new_offset
    } else if args.max_bytes.is_some() {
        let delta = session.read_delta(&id, offset, chunk)?;
        render::out_bytes(&delta.bytes)?;
        delta.new_offset
    } else {
        crate::cli::stream_cmd::print_to_end(session, &id, offset, chunk)?
    };
    let remaining = output_left(session, &id, new_offset)?;
    if remaining > 0 {
        render::warn(&format!(
            "{remaining} more bytes of output; continue with --offset {new_offset}"
        ));
    }
    Ok(exit::OK)
}

/// How many bytes of the output of `id` lie past `offset` now (0 when there is no file).
fn output_left(session: &Session, id: &TaskId, offset: u64) -> Result<u64> {
    let len = std::fs::metadata(session.output_path(id)).map_or(0, |meta| meta.len());
    Ok(len.saturating_sub(offset))
}

fn wait(session: &Session, args: &WaitArgs, printer: Printer) -> Result<u8> {
    if args.ready {
        return wait_ready(session, args, printer);
    }
    let ids = match &args.group {
        Some(group) => group_members(session, group, true)?,
        None => session.resolve_all(&args.ids)?,
    };
    if args.follow && !printer.is_json() {
        return crate::cli::stream_cmd::follow_then_summarize(session, &ids, !args.no_deliver);
    }
    let outcome = wait_with_spinner(
        session,
        &ids,
        args.timeout.map(Duration::from_millis),
        printer,
    )?;
    let (tasks, code) = match &outcome {
        WaitOutcome::Ended(tasks) => (
            tasks,
            tasks.iter().map(exit_code).find(|&c| c != 0).unwrap_or(0),
        ),
        WaitOutcome::TimedOut(tasks) => (tasks, exit::WAIT_TIMEOUT),
    };
    // The completions it reports are delivered, as `run --wait` delivers its task's: claimed,
    // printed, then marked (a `wait` killed before it printed leaves them deliverable).
    let mut leased = if args.no_deliver {
        Leased::new(session.paths())
    } else {
        session.lease_of(tasks, false)?
    };
    leased.record()?;
    let delivered = |id: TaskId| leased.notices().find(|n| n.task_id() == id);
    let items: Vec<_> = tasks
        .iter()
        .map(|t| {
            json!({
                "id": t.id(), "status": t.status(), "exitCode": t.exit_code(),
                "endReason": t.end_reason(), "exit": exit_code(t),
                "notification": delivered(t.id()).map(Notice::text),
            })
        })
        .collect();
    let timed_out = matches!(outcome, WaitOutcome::TimedOut(_));
    let value = json!({ "timedOut": timed_out, "tasks": items });
    let text: String = tasks
        .iter()
        .map(|t| {
            // Why it ended, unless the status already says it all.
            let why = t
                .end_reason()
                .filter(|reason| **reason != task_core::EndReason::Killed)
                .map(|reason| format!(" ({})", reason.short()))
                .unwrap_or_default();
            format!("{} {}{why}\n", t.id(), t.status().as_str())
        })
        .collect();
    if printer
        .deliver(&value, &text)
        .map(|()| true)
        .or_else(ignore_closed_pipe)?
    {
        leased.mark_delivered();
    }
    Ok(code)
}

/// The tasks of `group` a command acts on, oldest first: the live ones, and with
/// `undelivered` also those that ended and whose completion was not delivered yet (what
/// `tasks ps --group` lists). None is not an error: a line on stderr says so.
fn group_members(session: &Session, group: &str, undelivered: bool) -> Result<Vec<TaskId>> {
    let ids: Vec<TaskId> = session
        .group_tasks(group)?
        .iter()
        .filter(|task| !task.is_terminal() || (undelivered && !task.is_settled(session.paths())))
        .map(task_session::record::TaskRecord::id)
        .collect();
    if ids.is_empty() {
        let what = if undelivered {
            "live or undelivered"
        } else {
            "live"
        };
        render::warn(&format!("no {what} task in group {group:?}"));
    }
    Ok(ids)
}

fn kill(session: &Session, args: &KillArgs, printer: Printer) -> Result<u8> {
    let ids = match &args.group {
        Some(group) => group_members(session, group, false)?,
        None => session.resolve_all(&args.ids)?,
    };
    if ids.is_empty() && !args.all_strays {
        // A group with nothing live: nothing to kill.
        return print_kills(&[], printer);
    }
    if args.all_strays {
        return crate::cli::strays_cmd::kill_strays(session, None, printer);
    }
    if args.strays {
        return crate::cli::strays_cmd::kill_strays(session, Some(&ids), printer);
    }
    print_kills(&session.kill(&ids)?, printer)
}

fn notifications(session: &Session, args: &NotificationsArgs, printer: Printer) -> Result<u8> {
    use crate::cli::args::NoticeFormat;
    use crate::cli::stream_cmd::notice_text;
    let format = NoticeFormat::choose(args.format, printer, args.for_model);
    let write_out = |notices: &[&Notice]| {
        let text: String = notices.iter().map(|n| notice_text(n, format)).collect();
        render::write_out(&text)
    };
    // Following, a record renamed into place or an event published wakes this reader at once
    // (the watch is made before each full look, so no rename in between is missed), and only
    // the tasks whose records changed are read, what they make deliverable claimed, written
    // out and committed together (a burst of ends is one claim and one write). It looks at
    // every record once a rescan interval, for what no file change announces (a claim whose
    // reader died), and every poll period where there is no watch (no task started yet): a
    // whole look every poll period cost a follower of 1 000 live tasks a tenth of a core.
    let mut changes = None;
    loop {
        if args.follow && changes.is_none() {
            changes = RecordChanges::watch(session.paths()).ok();
        }
        // Marked delivered only once written out: a reader killed before that leaves them
        // deliverable again, with the same keys.
        session.deliver_notifications(write_out)?;
        if !args.follow {
            return Ok(exit::OK);
        }
        let Some(watch) = &changes else {
            std::thread::sleep(session.config().poll_interval);
            continue;
        };
        let until = std::time::Instant::now() + session.config().rescan_interval;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match watch.wait(left) {
                Ok(changed) if changed.lost => break,
                Ok(changed) if changed.any() => {
                    // A record that cannot be read now is left to the full look.
                    let Ok((_, leased)) = session.lease_changed(&changed) else {
                        break;
                    };
                    leased.deliver(write_out)?;
                }
                Ok(_) => break,
                Err(error) => {
                    tracing::debug!(%error, "record watch failed: polling");
                    changes = None;
                    std::thread::sleep(left);
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_is_shell_text_and_several_are_quoted() {
        assert_eq!(shell_text(&["echo a | wc -c".into()]), "echo a | wc -c");
        let words = ["printf".into(), r"%s\n".into(), "it's $HOME".into()];
        assert_eq!(shell_text(&words), r"printf '%s\n' 'it'\''s $HOME'");
        assert_eq!(shell_text(&["true".into(), "".into()]), "true ''");
    }
}
