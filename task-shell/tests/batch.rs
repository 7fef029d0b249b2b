//! Shells placed on a batch system, without a cluster: what is refused before anything is
//! registered, and a Slurm whose commands are missing, which ends the task `failed` with the
//! reason (never submitted, never guessed). The runs against a real cluster are
//! `task-cli/tests/slurm.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use task_core::{Caller, Launch, LaunchError};
use task_shell::ShellConfig;
use task_shell::launch::{Placement, ShellStart};
use task_shell::process::StdinMode;

fn on_slurm(command: &str, stdin: StdinMode) -> ShellStart {
    ShellStart {
        command: command.into(),
        description: command.into(),
        timeout_ms: None,
        stdin,
        placement: Some(Placement::parse("slurm").unwrap()),
    }
}

#[tokio::test]
async fn a_placement_without_its_engine_is_refused_and_registers_nothing() {
    let fx = Fixture::new(ShellConfig::default());
    let refused = fx.executor.launch(
        on_slurm("true", StdinMode::Null),
        Caller::current().unwrap(),
    );
    match refused {
        Err(LaunchError::Invalid(message)) => {
            assert!(message.contains("no slurm batch system"), "{message}");
        }
        other => panic!("not refused: {:?}", other.map(|l| l.id)),
    }
    assert!(fx.registry.is_empty());
}

#[cfg(feature = "slurm")]
mod with_slurm {
    use std::sync::Arc;

    use task_core::{EndReason, TaskKind, TaskStatus};
    use task_shell::batch::SlurmEngine;

    use super::*;

    /// A Slurm engine whose commands are looked for in `bin_dir`.
    fn engine(bin_dir: &std::path::Path) -> Arc<SlurmEngine> {
        let bin_dir = bin_dir.display().to_string();
        let config = task_slurm::SlurmConfig::from_vars(|name| match name {
            "TASKS_SLURM_BIN_DIR" => Some(bin_dir.clone()),
            "TASKS_SLURM_POLL_MS" => Some("10".into()),
            _ => None,
        })
        .unwrap();
        Arc::new(SlurmEngine::new(config))
    }

    #[tokio::test]
    async fn a_stdin_pipe_is_refused_on_a_batch_system() {
        let mut fx = Fixture::new(ShellConfig::default());
        let empty = tempfile::tempdir().unwrap();
        fx.executor = fx.executor.clone().with_batch_engine(engine(empty.path()));
        let refused = fx.executor.launch(
            on_slurm("cat", StdinMode::Piped),
            Caller::current().unwrap(),
        );
        assert!(
            matches!(&refused, Err(LaunchError::Invalid(m)) if m.contains("no stdin pipe")),
            "{:?}",
            refused.map(|l| l.id)
        );
        assert!(fx.registry.is_empty());
    }

    /// `squeue` and `sbatch` are not where the configuration says: the task is registered
    /// `pending` as a Slurm job, then ends `failed` saying it cannot tell whether it was
    /// submitted, with its one notification.
    #[tokio::test]
    async fn without_slurms_commands_the_task_fails_with_the_reason() {
        let mut fx = Fixture::new(ShellConfig::default());
        let empty = tempfile::tempdir().unwrap();
        fx.executor = fx.executor.clone().with_batch_engine(engine(empty.path()));
        let launched = fx
            .executor
            .launch(
                on_slurm("true", StdinMode::Null),
                Caller::current().unwrap(),
            )
            .unwrap();
        let id = launched.id;
        let state = fx.state(&id);
        assert_eq!(state.status(), TaskStatus::Pending);
        let TaskKind::Shell(shell) = &state.kind else {
            panic!("not a shell: {state:?}");
        };
        let batch = shell.batch.as_ref().unwrap();
        assert_eq!(
            (batch.engine.as_str(), batch.job_id.as_ref()),
            ("slurm", None)
        );
        (launched.start.unwrap())();
        common::wait_until("the task to end", || fx.state(&id).status().is_terminal()).await;
        let state = fx.state(&id);
        assert_eq!(state.status(), TaskStatus::Failed);
        match &state.base.end_reason {
            Some(EndReason::SpawnFailed { error }) => assert!(
                error.contains("cannot tell whether it was submitted")
                    && error.contains("squeue not found"),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
        let output = std::fs::read_to_string(&state.base.output_file).unwrap();
        assert!(output.starts_with("tasks: cannot tell"), "{output:?}");
        let notes = fx.registry.notifications().drain();
        assert_eq!(notes.len(), 1, "{notes:?}");
    }
}
