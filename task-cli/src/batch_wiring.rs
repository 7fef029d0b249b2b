//! Shells and agents placed on a batch system: the Slurm engine of the supervisor (feature
//! `slurm`, configured by task-slurm's `TASKS_SLURM_*` variables), and the shells' batch jobs a
//! dead supervisor left live, followed again before the engine ends its orphans.

use task_core::{TaskKind, TaskType};
use task_session::engine::Host;
use task_shell::ShellExecutor;

/// The batch systems this build and configuration offer: Slurm with feature `slurm`, its
/// settings `slurm` (task-slurm's `TASKS_SLURM_*` variables, read from the environment or
/// `config.json` by [`crate::settings`]; a bad one is logged and Slurm left out: a start placed
/// there is then refused, saying so). The same engines serve shells and agents.
pub(crate) fn engines(
    slurm: &std::collections::BTreeMap<String, String>,
) -> Vec<std::sync::Arc<dyn task_core::batch::BatchEngine>> {
    #[cfg(not(feature = "slurm"))]
    let _ = slurm;
    #[cfg(feature = "slurm")]
    {
        match task_slurm::SlurmConfig::from_vars(|name| slurm.get(name).cloned()) {
            Ok(config) => {
                return vec![std::sync::Arc::new(task_shell::batch::SlurmEngine::new(
                    config,
                ))];
            }
            Err(error) => tracing::warn!(%error, "no Slurm placement: its settings are invalid"),
        }
    }
    Vec::new()
}

/// Follows again every shell task on a batch system the session's dead supervisor left live
/// (its record not terminal), unless it waits in the session's queue (the queue takes it over
/// from its kept start, see task-session's `queue`). One whose batch system is not configured
/// here is ended `failed`, saying why.
pub(crate) fn adopt(host: &Host, shells: &ShellExecutor) {
    let listing = match task_session::record::list(&host.paths) {
        Ok(listing) => listing,
        Err(error) => {
            tracing::warn!(%error, "cannot list the records: batch jobs not followed again");
            return;
        }
    };
    for record in listing.tasks {
        let task = record.task;
        let id = task.id();
        let is_batch = matches!(&task.kind, TaskKind::Shell(shell) if shell.batch.is_some());
        if task.base.task_type != TaskType::LocalBash
            || !is_batch
            || task.status().is_terminal()
            || host.paths.queued_start(&id).exists()
            || host.registry.get(&id).is_some()
        {
            continue;
        }
        match shells.adopt_batch(task.clone()) {
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot follow its batch job again");
                shells.end_unfollowable(task, &error.to_string());
            }
        }
    }
}
