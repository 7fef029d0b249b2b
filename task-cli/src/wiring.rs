//! The task types the `tasks` supervisor runs: one line per executor crate.
//!
//! Everything else in the session layer is generic; adding a task type means an executor crate
//! (implementing task-core's `Task` and `Launch`) and a line here.

use task_agent::{AgentConfig, AgentExecutor};
use task_shell::{Monitors, ShellExecutor};
use task_workflow::{WorkflowConfig, WorkflowExecutor};

use crate::agent_wiring::AgentMessages;
use crate::settings::Settings;
use task_session::Result;
use task_session::engine::{Host, Launchers};

/// Shell commands and monitors (task-shell), agents, workflows, teammates and dreams
/// (task-agent), remote agents (task-remote).
///
/// The supervisor becomes a child subreaper, so what a task's process tree leaves behind is
/// re-parented to it rather than to init: kills find it, and the zombies it adopts are reaped
/// every sweep.
pub fn standard(host: &Host) -> Result<Launchers> {
    if let Err(error) = task_core::process::become_subreaper() {
        tracing::warn!(%error, "not a subreaper: escapees of a killed task go to init");
    }
    tokio::spawn(reap_adopted_orphans(host.config.sweep_interval));
    let settings = Settings::read(&host.config.executors)?;
    let tasks_dir = host.paths.tasks_dir();
    let shells = crate::batch_wiring::engines(
        ShellExecutor::new(host.registry.clone(), &tasks_dir, settings.shell),
        &settings.slurm,
    )
    .register_with_registry();
    crate::batch_wiring::adopt(host, &shells);
    let mut agent_config = AgentConfig::default();
    agent_config.worktrees_dir = Some(worktrees_dir(&host.paths));
    agent_config.session_token_budget = settings.agent_token_budget;
    agent_config.default_budget = settings.agent_budget;
    let agents = AgentExecutor::new(host.registry.clone(), &tasks_dir, agent_config)
        .register_with_registry();
    let workflows = WorkflowExecutor::new(agents.clone(), &tasks_dir, WorkflowConfig::default())
        .register_with_registry();
    let mut team_config = settings.team;
    team_config.default_budget = settings.agent_budget;
    let (team, dreams) = crate::team_wiring::executors(host, team_config, &agents);
    let remotes = crate::remote_wiring::executor(host, settings.remote);
    Ok(Launchers::new()
        .with(shells.clone())
        .with(Monitors(shells))
        .with(agents.clone())
        .with(workflows)
        .with(team.clone())
        .with(dreams)
        .with(remotes.clone())
        .with_messenger(crate::team_wiring::Messages {
            team,
            agents: crate::remote_wiring::RemoteOrAgent {
                remotes,
                agents: AgentMessages { agents },
            },
        }))
}

/// Where agents run with `--worktree` (or `isolation: "worktree"`) get their worktrees:
/// `{session}/worktrees/{id}`.
pub fn worktrees_dir(paths: &task_session::paths::SessionPaths) -> std::path::PathBuf {
    paths.dir().join("worktrees")
}

/// Reaps, every `period`, the zombies this subreaper adopted (never its own children).
async fn reap_adopted_orphans(period: std::time::Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        match tokio::task::spawn_blocking(task_core::process::reap_adopted_orphans).await {
            Ok(0) => {}
            Ok(reaped) => tracing::debug!(reaped, "reaped adopted orphans"),
            Err(error) => tracing::warn!(%error, "the orphan reaper did not run"),
        }
    }
}
