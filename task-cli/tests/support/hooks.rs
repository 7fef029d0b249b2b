//! End hooks seen from a test: a hook that appends a line per end to a file, and the lines it
//! appended.

use std::collections::BTreeMap;
use std::path::Path;

use super::eventually;

/// A hook that appends `ID STATUS REASON|TYPE|DESCRIPTION|OUTPUT` to `file`.
pub fn appending_hook(file: &Path) -> String {
    format!(
        r#"printf '%s %s %s|%s|%s|%s\n' "$TASKS_ID" "$TASKS_STATUS" "$TASKS_END_REASON" "$TASKS_TYPE" "$TASKS_DESCRIPTION" "$TASKS_OUTPUT_FILE" >> '{}'"#,
        file.display()
    )
}

/// The lines the hook appended, by task id (each id with every line it got, without the id).
pub fn hook_lines(file: &Path) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut by_id: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let (id, rest) = line.split_once(' ').unwrap_or((line, ""));
        by_id
            .entry(id.to_owned())
            .or_default()
            .push(rest.to_owned());
    }
    by_id
}

/// Waits until the hook has appended a line for each of `ids`; every line so far.
pub fn hooked(file: &Path, ids: &[&str]) -> BTreeMap<String, Vec<String>> {
    eventually("a hook line for every task", || {
        let lines = hook_lines(file);
        ids.iter()
            .all(|id| lines.contains_key(*id))
            .then_some(lines)
    })
}

/// Asserts that each of `expected` (id, how its line starts: `STATUS` or `STATUS REASON`,
/// and its type) got exactly one line, so.
pub fn assert_hooked_once(lines: &BTreeMap<String, Vec<String>>, expected: &[(&str, &str, &str)]) {
    for (id, start, task_type) in expected {
        let got = lines.get(*id).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(got.len(), 1, "{id} hooked once: {lines:?}");
        let line = &got[0];
        assert!(
            line.starts_with(&format!("{start} ")) || line.starts_with(&format!("{start}|")),
            "{id}: {start:?} in {line:?}"
        );
        assert_eq!(line.split('|').nth(1), Some(*task_type), "{id}: {line:?}");
    }
}
