//! Workflows (`local_workflow`, SPEC §9): the reference's JavaScript workflow scripts, run on
//! an embedded QuickJS with the hooks its `Workflow` tool documents (`agent`, `parallel`,
//! `pipeline`, `phase`, `log`, `args`, `budget`, `workflow`), every `agent()` a real
//! `local_agent` child task, a journal that lets a later run resume, and the reference's
//! progress entries, run record, summary and notification.
//!
//! **Why a crate of its own:** it brings QuickJS (a C build) and JSON5/JSON Schema with it; a
//! harness, a server (task-serve) or a build that runs no workflows links task-agent without
//! them, and this crate sits on top of task-agent's executor, whose `local_agent` tasks a
//! run's `agent()` calls start.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use task_agent::{AgentConfig, AgentExecutor, CliFormat, CommandRunner};
//! use task_core::Registry;
//! use task_workflow::{ScriptSource, WorkflowConfig, WorkflowExecutor, WorkflowRequest};
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Arc::new(Registry::default());
//! let agents = AgentExecutor::new(Arc::clone(&registry), "/tmp/tasks", AgentConfig::default())
//!     .register_with_registry();
//! let workflows = WorkflowExecutor::new(agents, "/tmp/tasks", WorkflowConfig::default())
//!     .register_with_registry();
//! let claude = CommandRunner::new(["claude"], CliFormat::Claude, AgentConfig::default())?;
//! let script = r#"export const meta = {name: "review", description: "two reviews"};
//! const [a, b] = await parallel([() => agent("review a.rs"), () => agent("review b.rs")]);"#;
//! let run = workflows.start(WorkflowRequest::new(
//!     Arc::new(claude),
//!     ScriptSource::Inline(script.to_owned()),
//! ))?;
//! println!("workflow {} (run {})", run.id, run.run_id);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod config;
mod engine;
mod error;
mod files;
mod heap;
mod journal;
mod launch;
mod meta;
mod progress;
mod run;
mod show;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use dashmap::DashMap;
use serde_json::Value;
use task_core::{
    Delivery, EndReason, KillError, Notification, Registry, Task, TaskId, TaskKind, TaskState,
    TaskStatus, TaskType, TerminalStatus, WorkflowState, now_ms,
};
use tokio::sync::Semaphore;

pub use config::{
    MAX_AGENTS_PER_RUN, MAX_CONCURRENT_AGENTS, MAX_ITEMS_PER_CALL, PREVIEW_CHARS,
    WORKFLOW_AGENT_TYPE, WorkflowConfig, default_concurrency,
};
pub use error::WorkflowError;
pub use files::{RunPaths, check_run_id};
pub use journal::{JournalRecord, call_key};
pub use launch::WorkflowStart;
pub use meta::{Meta, PhaseMeta};
pub use progress::{AgentEntry, AgentStage};
pub use show::{load_record, render_tree};
pub use task_protocol::texts::workflow_launch as workflow_launch_text;

use engine::ScriptJob;
use journal::Journal;
use progress::Book;
use run::{Inherited, Run, RunOrigin};
use task_agent::AgentExecutor;
use task_agent::AgentRunner;

/// Where a run's script comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptSource {
    /// The script's text (kept under `workflows/scripts/`).
    Inline(String),
    /// A script file (its path is the run's `scriptPath`).
    Path(PathBuf),
    /// A saved workflow, `{name}.js` in a configured workflows directory.
    Name(String),
    /// The script of the run being resumed.
    Resumed,
}

/// A workflow to run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkflowRequest {
    /// What runs its agents.
    pub runner: Arc<dyn AgentRunner>,
    /// Its script.
    pub script: ScriptSource,
    /// The script's `args`.
    pub args: Option<Value>,
    /// A previous run (`wf_…`) whose journal answers unchanged calls.
    pub resume_from: Option<String>,
    /// The working directory of its agents (and of relative `scriptPath`s).
    pub cwd: Option<PathBuf>,
    /// Environment of its agents.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Whether `env` is the agents' whole environment.
    pub replace_env: bool,
    /// The tool call that started it.
    pub tool_use_id: Option<String>,
    /// The agent that started it (it is stopped when that agent ends).
    pub owner_agent_id: Option<TaskId>,
    /// A token target: `agent()` throws once the run's agents spent it.
    pub budget_total: Option<u64>,
    /// The id it must get instead of a new one: a queued task registered again, under the id
    /// its caller holds, by the supervisor that succeeded the one it queued under
    /// (task-core's `Caller::task_id`); the files its first registration left are made again.
    pub id: Option<TaskId>,
}

