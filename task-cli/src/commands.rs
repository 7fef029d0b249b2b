//! One function per long subcommand: parse ids, call the session layer, print. The short
//! commands are task-client's ([`task_client::cli::commands`]).

use task_agent::{AgentStart, RunnerFormatExt};
use task_client::cli::commands::{execute_short, shell_text, started};
use task_client::cli::report::print_started;

use crate::cli::{AgentArgs, Cli, Command, MonitorArgs, SendArgs};
use crate::error::{CliError, Result, exit};
use task_protocol::start::{MonitorStart, WsTarget};

use crate::printer::Printer;
use task_session::paths::SessionPaths;
use task_session::session::Session;

/// Runs the parsed command line (in `tasksd`, which runs every command); returns the process
/// exit code.
pub fn execute(cli: Cli) -> Result<u8> {
    let globals = &cli.globals;
    let paths = || SessionPaths::resolve(globals.root.clone(), globals.session.clone());
    let session = || paths().and_then(crate::daemon::session);
    let printer = Printer::new(globals.json);
    match cli.command {
        Command::Short(command) => execute_short(globals, command, crate::list_open::open_in),
        Command::Monitor(args) => monitor(&session()?, args, printer),
        Command::Agent(args) => agent(&session()?, args, printer),
        Command::Workflow(args) => crate::workflow_cmd::execute(&paths()?, args, printer),
        Command::Send(args) => send(&session()?, &args, printer),
        Command::Team(args) => crate::team_cmd::team(&session()?, args, printer),
        Command::Worktree(args) => crate::worktree_cmd::worktree(&paths()?, args, printer),
        Command::Dream(args) => crate::team_cmd::dream(&session()?, args, printer),
        Command::Top(args) => crate::top::top(session()?, &args),
        Command::Restart(args) => restart(&session()?, &args, printer),
        Command::Group(args) => crate::group_cmd::group(&session()?, args, printer),
        Command::Strays(args) => {
            task_client::cli::strays_cmd::strays(&session()?, args.id.as_deref(), printer)
        }
        Command::Rm(args) => crate::tidy_cmd::rm(&session()?, &args, printer),
        Command::Prune(args) => crate::tidy_cmd::prune(&session()?, &args, printer),
        Command::Input(args) => crate::input_cmd::input(&session()?, &args, printer),
        Command::Completions(args) => crate::completions_cmd::completions(args.shell),
        Command::Complete { what } => {
            crate::completions_cmd::candidates(paths().map_err(Into::into), what)
        }
        Command::Mcp(args) => crate::mcp_cmd::run(paths()?, args),
        Command::Remote(args) => {
            let (id, wait) = crate::remote_cmd::start(&session()?, args)?;
            started(&session()?, id, wait, printer)
        }
        Command::Serve(args) => crate::serve_cmd::run(paths()?, args),
        Command::Supervise => {
            task_session::supervisor::run(paths()?, crate::wiring::standard)?;
            Ok(exit::OK)
        }
    }
}

fn restart(session: &Session, args: &crate::cli::RestartArgs, printer: Printer) -> Result<u8> {
    let id = session.restart(&session.resolve(&args.id)?)?;
    if args.wait && crate::stream_cmd::streams(false, false, printer) {
        return crate::stream_cmd::follow_then_summarize(session, &[id], true);
    }
    started(session, id, args.wait, printer)
}

fn agent(session: &Session, args: AgentArgs, printer: Printer) -> Result<u8> {
    let worktree = args.isolation.request();
    let budget = args.budget.budget();
    let (command, prompt) = args
        .runner
        .first_turn(args.command, args.prompt)
        .map_err(|error| crate::error::agent_command_error(&error))?;
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
        placement: args.on.placement(),
    };
    let schedule = args.schedule.to_schedule(session)?;
    let caller = Session::caller()?;
    let id = session.start_with(start, caller, schedule, args.ends.into())?;
    // A person at a terminal reads the conversation and how it ended; a model or a script the
    // notification.
    if args.wait && crate::stream_cmd::streams(false, false, printer) {
        return crate::stream_cmd::follow_then_summarize(session, &[id], true);
    }
    started(session, id, args.wait, printer)
}

/// A message to a task; one it did not take is an error (a person reads it on stderr; `--json`
/// has the reference's result on stdout), unknown-task when the address names none.
fn send(session: &Session, args: &SendArgs, printer: Printer) -> Result<u8> {
    let sent = session.send_message(&args.to, &args.message)?;
    let refused = (!sent.delivered()).then(|| CliError::MessageRefused {
        reason: sent.text(&args.to),
        unknown: sent.addressed_nobody(),
    });
    match refused {
        Some(error) if !printer.is_json() => Err(error),
        refused => {
            let text = format!("{}\n", sent.text(&args.to));
            printer.emit(&sent.model_result(&args.to), &text)?;
            Ok(refused.map_or(exit::OK, |error| error.exit_code()))
        }
    }
}

fn monitor(session: &Session, args: MonitorArgs, printer: Printer) -> Result<u8> {
    // What the monitor watches, which is also its default description.
    let (command, ws, watched) = match args.ws {
        Some(url) => {
            let protocols = args.ws_protocols;
            let ws = WsTarget {
                url: url.clone(),
                protocols,
            };
            task_shell::monitor::ws::validate(&ws)
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
    let id = session.start_with(
        start,
        caller,
        schedule,
        task_session::protocol::Ends::default(),
    )?;
    print_started(session, id, printer)
}
