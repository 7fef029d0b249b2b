//! Diagnostics of both executables: to stderr, warnings by default (`TASKS_LOG` overrides),
//! info for the supervisor, whose stderr is its log file.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// Installs the subscriber. A filter is parsed only when `TASKS_LOG` is set: building one costs
/// more than the rest of a short command's start-up work.
pub fn init(supervisor: bool) {
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
