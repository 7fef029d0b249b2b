//! The activity of a tool use in an agent's progress: its name, input, the words for it
//! ([`description`], agent-stream's) and whether it reads or searches.

pub use agent_stream::activity::description;
use agent_stream::activity::{is_read, is_search};
use task_core::ToolActivity;

use crate::event::ToolUse;

/// The activity of one tool use: name, input, description and the read/search flags.
pub fn activity(tool: &ToolUse) -> ToolActivity {
    ToolActivity {
        tool_name: tool.name.clone(),
        input: tool.input.clone(),
        activity_description: description(&tool.name, &tool.input),
        is_search: is_search(&tool.name).then_some(true),
        is_read: is_read(&tool.name).then_some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_say_what_kind_of_tool_it_is() {
        let read = activity(&ToolUse {
            id: "t".into(),
            name: "Read".into(),
            input: json!({"file_path": "/a"}),
        });
        assert_eq!(read.is_read, Some(true));
        assert_eq!(read.is_search, None);
        let grep = activity(&ToolUse {
            id: "t".into(),
            name: "Grep".into(),
            input: json!({"pattern": "fn"}),
        });
        assert_eq!(grep.is_search, Some(true));
        assert_eq!(
            grep.activity_description.as_deref(),
            Some("Searching for fn")
        );
    }
}
