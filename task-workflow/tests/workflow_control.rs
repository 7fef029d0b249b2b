//! Workflow scheduling and safety: the concurrency cap and pipeline ordering (from recorded
//! timestamps), determinism guards, no way out of the sandbox, limits, resume from the
//! journal, and a stop that leaves no process behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod workflow_common;

use serde_json::{Value, json};
use task_core::{TaskKind, TaskStatus, TaskType};
use task_workflow::{ScriptSource, WorkflowConfig, WorkflowRequest};
use workflow_common::*;

/// The most agents whose [startedAt, startedAt + durationMs) intervals overlap.
fn max_overlap(entries: &[Value]) -> usize {
    let spans: Vec<(u64, u64)> = entries
        .iter()
        .map(|e| {
            let start = e["startedAt"].as_u64().unwrap();
            (start, start + e["durationMs"].as_u64().unwrap())
        })
        .collect();
    spans
        .iter()
        .map(|(start, _)| {
            spans
                .iter()
                .filter(|(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn running_agents(wf: &Wf) -> usize {
    wf.registry
        .snapshot()
        .iter()
        .filter(|s| s.base.task_type == TaskType::LocalAgent && s.status() == TaskStatus::Running)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_cap_queues_the_rest() {
    let wf = Wf::new(2);
    let go = wf.path("go");
    let runner = wf.runner(&[("", json!([{"wait_file": go}, {"result": "ok"}]))]);
    let script = "export const meta = { name: 'c', description: 'cap' }\n\
        return await parallel([1, 2, 3, 4, 5].map((i) => () => agent(`job ${i}`, { label: `job:${i}` })))";
    let handle = wf.workflows.start(wf.request(runner, script)).unwrap();
    wait_for(|| (running_agents(&wf) == 2).then_some(())).await;
    // Two run, the first two calls; the other three are queued: called, no agent registered.
    let mut prompts: Vec<String> = wf
        .agent_ids()
        .iter()
        .filter_map(|id| match &wf.registry.get(id)?.kind {
            TaskKind::Agent(agent) => Some(agent.prompt.clone()),
            _ => None,
        })
        .collect();
    prompts.sort();
    assert_eq!(prompts, ["job 1", "job 2"]);
    std::fs::write(&go, "").unwrap();
    let state = wf.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let record = wf.record(&handle);
    let entries = agent_entries(&record);
    assert_eq!(entries.len(), 5);
    assert_eq!(
        max_overlap(&entries),
        2,
        "at most two agents at once: {entries:?}"
    );
    let queued_at: Vec<u64> = entries
        .iter()
        .map(|e| e["queuedAt"].as_u64().unwrap())
        .collect();
    let last_start = entries
        .iter()
        .map(|e| e["startedAt"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(last_start >= *queued_at.iter().max().unwrap());
    assert_eq!(record["result"], json!(["ok", "ok", "ok", "ok", "ok"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_has_no_barrier_between_stages() {
    let wf = Wf::new(4);
    let release = wf.path("release-b");
    let runner = wf.runner(&[
        ("find b", json!([{"wait_file": release}, {"result": "B"}])),
        ("find a", answer("A")),
        ("check", answer("checked")),
    ]);
    let script = "export const meta = { name: 'p', description: 'pipeline' }\n\
        return await pipeline(['a', 'b'],\n\
          (item) => agent(`find ${item}`, { label: `find:${item}`, phase: 'Find' }),\n\
          (found, item, index) => agent(`check ${found} ${item} ${index}`, { label: `check:${item}`, phase: 'Check' }))";
    let handle = wf.workflows.start(wf.request(runner, script)).unwrap();
    // Item a goes through both stages while item b is still in its first.
    wait_for(|| {
        let checked = wf.registry.snapshot().iter().any(|s| match &s.kind {
            TaskKind::Agent(agent) => {
                agent.prompt == "check A a 0" && s.status() == TaskStatus::Completed
            }
            _ => false,
        });
        checked.then_some(())
    })
    .await;
    let find_b_running = wf.registry.snapshot().iter().any(|s| {
        matches!(&s.kind, TaskKind::Agent(agent) if agent.prompt == "find b")
            && s.status() == TaskStatus::Running
    });
    assert!(find_b_running);
    std::fs::write(&release, "").unwrap();
    let state = wf.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let record = wf.record(&handle);
    assert_eq!(record["result"], json!(["checked", "checked"]));
    let entries = agent_entries(&record);
    let by_label = |label: &str| {
        entries
            .iter()
            .find(|e| e["label"] == label)
            .unwrap()
            .clone()
    };
    let end = |e: &Value| e["startedAt"].as_u64().unwrap() + e["durationMs"].as_u64().unwrap();
    assert!(end(&by_label("check:a")) <= end(&by_label("find:b")));
    assert_eq!(by_label("check:a")["phaseTitle"], "Check");
    assert_eq!(by_label("find:b")["phaseTitle"], "Find");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn determinism_guards_throw() {
    let wf = Wf::new(2);
    let script = "export const meta = { name: 'd', description: 'guards' }\n\
        const out = []\n\
        for (const f of [() => Date.now(), () => Math.random(), () => new Date(), () => Date()]) {\n\
          try { f(); out.push('ran') } catch (e) { out.push(e.message) }\n\
        }\n\
        out.push(new Date(0).toISOString(), new Date('2026-11-23T00:00:00Z') instanceof Date)\n\
        return out";
    let (handle, state) = wf.run(wf.request(wf.fixture_runner(), script)).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let result = wf.output(&handle)["result"].clone();
    let result = result.as_array().unwrap();
    for (i, what) in ["Date.now()", "Math.random()", "new Date()", "Date()"]
        .iter()
        .enumerate()
    {
        let message = result[i].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{what} is unavailable in workflow scripts")),
            "{message}"
        );
    }
    assert_eq!(result[4], "1970-01-01T00:00:00.000Z");
    assert_eq!(result[5], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_cannot_reach_files_network_or_processes() {
    let wf = Wf::new(2);
    let script = "export const meta = { name: 's', description: 'sandbox' }\n\
        const names = ['require', 'process', 'fetch', 'std', 'os', 'Deno', 'Bun', 'XMLHttpRequest', 'WebSocket', 'setTimeout', 'print', 'console', 'scriptArgs']\n\
        const seen = names.filter((n) => typeof globalThis[n] !== 'undefined')\n\
        let imported\n\
        try { await import('fs'); imported = 'loaded' } catch (e) { imported = 'refused' }\n\
        let os\n\
        try { await import('os'); os = 'loaded' } catch (e) { os = 'refused' }\n\
        return { seen, imported, os }";
    let (handle, state) = wf.run(wf.request(wf.fixture_runner(), script)).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(
        wf.output(&handle)["result"],
        json!({"seen": [], "imported": "refused", "os": "refused"})
    );
    // A static import is not even valid in a script.
    let script = "export const meta = { name: 's', description: 'import' }\nimport { readFileSync } from 'fs'\nreturn readFileSync('/etc/passwd')";
    let (_, state) = wf.run(wf.request(wf.fixture_runner(), script)).await;
    assert_eq!(state.status(), TaskStatus::Failed);
    assert!(wf.agent_ids().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_throw_in_the_script() {
    let mut config = WorkflowConfig::default();
    config.max_agents = 2;
    let wf = Wf::with_config(config);
    let script = "export const meta = { name: 'l', description: 'limits' }\n\
        const errors = []\n\
        try { await parallel(new Array(4097).fill(() => 1)) } catch (e) { errors.push(e.message) }\n\
        try { await pipeline(new Array(4097).fill(0)) } catch (e) { errors.push(e.message) }\n\
        const ok = await parallel(new Array(4096).fill(() => 1))\n\
        await agent('sum A=3,B=4'); await agent('sum A=3,B=4')\n\
        try { agent('sum A=3,B=4') } catch (e) { errors.push(e.message) }\n\
        return { errors, ok: ok.length }";
    let (handle, state) = wf.run(wf.request(wf.fixture_runner(), script)).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let result = wf.output(&handle)["result"].clone();
    assert_eq!(result["ok"], 4096);
    assert_eq!(
        result["errors"],
        json!([
            "parallel() accepts at most 4096 items; got 4097",
            "pipeline() accepts at most 4096 items; got 4097",
            "a workflow runs at most 2 agents: agent() refused",
        ])
    );
    assert_eq!(wf.agent_ids().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_workflow_runs_one_level_deep() {
    let wf = Wf::new(2);
    std::fs::write(
        wf.path("child.js"),
        "export const meta = { name: 'child', description: 'c' }\n\
        let nested\n\
        try { await workflow({ scriptPath: 'child.js' }) } catch (e) { nested = e.message }\n\
        return { got: args, answer: await agent('sum A=3,B=4'), nested }",
    )
    .unwrap();
    let script = "export const meta = { name: 'parent', description: 'p' }\n\
        const child = await workflow({ scriptPath: 'child.js' }, { n: 1 })\n\
        let missing\n\
        try { await workflow('no-such-workflow') } catch (e) { missing = e.message }\n\
        return { child, missing, args }";
    let mut request = wf.request(wf.fixture_runner(), script);
    request.args = Some(json!(["x"]));
    let (handle, state) = wf.run(request).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(
        wf.output(&handle)["result"],
        json!({
            "child": {"got": {"n": 1}, "answer": "7", "nested": "workflow() nests one level only: a child workflow cannot start another"},
            "missing": "unknown workflow \"no-such-workflow\"",
            "args": ["x"],
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_answers_unchanged_calls_from_the_journal() {
    let wf = Wf::new(4);
    let (first, _) = wf
        .run(wf.request(wf.fixture_runner(), FIXTURE_SCRIPT))
        .await;
    assert_eq!(wf.agent_ids().len(), 3);

    // Same script, nothing changed: no agent runs.
    let mut request = WorkflowRequest::new(wf.fixture_runner(), ScriptSource::Resumed);
    request.resume_from = Some(first.run_id.clone());
    let (second, state) = wf.run(request).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(wf.agent_ids().len(), 3, "no agent ran");
    let record = wf.record(&second);
    assert_eq!(
        record["result"],
        json!({"parts": ["A=3", "B=4"], "total": "7"})
    );
    assert_eq!(record["resumedFrom"], first.run_id);
    assert_eq!(record["totalTokens"], 0);
    assert_eq!(
        wf.journal(&second).len(),
        6,
        "the new run's journal can be resumed too"
    );

    // Only the edited call runs again.
    let edited = FIXTURE_SCRIPT.replace("'SUBAGENT-MARK sum '", "'SUBAGENT-MARK total '");
    let runner = wf.runner(&[("total A=3,B=4", answer("seven"))]);
    let mut request = wf.request(runner, &edited);
    request.resume_from = Some(second.run_id.clone());
    let (third, _) = wf.run(request).await;
    assert_eq!(wf.agent_ids().len(), 4, "one new agent");
    assert_eq!(
        wf.record(&third)["result"],
        json!({"parts": ["A=3", "B=4"], "total": "seven"})
    );

    // Unknown and malformed run ids are refused.
    for bad in ["wf_nosuchrun", "wf_../../etc"] {
        let mut request = WorkflowRequest::new(wf.fixture_runner(), ScriptSource::Resumed);
        request.resume_from = Some(bad.into());
        assert!(wf.workflows.start(request).is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_the_script_and_every_agent_leaving_no_process() {
    let wf = Wf::new(2);
    let never = wf.path("never");
    let pid_dir = wf.path("pids");
    std::fs::create_dir(&pid_dir).unwrap();
    let runner = wf.runner(&[
        ("one", json!([{"spawn": "sleep 300", "pid_file": pid_dir.join("one")}, {"touch": pid_dir.join("one.ready")}, {"wait_file": never}])),
        ("two", json!([{"spawn": "sleep 300", "pid_file": pid_dir.join("two")}, {"touch": pid_dir.join("two.ready")}, {"wait_file": never}])),
    ]);
    let script = "export const meta = { name: 'k', description: 'to stop' }\n\
        return await parallel(['one', 'two', 'three'].map((p) => () => agent(p)))";
    let handle = wf.workflows.start(wf.request(runner, script)).unwrap();
    wait_file(&pid_dir.join("one.ready")).await;
    wait_file(&pid_dir.join("two.ready")).await;
    let agents: Vec<u32> = wf
        .agent_ids()
        .iter()
        .filter_map(|id| match &wf.registry.get(id)?.kind {
            TaskKind::Agent(agent) => agent.process.map(|p| p.pgid),
            _ => None,
        })
        .collect();
    assert_eq!(agents.len(), 2);
    let children: Vec<u32> = ["one", "two"]
        .iter()
        .map(|n| {
            std::fs::read_to_string(pid_dir.join(n))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();

    wf.registry.kill(&handle.id).await.unwrap();
    let state = wf.registry.get(&handle.id).unwrap();
    assert_eq!(state.status(), TaskStatus::Killed);
    for pid in agents.iter().chain(&children) {
        wait_for(|| process_gone(*pid).then_some(())).await;
    }
    for id in wf.agent_ids() {
        assert_eq!(wf.registry.get(&id).unwrap().status(), TaskStatus::Killed);
    }
    // The queued third call never starts, and the model gets no notification.
    assert_eq!(wf.agent_ids().len(), 2);
    assert!(wf.registry.notifications().drain().is_empty());
    assert_eq!(wf.record(&handle)["status"], "killed");
    assert!(
        !script_thread_alive(&handle.run_id) || {
            wait_for(|| (!script_thread_alive(&handle.run_id)).then_some(())).await;
            true
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_interrupts_a_busy_script() {
    let wf = Wf::new(2);
    let script =
        "export const meta = { name: 'b', description: 'busy' }\nlet n = 0\nwhile (true) { n++ }";
    let handle = wf
        .workflows
        .start(wf.request(wf.fixture_runner(), script))
        .unwrap();
    wait_for(|| script_thread_alive(&handle.run_id).then_some(())).await;
    wf.registry.kill(&handle.id).await.unwrap();
    wait_for(|| (!script_thread_alive(&handle.run_id)).then_some(())).await;
    assert_eq!(
        wf.registry.get(&handle.id).unwrap().status(),
        TaskStatus::Killed
    );
}

/// Whether this process has a thread named after the run (its script thread).
fn script_thread_alive(run_id: &str) -> bool {
    let name: String = run_id.chars().take(15).collect();
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .any(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
}