impl WorkflowRequest {
    /// A request to run `script` with `runner`; everything else default.
    pub fn new(runner: Arc<dyn AgentRunner>, script: ScriptSource) -> Self {
        WorkflowRequest {
            runner,
            script,
            args: None,
            resume_from: None,
            cwd: None,
            env: Vec::new(),
            replace_env: false,
            tool_use_id: None,
            owner_agent_id: None,
            budget_total: None,
            id: None,
        }
    }
}

/// A started run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowHandle {
    /// Its task id (`w…`).
    pub id: TaskId,
    /// Its run id (`wf_…`).
    pub run_id: String,
    /// The task's output file (the run summary once it ends).
    pub output_file: PathBuf,
    /// Its files.
    pub paths: RunPaths,
    /// Where its script is kept.
    pub script_path: PathBuf,
}

/// Runs `local_workflow` tasks; their agents run through an [`AgentExecutor`].
#[derive(Debug, Clone)]
pub struct WorkflowExecutor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    agents: AgentExecutor,
    output_dir: PathBuf,
    config: WorkflowConfig,
    runs: DashMap<TaskId, Arc<Run>>,
    task: Arc<WorkflowTask>,
}

impl WorkflowExecutor {
    /// An executor keeping runs under `{output_dir}/workflows/` and summaries in
    /// `{output_dir}/{id}.output`; agents run through `agents` (same registry).
    pub fn new(
        agents: AgentExecutor,
        output_dir: impl Into<PathBuf>,
        config: WorkflowConfig,
    ) -> Self {
        let inner = Arc::new_cyclic(|weak| Inner {
            agents,
            output_dir: output_dir.into(),
            config,
            runs: DashMap::new(),
            task: Arc::new(WorkflowTask {
                inner: weak.clone(),
            }),
        });
        WorkflowExecutor { inner }
    }

