//! Golden tests: the reference's own stream-json output parses into exactly the progress it
//! reported in its `task_progress` events and completion notifications.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use task_agent::format::{ClaudeParser, LineParser};
use task_agent::{Change, ProgressTracker, RunEnd, agent_notification};
use task_core::{AgentUsage, TaskId, TaskKind, TaskState};

const BACKGROUND: &str = include_str!("fixtures/run-background-agent.jsonl");
const NAMED: &str = include_str!("fixtures/run-named-agent-sendmessage.jsonl");
const OBSERVED: &str = include_str!("fixtures/observed.md");

/// What the reference reported in one `task_progress` event.
#[derive(Debug, PartialEq)]
struct Reported {
    description: String,
    total_tokens: u64,
    tool_uses: u64,
    last_tool_name: String,
}

fn reported(event: &serde_json::Map<String, Value>) -> Reported {
    Reported {
        description: event["description"].as_str().unwrap().to_owned(),
        total_tokens: event["usage"]["total_tokens"].as_u64().unwrap(),
        tool_uses: event["usage"]["tool_uses"].as_u64().unwrap(),
        last_tool_name: event["last_tool_name"].as_str().unwrap().to_owned(),
    }
}

/// One run of a sub-agent, split out of the main stream: what we computed, and what the
/// reference reported, for each `task_progress`.
struct Run {
    tracker: ProgressTracker,
    ours: Vec<Reported>,
    theirs: Vec<Reported>,
}

/// Follows sub-agent `task_id` (started by `parent`) through `stream`, one [`Run`] per
/// stretch ended by the reference's `task_updated` of that task.
fn runs(stream: &str, parent: &str, task_id: &str, description: &str) -> Vec<Run> {
    let mut parser = ClaudeParser::following(parent);
    let mut runs = vec![Run {
        tracker: ProgressTracker::default(),
        ours: vec![],
        theirs: vec![],
    }];
    let mut events = Vec::new();
    for line in stream.lines() {
        let json: Value = serde_json::from_str(line).unwrap();
        let mine = json.get("task_id").and_then(Value::as_str) == Some(task_id);
        match json.get("subtype").and_then(Value::as_str) {
            Some("task_progress") if mine => {
                runs.last_mut()
                    .unwrap()
                    .theirs
                    .push(reported(json.as_object().unwrap()));
            }
            Some("task_updated") if mine => {
                runs.push(Run {
                    tracker: ProgressTracker::default(),
                    ours: vec![],
                    theirs: vec![],
                });
            }
            _ => {}
        }
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
        let run = runs.last_mut().unwrap();
        for event in events.drain(..) {
            if run.tracker.apply(&event) == Change::ToolUse {
                let detail = run.tracker.event_detail(description, "general-purpose", 0);
                run.ours.push(reported(&detail));
            }
        }
    }
    runs.pop(); // the empty stretch after the last task_updated
    runs
}

/// The `<task-notification>` blocks of observed.md that are about `task_id`.
fn observed_notifications(task_id: &str) -> Vec<String> {
    OBSERVED
        .split("<task-notification>")
        .skip(1)
        .filter_map(|rest| rest.split("</task-notification>").next())
        .filter(|body| body.contains(&format!("<task-id>{task_id}</task-id>")))
        .map(|body| format!("<task-notification>{body}</task-notification>"))
        .collect()
}

fn element(block: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = block.find(&open).unwrap() + open.len();
    let end = block[start..].find(&format!("</{tag}>")).unwrap();
    block[start..start + end].to_owned()
}

/// Our ids are 9 characters where the reference's are 17: envelopes are compared with the id
/// put back.
fn task_state(description: &str, tool_use_id: &str, output_file: &str) -> TaskState {
    let ours = TaskId::generate(task_core::TaskType::LocalAgent).unwrap();
    TaskState::new(
        ours,
        description,
        output_file,
        TaskKind::Agent(Box::default()),
    )
    .unwrap()
    .with_tool_use_id(tool_use_id)
}

#[test]
fn background_agent_progress_matches_the_reference_task_progress_events() {
    let runs = runs(
        BACKGROUND,
        "toolu_000002",
        "ac26648f68d64e8ec",
        "count files",
    );
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(
        run.theirs.len(),
        2,
        "the fixture has two task_progress events"
    );
    assert_eq!(run.ours, run.theirs);
    let activities: Vec<_> = run
        .tracker
        .progress()
        .recent_activities
        .iter()
        .map(|a| a.activity_description.clone().unwrap())
        .collect();
    assert_eq!(activities, ["Running count", "Reading /etc/hostname"]);
}

