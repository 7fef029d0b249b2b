//! One function per subcommand: parse ids, call the session layer, print.

use std::time::Duration;

use serde_json::json;
use task_core::{TaskId, TaskStatus};

use task_agent::{AgentExecutor, AgentStart};

use crate::cli::{
    AgentArgs, Cli, Command, Globals, KillArgs, MonitorArgs, NotificationsArgs, OutputArgs,
    RunArgs, SendArgs, ShortCommand, WaitArgs,
};
use crate::error::{CliError, Result, exit};
use task_shell::monitor::WsTarget;
use task_shell::{MonitorStart, Monitors, ShellExecutor, ShellStart};

use crate::render::{self, Spinner};
use task_session::notice::{Leased, Notice};
use task_session::paths::SessionPaths;
use task_session::record::TaskRecord;
use task_session::session::{Session, WaitOutcome};

/// Runs the parsed command line (in `tasksd`, which runs every command); returns the process
/// exit code.
pub fn execute(cli: Cli) -> Result<u8> {
    let globals = &cli.globals;
    let paths = || SessionPaths::resolve(globals.root.clone(), globals.session.clone());
    let session = || paths().and_then(crate::daemon::session);
    let json = globals.json;
    match cli.command {
        Command::Short(command) => execute_short(globals, command, crate::list_cmd::open_in),
        Command::Monitor(args) => monitor(&session()?, args, json),
        Command::Agent(args) => agent(&session()?, args, json),
        Command::Workflow(args) => crate::workflow_cmd::execute(&paths()?, args, json),
        Command::Send(args) => send(&session()?, &args, json),
        Command::Team(args) => crate::team_cmd::team(&session()?, args, json),
        Command::Worktree(args) => crate::worktree_cmd::worktree(&paths()?, args, json),
        Command::Dream(args) => crate::team_cmd::dream(&session()?, args, json),
        Command::Top(args) => crate::top::top(session()?, &args),
        Command::Restart(args) => restart(&session()?, &args, json),
        Command::Group(args) => crate::group_cmd::group(&session()?, args, json),
        Command::Strays(args) => crate::strays_cmd::strays(&session()?, &args, json),
        Command::Rm(args) => crate::tidy_cmd::rm(&session()?, &args, json),
        Command::Prune(args) => crate::tidy_cmd::prune(&session()?, &args, json),
        Command::Input(args) => crate::input_cmd::input(&session()?, &args, json),
        Command::Completions(args) => crate::completions_cmd::completions(args.shell),
        Command::Complete { what } => {
            crate::completions_cmd::candidates(paths().map_err(Into::into), what)
        }
        Command::Mcp(args) => crate::mcp_cmd::run(paths()?, args),
        Command::Remote(args) => {
            let (id, wait) = crate::remote_cmd::start(&session()?, args)?;
            started(&session()?, id, wait, json)
        }
        Command::Serve(args) => crate::serve_cmd::run(paths()?, args),
        Command::Supervise => {
            task_session::supervisor::run(paths()?, crate::wiring::standard)?;
            Ok(exit::OK)
        }
    }
}

/// Runs a short command (in `tasks` and in `tasksd`): `open_list` opens the task list it names
/// (only `tasksd`'s reaches a database).
pub fn execute_short(
    globals: &Globals,
    command: ShortCommand,
    open_list: crate::list_cmd::Opener,
) -> Result<u8> {
    let paths = || SessionPaths::resolve(globals.root.clone(), globals.session.clone());
    let session = || paths().and_then(crate::daemon::session);
    let json = globals.json;
    match command {
        ShortCommand::Run(args) => run(&session()?, args, json),
        ShortCommand::Ps(args) => crate::ps_cmd::ps(&session()?, &args, json),
        ShortCommand::Status => crate::status_cmd::status(paths()?, json),
        ShortCommand::Output(args) => output(&session()?, &args, json),
        ShortCommand::Wait(args) => wait(&session()?, &args, json),
        ShortCommand::Kill(args) => kill(&session()?, &args, json),
        ShortCommand::Notifications(args) => notifications(&session()?, &args, json),
        ShortCommand::List(args) => crate::list_cmd::execute(&paths()?, *args, json, open_list),
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

impl crate::cli::ScheduleArgs {
    /// The schedule these options ask for (`--at` read by this machine's clock).
    pub fn to_schedule(&self) -> Result<task_session::queue::Schedule> {
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
            after: parse_ids(&self.after)?,
            at_ms,
            delay_ms: self.delay,
            ready: None,
        })
    }
}

