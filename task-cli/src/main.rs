//! `tasks`: runs the short commands itself (`run`, `ps`, `output`, `wait`, `kill`, `status`,
//! `notifications`, and `list` on files) and hands every other command line to `tasksd`,
//! installed beside it, by exec (see `task_client::cli::daemon`). It links only what the short
//! commands need, so it starts nearly as fast as `tail` (BENCHMARKS.md): task-client and the
//! crates below it, never this package's library (which links every executor).

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use clap::Parser;
use task_client::cli::args::{ShortCli, ShortCommand};
use task_client::cli::daemon;
use task_client::cli::error::exit;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr(), "tasks: internal error: {info}");
    }));
    let args: Vec<OsString> = std::env::args_os().collect();
    if !is_short(&args) {
        return exec_daemon(&args);
    }
    task_client::cli::logging::init(false);
    let cli = ShortCli::parse_from(args);
    let opener = task_client::cli::list_open::open_files;
    match task_client::cli::commands::execute_short(&cli.globals, cli.command, opener) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "tasks: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// Whether `args` name a short command this executable runs itself: the first word after the
/// global options is one of [`ShortCommand::NAMES`], and a task list is not in a database.
/// Help, the version, and anything unexpected go to `tasksd`, which knows every command.
fn is_short(args: &[OsString]) -> bool {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    let command = loop {
        match words.next() {
            Some(Some("--json")) => {}
            Some(Some("--root" | "--session")) => {
                words.next();
            }
            Some(Some(word)) if word.starts_with("--root=") || word.starts_with("--session=") => {}
            Some(Some(word)) if !word.starts_with('-') => break word,
            _ => return false,
        }
    };
    let database = || {
        args.iter()
            .any(|a| a.to_str().is_some_and(|a| a.starts_with("--store")))
            || std::env::var_os("TASKS_LIST_STORE").is_some_and(|v| !v.is_empty())
    };
    ShortCommand::NAMES.contains(&command) && !(command == "list" && database())
}

/// Replaces this process with `tasksd` and the same arguments; returns only if it cannot.
fn exec_daemon(args: &[OsString]) -> ExitCode {
    let error = match daemon::daemon_path() {
        Ok(path) => {
            let error = std::process::Command::new(&path)
                .arg0("tasks")
                .args(args.iter().skip(1))
                .exec();
            format!(
                "cannot run {}: {error} (tasks and {} are installed together)",
                path.display(),
                daemon::DAEMON
            )
        }
        Err(error) => error.to_string(),
    };
    let _ = writeln!(std::io::stderr(), "tasks: {error}");
    ExitCode::from(exit::SUPERVISOR)
}
