//! `tasks team {spawn|ls|shutdown}` and `tasks dream`: the front ends of teammates and dreams
//! (task-agent's `team` and `dream` modules, run by the supervisor).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;
use task_agent::dream::{DreamExecutor, DreamStart};
use task_agent::team::{Protocol, TeamExecutor, TeammateStart};
use task_core::{Address, TaskId, TaskKind, TaskType};

use crate::commands::print_started;
use crate::error::{CliError, Result, exit};
use crate::render;
use task_session::record::TaskRecord;
use task_session::session::Session;

/// The prompt of a dream when none is given.
pub const DEFAULT_DREAM_PROMPT: &str =
    "Review the recent sessions and consolidate what is worth remembering into the memory files.";

/// Teammates NAME@TEAM with mailboxes: spawn, list, shut down (message them with `send`).
#[derive(Debug, Args)]
pub struct TeamArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TeamCommand,
}

/// The `tasks team` subcommands.
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Spawn a teammate NAME@TEAM: one long-lived agent CLI fed through its stream-json input;
    /// messages sent to it (`tasks send NAME …`) reach it as soon as it is idle.
    Spawn(Box<TeamSpawnArgs>),
    /// List the session's teammates: NAME@TEAM, status, idle or working.
    Ls,
    /// Ask a teammate to shut down (a `shutdown_request`; it ends once it approves).
    Shutdown(TeamShutdownArgs),
}

/// Spawn a teammate NAME@TEAM: one long-lived agent CLI fed through its stream-json input.
#[derive(Debug, Args)]
pub struct TeamSpawnArgs {
    /// The teammate, `NAME@TEAM`.
    pub member: String,
    /// Plan mode: its first turn is a plan that the lead must approve before it acts.
    #[arg(long)]
    pub plan: bool,
    /// Its first turn.
    #[arg(
        long,
        short,
        default_value = "You have joined the team. Wait for instructions."
    )]
    pub prompt: String,
    /// Its display colour.
    #[arg(long)]
    pub color: Option<String>,
    /// Group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: crate::cli::ScheduleArgs,
    /// `--worktree`, `--worktree-branch`: the teammate works in a git worktree of its own
    /// (its branch `tasks/{name}-{team}-{id}`), removed when it ends unchanged.
    #[command(flatten)]
    pub isolation: crate::cli::WorktreeFlags,
    /// `--timeout`, `--max-turns`, `--max-tokens`: it ends failed once it used one up.
    #[command(flatten)]
    pub budget: crate::cli::BudgetArgs,
    /// What the task brings for its end.
    #[command(flatten)]
    pub ends: crate::cli::EndArgs,
    /// The agent CLI (Claude Code's stream-json): program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Ask a teammate to shut down (a `shutdown_request`; it ends once it approves, or is ended
/// `killed` when it has not approved within `team_shutdown_timeout_ms`, 60 s by default).
#[derive(Debug, Args)]
pub struct TeamShutdownArgs {
    /// The teammate: NAME, NAME@TEAM or its task id.
    pub name: Address,
    /// Why (shown to the teammate).
    #[arg(long, conflicts_with = "force")]
    pub reason: Option<String>,
    /// End it at once (`killed`), without asking.
    #[arg(long)]
    pub force: bool,
}

/// Start a dream: a memory-consolidation agent under the consolidation lock.
#[derive(Debug, Args)]
pub struct DreamArgs {
    /// The consolidation prompt.
    #[arg(long, short, default_value = DEFAULT_DREAM_PROMPT)]
    pub prompt: String,
    /// The consolidation lock file (default `{session}/dream/.consolidate-lock`).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// The agent CLI: program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Runs `tasks team …`.
pub fn team(session: &Session, args: TeamArgs, json: bool) -> Result<u8> {
    match args.command {
        TeamCommand::Spawn(args) => spawn(session, *args, json),
        TeamCommand::Ls => ls(session, json),
        TeamCommand::Shutdown(args) => shutdown(session, &args, json),
    }
}

fn spawn(session: &Session, args: TeamSpawnArgs, json: bool) -> Result<u8> {
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
    };
    let schedule = args.schedule.to_schedule()?;
    let caller = Session::caller()?;
    let id = session.start_with::<TeamExecutor>(start, caller, schedule, args.ends.into())?;
    print_started(session, id, json)
}

fn ls(session: &Session, json: bool) -> Result<u8> {
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
    if json {
        render::json(&rows)?;
        return Ok(exit::OK);
    }
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
    render::out(&text)?;
    Ok(exit::OK)
}

fn shutdown(session: &Session, args: &TeamShutdownArgs, json: bool) -> Result<u8> {
    if args.force {
        return force_shutdown(session, &args.name, json);
    }
    let request_id = format!("shutdown-{}", task_core::now_ms());
    let request = Protocol::ShutdownRequest {
        request_id: request_id.clone(),
        reason: args.reason.clone(),
    };
    let text = serde_json::to_string(&request)
        .map_err(|e| CliError::invalid(format!("cannot encode the request: {e}")))?;
    let sent = session.send_message(&args.name, &text)?;
    if json {
        render::json(&json!({
            "requestId": request_id,
            "delivered": sent.delivered(),
            "reply": sent.model_result(&args.name),
        }))?;
    } else {
        render::out(&format!("{}\n", sent.text(&args.name)))?;
    }
    Ok(if sent.delivered() {
        exit::OK
    } else {
        exit::UNKNOWN_TASK
    })
}

/// `team shutdown --force`: kills the live teammate `name` names.
fn force_shutdown(session: &Session, name: &Address, json: bool) -> Result<u8> {
    let Some(id) = live_teammate(session, name)? else {
        return Err(CliError::invalid(format!("no live teammate named {name}")));
    };
    let reports = session.kill(&[id])?;
    if json {
        render::json(&reports)?;
    } else {
        for report in &reports {
            render::out(&format!("{} {}\n", report.id, report.result.as_str()))?;
        }
    }
    Ok(exit::OK)
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
pub fn dream(session: &Session, args: DreamArgs, json: bool) -> Result<u8> {
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
    let id = session.start::<DreamExecutor>(start, Session::caller()?)?;
    print_started(session, id, json)
}
