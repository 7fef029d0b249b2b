//! Benchmarks of task-agent's workflows: the overhead of one `agent()` call (the QuickJS
//! engine, the host bridge, the journal, progress entries, the agent task's registration,
//! transcript, output symlink and end) with an in-process agent that answers at once, and a
//! whole 1000-agent run (`parallel` over 1000 calls, the per-run maximum).
//!
//! Run with `cargo bench -p benches --bench workflow -- --warm-up-time 1 --measurement-time 5`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use task_agent::{
    AgentConfig, AgentError, AgentEvent, AgentExecutor, AgentRunner, AgentSession, AgentSpec,
    SessionEnd, SessionEvent, TurnOutcome,
};
use task_core::{Registry, RegistryConfig, TaskId};
use task_workflow::{ScriptSource, WorkflowConfig, WorkflowExecutor, WorkflowRequest};

/// An agent that answers its prompt's length at once, with no process.
#[derive(Debug)]
struct InstantRunner;

#[async_trait]
impl AgentRunner for InstantRunner {
    fn name(&self) -> &'static str {
        "instant"
    }

    async fn start(&self, spec: &AgentSpec) -> Result<Box<dyn AgentSession>, AgentError> {
        let events = vec![
            SessionEvent::Agent(AgentEvent::TurnEnded(TurnOutcome::Success {
                result: Some(spec.prompt.len().to_string()),
            })),
            SessionEvent::Ended(SessionEnd {
                exit_code: Some(0),
                ..SessionEnd::default()
            }),
        ];
        Ok(Box::new(InstantSession { events }))
    }

    async fn resume(
        &self,
        spec: &AgentSpec,
        _session: &str,
        _message: &str,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        self.start(spec).await
    }
}

struct InstantSession {
    events: Vec<SessionEvent>,
}

#[async_trait]
impl AgentSession for InstantSession {
    async fn next_event(&mut self) -> SessionEvent {
        if self.events.len() > 1 {
            self.events.remove(0)
        } else {
            self.events[0].clone()
        }
    }

    async fn send(&mut self, _message: &str) -> Result<(), AgentError> {
        Err(AgentError::NoInput)
    }

    async fn close_input(&mut self) {}

    async fn cancel(&mut self) {}
}

struct Bench {
    _dir: tempfile::TempDir,
    registry: Arc<Registry>,
    workflows: WorkflowExecutor,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::new(RegistryConfig {
            panel_grace: Duration::ZERO,
            ..RegistryConfig::default()
        }));
        let agents = AgentExecutor::new(Arc::clone(&registry), dir.path(), AgentConfig::default())
            .register_with_registry();
        let mut config = WorkflowConfig::default();
        config.concurrency = 16;
        let workflows = WorkflowExecutor::new(agents, dir.path(), config).register_with_registry();
        Bench {
            _dir: dir,
            registry,
            workflows,
        }
    }

    /// Runs `script` to its end; the registry forgets it and its agents.
    async fn run(&self, script: &str) {
        let request = WorkflowRequest::new(
            Arc::new(InstantRunner),
            ScriptSource::Inline(script.to_owned()),
        );
        let handle = self.workflows.start(request).unwrap();
        self.wait(&handle.id).await;
        self.registry.evict_expired();
    }

    async fn wait(&self, id: &TaskId) {
        let mut events = self.registry.subscribe();
        loop {
            if self
                .registry
                .get(id)
                .is_some_and(|s| s.status().is_terminal() && s.base.notified)
            {
                let _ = self.registry.notifications().drain();
                return;
            }
            let _ = events.recv().await;
        }
    }
}

fn script(calls: usize, parallel: bool) -> String {
    let body = if parallel {
        format!(
            "return (await parallel(Array.from({{length: {calls}}}, (_, i) => () => agent(`task ${{i}}`, {{label: `t${{i}}`}})))).length"
        )
    } else {
        format!(
            "let n = 0\nfor (let i = 0; i < {calls}; i++) n += Number(await agent(`task ${{i}}`))\nreturn n"
        )
    };
    format!("export const meta = {{ name: 'bench', description: 'bench' }}\n{body}")
}

fn workflows(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bench = Bench::new();
    let mut group = c.benchmark_group("workflow");
    group.sample_size(10);
    let empty = script(0, false);
    group.bench_function("run_with_no_agent", |b| {
        b.iter(|| runtime.block_on(bench.run(&empty)))
    });
    let hundred = script(100, false);
    group.bench_function("100_sequential_agent_calls", |b| {
        b.iter(|| runtime.block_on(bench.run(&hundred)))
    });
    let thousand = script(1000, true);
    group.bench_function("1000_agents_in_parallel", |b| {
        b.iter(|| runtime.block_on(bench.run(&thousand)))
    });
    group.finish();
}

criterion_group!(benches, workflows);
criterion_main!(benches);
