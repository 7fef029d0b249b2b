//! The supervisor side of teammates and dreams: their executors, the end hook that unassigns a
//! teammate's task-list tasks, and messages that reach teammates as well as agents.

#[cfg(feature = "cli")]
use std::path::{Path, PathBuf};

use task_agent::dream::DreamExecutor;
#[cfg(feature = "cli")]
use task_core::TeammateIdentity;
use task_core::{Launched, TaskKind, TaskType};
#[cfg(feature = "cli")]
use task_list::{EnvValues, Layout, ListIdHints, UnassignReason};
#[cfg(feature = "cli")]
use task_team::TeammateEnd;
use task_team::{TEAM_LEAD, TeamConfig, TeamExecutor, TeamMessage, TeammateStart};

use task_core::{Address, MessageOutcome, MessageReply};
use task_session::engine::{Host, Messenger};
use task_session::paths::SessionPaths;
use task_session::record::TaskRecord;
use task_session::restart::StartRecord;

use crate::recorded;

/// The teammate and dream executors of a supervisor, registered with its registry. Teams live
/// in `{session}/teams/`; a teammate that ends gets its open tasks in the list named after its
/// team unassigned, and the lead is told in its mailbox.
/// Teammates share the worktrees and the session's token budget of `agents`.
pub fn executors(
    host: &Host,
    config: TeamConfig,
    agents: &task_agent::AgentExecutor,
) -> (TeamExecutor, DreamExecutor) {
    let tasks_dir = host.paths.tasks_dir();
    let teams_root = host.paths.dir().join("teams");
    let team = TeamExecutor::new(host.registry.clone(), &teams_root, &tasks_dir, config)
        .with_worktrees(agents.worktrees().clone())
        .with_session_tokens(agents.session_tokens().clone())
        .register_with_registry();
    #[cfg(feature = "cli")]
    unassign_on_end(&team, host.paths.root().to_path_buf(), teams_root);
    resume_teammates(&team, host);
    let dreams = DreamExecutor::new(host.registry.clone(), &tasks_dir).register_with_registry();
    (team, dreams)
}

/// Resumes every teammate a dead supervisor left live (its record neither terminal nor with
/// an end in its slot) from how it was spawned: its session goes on, its transcript and
/// mailbox where they were. One that cannot be resumed (how it was spawned is not on record)
/// is left to the engine, which ends it as its supervisor's orphan.
fn resume_teammates(team: &TeamExecutor, host: &Host) {
    let listing = match task_session::record::list(&host.paths) {
        Ok(listing) => listing,
        Err(error) => {
            tracing::warn!(%error, "cannot list the teammates to resume");
            return;
        }
    };
    let live = listing.tasks.into_iter().filter(|found| {
        found.task.base.task_type == TaskType::InProcessTeammate
            && !found.is_terminal()
            && task_session::record::read_end(&host.paths, found).is_none()
    });
    for found in live {
        let id = found.id();
        let resumed = task_session::restart::recall(&host.paths, &id)
            .map_err(|e| e.to_string())
            .and_then(|start| relaunch(team, &found, &start));
        match resumed {
            Ok(launched) => {
                tracing::info!(task = %id, "teammate resumed");
                if let Some(start) = launched.start {
                    start();
                }
            }
            Err(error) => tracing::warn!(task = %id, %error, "cannot resume the teammate"),
        }
    }
}

/// Unassigns an ended teammate's tasks (the task-list store comes with the `cli` feature).
#[cfg(feature = "cli")]
fn unassign_on_end(team: &TeamExecutor, state_root: PathBuf, teams_root: PathBuf) {
    team.on_end(move |_, who, how| {
        let (who, root, teams) = (who.clone(), state_root.clone(), teams_root.clone());
        // Task-list files and locks: off the runtime's workers.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn_blocking(move || unassign(&who, how, &root, &teams));
        }
    });
}

/// Puts the ended teammate's open tasks back to `pending` with no owner, and posts the
/// reference's message about it to the team lead.
#[cfg(feature = "cli")]
fn unassign(who: &TeammateIdentity, how: TeammateEnd, state_root: &Path, teams: &Path) {
    let mut env = EnvValues::from_env();
    env.tasks_root = Some(state_root.to_string_lossy().into_owned());
    let hints = ListIdHints {
        explicit: Some(&who.team_name),
        ..ListIdHints::default()
    };
    let reason = match how {
        TeammateEnd::Shutdown => UnassignReason::Shutdown,
        _ => UnassignReason::Terminated,
    };
    let outcome = task_list::resolve_list_id(&env, Layout::Auto, hints)
        .and_then(|id| crate::list_open::open_in(None, &env, Layout::Auto, &id))
        .and_then(|list| list.unassign(&who.agent_name, reason));
    match outcome {
        Ok(result) => {
            if let Some(text) = result.notification_message {
                let message = TeamMessage::new("system", text);
                if let Err(error) = task_team::post(teams, &who.team_name, TEAM_LEAD, &message) {
                    tracing::warn!(%error, "the unassign message did not reach the lead");
                }
            }
        }
        Err(error) => tracing::warn!(%error, teammate = %who.agent_name, "unassign failed"),
    }
}

