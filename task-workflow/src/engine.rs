//! The JavaScript side of a run: one OS thread per run owns a QuickJS runtime, runs the script
//! and its hooks, and talks to the tokio side through channels. `agent()` asks the host to run
//! an agent and gets a promise the host settles later; between settlements the thread blocks
//! on its channel. An interrupt handler stops a busy script as soon as the run is stopped.

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

use rquickjs::convert::Coerced;
use rquickjs::{Context, Ctx, Exception, Function, Object, Persistent, Promise, Runtime};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::config::WorkflowConfig;
use super::heap::BoundedHeap;
use super::meta;

const PRELUDE: &str = include_str!("prelude.js");

/// An `agent()` call, for the host to run.
#[derive(Debug)]
pub(crate) struct AgentCall {
    /// Its number in the run (1-based, in call order).
    pub(crate) call: u64,
    pub(crate) prompt: String,
    pub(crate) opts: Value,
}

/// What the script tells the host.
#[derive(Debug)]
pub(crate) enum ToHost {
    Agent(AgentCall),
    Phase(String),
    Log(String),
    /// The script returned (its value as JSON) or failed.
    Finished(Result<Value, String>),
}

/// What the host tells the script.
#[derive(Debug)]
pub(crate) enum ToScript {
    /// An `agent()` call's value (`null` when the agent failed).
    Settle { call: u64, value: Value },
    /// The run was stopped: end now.
    Stop,
}

/// What the script thread needs.
#[derive(Debug)]
pub(crate) struct ScriptJob {
    /// The run id, which names the script's thread.
    pub(crate) run_id: String,
    /// The script body (after `meta`) and its `meta` as JSON.
    pub(crate) body: String,
    pub(crate) meta_json: String,
    /// `args`, as JSON (`None`: undefined).
    pub(crate) args_json: Option<String>,
    pub(crate) config: WorkflowConfig,
    /// The run's token target, if any.
    pub(crate) budget_total: Option<u64>,
    /// The directory relative `scriptPath`s of `workflow()` are resolved in.
    pub(crate) cwd: PathBuf,
    pub(crate) to_host: UnboundedSender<ToHost>,
    pub(crate) from_host: mpsc::Receiver<ToScript>,
    pub(crate) stopped: Arc<AtomicBool>,
    /// Output tokens spent by the run's agents (`budget.spent()`).
    pub(crate) spent: Arc<AtomicU64>,
}

/// Runs the script on a new thread; it reports [`ToHost::Finished`] last.
pub(crate) fn spawn(job: ScriptJob) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(job.run_id.clone())
        .stack_size(job.config.engine_stack_bytes.saturating_mul(2).max(4 << 20))
        .spawn(move || {
            let to_host = job.to_host.clone();
            let outcome = run(job);
            let _ = to_host.send(ToHost::Finished(outcome));
        })
        .map(drop)
}

/// The script's side of its calls: counters and the channel to the host.
struct Host {
    to_host: UnboundedSender<ToHost>,
    calls: Cell<u64>,
    outstanding: Cell<u64>,
    max_agents: u64,
    budget_total: Option<u64>,
    spent: Arc<AtomicU64>,
    cwd: PathBuf,
    workflow_dirs: Vec<PathBuf>,
}

/// What a failure of the script is reported with: whether its heap refused an allocation.
struct Failures {
    heap_refused: Arc<AtomicBool>,
    heap_limit: usize,
}

fn run(job: ScriptJob) -> Result<Value, String> {
    let (heap, heap_refused) = BoundedHeap::new(job.config.engine_memory_bytes);
    let failures = Failures {
        heap_refused,
        heap_limit: job.config.engine_memory_bytes,
    };
    let runtime = Runtime::new_with_alloc(heap).map_err(|e| e.to_string())?;
    runtime.set_max_stack_size(job.config.engine_stack_bytes);
    let stopped = Arc::clone(&job.stopped);
    runtime.set_interrupt_handler(Some(Box::new(move || stopped.load(Ordering::Relaxed))));
    let context = Context::full(&runtime).map_err(|e| e.to_string())?;
    let host = Rc::new(Host {
        to_host: job.to_host.clone(),
        calls: Cell::new(0),
        outstanding: Cell::new(0),
        max_agents: job.config.max_agents,
        budget_total: job.budget_total,
        spent: Arc::clone(&job.spent),
        cwd: job.cwd.clone(),
        workflow_dirs: job.config.workflow_dirs.clone(),
    });
    let (settle, promise) = context.with(|ctx| start(&ctx, &host, &job, &failures))?;
    loop {
        // A job that throws rejects its promise; the script sees it.
        while runtime.execute_pending_job().unwrap_or(true) {}
        if job.stopped.load(Ordering::Relaxed) {
            return Err("the workflow was stopped".into());
        }
        let finished = context.with(|ctx| match promise.clone().restore(&ctx) {
            Ok(promise) => match promise.result::<String>() {
                None => None,
                Some(Ok(json)) => Some(serde_json::from_str(&json).map_err(|e| e.to_string())),
                Some(Err(error)) => Some(Err(failures.text(&ctx, error))),
            },
            Err(error) => Some(Err(error.to_string())),
        });
        if let Some(outcome) = finished {
            return outcome;
        }
        if host.outstanding.get() == 0 {
            return Err("the script is waiting for a promise that nothing will settle".into());
        }
        match job.from_host.recv() {
            Ok(ToScript::Settle { call, value }) => {
                host.outstanding
                    .set(host.outstanding.get().saturating_sub(1));
                context.with(|ctx| {
                    let outcome = settle.clone().restore(&ctx).and_then(|settle| {
                        settle.call::<_, ()>((call as f64, value.to_string()))
                    });
                    if let Err(error) = outcome {
                        tracing::warn!(error = %failures.text(&ctx, error), "settling an agent() call");
                    }
                });
            }
            Ok(ToScript::Stop) | Err(_) => return Err("the workflow was stopped".into()),
        }
    }
}