#[test]
fn background_agent_notification_matches_the_reference_envelope() {
    let runs = runs(
        BACKGROUND,
        "toolu_000002",
        "ac26648f68d64e8ec",
        "count files",
    );
    let tracker = &runs[0].tracker;
    let observed = observed_notifications("ac26648f68d64e8ec");
    assert_eq!(observed.len(), 1);
    let expected = &observed[0];
    let output_file = element(expected, "output-file");
    let duration_ms: u64 = element(expected, "duration_ms").parse().unwrap();
    let state = task_state("count files", "toolu_000002", &output_file);
    let usage = AgentUsage {
        subagent_tokens: tracker.progress().token_count,
        tool_uses: tracker.progress().tool_use_count,
        duration_ms,
        agent_count: None,
    };
    let rendered = agent_notification(
        &state,
        &RunEnd::Finished(tracker.result_text()),
        usage,
        true,
    )
    .render();
    let rendered = rendered.replace(state.id().as_str(), "ac26648f68d64e8ec");
    assert_eq!(&rendered, expected);
}

#[test]
fn named_agent_and_its_resume_match_both_reference_notifications() {
    let runs = runs(NAMED, "toolu_000002", "a36aeaca6389b56be", "research files");
    assert_eq!(
        runs.len(),
        2,
        "a first run and the run resumed by SendMessage"
    );
    assert_eq!(runs[0].theirs.len(), 2);
    assert_eq!(runs[0].ours, runs[0].theirs);
    // SendMessage has no activity text: the reference shows the task's description.
    assert_eq!(runs[0].ours[1].description, "research files");

    let first = observed_notifications("a36aeaca6389b56be");
    assert_eq!(
        first.len(),
        1,
        "observed.md shows the first envelope in full"
    );
    let t0 = &runs[0].tracker;
    assert_eq!(
        t0.progress().token_count.to_string(),
        element(&first[0], "subagent_tokens")
    );
    assert_eq!(
        t0.progress().tool_use_count.to_string(),
        element(&first[0], "tool_uses")
    );
    assert_eq!(t0.result_text().unwrap(), element(&first[0], "result"));

    // The second is described in a sentence: "`<result>ok2</result>`, `<subagent_tokens>1301…`".
    let sentence = OBSERVED
        .lines()
        .find(|l| l.contains("then the same id again"))
        .unwrap();
    let t1 = &runs[1].tracker;
    assert!(sentence.contains(&format!("<result>{}</result>", t1.result_text().unwrap())));
    assert!(sentence.contains(&format!(
        "<subagent_tokens>{}</subagent_tokens>",
        t1.progress().token_count
    )));
}

#[test]
fn the_subagent_transcript_on_disk_parses_with_every_tool_use() {
    let transcript = include_str!("fixtures/agent-ac26648f68d64e8ec.jsonl");
    let mut parser = ClaudeParser::default();
    let mut tracker = ProgressTracker::default();
    let mut events = Vec::new();
    for line in transcript.lines() {
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
        for event in events.drain(..) {
            tracker.apply(&event);
        }
    }
    // On disk each message carries its final usage (42 output tokens), not the streamed 1.
    assert_eq!(tracker.progress().tool_use_count, 2);
    assert_eq!(tracker.progress().latest_input_tokens, 1200);
    assert_eq!(tracker.progress().cumulative_output_tokens, 3 * 42);
    assert_eq!(
        tracker.result_text().as_deref(),
        Some("There are 0 files. SUB-RESULT-TEXT")
    );
}

/// The fenced block that follows the heading line starting with `heading` in observed.md.
fn observed_block(heading: &str) -> String {
    let start = OBSERVED.find(heading).unwrap();
    let body = &OBSERVED[start..];
    let open = body.find("```\n").unwrap() + 4;
    let close = body[open..].find("\n```").unwrap();
    body[open..open + close].to_owned()
}

#[test]
fn the_launch_text_is_the_references() {
    let expected = observed_block("## Agent {\"description\": \"count files\"");
    let output_file = expected
        .lines()
        .find_map(|l| l.strip_prefix("output_file: "))
        .unwrap();
    let ours = TaskId::generate(task_core::TaskType::LocalAgent).unwrap();
    let text = task_agent::launch_text(&ours, output_file.as_ref());
    assert_eq!(text.replace(ours.as_str(), "ac26648f68d64e8ec"), expected);
}

#[test]
fn the_unknown_name_refusal_is_the_references() {
    let expected = observed_block("### SendMessage {\"to\": \"team-lead\"");
    let refused = Err(task_agent::AgentError::NoSuchAgent("team-lead".into()));
    let to: task_core::Address = "team-lead".parse().unwrap();
    let result = task_agent::send_reply(&refused).model_result(&to);
    assert_eq!(result.to_string(), expected);
}
