//! The human text of a tool use in an agent's progress ("Running count", "Reading /etc/hostname").

use serde_json::Value;
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

/// What the tool use is doing, in words; `None` for tools without a description (the
/// reference then shows the task's own description, as it does for `SendMessage`).
///
/// `Running {description}` (or the command when there is no description) and
/// `Reading {file_path}` are the reference's observed texts; the others follow the same form.
pub fn description(tool_name: &str, input: &Value) -> Option<String> {
    let field = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (verb, object) = match tool_name {
        "Bash" | "run_shell_command" => (
            "Running",
            field("description").or_else(|| field("command"))?,
        ),
        "Read" | "read_file" => ("Reading", field("file_path").or_else(|| field("path"))?),
        "Write" | "write_file" => ("Writing", field("file_path").or_else(|| field("path"))?),
        "Edit" | "MultiEdit" | "NotebookEdit" | "replace" => (
            "Editing",
            field("file_path").or_else(|| field("notebook_path"))?,
        ),
        "Grep" | "Glob" | "search_file_content" | "glob" => ("Searching for", field("pattern")?),
        "WebFetch" | "web_fetch" => ("Fetching", field("url")?),
        "WebSearch" | "google_web_search" => ("Searching the web for", field("query")?),
        _ => return None,
    };
    Some(format!("{verb} {object}"))
}

fn is_search(tool_name: &str) -> bool {
    matches!(
        tool_name,
        "Grep" | "Glob" | "WebSearch" | "search_file_content" | "glob" | "google_web_search"
    )
}

fn is_read(tool_name: &str) -> bool {
    matches!(tool_name, "Read" | "read_file" | "WebFetch" | "web_fetch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_reference_wordings() {
        assert_eq!(
            description(
                "Bash",
                &json!({"command": "ls | wc -l", "description": "count"})
            )
            .as_deref(),
            Some("Running count")
        );
        assert_eq!(
            description("Bash", &json!({"command": "ls"})).as_deref(),
            Some("Running ls")
        );
        assert_eq!(
            description("Read", &json!({"file_path": "/etc/hostname"})).as_deref(),
            Some("Reading /etc/hostname")
        );
        assert_eq!(description("SendMessage", &json!({"to": "x"})), None);
        assert_eq!(description("Read", &json!({})), None);
    }

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
