//! What each MCP client puts in front of its model from a tool result, so that a notification
//! rides in the part the model reads, and is claimed only by a result whose forwarded part
//! carries it.
//!
//! Established by running each client for real against a scripted model
//! (`task-cli/tests/mcp_clients.rs`; one recorded exchange of each in
//! `task-cli/tests/fixtures/mcp-clients/`):
//!
//! | client (`clientInfo.name`) | a result with `structuredContent` | a result without |
//! |---|---|---|
//! | Claude Code (`claude-code`) | `structuredContent` as JSON text, plus resource links; the text blocks are dropped; but a failure (`isError`) shows its text blocks | the text blocks |
//! | Codex (`codex-mcp-client`) | `structuredContent` as JSON text only, failure or not | the text blocks |
//! | Gemini CLI (`gemini-cli-mcp-client`) | the text blocks and resource links; a failure shows the whole result as JSON | the text blocks |
//!
//! None of them shows its model a `notifications/message`. A client not in the table gets
//! every model-facing text in both parts: whichever it forwards carries it.

use rmcp::model::{CallToolResult, Implementation};
use serde_json::Value;

/// Which parts of a tool result a client shows its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// `structuredContent` of a successful result that has one (its text blocks are dropped);
    /// the text blocks of any other result (Claude Code).
    StructuredUnlessFailed,
    /// `structuredContent` of any result that has one; the text blocks of the others (Codex).
    Structured,
    /// The text blocks (Gemini CLI).
    Text,
    /// Not known: the texts go in both parts, so whichever the client forwards carries them.
    Unknown,
}

/// Where the model-facing texts of one result go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// In text blocks.
    pub text: bool,
    /// In `structuredContent` (an object).
    pub structured: bool,
}

impl Placement {
    /// Whether any part the client reads can carry a text.
    pub fn reaches_model(self) -> bool {
        self.text || self.structured
    }
}

impl Forwarding {
    /// The forwarding of the client that introduced itself as `client`.
    pub fn of(client: Option<&Implementation>) -> Self {
        match client.map(|c| c.name.as_str()) {
            Some("claude-code") => Forwarding::StructuredUnlessFailed,
            Some("codex-mcp-client") => Forwarding::Structured,
            Some("gemini-cli-mcp-client") => Forwarding::Text,
            _ => Forwarding::Unknown,
        }
    }

    /// Where the texts of `result` must go for this client's model to read them once.
    pub(crate) fn placement(self, result: &CallToolResult) -> Placement {
        let has_structure = result.structured_content.is_some();
        // A structure that is not an object cannot carry a text.
        let object = result
            .structured_content
            .as_ref()
            .is_some_and(Value::is_object);
        let failed = result.is_error == Some(true);
        let reads_structure = match self {
            Forwarding::StructuredUnlessFailed => has_structure && !failed,
            Forwarding::Structured => has_structure,
            Forwarding::Text => false,
            Forwarding::Unknown => {
                return Placement {
                    text: true,
                    structured: object,
                };
            }
        };
        Placement {
            text: !reads_structure,
            structured: reads_structure && object,
        }
    }
}

/// The key of a result's `structuredContent` that carries its notifications (an array of the
/// texts a text block would hold), for clients that read only the structure.
pub const NOTIFICATIONS_KEY: &str = "notifications";

/// The key of a result's `structuredContent` that carries the reference's model-facing text of
/// a start ("Command running in background with ID: …"), which the structure alone does not say.
pub const MESSAGE_KEY: &str = "message";

/// Places `texts` (notifications, in delivery order) in `result` as `placement` says.
pub(crate) fn attach(result: &mut CallToolResult, placement: Placement, texts: &[String]) {
    if texts.is_empty() {
        return;
    }
    if placement.text {
        result
            .content
            .extend(texts.iter().cloned().map(rmcp::model::ContentBlock::text));
    }
    if placement.structured
        && let Some(Value::Object(map)) = result.structured_content.as_mut()
    {
        map.insert(NOTIFICATIONS_KEY.to_owned(), Value::from(texts.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    fn result(structured: Option<Value>, error: bool) -> CallToolResult {
        let mut result = if error {
            CallToolResult::error(vec![ContentBlock::text("why")])
        } else {
            CallToolResult::success(vec![ContentBlock::text("text")])
        };
        result.structured_content = structured;
        result
    }

    fn client(name: &str) -> Implementation {
        Implementation::new(name, "1")
    }

    #[test]
    fn claude_code_reads_the_structure_of_a_successful_result_and_the_text_of_a_failure() {
        let claude = Forwarding::of(Some(&client("claude-code")));
        let ok = claude.placement(&result(Some(json!({"a": 1})), false));
        assert_eq!(
            ok,
            Placement {
                text: false,
                structured: true
            }
        );
        let failed = claude.placement(&result(Some(json!({"a": 1})), true));
        assert_eq!(
            failed,
            Placement {
                text: true,
                structured: false
            }
        );
        let plain = claude.placement(&result(None, false));
        assert_eq!(
            plain,
            Placement {
                text: true,
                structured: false
            }
        );
    }

    #[test]
    fn a_structure_that_is_not_an_object_carries_nothing_to_a_structure_reader() {
        let claude = Forwarding::of(Some(&client("claude-code")));
        let placement = claude.placement(&result(Some(json!([1])), false));
        assert!(!placement.reaches_model());
    }

    #[test]
    fn an_unknown_client_gets_the_texts_in_both_parts() {
        let unknown = Forwarding::of(Some(&client("some-new-client")));
        let mut r = result(Some(json!({"a": 1})), false);
        let placement = unknown.placement(&r);
        attach(
            &mut r,
            placement,
            &["<task-notification>x</task-notification>".into()],
        );
        assert_eq!(r.content.len(), 2);
        assert_eq!(
            r.structured_content.as_ref().map(|s| &s[NOTIFICATIONS_KEY]),
            Some(&json!(["<task-notification>x</task-notification>"]))
        );
        assert_eq!(Forwarding::of(None), Forwarding::Unknown);
    }

    #[test]
    fn codex_reads_the_structure_of_any_result_that_has_one() {
        let codex = Forwarding::of(Some(&client("codex-mcp-client")));
        let failed = codex.placement(&result(Some(json!({"a": 1})), true));
        assert_eq!(
            failed,
            Placement {
                text: false,
                structured: true
            }
        );
        let plain = codex.placement(&result(None, true));
        assert_eq!(
            plain,
            Placement {
                text: true,
                structured: false
            }
        );
    }

    #[test]
    fn gemini_reads_text_only_so_a_failure_shown_whole_carries_each_text_once() {
        let gemini = Forwarding::of(Some(&client("gemini-cli-mcp-client")));
        for failed in [false, true] {
            let mut r = result(Some(json!({"a": 1})), failed);
            let placement = gemini.placement(&r);
            assert_eq!(
                placement,
                Placement {
                    text: true,
                    structured: false
                }
            );
            attach(&mut r, placement, &["n".into()]);
            assert_eq!(r.content.len(), 2);
            let structured = r.structured_content.unwrap_or_default();
            assert!(structured.get(NOTIFICATIONS_KEY).is_none());
        }
    }
}
