//! An agent's transcript (its CLI's JSON event stream, as its output file keeps it) as a person
//! reads it: what it said, each tool it used (with the activity the reference shows), and how
//! each turn ended. `tasks output` prints an agent's output so, and `tasks top` shows it so.

use task_agent::format::{DetectingParser, LineParser};
use task_agent::{AgentEvent, TurnOutcome};

/// Reads a transcript one line at a time (the format is detected from the lines read).
#[derive(Default)]
pub struct Readable {
    parser: DetectingParser,
    events: Vec<AgentEvent>,
}

impl std::fmt::Debug for Readable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readable").finish_non_exhaustive()
    }
}

impl Readable {
    /// What a reader sees of one transcript line (given without its newline): lines, each
    /// ending in a newline, or nothing for events of no interest to a reader (init, usage,
    /// unknown types). `None` when the line is not an event (a CLI's plain text, a malformed
    /// line): the caller shows it as it is.
    pub fn line(&mut self, line: &[u8]) -> Option<String> {
        self.events.clear();
        self.parser.parse_line(line, &mut self.events).ok()?;
        let mut text = String::new();
        for event in &self.events {
            match event {
                AgentEvent::Text(said) => text.push_str(&format!("{said}\n")),
                AgentEvent::ToolStarted(tool) => {
                    let what = task_agent::activity::description(&tool.name, &tool.input)
                        .unwrap_or_else(|| tool.name.clone());
                    text.push_str(&format!("  → {what}\n"));
                }
                AgentEvent::ToolFinished { is_error: true, .. } => {
                    text.push_str("    (the tool failed)\n");
                }
                AgentEvent::TurnEnded(TurnOutcome::Success { result }) => {
                    text.push_str(&format!("✓ {}\n", result.as_deref().unwrap_or("done")));
                }
                AgentEvent::TurnEnded(outcome) => {
                    text.push_str(&format!("✗ {}\n", outcome.error_text().unwrap_or_default()));
                }
                _ => {}
            }
        }
        Some(text)
    }
}
