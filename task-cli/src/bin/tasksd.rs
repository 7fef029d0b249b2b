//! `tasksd`: every command of `tasks` (the short ones too) and the session supervisor
//! (`tasksd __supervise`, started on demand). `tasks` execs it for every command it does not
//! run itself; it parses, executes, and turns any error into one line on stderr and an exit
//! code (see `tasks --help`).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use task_cli::cli::{Cli, Command};

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr(), "tasks: internal error: {info}");
    }));
    let cli = Cli::parse();
    task_client::cli::logging::init(matches!(cli.command, Command::Supervise));
    match task_cli::commands::execute(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "tasks: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
