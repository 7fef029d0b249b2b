//! Workflows run the reference's own script against the scripted fake agent CLI: the result,
//! journal, run record, summary, progress and notification have the fixture's shape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod workflow_common;

use serde_json::{Value, json};
use task_core::{TaskKind, TaskStatus};
use task_workflow::WorkflowConfig;
use workflow_common::*;

const FIXTURE: &str = "tests/fixtures/workflow";

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(format!("{FIXTURE}/{name}")).unwrap()).unwrap()
}

/// The keys of an object, in order.
fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

/// An entry without the fields that differ from run to run (ids, clocks).
fn stable(entry: &Value) -> Value {
    let mut entry = entry.clone();
    for volatile in [
        "agentId",
        "startedAt",
        "queuedAt",
        "lastProgressAt",
        "durationMs",
    ] {
        entry.as_object_mut().unwrap().remove(volatile);
    }
    entry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixture_script_produces_the_fixture_result_summary_and_record() {
    let wf = Wf::new(4);
    let mut events = wf.registry.subscribe();
    let request = wf.request(wf.fixture_runner(), FIXTURE_SCRIPT);
    let (handle, state) = wf.run(request).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(state.base.description, "Count things in two places");

    // The output file is the run summary, field for field.
    let expected = fixture_json("task-output.json");
    let summary = wf.output(&handle);
    assert_eq!(keys(&summary), keys(&expected));
    for field in [
        "summary",
        "agentCount",
        "logs",
        "result",
        "totalTokens",
        "totalToolCalls",
    ] {
        assert_eq!(summary[field], expected[field], "{field}");
    }
    let ours: Vec<Value> = summary["workflowProgress"]
        .as_array()
        .unwrap()
        .iter()
        .map(stable)
        .collect();
    let theirs: Vec<Value> = expected["workflowProgress"]
        .as_array()
        .unwrap()
        .iter()
        .map(stable)
        .collect();
    assert_eq!(ours, theirs);
    for (entry, reference) in summary["workflowProgress"]
        .as_array()
        .unwrap()
        .iter()
        .zip(expected["workflowProgress"].as_array().unwrap())
    {
        assert_eq!(keys(entry), keys(reference), "entry fields and their order");
    }

    // The task's steps: every phase, completed, with its agents under it, done.
    let TaskKind::Workflow(flow) = &state.kind else {
        panic!("not a workflow: {:?}", state.kind)
    };
    let titles: Vec<&str> = flow.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(titles, ["Scan", "Sum"]);
    for (n, step) in flow.steps.iter().enumerate() {
        assert_eq!(step.status, TaskStatus::Completed, "{step:?}");
        let in_phase = summary["workflowProgress"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "workflow_agent" && e["phaseIndex"] == n + 1)
            .count();
        let agents = step.detail["agents"].as_array().unwrap();
        assert_eq!(agents.len(), in_phase, "{step:?}");
        assert!(agents.iter().all(|a| a["status"] == "done"), "{step:?}");
    }

    // The run record has every field of the reference's.
    let record = wf.record(&handle);
    let reference = fixture_json("run-record.json");
    for field in keys(&reference) {
        assert!(record.get(&field).is_some(), "run record lacks {field}");
    }
    assert_eq!(record["runId"], handle.run_id);
    assert_eq!(record["taskId"], handle.id.as_str());
    assert_eq!(record["status"], "completed");
    assert_eq!(record["script"], FIXTURE_SCRIPT);
    assert_eq!(record["phases"], reference["phases"]);
    assert_eq!(record["result"], reference["result"]);
    assert_eq!(
        std::fs::read_to_string(&handle.script_path).unwrap(),
        FIXTURE_SCRIPT
    );
    assert!(handle.script_path.starts_with(&handle.paths.scripts));

    // The barrier: the sum starts after both scans ended.
    let entries = agent_entries(&record);
    let end = |e: &Value| e["startedAt"].as_u64().unwrap() + e["durationMs"].as_u64().unwrap();
    assert!(entries[2]["startedAt"].as_u64().unwrap() >= end(&entries[0]).max(end(&entries[1])));

    // The notification: summary, result as JSON, usage with the agent count.
    let notifications = wf.registry.notifications().drain();
    assert_eq!(notifications.len(), 1);
    let notification = &notifications[0];
    assert_eq!(
        notification.summary,
        "Dynamic workflow \"Count things in two places\" completed"
    );
    let extras = notification.agent.as_ref().unwrap();
    assert_eq!(
        extras.result.as_deref(),
        Some(r#"{"parts":["A=3","B=4"],"total":"7"}"#)
    );
    let rendered = notification.render();
    assert!(rendered.contains("<usage><agent_count>3</agent_count><subagent_tokens>3603</subagent_tokens><tool_uses>0</tool_uses><duration_ms>"), "{rendered}");

    // Each agent: a local_agent task of the workflow, its transcript and meta in the run's directory.
    let agent_ids = wf.agent_ids();
    assert_eq!(agent_ids.len(), 3);
    for id in &agent_ids {
        let agent = wf.registry.get(id).unwrap();
        assert_eq!(agent.owner_agent_id(), Some(handle.id));
        let TaskKind::Agent(agent) = &agent.kind else {
            panic!("not an agent")
        };
        assert_eq!(agent.agent_type, "workflow-subagent");
        assert!(handle.paths.dir.join(format!("agent-{id}.jsonl")).is_file());
        let meta: Value = serde_json::from_slice(
            &std::fs::read(handle.paths.dir.join(format!("agent-{id}.meta.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(meta["agentType"], "workflow-subagent");
        assert_eq!(meta["spawnDepth"], 1);
    }

    // The journal: a started record before each result, keyed v2:{sha256}, the fixture's results.
    let journal = wf.journal(&handle);
    let reference_journal: Vec<Value> = std::fs::read_to_string(format!("{FIXTURE}/journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The two parallel agents' lines may interleave either way (an agent can end before the
    // other starts on a loaded machine), so each line is compared with a reference line of its
    // type; that a result follows its start is checked below.
    assert_eq!(journal.len(), reference_journal.len());
    for line in &journal {
        let reference = reference_journal
            .iter()
            .find(|r| r["type"] == line["type"])
            .unwrap_or_else(|| panic!("a journal line of an unknown type: {line}"));
        assert_eq!(keys(line), keys(reference));
        let key = line["key"].as_str().unwrap();
        assert!(
            key.starts_with("v2:")
                && key.len() == 67
                && key[3..].bytes().all(|b| b.is_ascii_hexdigit())
        );
        assert!(agent_ids.iter().any(|id| line["agentId"] == id.as_str()));
    }
    let results: Vec<&Value> = journal
        .iter()
        .filter(|l| l["type"] == "result")
        .map(|l| &l["result"])
        .collect();
    assert_eq!(results.len(), 3);
    for expected in ["A=3", "B=4", "7"] {
        assert!(results.contains(&&json!(expected)));
    }
    for result in journal.iter().filter(|l| l["type"] == "result") {
        let started = journal
            .iter()
            .position(|l| l["type"] == "started" && l["key"] == result["key"])
            .unwrap();
        let ended = journal.iter().position(|l| l == result).unwrap();
        assert!(started < ended);
    }

    // Progress: task_progress events shaped like the reference's.
    let progress = progress_entries(&mut events, &handle.id);
    assert!(!progress.is_empty());
    let reference_event = std::fs::read_to_string(format!("{FIXTURE}/run-workflow.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["subtype"] == "task_progress")
        .unwrap();
    for (detail, _) in &progress {
        for field in [
            "description",
            "usage",
            "last_tool_name",
            "summary",
            "workflow_progress",
        ] {
            assert!(detail.contains_key(field), "progress lacks {field}");
            assert!(reference_event.get(field).is_some());
        }
        assert_eq!(keys(&detail["usage"]), keys(&reference_event["usage"]));
    }
    let (_, first) = &progress[0];
    assert_eq!(
        first[0],
        json!({"type": "workflow_phase", "index": 1, "title": "Scan"})
    );
    assert_eq!(
        first[1],
        json!({"type": "workflow_phase", "index": 2, "title": "Sum"})
    );
    let states: Vec<String> = progress
        .iter()
        .flat_map(|(_, e)| e.iter())
        .filter(|e| e["type"] == "workflow_agent")
        .map(|e| e["state"].as_str().unwrap().to_owned())
        .collect();
    assert!(states.contains(&"start".to_owned()) && states.contains(&"done".to_owned()));
    let last = progress.last().unwrap();
    assert_eq!(last.0["description"], "Sum: sum");
    assert_eq!(last.0["usage"]["total_tokens"], 3603);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_agent_yields_null_and_the_run_goes_on() {
    let wf = Wf::new(2);
    let runner = wf.runner(&[
        ("crash", json!([{"exit": 3}])),
        (
            "error",
            json!([{"result_error": "error_during_execution", "message": "boom"}]),
        ),
        ("", answer("fine")),
    ]);
    let script = "export const meta = { name: 'f', description: 'failures' }\n\
        const both = await parallel([() => agent('crash now'), () => agent('be fine')])\n\
        const alone = await agent('error out')\n\
        const piped = await pipeline(['x'], (x) => { throw new Error('stage') }, (x) => agent('never'))\n\
        return { both, alone, piped }";
    let (handle, state) = wf.run(wf.request(runner, script)).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(
        wf.output(&handle)["result"],
        json!({"both": [null, "fine"], "alone": null, "piped": [null]})
    );
    // Failed calls leave no result in the journal, so a resume runs them again.
    let results = wf
        .journal(&handle)
        .iter()
        .filter(|l| l["type"] == "result")
        .count();
    assert_eq!(results, 1);
    assert_eq!(
        wf.agent_ids().len(),
        3,
        "the thrown stage skipped its item's next stage"
    );
    // Outside any phase, the agents make one step; the two that failed say so.
    let TaskKind::Workflow(flow) = &state.kind else {
        panic!("not a workflow: {:?}", state.kind)
    };
    let [step] = flow.steps.as_slice() else {
        panic!("{:?}", flow.steps)
    };
    let mut statuses: Vec<&str> = step.detail["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(
        (step.step.as_str(), statuses),
        ("agents", vec!["done", "failed", "failed"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_is_validated_against_the_schema() {
    let wf = Wf::new(2);
    let runner = wf.runner(&[
        ("good", answer("{\"n\": 3}")),
        ("fenced", answer("```json\n{\"n\": 4}\n```")),
        ("bad", answer("{\"n\": \"three\"}")),
    ]);
    let script = "export const meta = { name: 's', description: 'schema' }\n\
        const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }\n\
        return await parallel(['good', 'fenced', 'bad'].map((p) => () => agent(p, { schema })))";
    let (handle, _) = wf.run(wf.request(runner, script)).await;
    assert_eq!(
        wf.output(&handle)["result"],
        json!([{"n": 3}, {"n": 4}, null])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_error_fails_the_run_with_its_message() {
    let wf = Wf::new(2);
    let script =
        "export const meta = { name: 'e', description: 'throws' }\nthrow new Error('no luck')";
    let (handle, state) = wf.run(wf.request(wf.fixture_runner(), script)).await;
    assert_eq!(state.status(), TaskStatus::Failed);
    let notifications = wf.registry.notifications().drain();
    assert!(
        notifications[0]
            .summary
            .starts_with("Dynamic workflow \"throws\" failed: Error: no luck")
            || notifications[0]
                .summary
                .starts_with("Dynamic workflow \"throws\" failed: no luck"),
        "{}",
        notifications[0].summary
    );
    assert_eq!(wf.record(&handle)["status"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_meta_is_refused_before_anything_is_registered() {
    let wf = Wf::new(2);
    for script in [
        "phase('x')",
        "export const meta = { name: NAME, description: 'd' }\n",
        "export const meta = { name: 'n' }\n",
    ] {
        assert!(
            wf.workflows
                .start(wf.request(wf.fixture_runner(), script))
                .is_err(),
            "{script}"
        );
    }
    assert!(wf.registry.snapshot().is_empty());
}

/// Runs `body` as a workflow script of `wf` and returns the failure summary of its run.
async fn failure_of(wf: &Wf, body: &str) -> String {
    let script = format!("export const meta = {{ name: 'f', description: 'fails' }}\n{body}");
    let (handle, state) = wf.run(wf.request(wf.fixture_runner(), &script)).await;
    assert_eq!(state.status(), TaskStatus::Failed, "{body}");
    assert_eq!(wf.record(&handle)["status"], "failed", "{body}");
    let notifications = wf.registry.notifications().drain();
    let summary = &notifications[0].summary;
    summary
        .strip_prefix("Dynamic workflow \"fails\" failed: ")
        .unwrap_or_else(|| panic!("{body}: {summary}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_script_names_what_it_threw() {
    let wf = Wf::new(2);
    for (body, said) in [
        ("throw 42", "workflow script threw 42"),
        ("throw null", "workflow script threw null"),
        ("throw undefined", "workflow script threw undefined"),
        ("throw 'no luck'", "workflow script threw \"no luck\""),
        (
            "return await Promise.reject(3.5)",
            "workflow script threw 3.5",
        ),
        ("throw Symbol('odd')", "workflow script threw Symbol(odd)"),
        (
            "throw { code: 7, why: ['a'] }",
            r#"workflow script threw {"code":7,"why":["a"]}"#,
        ),
        ("throw { message: 'told' }", "told"),
        (
            "const o = { toString: () => 'cyclic' }; o.o = o; throw o",
            "workflow script threw cyclic",
        ),
        ("throw Object.create(null)", "workflow script threw {}"),
        ("throw new Error('no luck')", "no luck"),
        ("throw new TypeError()", "TypeError"),
    ] {
        let text = failure_of(&wf, body).await;
        assert_eq!(text.lines().next(), Some(said), "{body}: {text}");
        for debug in ["Int(", "Float(", "Null\"", "Object(0x", "Symbol(0x"] {
            assert!(!text.contains(debug), "{body}: {text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_to_exhaust_memory_ends_at_the_heap_limit_with_out_of_memory() {
    let mut config = WorkflowConfig::default();
    config.engine_memory_bytes = 16 << 20;
    let wf = Wf::with_config(config);
    for body in [
        "const a = []; while (true) a.push([a.length, 2, 3]);",
        "const parts = []; while (true) parts.push('x'.repeat(1 << 16) + parts.length);",
        "let s = 'x'.repeat(1 << 20); while (true) s = s.repeat(2);",
        "let p = Promise.resolve(); while (true) p = p.then(() => 1);",
        "async function f(n) { await null; return [n, await f(n + 1)] }\nreturn await f(0)",
        "const fs = []; while (true) { const x = [fs.length]; fs.push(() => x); }",
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, { i });",
    ] {
        let text = failure_of(&wf, body).await;
        assert_eq!(
            text, "workflow script ran out of memory: its heap is limited to 16 MiB",
            "{body}"
        );
    }
}