type Started = (Persistent<Function<'static>>, Persistent<Promise<'static>>);

/// Installs the hooks and starts the script: the settle function and the script's promise.
fn start(
    ctx: &Ctx<'_>,
    host: &Rc<Host>,
    job: &ScriptJob,
    failures: &Failures,
) -> Result<Started, String> {
    let catch = |error| failures.text(ctx, error);
    let hooks = host_object(ctx, host).map_err(catch)?;
    let prelude: Function = ctx.eval(PRELUDE).map_err(catch)?;
    let budget = job
        .budget_total
        .map_or(rquickjs::Value::new_null(ctx.clone()), |total| {
            rquickjs::Value::new_number(ctx.clone(), total as f64)
        });
    let settle: Function = prelude
        .call((hooks, job.config.max_items as f64, budget))
        .map_err(catch)?;
    let args = job.args_json.as_deref().unwrap_or("undefined");
    let source = format!(
        "globalThis.args = {args};\n(async () => {{ const meta = {meta};\n{body}\n}})()\
         .then((value) => JSON.stringify(value === undefined ? null : value))",
        meta = job.meta_json,
        body = job.body,
    );
    let promise: Promise = ctx.eval(source).map_err(catch)?;
    Ok((
        Persistent::save(ctx, settle),
        Persistent::save(ctx, promise),
    ))
}

/// The `host` object the prelude's hooks call.
fn host_object<'js>(ctx: &Ctx<'js>, host: &Rc<Host>) -> rquickjs::Result<Object<'js>> {
    let hooks = Object::new(ctx.clone())?;
    let agent_host = Rc::clone(host);
    hooks.set(
        "agent",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, prompt: String, opts: String| -> rquickjs::Result<f64> {
                agent_host
                    .agent(prompt, &opts)
                    .map(|call| call as f64)
                    .map_err(|message| Exception::throw_message(&ctx, &message))
            },
        )?,
    )?;
    let phase_host = Rc::clone(host);
    hooks.set(
        "phase",
        Function::new(ctx.clone(), move |title: String| {
            let _ = phase_host.to_host.send(ToHost::Phase(title));
        })?,
    )?;
    let log_host = Rc::clone(host);
    hooks.set(
        "log",
        Function::new(ctx.clone(), move |message: String| {
            let _ = log_host.to_host.send(ToHost::Log(message));
        })?,
    )?;
    let spent_host = Rc::clone(host);
    hooks.set(
        "spent",
        Function::new(ctx.clone(), move || {
            spent_host.spent.load(Ordering::Relaxed) as f64
        })?,
    )?;
    let load_host = Rc::clone(host);
    hooks.set(
        "loadWorkflow",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, reference: String| -> rquickjs::Result<String> {
                load_host
                    .load_workflow(&reference)
                    .map_err(|message| Exception::throw_message(&ctx, &message))
            },
        )?,
    )?;
    Ok(hooks)
}

impl Host {
    /// Checks the run's limits and hands the call to the host; its number.
    fn agent(&self, prompt: String, opts: &str) -> Result<u64, String> {
        let made = self.calls.get();
        if made >= self.max_agents {
            return Err(format!(
                "a workflow runs at most {} agents: agent() refused",
                self.max_agents
            ));
        }
        if let Some(total) = self.budget_total
            && self.spent.load(Ordering::Relaxed) >= total
        {
            return Err(format!(
                "the token budget ({total}) is spent: agent() refused"
            ));
        }
        let opts: Value = serde_json::from_str(opts).map_err(|e| e.to_string())?;
        // A bad placement throws in the script, before anything is counted.
        placement_of(&opts)?;
        let call = made + 1;
        self.to_host
            .send(ToHost::Agent(AgentCall { call, prompt, opts }))
            .map_err(|_| "the workflow was stopped".to_owned())?;
        self.calls.set(call);
        self.outstanding.set(self.outstanding.get() + 1);
        Ok(call)
    }

