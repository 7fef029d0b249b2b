//! The two executables and how they find each other.
//!
//! `tasks` runs the short commands itself ([`crate::cli::args::ShortCommand`]: `run`, `ps`, `output`,
//! `wait`, `kill`, `status`, `notifications`, `list` on files) and links nothing else, so it
//! starts nearly as fast as `tail`; every other command, and the supervisor, is `tasksd`, installed
//! beside it (`cargo install` installs both), which `tasks` execs with the same arguments.

use std::path::PathBuf;

use task_session::client::{Program, SupervisorCommand};
use task_session::paths::SessionPaths;
use task_session::session::Session;

/// The executable that runs every command and the supervisor.
pub const DAEMON: &str = "tasksd";

/// `tasksd`, beside the running executable (`tasks` or `tasksd` itself).
pub fn daemon_path() -> task_session::Result<PathBuf> {
    daemon().path()
}

fn daemon() -> Program {
    Program::BesideThisExecutable(DAEMON.into())
}

/// The session at `paths`, whose supervisor is `tasksd __supervise`.
pub fn session(paths: SessionPaths) -> task_session::Result<Session> {
    let supervisor = SupervisorCommand {
        program: daemon(),
        args: vec!["__supervise".into()],
    };
    Ok(Session::open(paths)?.with_supervisor(supervisor))
}
