//! Background shell commands and monitors with real process control for an AI-agent task system.
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod lines;
pub mod process;
pub mod prompt;
pub mod watchdog;

pub use config::ShellConfig;
pub use error::ShellError;