    /// The source of a child workflow as a function `(args, workflow) => Promise`.
    fn load_workflow(&self, reference: &str) -> Result<String, String> {
        let reference: Value = serde_json::from_str(reference).map_err(|e| e.to_string())?;
        let path = super::files::resolve_reference(&reference, &self.cwd, &self.workflow_dirs)
            .map_err(|e| e.to_string())?;
        let source = super::files::read_script(&path).map_err(|e| e.to_string())?;
        let parsed = meta::parse(&source).map_err(|e| e.to_string())?;
        Ok(format!(
            "(async (args, workflow) => {{ const meta = {};\n{}\n}})",
            parsed.meta_value, parsed.body
        ))
    }
}

impl Failures {
    /// What `error` says: out of memory when the heap refused an allocation and the script
    /// failed with what QuickJS throws then (`null`, when even its error could not be made, or
    /// its `InternalError`); otherwise what was thrown ([`thrown_text`]).
    fn text(&self, ctx: &Ctx<'_>, error: rquickjs::Error) -> String {
        if !matches!(error, rquickjs::Error::Exception) {
            return error.to_string();
        }
        let thrown = ctx.catch();
        let out_of_memory = thrown.is_null()
            || thrown
                .as_exception()
                .and_then(Exception::message)
                .is_some_and(|message| message == "out of memory");
        if out_of_memory && self.heap_refused.load(Ordering::Relaxed) {
            return format!(
                "workflow script ran out of memory: its heap is limited to {} MiB",
                self.heap_limit >> 20
            );
        }
        thrown_text(&thrown)
    }
}

/// The most characters of a thrown value's text kept in a failure message.
const MAX_THROWN_CHARS: usize = 2000;

/// Names what the script threw: an error's message (and stack); for anything else
/// `workflow script threw {value}`, the value as JavaScript prints it (`42`, `null`, `3.5`), a
/// string quoted, a symbol as `Symbol(description)`, an object by its `message` if it has one,
/// else its JSON, else its `toString()`. Cut to [`MAX_THROWN_CHARS`].
fn thrown_text(thrown: &rquickjs::Value<'_>) -> String {
    if let Some(exception) = thrown.as_exception() {
        let message = exception.message().unwrap_or_default();
        if message.is_empty() {
            // An error without a message: its name (`TypeError`).
            return cut(coerced(thrown).unwrap_or_else(|| "Error".to_owned()));
        }
        return cut(match exception.stack() {
            Some(stack) if !stack.trim().is_empty() => format!("{message}\n{}", stack.trim_end()),
            _ => message,
        });
    }
    let what = if let Some(text) = thrown.as_string() {
        let text = text.to_string().unwrap_or_default();
        serde_json::Value::String(text).to_string()
    } else if let Some(symbol) = thrown.as_symbol() {
        let description = symbol
            .description()
            .ok()
            .and_then(|d| d.as_string().and_then(|s| s.to_string().ok()));
        format!("Symbol({})", description.unwrap_or_default())
    } else if let Some(object) = thrown.as_object() {
        let message = object
            .get::<_, rquickjs::Value>("message")
            .ok()
            .and_then(|m| m.as_string().and_then(|s| s.to_string().ok()))
            .filter(|m| !m.is_empty());
        if let Some(message) = message {
            return cut(message);
        }
        thrown
            .ctx()
            .json_stringify(thrown.clone())
            .ok()
            .flatten()
            .and_then(|json| json.to_string().ok())
            .or_else(|| coerced(thrown))
            .unwrap_or_else(|| format!("a value of type {}", thrown.type_name()))
    } else {
        coerced(thrown).unwrap_or_else(|| format!("a value of type {}", thrown.type_name()))
    };
    cut(format!("workflow script threw {what}"))
}

/// `String(value)`, when it can be had.
fn coerced(value: &rquickjs::Value<'_>) -> Option<String> {
    let text = value.get::<Coerced<String>>();
    if text.is_err() {
        // A `toString` that threw left its exception pending: drop it.
        drop(value.ctx().catch());
    }
    text.ok().map(|Coerced(text)| text)
}

/// `text` cut to [`MAX_THROWN_CHARS`] characters, marked when cut.
fn cut(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(MAX_THROWN_CHARS) {
        text.truncate(at);
        text.push('…');
    }
    text
}

/// Where `agent()`'s `opts.on` places the agent (`"slurm"`, `"slurm:PARTITION"`, `"local"`);
/// `None` without one (the default placement).
///
/// # Errors
/// An `on` that is not a string naming a placement, with why.
pub(crate) fn placement_of(
    opts: &Value,
) -> Result<Option<task_protocol::start::Placement>, String> {
    match opts.get("on") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => task_protocol::start::Placement::parse(text)
            .map(Some)
            .map_err(|reason| format!("agent(): opts.on: {reason}")),
        Some(other) => Err(format!(
            "agent(): opts.on must be a string (\"slurm\", \"slurm:PARTITION\", \"local\"), not {other}"
        )),
    }
}
