//! The supervisor side of teammates and dreams: their executors, the end hook that unassigns a
//! teammate's task-list tasks, and messages that reach teammates as well as agents.

#[cfg(feature = "cli")]
use std::path::{Path, PathBuf};

use task_agent::dream::DreamExecutor;
#[cfg(feature = "cli")]
use task_core::TeammateIdentity;
#[cfg(feature = "cli")]
use task_list::{EnvValues, Layout, ListIdHints, UnassignReason};
#[cfg(feature = "cli")]
use task_team::TeammateEnd;
use task_team::{TEAM_LEAD, TeamConfig, TeamExecutor, TeamMessage};

use task_core::{Address, MessageOutcome, MessageReply};
use task_session::engine::{Host, Messenger};

/// The teammate and dream executors of a supervisor, registered with its registry. Teams live
/// in `{session}/teams/`; a teammate that ends gets its open tasks in the list named after its
/// team unassigned, and the lead is told in its mailbox.
/// Teammates share the worktrees, the session's token budget and the batch engines (with the
/// default placement) of `agents`.
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
        .with_engines(agents.engines())
        .register_with_registry();
    #[cfg(feature = "cli")]
    unassign_on_end(&team, host.paths.root().to_path_buf(), teams_root);
    let dreams = DreamExecutor::new(host.registry.clone(), &tasks_dir).register_with_registry();
    (team, dreams)
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

/// Messages reach a live teammate by name (or `name@team`, or id), else go to `agents` (a
/// stopped one on record is taken back by the supervisor's engine first).
#[derive(Debug)]
pub struct Messages<M> {
    /// The teammates.
    pub team: TeamExecutor,
    /// Everything else that takes messages.
    pub agents: M,
}

#[async_trait::async_trait]
impl<M: Messenger> Messenger for Messages<M> {
    async fn send(&self, to: &Address, text: &str, id: Option<&str>) -> MessageReply {
        let mut message = TeamMessage::new(TEAM_LEAD, text);
        if let Some(id) = id {
            message = message.with_id(id);
        }
        let Some(teammate) = self.team.find(to) else {
            return self.agents.send(to, text, id).await;
        };
        let outcome = match self.team.post_to(teammate, &message) {
            Ok(()) => MessageOutcome::Posted,
            Err(error) => MessageOutcome::Refused {
                reason: error.to_string(),
            },
        };
        MessageReply::reached(teammate, outcome)
    }
}
