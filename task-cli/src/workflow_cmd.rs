//! `tasks workflow run|resume|show`: JavaScript workflow scripts run by the session's
//! supervisor (task-agent's workflow engine); their agents run through the agent CLI given
//! after `--`, or the one configured (`TASKS_AGENT_COMMAND` / `agent_command`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use task_agent::RunnerFormat;
use task_agent::workflow::{
    WorkflowExecutor, WorkflowStart, check_run_id, load_record, render_tree,
};

use crate::error::{CliError, Result};
use crate::render;
use crate::settings::Settings;
use task_session::paths::SessionPaths;
use task_session::session::Session;

/// Run, resume or show JavaScript workflow scripts whose agent() calls are background agents.
#[derive(Debug, Args)]
pub struct WorkflowArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WorkflowCommand,
}

/// The `tasks workflow` subcommands.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Start a workflow script; prints its task id and run id.
    Run(RunWorkflowArgs),
    /// Run a script again, answering unchanged agent() calls from an earlier run's journal.
    Resume(ResumeWorkflowArgs),
    /// Show a run's phases and agents as a tree.
    Show(ShowWorkflowArgs),
}

/// How a workflow's agents run, and whether to wait.
#[derive(Debug, Args)]
pub struct AgentCli {
    /// The agent CLI's event format (claude, codex, gemini, auto); default: the configured one.
    #[arg(long, value_parser = parse_runner)]
    pub runner: Option<RunnerFormat>,
    /// Wait for the run to end, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// The run's group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: crate::cli::ScheduleArgs,
    /// The agent CLI (program, then arguments); default: TASKS_AGENT_COMMAND / agent_command.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Start a workflow script; prints its task id and run id.
#[derive(Debug, Args)]
pub struct RunWorkflowArgs {
    /// The script (`export const meta = {…}` then the body).
    pub file: PathBuf,
    /// The script's `args`, as JSON.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// The agents' CLI.
    #[command(flatten)]
    pub agents: AgentCli,
}

/// Run a script again, answering unchanged agent() calls from an earlier run's journal.
#[derive(Debug, Args)]
pub struct ResumeWorkflowArgs {
    /// The run to resume (`wf_…`).
    pub run_id: String,
    /// The (edited) script; default: the run's own.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The script's `args`, as JSON.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// The agents' CLI.
    #[command(flatten)]
    pub agents: AgentCli,
}

/// Show a run's phases and agents as a tree.
#[derive(Debug, Args)]
pub struct ShowWorkflowArgs {
    /// The run (`wf_…`).
    pub run_id: String,
}

fn parse_runner(text: &str) -> std::result::Result<RunnerFormat, String> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| format!("{text:?}: expected claude, codex, gemini or auto"))
}

/// Runs a `tasks workflow` subcommand.
pub fn execute(paths: &SessionPaths, args: WorkflowArgs, json: bool) -> Result<u8> {
    match args.command {
        WorkflowCommand::Run(run) => {
            let script_path = Some(absolute(run.file)?);
            start(paths, run.agents, script_path, run.args, None, json)
        }
        WorkflowCommand::Resume(resume) => {
            check_run_id(&resume.run_id).map_err(|e| CliError::invalid(e.to_string()))?;
            let script_path = resume.script.map(absolute).transpose()?;
            start(
                paths,
                resume.agents,
                script_path,
                resume.args,
                Some(resume.run_id),
                json,
            )
        }
        WorkflowCommand::Show(show) => {
            let record = load_record(&paths.tasks_dir(), &show.run_id)
                .map_err(|e| CliError::invalid(e.to_string()))?;
            if json {
                render::json(&record)?;
            } else {
                render::out(&render_tree(&record))?;
            }
            Ok(crate::error::exit::OK)
        }
    }
}

fn start(
    paths: &SessionPaths,
    agents: AgentCli,
    script_path: Option<PathBuf>,
    args: Option<String>,
    resume_from_run_id: Option<String>,
    json: bool,
) -> Result<u8> {
    let args = args
        .map(|text| serde_json::from_str::<Value>(&text))
        .transpose()
        .map_err(|e| CliError::invalid(format!("--args is not JSON: {e}")))?;
    let session = crate::daemon::session(paths.clone())?;
    let (command, runner) = if agents.command.is_empty() {
        Settings::read(&session.config().executors)?
            .agent_runner_command()
            .map_err(CliError::invalid)?
    } else {
        (agents.command, RunnerFormat::Claude)
    };
    let request = WorkflowStart {
        command,
        runner: agents.runner.unwrap_or(runner),
        script: None,
        script_path,
        name: None,
        args,
        resume_from_run_id,
    };
    let schedule = agents.schedule.to_schedule()?;
    let caller = Session::caller()?;
    let ends = task_session::protocol::Ends::default();
    let id = session.start_with::<WorkflowExecutor>(request, caller, schedule, ends)?;
    let run_id = WorkflowExecutor::run_id_of(&id);
    if json {
        if !agents.wait {
            render::json(
                &json!({"id": id, "runId": run_id, "outputFile": session.paths().output(&id)}),
            )?;
            return Ok(crate::error::exit::OK);
        }
    } else {
        render::out(&format!("{id}\n{run_id}\n"))?;
        if !agents.wait {
            return Ok(crate::error::exit::OK);
        }
    }
    crate::commands::wait_and_report(&session, id, json)
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path);
    }
    Ok(std::env::current_dir()
        .map_err(|e| CliError::invalid(format!("no working directory: {e}")))?
        .join(path))
}