impl crate::cli::ReadyArgs {
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
fn wait_ready(session: &Session, args: &WaitArgs, json: bool) -> Result<u8> {
    use task_session::session::ReadyOutcome;
    let [id] = parse_ids(&args.ids)?[..] else {
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
    if json {
        render::json(&json!({ "id": id, "ready": code == exit::OK, "outcome": word }))?;
    } else {
        render::out(&format!("{id} {word}\n"))?;
    }
    Ok(code)
}

fn parse_ids(inputs: &[String]) -> Result<Vec<TaskId>> {
    inputs
        .iter()
        .map(|input| Ok(Session::parse_id(input)?))
        .collect()
}

fn run(session: &Session, args: RunArgs, json: bool) -> Result<u8> {
    let command = shell_text(&args.command);
    let mut caller = Session::caller()?;
    if args.agent_id.is_some() {
        caller.agent_id = args.agent_id;
    }
    let start = ShellStart {
        description: args.description.unwrap_or_else(|| command.clone()),
        command,
        timeout_ms: args.timeout,
        stdin: args.stdin.into(),
    };
    let mut schedule = args.schedule.to_schedule()?;
    schedule.ready = args.ready.check();
    if let Some(check) = &schedule.ready {
        check.validate()?;
    }
    let id = session.start_with::<ShellExecutor>(start, caller, schedule, args.ends.into())?;
    if args.wait && crate::stream_cmd::streams(args.follow, args.for_model, json) {
        return crate::stream_cmd::follow_then_summarize(session, &[id], true);
    }
    started(session, id, args.wait, json)
}

/// Prints a started task's id; with `wait`, waits for it to end, prints its notification and
/// returns its exit status.
fn started(session: &Session, id: TaskId, wait: bool, json: bool) -> Result<u8> {
    if !wait {
        return print_started(session, id, json);
    }
    if !json {
        render::out(&format!("{id}\n"))?;
    }
    wait_and_report(session, id, json)
}

/// Waits for a started task to end, prints its notification and returns its exit status.
pub(crate) fn wait_and_report(session: &Session, id: TaskId, json: bool) -> Result<u8> {
    let WaitOutcome::Ended(tasks) = wait_with_spinner(session, &[id], None, json)? else {
        return Ok(exit::WAIT_TIMEOUT);
    };
    let task = &tasks[0];
    let report = |notice: Option<&Notice>| {
        if json {
            let value = json!({
                "id": id, "status": task.status(), "exitCode": task.exit_code(),
                "endReason": task.end_reason(),
                "notification": notice.map(Notice::text),
            });
            render::write_out(&format!("{value}\n"))
        } else {
            notice.map_or(Ok(()), |n| render::write_out(&format!("{}\n", n.text())))
        }
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

fn restart(session: &Session, args: &crate::cli::RestartArgs, json: bool) -> Result<u8> {
    let id = session.restart(&Session::parse_id(&args.id)?)?;
    if args.wait && crate::stream_cmd::streams(false, false, json) {
        return crate::stream_cmd::follow_then_summarize(session, &[id], true);
    }
    started(session, id, args.wait, json)
}

fn agent(session: &Session, args: AgentArgs, json: bool) -> Result<u8> {
    let worktree = args.isolation.request();
    let budget = args.budget.budget();
    let (command, prompt) = args
        .runner
        .first_turn(args.command, args.prompt)
        .map_err(|error| crate::CliError::invalid(error.to_string()))?;
    let start = AgentStart {
        command,
        runner: args.runner,
        description: args.description.unwrap_or_else(|| prompt.clone()),
        prompt,
        name: args.name,
        model: None,
        subagent_type: None,
        worktree,
        budget,
    };
    let schedule = args.schedule.to_schedule()?;
    let caller = Session::caller()?;
    let id = session.start_with::<AgentExecutor>(start, caller, schedule, args.ends.into())?;
    started(session, id, args.wait, json)
}

fn send(session: &Session, args: &SendArgs, json: bool) -> Result<u8> {
    let sent = session.send_message(&args.to, &args.message)?;
    if json {
        render::json(&sent.model_result(&args.to))?;
    } else {
        render::out(&format!("{}\n", sent.text(&args.to)))?;
    }
    Ok(if sent.delivered() {
        exit::OK
    } else {
        exit::UNKNOWN_TASK
    })
}

fn monitor(session: &Session, args: MonitorArgs, json: bool) -> Result<u8> {
    // What the monitor watches, which is also its default description.
    let (command, ws, watched) = match args.ws {
        Some(url) => {
            let protocols = args.ws_protocols;
            let ws = WsTarget {
                url: url.clone(),
                protocols,
            };
            ws.validate()
                .map_err(|e| crate::CliError::invalid(e.to_string()))?;
            (None, Some(ws), url)
        }
        None => {
            let command = shell_text(&args.command);
            (Some(command.clone()), None, command)
        }
    };
    let start = MonitorStart {
        description: args.description.unwrap_or(watched),
        command,
        ws,
        timeout_ms: args.timeout_ms,
        persistent: args.persistent,
    };
    let schedule = task_session::queue::Schedule {
        group: args.group,
        ..Default::default()
    };
    let caller = Session::caller()?;
    let id = session.start_with::<Monitors>(
        start,
        caller,
        schedule,
        task_session::protocol::Ends::default(),
    )?;
    print_started(session, id, json)
}

/// Prints the id of a started task (with its output file in `--json`).
pub(crate) fn print_started(session: &Session, id: TaskId, json: bool) -> Result<u8> {
    if json {
        render::json(&json!({ "id": id, "outputFile": session.paths().output(&id) }))?;
    } else {
        render::out(&format!("{id}\n"))?;
    }
    Ok(exit::OK)
}

/// `tasks output`: without `--max-bytes` prints everything from the offset to the end (streamed
/// in chunks, so a huge output never sits in memory whole); with it, one read, and a line on
/// stderr saying how many bytes are left and the `--offset` that continues, so output is never
/// cut silently.
fn output(session: &Session, args: &OutputArgs, json: bool) -> Result<u8> {
    let id = Session::parse_id(&args.id)?;
    let chunk = args
        .max_bytes
        .map_or(task_output::read::DEFAULT_MAX_READ_BYTES, |m| {
            usize::try_from(m).unwrap_or(usize::MAX)
        });
    // An agent-like task's output reads as its conversation (for a model too), but in JSON
    // and by byte ranges.
    let holds_conversation = session.task(&id)?.task.base.task_type.holds_conversation();
    let conversation = holds_conversation && !json;
    if args.for_model {
        let text = if holds_conversation {
            crate::transcript::for_model(session, &id)?
        } else {
            session.output_for_model(&id)?
        };
        return if json {
            render::json(&json!({ "id": id, "output": text }))
        } else {
            render::out(&text)
        }
        .map(|()| exit::OK);
    }
    if let Some(lines) = args.tail {
        if conversation {
            return crate::transcript::print_last(session, &id, lines).map(|()| exit::OK);
        }
        let lines = session.tail(&id, lines)?;
        return if json {
            render::json(&json!({ "id": id, "lines": lines }))
        } else {
            render::out(&lines.iter().map(|l| format!("{l}\n")).collect::<String>())
        }
        .map(|()| exit::OK);
    }
    let offset = args.offset.unwrap_or(0);
    let conversation = conversation && args.max_bytes.is_none();
    if args.follow {
        if conversation && offset == 0 {
            return crate::transcript::follow(session, &id, offset, chunk).map(|()| exit::OK);
        }
        return follow(session, &id, offset, chunk);
    }
    if conversation && offset == 0 {
        return crate::transcript::print_whole(session, &id).map(|()| exit::OK);
    }
    let new_offset = if json {
        let delta = session.read_text_delta(&id, offset, chunk)?;
        let status = session.task(&id)?.status();
        let remaining = output_left(session, &id, delta.new_offset)?;
        render::json(&json!({
            "id": id, "offset": offset, "newOffset": delta.new_offset,
            "remainingBytes": remaining, "status": status, "output": delta.text,
        }))?;
        delta.new_offset
    } else if args.max_bytes.is_some() {
        let delta = session.read_delta(&id, offset, chunk)?;
        render::out_bytes(&delta.bytes)?;
        delta.new_offset
    } else {
        print_to_end(session, &id, offset, chunk)?
    };
    let remaining = output_left(session, &id, new_offset)?;
    if remaining > 0 {
        render::warn(&format!(
            "{remaining} more bytes of output; continue with --offset {new_offset}"
        ));
    }
    Ok(exit::OK)
}

/// Prints the output of `id` from `offset` to its end as it is now, `chunk` bytes at a time;
/// returns the offset reached.
fn print_to_end(session: &Session, id: &TaskId, mut offset: u64, chunk: usize) -> Result<u64> {
    loop {
        let delta = session.read_delta(id, offset, chunk)?;
        if delta.bytes.is_empty() {
            return Ok(offset);
        }
        render::out_bytes(&delta.bytes)?;
        offset = delta.new_offset;
    }
}

/// How many bytes of the output of `id` lie past `offset` now (0 when there is no file).
fn output_left(session: &Session, id: &TaskId, offset: u64) -> Result<u64> {
    let len = std::fs::metadata(session.output_path(id)).map_or(0, |meta| meta.len());
    Ok(len.saturating_sub(offset))
}

/// Prints output as it grows until the task is terminal and everything was printed.
pub(crate) fn follow(
    session: &Session,
    id: &TaskId,
    mut offset: u64,
    max_bytes: usize,
) -> Result<u8> {
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

/// Waits for `ids`, with a spinner on stderr when it is a terminal (and not `--json`).
fn wait_with_spinner(
    session: &Session,
    ids: &[TaskId],
    timeout: Option<Duration>,
    json: bool,
) -> Result<WaitOutcome> {
    let mut spinner = Spinner::new(!json);
    let outcome = session.wait(ids, timeout, |tasks| {
        let live = tasks.iter().filter(|t| !t.is_terminal()).count();
        spinner.tick(&format!("waiting for {live} task(s)"));
    });
    spinner.clear();
    Ok(outcome?)
}

fn wait(session: &Session, args: &WaitArgs, json: bool) -> Result<u8> {
    if args.ready {
        return wait_ready(session, args, json);
    }
    let ids = parse_ids(&args.ids)?;
    if args.follow && !json {
        return crate::stream_cmd::follow_then_summarize(session, &ids, !args.no_deliver);
    }
    let outcome = wait_with_spinner(session, &ids, args.timeout.map(Duration::from_millis), json)?;
    let (tasks, code) = match &outcome {
        WaitOutcome::Ended(tasks) => (
            tasks,
            tasks.iter().map(exit_code).find(|&c| c != 0).unwrap_or(0),
        ),
        WaitOutcome::TimedOut(tasks) => (tasks, exit::WAIT_TIMEOUT),
    };
    // The completions it reports are delivered, as `run --wait` delivers its task's: claimed,
    // printed, then marked (a `wait` killed before it printed leaves them deliverable).
    let mut leased = Leased::new(session.paths());
    for task in tasks.iter().filter(|_| !args.no_deliver) {
        leased.extend(session.lease_completion(task)?);
    }
    leased.record()?;
    let delivered = |id: TaskId| leased.notices().find(|n| n.task_id() == id);
    let text = if json {
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
        format!("{}\n", json!({ "timedOut": timed_out, "tasks": items }))
    } else {
        tasks
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
            .collect()
    };
    if render::write_out(&text)
        .map(|()| true)
        .or_else(ignore_closed_pipe)?
    {
        leased.mark_delivered();
    }
    Ok(code)
}

/// A reader that closed its end of the pipe is not an error (`tasks wait | head -1`); what
/// was not written is not delivered. True when the write went through.
fn ignore_closed_pipe(error: std::io::Error) -> Result<bool> {
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

fn kill(session: &Session, args: &KillArgs, json: bool) -> Result<u8> {
    let ids = parse_ids(&args.ids)?;
    if args.all_strays {
        return crate::strays_cmd::kill_strays(session, None, json);
    }
    if args.strays {
        return crate::strays_cmd::kill_strays(session, Some(&ids), json);
    }
    let reports = session.kill(&ids)?;
    if json {
        render::json(&reports)?;
    } else {
        render::out(
            &reports
                .iter()
                .map(|r| format!("{} {}\n", r.id, r.result.as_str()))
                .collect::<String>(),
        )?;
    }
    Ok(exit::OK)
}

fn notifications(session: &Session, args: &NotificationsArgs, json: bool) -> Result<u8> {
    use crate::stream_cmd::{NoticeFormat, notice_text};
    let format = NoticeFormat::choose(args.format, json, args.for_model);
    loop {
        // Marked delivered only once written out: a reader killed before that leaves them
        // deliverable again, with the same keys.
        session.deliver_notifications(|notices| {
            let text: String = notices.iter().map(|n| notice_text(n, format)).collect();
            render::write_out(&text)
        })?;
        if !args.follow {
            return Ok(exit::OK);
        }
        std::thread::sleep(session.config().poll_interval);
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
