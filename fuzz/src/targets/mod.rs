//! The targets, by crate. Each is `fn(&[u8])` and panics on a finding.

pub mod agent;
pub mod list;
pub mod mcp;
pub mod output;
pub mod remote;
pub mod session;
pub mod workflow;
