//! Background shell commands and monitors with real process control for an AI-agent task system.
#![deny(missing_docs)]
