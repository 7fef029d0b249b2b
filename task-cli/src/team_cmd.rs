//! `tasks team {spawn|ls|shutdown}` and `tasks dream`: the front ends of teammates and dreams
//! (task-agent's `team` and `dream` modules, run by the supervisor).

use serde_json::json;
use task_agent::dream::DreamStart;
use task_core::{Address, TaskId, TaskKind, TaskType};
use task_team::{Protocol, TeammateStart};

use crate::cli::{DreamArgs, TeamArgs, TeamCommand, TeamShutdownArgs, TeamSpawnArgs};
use crate::error::{CliError, Result, exit};
use crate::printer::Printer;
use crate::render;
use crate::report::{print_kills, print_started};
use task_session::record::TaskRecord;
use task_session::session::Session;

/// Runs `tasks team …`.
pub fn team(session: &Session, args: TeamArgs, printer: Printer) -> Result<u8> {
    match args.command {
        TeamCommand::Spawn(args) => spawn(session, *args, printer),
        TeamCommand::Ls => ls(session, printer),
        TeamCommand::Shutdown(args) => shutdown(session, &args, printer),
    }
}

fn spawn(session: &Session, args: TeamSpawnArgs, printer: Printer) -> Result<u8> {
    let (name, team) = args
        .member
        .split_once('@')
        .ok_or_else(|| CliError::invalid(format!("{:?}: expected NAME@TEAM", args.member)))?;
    let start = TeammateStart {
        name: name.to_owned(),
        team: team.to_owned(),
        command: args.command,
        prompt: args.prompt,
        plan: args.plan,
        color: args.color,
        worktree: args.isolation.request(),
        budget: args.budget.budget(),
        placement: args.on.placement(),
    };
    let schedule = args.schedule.to_schedule(session)?;
    let caller = Session::caller()?;
    let id = session.start_with(start, caller, schedule, args.ends.into())?;
    print_started(session, id, printer)
}

fn ls(session: &Session, printer: Printer) -> Result<u8> {
    let listing = session.tasks()?;
    let rows: Vec<serde_json::Value> = listing
        .tasks
        .iter()
        .filter(|record| record.task.base.task_type == TaskType::InProcessTeammate)
        .filter_map(|record| match &record.task.kind {
            TaskKind::Teammate(mate) => Some(json!({
                "id": record.task.base.id,
                "teammate": format!("{}@{}", mate.identity.agent_name, mate.identity.team_name),
                "status": record.task.base.status,
                "activity": render::teammate_activity(&record.task),
                "awaitingPlanApproval": mate.awaiting_plan_approval,
                "shutdownRequestedAt": mate.shutdown_requested_at,
            })),
            _ => None,
        })
        .collect();
    let mut text = format!(
        "{:<10} {:<28} {:<10} {}\n",
        "ID", "TEAMMATE", "STATUS", "ACTIVITY"
    );
    for row in &rows {
        let field = |key: &str| row[key].as_str().unwrap_or_default().to_owned();
        text.push_str(&format!(
            "{:<10} {:<28} {:<10} {}\n",
            field("id"),
            field("teammate"),
            field("status"),
            field("activity")
        ));
    }
    printer.emit(&rows, &text)?;
    Ok(exit::OK)
}

fn shutdown(session: &Session, args: &TeamShutdownArgs, printer: Printer) -> Result<u8> {
    if args.force {
        return force_shutdown(session, &args.name, printer);
    }
    let request_id = format!("shutdown-{}", task_core::now_ms());
    let request = Protocol::ShutdownRequest {
        request_id: request_id.clone(),
        reason: args.reason.clone(),
    };
    let text = serde_json::to_string(&request)
        .map_err(|e| CliError::invalid(format!("cannot encode the request: {e}")))?;
    let sent = session.send_message(&args.name, &text)?;
    let value = json!({
        "requestId": request_id,
        "delivered": sent.delivered(),
        "reply": sent.model_result(&args.name),
    });
    printer.emit(&value, &format!("{}\n", sent.text(&args.name)))?;
    Ok(if sent.delivered() {
        exit::OK
    } else {
        exit::UNKNOWN_TASK
    })
}

/// `team shutdown --force`: kills the live teammate `name` names.
fn force_shutdown(session: &Session, name: &Address, printer: Printer) -> Result<u8> {
    let Some(id) = live_teammate(session, name)? else {
        return Err(CliError::invalid(format!("no live teammate named {name}")));
    };
    print_kills(&session.kill(&[id])?, printer)
}

/// The live teammate `address` names, as the supervisor resolves one: a bare name must be
/// unique among the live teammates.
fn live_teammate(session: &Session, address: &Address) -> Result<Option<TaskId>> {
    let listing = session.tasks()?;
    let named: Vec<TaskId> = listing
        .tasks
        .iter()
        .filter(|record| !record.is_terminal())
        .filter(|record| match (&record.task.kind, address) {
            (TaskKind::Teammate(_), Address::Task(id)) => record.id() == *id,
            (TaskKind::Teammate(mate), Address::Teammate { name, team }) => {
                mate.identity.agent_name == *name && mate.identity.team_name == *team
            }
            (TaskKind::Teammate(mate), Address::Name(name)) => mate.identity.agent_name == *name,
            _ => false,
        })
        .map(TaskRecord::id)
        .collect();
    Ok(match named.as_slice() {
        [only] => Some(*only),
        _ => None,
    })
}

/// Runs `tasks dream …`.
pub fn dream(session: &Session, args: DreamArgs, printer: Printer) -> Result<u8> {
    let lock = args.lock.unwrap_or_else(|| {
        session
            .paths()
            .dir()
            .join("dream")
            .join(".consolidate-lock")
    });
    let start = DreamStart {
        command: args.command,
        runner: task_agent::RunnerFormat::Claude,
        prompt: args.prompt,
        lock,
    };
    let id = session.start(start, Session::caller()?)?;
    print_started(session, id, printer)
}