/// Messages reach a live teammate by name (or `name@team`, or id), or resume a stopped one on
/// record, else go to `agents`.
#[derive(Debug)]
pub struct Messages<M> {
    /// The teammates.
    pub team: TeamExecutor,
    /// Everything else that takes messages.
    pub agents: M,
    /// The session, whose records hold the stopped teammates.
    pub paths: SessionPaths,
}

#[async_trait::async_trait]
impl<M: Messenger> Messenger for Messages<M> {
    async fn send(&self, to: &Address, text: &str, id: Option<&str>) -> MessageReply {
        let mut message = TeamMessage::new(TEAM_LEAD, text);
        if let Some(id) = id {
            message = message.with_id(id);
        }
        if let Some(teammate) = self.team.find(to) {
            let outcome = match self.team.post_to(teammate, &message) {
                Ok(()) => MessageOutcome::Posted,
                Err(error) => MessageOutcome::Refused {
                    reason: error.to_string(),
                },
            };
            return MessageReply::reached(teammate, outcome);
        }
        match self.take_back(to, message).await {
            Some(reply) => reply,
            None => self.agents.send(to, text, id).await,
        }
    }
}

impl<M> Messages<M> {
    /// Resumes the stopped teammate `to` names from its records with `message` as its next
    /// turn: `None` when none is on record.
    async fn take_back(&self, to: &Address, message: TeamMessage) -> Option<MessageReply> {
        let (team, paths, address) = (self.team.clone(), self.paths.clone(), to.clone());
        let taken = tokio::task::spawn_blocking(move || {
            let (found, start) =
                recorded::stopped(&paths, &address, TaskType::InProcessTeammate, |found, _| {
                    names_teammate(found, &address)
                })?;
            let resumed = resume_recorded(&team, &found, start, &message);
            Some((found, resumed))
        })
        .await
        .ok()??;
        let (found, resumed) = taken;
        let id = found.id();
        Some(match resumed {
            Ok(launched) => {
                tracing::info!(task = %id, "a stopped teammate resumed from its record");
                if let Some(start) = launched.start {
                    start();
                }
                let outcome = MessageOutcome::Resumed {
                    previous: found.status(),
                    output_file: found.task.base.output_file.clone(),
                };
                MessageReply::reached(id, outcome)
            }
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot resume the teammate");
                MessageReply::refused(format!("cannot resume teammate {id}: {error}"))
            }
        })
    }
}

/// Whether `to` names the teammate of `found`: `name@team`, or its bare name.
fn names_teammate(found: &TaskRecord, to: &Address) -> bool {
    if !matches!(found.task.kind, TaskKind::Teammate(_)) {
        return false;
    }
    match to {
        Address::Task(id) => *id == found.id(),
        name => found.task.kind.answers_to(name),
    }
}

/// Registers again under its id the stopped teammate `found` (`start`, how it was spawned), its
/// CLI session resumed with `message` posted to its mailbox as its first turn; to be started.
fn resume_recorded(
    team: &TeamExecutor,
    found: &TaskRecord,
    start: Result<StartRecord, String>,
    message: &TeamMessage,
) -> Result<Launched, String> {
    let TaskKind::Teammate(mate) = &found.task.kind else {
        return Err("it is not a teammate".into());
    };
    if mate.session_id.is_none() {
        return Err("its agent CLI never said its session, so there is none to resume".into());
    }
    let start = start?;
    let who = &mate.identity;
    task_team::post(team.teams_root(), &who.team_name, &who.agent_name, message)
        .map_err(|e| e.to_string())?;
    relaunch(team, found, &start)
}

/// Registers again under its id the teammate `found` from how it was spawned (`start`): see
/// [`TeamExecutor::relaunch`].
fn relaunch(
    team: &TeamExecutor,
    found: &TaskRecord,
    start: &StartRecord,
) -> Result<Launched, String> {
    let request = serde_json::from_value::<TeammateStart>(start.request.clone())
        .map_err(|e| e.to_string())?;
    let again = start.resumed().map_err(|e| e.to_string())?;
    team.relaunch(&found.task, request, again.caller)
        .map_err(|e| e.to_string())
}
