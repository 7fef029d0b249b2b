//! The event streams agent CLIs print, read: Claude Code's stream-json, `codex exec --json` and
//! the Gemini CLI's stream-json, one JSON object a line (SPEC §15), parsed into one normalised
//! [`AgentEvent`] stream, with each CLI's token accounting (SPEC §7: a message's usage, input
//! cumulative per turn and output its own), the activity words of a tool use, and the
//! conversation a person reads.
//!
//! It depends on serde, serde_json, memchr, thiserror and tracing only: no runtime, no task types. A
//! harness that only reads what an agent CLI printed takes this crate alone; task-agent runs
//! the CLIs on top of it.
//!
//! # Example
//!
//! A recorded Claude Code run (a line a JSON object), its tokens and its result:
//!
//! ```
//! use agent_stream::format::{ClaudeParser, LineParser};
//! use agent_stream::{AgentEvent, TurnOutcome};
//!
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/claude-run1.jsonl");
//! let transcript = std::fs::read(path)?;
//! let (mut parser, mut events) = (ClaudeParser::default(), Vec::new());
//! for line in transcript.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
//!     parser.parse_line(line, &mut events)?;
//! }
//! let (mut latest_input, mut output) = (0, 0);
//! for event in &events {
//!     match event {
//!         AgentEvent::Usage(usage) => {
//!             latest_input = usage.input_tokens
//!                 + usage.cache_creation_input_tokens
//!                 + usage.cache_read_input_tokens;
//!             output += usage.output_tokens;
//!         }
//!         AgentEvent::TurnEnded(TurnOutcome::Success { result }) => {
//!             println!("result: {}", result.as_deref().unwrap_or(""));
//!         }
//!         _ => {}
//!     }
//! }
//! println!("tokens: {}", latest_input + output);
//! assert!(events.iter().any(|e| matches!(e, AgentEvent::TurnEnded(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod activity;
pub mod conversation;
pub mod event;
pub mod format;
pub mod session_file;

pub use event::{AgentEvent, ToolUse, TurnOutcome, Usage};
pub use format::{CliFormat, LineError, LineParser};
