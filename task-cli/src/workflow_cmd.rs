//! `tasks workflow run|resume|show`: JavaScript workflow scripts run by the session's
//! supervisor (task-agent's workflow engine); their agents run through the agent CLI given
//! after `--`, or the one configured (`TASKS_AGENT_COMMAND` / `agent_command`).

use std::path::PathBuf;

use serde_json::{Value, json};
use task_agent::RunnerFormat;
use task_workflow::{WorkflowExecutor, WorkflowStart, check_run_id, load_record, render_tree};

use crate::cli::{AgentCli, WorkflowArgs, WorkflowCommand};
use crate::error::{CliError, Result};
use crate::printer::Printer;
use crate::settings::Settings;
use task_session::paths::SessionPaths;
use task_session::session::Session;

/// Runs a `tasks workflow` subcommand.
pub fn execute(paths: &SessionPaths, args: WorkflowArgs, printer: Printer) -> Result<u8> {
    match args.command {
        WorkflowCommand::Run(run) => {
            let script_path = Some(absolute(run.file)?);
            start(paths, run.agents, script_path, run.args, None, printer)
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
                printer,
            )
        }
        WorkflowCommand::Show(show) => {
            let record = load_record(&paths.tasks_dir(), &show.run_id)
                .map_err(|e| CliError::invalid(e.to_string()))?;
            printer.emit(&record, &render_tree(&record))?;
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
    printer: Printer,
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
    let schedule = agents.schedule.to_schedule(&session)?;
    let caller = Session::caller()?;
    let ends = task_session::protocol::Ends::default();
    let id = session.start_with(request, caller, schedule, ends)?;
    let run_id = WorkflowExecutor::run_id_of(&id);
    let text = format!("{id}\n{run_id}\n");
    if !agents.wait {
        let value = json!({"id": id, "runId": run_id, "outputFile": session.paths().output(&id)});
        printer.emit(&value, &text)?;
        return Ok(crate::error::exit::OK);
    }
    printer.text(&text)?;
    crate::report::wait_and_report(&session, id, printer)
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path);
    }
    Ok(std::env::current_dir()
        .map_err(|e| CliError::invalid(format!("no working directory: {e}")))?
        .join(path))
}
