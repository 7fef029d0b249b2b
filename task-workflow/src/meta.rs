//! The script's `export const meta = {…}`: found, checked to be a pure literal (JSON5, which is
//! exactly an object literal of strings, numbers, booleans, null, arrays and objects), and
//! split from the body.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::WorkflowError;

const META_DECLARATION: &str = "export const meta";

/// How deeply the `meta` literal may nest. Names, phases and options need a few levels; the
/// JSON5 parser recurses once a level, so a literal nested 2000 deep overflowed the stack of a
/// 2 MiB thread (the supervisor's tokio worker): SIGSEGV, found with the workflow_meta fuzz
/// target (fuzz/regressions/workflow_meta/).
const MAX_META_DEPTH: usize = 64;

/// A phase the script declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseMeta {
    /// Its title (matched exactly by `phase(title)`).
    pub title: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The model its agents use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A script's `meta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Its name.
    pub name: String,
    /// One line: the task's description.
    pub description: String,
    /// Its phases, in order.
    #[serde(default)]
    pub phases: Vec<PhaseMeta>,
    /// When to use it (for workflow lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_to_use: Option<String>,
}

/// A parsed script: its `meta` (also as the literal's JSON value) and its body.
#[derive(Debug, Clone)]
pub(crate) struct ParsedScript {
    pub(crate) meta: Meta,
    pub(crate) meta_value: Value,
    pub(crate) body: String,
}

/// Splits `source` into `meta` and body.
pub(crate) fn parse(source: &str) -> Result<ParsedScript, WorkflowError> {
    let rest = skip_trivia(source);
    let rest = rest
        .strip_prefix(META_DECLARATION)
        .ok_or(WorkflowError::MissingMeta)?;
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').ok_or(WorkflowError::MissingMeta)?;
    let literal_start = rest.len() - rest.trim_start().len();
    let literal_text = &rest[literal_start..];
    if !literal_text.starts_with('{') {
        return Err(WorkflowError::InvalidMeta(
            "meta must be an object literal".into(),
        ));
    }
    let (end, depth) = literal_end(literal_text)
        .ok_or_else(|| WorkflowError::InvalidMeta("the meta literal is not closed".into()))?;
    if depth > MAX_META_DEPTH {
        return Err(WorkflowError::InvalidMeta(format!(
            "the meta literal nests {depth} levels deep (at most {MAX_META_DEPTH})"
        )));
    }
    let literal = &literal_text[..end];
    let meta_value: Value = json5::from_str(literal).map_err(|e| {
        WorkflowError::InvalidMeta(format!(
            "meta must be a pure literal (no variables, calls, spreads or template interpolation): {e}"
        ))
    })?;
    let meta: Meta = serde_json::from_value(meta_value.clone())
        .map_err(|e| WorkflowError::InvalidMeta(e.to_string()))?;
    if meta.name.trim().is_empty() || meta.description.trim().is_empty() {
        return Err(WorkflowError::InvalidMeta(
            "meta.name and meta.description must not be empty".into(),
        ));
    }
    let body = literal_text[end..].trim_start_matches(';').to_owned();
    Ok(ParsedScript {
        meta,
        meta_value,
        body,
    })
}

/// `source` after leading whitespace and comments.
fn skip_trivia(mut source: &str) -> &str {
    loop {
        let trimmed = source.trim_start();
        if let Some(rest) = trimmed.strip_prefix("//") {
            source = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = trimmed.strip_prefix("/*") {
            source = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return trimmed;
        }
    }
}

/// The byte length of the bracketed literal at the start of `text` (strings and comments
/// skipped) and how deeply it nests, or `None` if it never closes.
fn literal_end(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' | b'(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' | b')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some((i + 1, deepest));
                }
            }
            quote @ (b'\'' | b'"' | b'`') => i = string_end(bytes, i, quote)?,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i += bytes[i..].iter().position(|&b| b == b'\n')?;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2 + text.get(i + 2..)?.find("*/")? + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote closing the string that opens at `start`.
fn string_end(bytes: &[u8], start: usize, quote: u8) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b if b == quote => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_fixture_shape() {
        let parsed = parse(
            "// a workflow\nexport const meta = {\n  name: 'n', description: 'a } b', // }\n  phases: [{ title: 'Scan' }],\n}\nphase('Scan')\n",
        )
        .unwrap();
        assert_eq!(parsed.meta.name, "n");
        assert_eq!(parsed.meta.description, "a } b");
        assert_eq!(parsed.meta.phases[0].title, "Scan");
        assert_eq!(parsed.body.trim(), "phase('Scan')");
    }

    #[test]
    fn refuses_computed_meta() {
        for source in [
            "export const meta = { name: NAME, description: 'd' }",
            "export const meta = { name: 'n', description: `d ${x}` }",
            "export const meta = { ...other, name: 'n', description: 'd' }",
            "export const meta = { name: f(), description: 'd' }",
        ] {
            assert!(
                matches!(parse(source), Err(WorkflowError::InvalidMeta(_))),
                "{source}"
            );
        }
        assert!(matches!(
            parse("phase('x')"),
            Err(WorkflowError::MissingMeta)
        ));
        let deep = format!(
            "export const meta = {{ name: 'n', description: 'd', x: {}{} }}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(
            matches!(parse(&deep), Err(WorkflowError::InvalidMeta(m)) if m.contains("nests")),
            "a literal nested too deep is refused before it reaches the parser"
        );
        assert!(matches!(
            parse("export const meta = { name: 'n' }"),
            Err(WorkflowError::InvalidMeta(_))
        ));
    }
}