    /// Registers its [`Task`] (kill, eviction) with the registry for `local_workflow`.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        let task: Arc<dyn Task> = Arc::clone(&self.inner.task) as Arc<dyn Task>;
        self.registry()
            .register_executor(TaskType::LocalWorkflow, task);
        self
    }

    /// The registry it records into.
    pub fn registry(&self) -> &Arc<Registry> {
        self.inner.agents.registry()
    }

    /// The directory runs are kept under (`{output_dir}`).
    pub fn output_dir(&self) -> &Path {
        &self.inner.output_dir
    }

    /// Starts a run in the background: registers the task, starts the script on its own
    /// thread and answers it on the current tokio runtime. Notifies once when it ends
    /// (priority `later`); a kill ends it and its agents with no notification for the model.
    ///
    /// # Errors
    /// Script and meta errors (nothing registered), an unknown run to resume, output errors.
    pub fn start(&self, request: WorkflowRequest) -> Result<WorkflowHandle, WorkflowError> {
        let prepared = self.prepare(request)?;
        let handle = prepared.handle.clone();
        self.begin(prepared)?;
        Ok(handle)
    }

    /// The run id of workflow task `id` (`wf_` and the id's random part).
    pub fn run_id_of(id: &TaskId) -> String {
        task_protocol::workflow::run_id_of(id)
    }

    /// Marks a prepared run running, starts its script thread and its host loop.
    fn begin(&self, prepared: Prepared) -> Result<(), WorkflowError> {
        let Prepared { handle, run, job } = prepared;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| WorkflowError::Engine(format!("no tokio runtime: {e}")));
        let (to_host, from_script) = tokio::sync::mpsc::unbounded_channel();
        let job = ScriptJob { to_host, ..job };
        self.registry()
            .transition(&handle.id, TaskStatus::Running)?;
        let spawned = runtime.and_then(|runtime| {
            engine::spawn(job)
                .map(|()| runtime)
                .map_err(|e| WorkflowError::Engine(e.to_string()))
        });
        let runtime = match spawned {
            Ok(runtime) => runtime,
            Err(error) => {
                let message = error.to_string();
                let _ = self
                    .registry()
                    .transition_with(&handle.id, TaskStatus::Failed, |state| {
                        state.base.notified = true;
                        state.base.end_reason = Some(EndReason::SpawnFailed {
                            error: message.clone(),
                        });
                    });
                return Err(error);
            }
        };
        let runs = Arc::downgrade(&self.inner);
        let id = handle.id;
        runtime.spawn(async move {
            run.drive(from_script).await;
            if let Some(inner) = runs.upgrade() {
                inner.runs.remove(&id);
            }
        });
        Ok(())
    }

    /// Everything up to the start: files, task, run, the script's job (its channel to the
    /// host is set by `start`).
    fn prepare(&self, request: WorkflowRequest) -> Result<Prepared, WorkflowError> {
        let output_dir = &self.inner.output_dir;
        let previous = match &request.resume_from {
            Some(run_id) => Some(load_previous(output_dir, run_id)?),
            None => None,
        };
        let cwd = request
            .cwd
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
        let (script, given_path) = self.script_text(&request, previous.as_ref(), &cwd)?;
        let parsed = meta::parse(&script)?;
        let id = match request.id {
            Some(id) => id,
            None => TaskId::generate(TaskType::LocalWorkflow)?,
        };
        let run_id = Self::run_id_of(&id);
        let paths = RunPaths::new(output_dir, &run_id)?;
        create_dir(&paths.dir)?;
        create_dir(&paths.scripts)?;
        let kept_script = paths.scripts.join(format!(
            "{}-{run_id}.js",
            files::file_stem(&parsed.meta.name)
        ));
        if request.id.is_some() {
            clear_unstarted(id, &paths, &kept_script);
        }
        let script_path = match given_path {
            Some(path) => path,
            None => {
                let path = kept_script;
                let mut file = task_output::open::create_output_file(&path)?;
                std::io::Write::write_all(&mut file, script.as_bytes())
                    .map_err(|e| WorkflowError::file(&path, e))?;
                path
            }
        };
        let output_file = output_dir.join(format!("{id}.output"));
        drop(task_output::open::create_output_file(&output_file)?);
        let journal = Journal::create(&paths.journal)?;
        let state = WorkflowState {
            run_id: Some(run_id.clone()),
            workflow_name: Some(parsed.meta.name.clone()),
            ..WorkflowState::default()
        };
        let mut task = TaskState::new(
            id,
            &parsed.meta.description,
            &output_file,
            TaskKind::Workflow(Box::new(state)),
        )?
        .owned_by(request.owner_agent_id);
        task.base.tool_use_id = request.tool_use_id.clone();
        self.registry().register(task)?;
        let (to_script, from_host) = std::sync::mpsc::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let spent = Arc::new(AtomicU64::new(0));
        let config = self.inner.config.clone();
        let job = ScriptJob {
            run_id: run_id.clone(),
            body: parsed.body.clone(),
            meta_json: parsed.meta_value.to_string(),
            args_json: request.args.as_ref().map(Value::to_string),
            config: config.clone(),
            budget_total: request.budget_total,
            cwd: cwd.clone(),
            to_host: tokio::sync::mpsc::unbounded_channel().0,
            from_host,
            stopped: Arc::clone(&stopped),
            spent: Arc::clone(&spent),
        };
        let run = Arc::new(Run {
            registry: Arc::clone(self.registry()),
            agents: self.inner.agents.clone(),
            runner: Arc::clone(&request.runner),
            slots: Arc::new(Semaphore::new(config.concurrency.max(1))),
            config,
            id,
            run_id: run_id.clone(),
            paths: paths.clone(),
            output_file: output_file.clone(),
            origin: RunOrigin {
                script,
                script_path: script_path.clone(),
                meta: parsed.meta.clone(),
                start_time: now_ms(),
                resumed_from: request.resume_from.clone(),
            },
            inherited: Inherited {
                cwd: Some(cwd),
                env: request.env.clone(),
                replace_env: request.replace_env,
            },
            journal,
            cache: previous.map(|p| p.results).unwrap_or_default(),
            book: Mutex::new(Book::new(parsed.meta.phases.clone())),
            seen: Mutex::new(Default::default()),
            stopped,
            closed: AtomicBool::new(false),
            gate: tokio::sync::Mutex::new(()),
            to_script,
            spent,
            started: Instant::now(),
        });
        run.write_record("running", &Value::Null, None);
        self.inner.runs.insert(id, Arc::clone(&run));
        let handle = WorkflowHandle {
            id,
            run_id,
            output_file,
            paths,
            script_path,
        };
        Ok(Prepared { handle, run, job })
    }

    /// The script's text and, when it is a file, its path.
    fn script_text(
        &self,
        request: &WorkflowRequest,
        previous: Option<&Previous>,
        cwd: &Path,
    ) -> Result<(String, Option<PathBuf>), WorkflowError> {
        let path = match &request.script {
            ScriptSource::Inline(text) => return Ok((text.clone(), None)),
            ScriptSource::Path(path) => cwd.join(path),
            ScriptSource::Name(name) => files::resolve_reference(
                &Value::String(name.clone()),
                cwd,
                &self.inner.config.workflow_dirs,
            )?,
            ScriptSource::Resumed => match previous {
                Some(previous) => return Ok((previous.script.clone(), None)),
                None => return Err(WorkflowError::Script("nothing to resume".into())),
            },
        };
        Ok((files::read_script(&path)?, Some(path)))
    }
}

