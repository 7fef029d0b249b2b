//! The human text of a tool use ("Running count", "Reading /etc/hostname"), as the reference
//! shows it in an agent's progress, and what kind of tool it is.

use serde_json::Value;

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

/// Whether the tool searches (files or the web).
pub fn is_search(tool_name: &str) -> bool {
    matches!(
        tool_name,
        "Grep" | "Glob" | "WebSearch" | "search_file_content" | "glob" | "google_web_search"
    )
}

/// Whether the tool reads (a file or a page).
pub fn is_read(tool_name: &str) -> bool {
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
}
