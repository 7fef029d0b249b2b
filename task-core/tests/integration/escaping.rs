//! Property test: whatever text goes into an envelope, an XML parser reads back exactly one
//! `task-notification` element whose fields are the sanitized inputs.

use std::collections::HashMap;

use proptest::prelude::*;
use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use task_core::{
    AgentExtras, AgentUsage, Notification, ShellState, TaskId, TaskKind, TaskState, TerminalStatus,
    Worktree, sanitize, summary,
};

/// Text built from pieces meant to break an envelope.
fn hostile_text() -> impl Strategy<Value = String> {
    let markup = prop_oneof![
        Just("</task-notification>"),
        Just("<task-notification>"),
        Just("<summary>"),
        Just("]]>"),
        Just("<![CDATA["),
        Just("&amp;"),
        Just("&"),
        Just("&#0;"),
        Just("\r\n"),
        Just("\r"),
        Just("\u{0}"),
        Just("\u{1b}[31m"),
        Just("\u{FFFE}\u{FFFF}"),
        Just("\"'"),
        Just("\u{85}\u{2028}"),
    ]
    .prop_map(str::to_owned);
    let piece = prop_oneof![
        3 => any::<String>(),
        3 => markup,
        1 => prop::collection::vec(any::<u16>(), 0..8)
            .prop_map(|units| String::from_utf16_lossy(&units)),
        1 => prop::collection::vec(any::<u8>(), 0..16)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

/// What the parser saw: the number of envelopes, the text of each element path, and the
/// text after the envelope.
struct Parsed {
    envelopes: usize,
    fields: HashMap<String, String>,
    after: String,
}

fn parse(rendered: &str) -> Parsed {
    let document = format!("<root>{rendered}</root>");
    let mut reader = Reader::from_str(&document);
    let mut stack: Vec<String> = Vec::new();
    let mut parsed = Parsed {
        envelopes: 0,
        fields: HashMap::new(),
        after: String::new(),
    };
    let mut closed = false;
    loop {
        let text = match reader.read_event().expect("well-formed XML") {
            Event::Start(start) => {
                let name = start.name().as_ref().to_owned();
                if name == "task-notification" {
                    assert_eq!(stack, ["root"], "an envelope nested in something");
                    parsed.envelopes += 1;
                }
                stack.push(name);
                continue;
            }
            Event::End(_) => {
                if stack.pop().as_deref() == Some("task-notification") {
                    closed = true;
                }
                continue;
            }
            Event::Text(text) => text.xml10_content().into_owned(),
            Event::GeneralRef(reference) => match reference.resolve_char_ref().unwrap() {
                Some(c) => c.to_string(),
                None => resolve_predefined_entity(&reference)
                    .expect("known entity")
                    .to_owned(),
            },
            Event::Eof => break,
            other => panic!("unexpected {other:?}"),
        };
        if stack.len() == 1 {
            assert!(closed, "text before the envelope: {text:?}");
            parsed.after.push_str(&text);
        } else {
            let path = stack[1..].join("/");
            parsed.fields.entry(path).or_default().push_str(&text);
        }
    }
    parsed
}

fn shell_task(description: &str, output_file: &str) -> TaskState {
    TaskState::new(
        TaskId::parse("b12345678").unwrap(),
        description,
        output_file,
        TaskKind::Shell(ShellState::default()),
    )
    .unwrap()
}

fn field<'a>(parsed: &'a Parsed, path: &str) -> &'a str {
    parsed
        .fields
        .get(&format!("task-notification/{path}"))
        .map_or("", String::as_str)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_round_trips_through_an_xml_parser(
        description in hostile_text(),
        tool_use_id in hostile_text(),
        output_file in hostile_text(),
        event in hostile_text(),
        result in hostile_text(),
        note in hostile_text(),
        path in hostile_text(),
        branch in hostile_text(),
        trailer in hostile_text(),
    ) {
        let task = shell_task(&description, &output_file).with_tool_use_id(tool_use_id.clone());
        let summary = summary::shell(&description, summary::ShellEnd::Failed(1));
        let notification = Notification {
            event: Some(event.clone()),
            agent: Some(AgentExtras {
                note: Some(note.clone()),
                result: Some(result.clone()),
                usage: Some(AgentUsage { subagent_tokens: 1, tool_uses: 2, duration_ms: 3, agent_count: None }),
                worktree: Some(Worktree { worktree_path: path.clone(), worktree_branch: branch.clone(), ..Worktree::default() }),
            }),
            trailer: Some(trailer.clone()),
            ..Notification::for_task(&task, Some(TerminalStatus::Failed), summary.clone())
        };
        let parsed = parse(&notification.render());
        prop_assert_eq!(parsed.envelopes, 1);
        prop_assert_eq!(field(&parsed, "task-id"), "b12345678");
        prop_assert_eq!(field(&parsed, "tool-use-id"), sanitize(&tool_use_id));
        prop_assert_eq!(field(&parsed, "output-file"), sanitize(&output_file));
        prop_assert_eq!(field(&parsed, "status"), "failed");
        prop_assert_eq!(field(&parsed, "summary"), sanitize(&summary));
        prop_assert_eq!(field(&parsed, "event"), sanitize(&event));
        prop_assert_eq!(field(&parsed, "note"), sanitize(&note));
        prop_assert_eq!(field(&parsed, "result"), sanitize(&result));
        prop_assert_eq!(field(&parsed, "usage/subagent_tokens"), "1");
        prop_assert_eq!(field(&parsed, "worktree/worktreePath"), sanitize(&path));
        prop_assert_eq!(field(&parsed, "worktree/worktreeBranch"), sanitize(&branch));
        prop_assert_eq!(parsed.after, format!("\n{}", sanitize(&trailer)));
    }

    #[test]
    fn stall_warnings_cannot_forge_an_envelope(description in hostile_text(), tail in hostile_text()) {
        let task = shell_task(&description, "/tmp/o");
        let parsed = parse(&Notification::stall(&task, &tail).render());
        prop_assert_eq!(parsed.envelopes, 1);
        prop_assert!(!parsed.fields.contains_key("task-notification/status"));
        prop_assert_eq!(field(&parsed, "summary"), sanitize(&summary::stall(&description)));
        let expected = format!(
            "\nLast output:\n{}\n\n{}",
            sanitize(tail.trim_end()),
            summary::STALL_ADVICE
        );
        prop_assert_eq!(parsed.after, expected);
    }
}