/// A run registered `pending`, not started yet.
struct Prepared {
    handle: WorkflowHandle,
    run: Arc<Run>,
    job: ScriptJob,
}

/// What a resumed run takes from its predecessor.
struct Previous {
    script: String,
    results: std::collections::HashMap<String, (String, Value)>,
}

fn load_previous(output_dir: &Path, run_id: &str) -> Result<Previous, WorkflowError> {
    let paths = RunPaths::new(output_dir, run_id)?;
    if !paths.record.is_file() {
        return Err(WorkflowError::UnknownRun(run_id.to_owned()));
    }
    let record = files::read_json(&paths.record)?;
    let script = record
        .get("script")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let results = journal::load_results(&paths.journal)?;
    Ok(Previous { script, results })
}

/// Removes what the first registration of run `id` left, registered again under its id after
/// it waited and never ran: its empty journal and the copy of its script. A journal with
/// anything in it is kept (the run ran), and registering again then fails on it.
fn clear_unstarted(id: TaskId, paths: &RunPaths, script: &Path) {
    if std::fs::metadata(&paths.journal).is_ok_and(|meta| meta.len() != 0) {
        return;
    }
    task_agent::remove_left(id, [paths.journal.as_path(), script]);
}

fn create_dir(dir: &Path) -> Result<(), WorkflowError> {
    std::fs::create_dir_all(dir).map_err(|e| WorkflowError::file(dir, e))
}

/// The `local_workflow` policies: a kill stops the script and every agent of the run, with
/// no notification for the model (SDK status `stopped`).
#[derive(Debug)]
struct WorkflowTask {
    inner: std::sync::Weak<Inner>,
}

#[async_trait]
impl Task for WorkflowTask {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        let marked = registry.transition_with(id, TaskStatus::Killed, |state| {
            state.base.end_reason = Some(EndReason::Killed);
        });
        let Ok(state) = marked else {
            return Ok(());
        };
        let summary = format!(
            "Dynamic workflow \"{}\" was stopped",
            state.base.description
        );
        let notification = Notification::for_task(&state, Some(TerminalStatus::Killed), summary);
        registry.notify_once(id, notification, Delivery::Silent);
        let run = self
            .inner
            .upgrade()
            .and_then(|inner| inner.runs.remove(id).map(|(_, run)| run));
        match run {
            Some(run) => run.stop().await,
            None => {
                registry.kill_tasks_for_agent(*id).await;
            }
        }
        Ok(())
    }
}
