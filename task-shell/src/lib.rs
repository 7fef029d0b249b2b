//! Background shell commands and monitors with real process control for an AI-agent task system.
#![deny(missing_docs)]

mod book;
pub mod config;
pub mod error;
mod executor;
pub mod lines;
pub mod monitor;
mod output;
pub mod process;
pub mod prompt;
pub mod shell;
mod supervise;
pub mod watchdog;

pub use book::monitor_event_summary;
pub use config::ShellConfig;
pub use error::ShellError;
pub use executor::{ShellExecutor, TaskHandle};
pub use supervise::Outcome;
