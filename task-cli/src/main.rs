//! The `tasks` binary: parse, execute, and turn any error into one line on stderr and an exit
//! code (see `tasks --help`).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use task_cli::cli::{Cli, Command};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr(), "tasks: internal error: {info}");
    }));
    let cli = Cli::parse();
    init_tracing(matches!(cli.command, Command::Supervise));
    match task_cli::commands::execute(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "tasks: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// Diagnostics go to stderr: warnings by default (`TASKS_LOG` overrides), info for the
/// supervisor, whose stderr is its log file. A filter is parsed only when `TASKS_LOG` is set:
/// building one costs more than the rest of a short command's start-up work.
fn init_tracing(supervisor: bool) {
    let default = if supervisor {
        LevelFilter::INFO
    } else {
        LevelFilter::WARN
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    if std::env::var_os("TASKS_LOG").is_some() {
        let filter = EnvFilter::try_from_env("TASKS_LOG")
            .unwrap_or_else(|_| EnvFilter::new(default.to_string()));
        builder.with_env_filter(filter).init();
    } else {
        builder.with_max_level(default).init();
    }
}
