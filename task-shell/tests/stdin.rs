//! Writing to a shell task's stdin pipe through the registry (`Registry::write_input`), as a
//! host that launched it from a request does: input sent before the process exists waits for
//! it, a close ends the reader, and every refusal is typed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Fixture, wait_until};
use task_core::{Caller, Input, InputError, Launch, TaskId, TaskStatus};
use task_shell::process::StdinMode;
use task_shell::{MonitorStart, Monitors, ShellConfig, ShellStart};

const PATIENCE: Duration = Duration::from_secs(10);

fn shell(command: &str, stdin: StdinMode) -> ShellStart {
    ShellStart {
        command: command.into(),
        description: command.into(),
        timeout_ms: None,
        stdin,
        placement: None,
    }
}

fn caller() -> Caller {
    Caller::current().unwrap()
}

fn input(bytes: &[u8], close: bool) -> Input<'_> {
    Input {
        bytes,
        close,
        patience: PATIENCE,
    }
}

/// Launches `start` and returns its id with the start not yet run.
fn launch(fx: &Fixture, start: ShellStart) -> (TaskId, Box<dyn FnOnce() + Send>) {
    let launched = fx.executor.launch(start, caller()).unwrap();
    (launched.id, launched.start.unwrap())
}

async fn ended(fx: &Fixture, id: &TaskId) -> TaskStatus {
    wait_until("the task to end", || fx.state(id).status().is_terminal()).await;
    fx.state(id).status()
}

#[tokio::test]
async fn input_sent_before_the_process_exists_waits_for_its_pipe() {
    let fx = Fixture::new(ShellConfig::default());
    let (id, start) = launch(&fx, shell("cat", StdinMode::Piped));
    let registry = std::sync::Arc::clone(&fx.registry);
    let early = tokio::spawn(async move {
        registry
            .write_input(&id, input(b"before the fork\n", true))
            .await
    });
    // The writer is parked on the pipe's lock until the process is started.
    tokio::task::yield_now().await;
    assert!(!early.is_finished());
    start();
    early.await.unwrap().unwrap();
    assert_eq!(ended(&fx, &id).await, TaskStatus::Completed);
    let output = std::fs::read_to_string(fx.dir.path().join(format!("{id}.output"))).unwrap();
    assert_eq!(output, "before the fork\n");
}

#[tokio::test]
async fn refusals_are_typed() {
    let fx = Fixture::new(ShellConfig::default());
    let registry = &fx.registry;

    let (null, start) = launch(&fx, shell("sleep 1000", StdinMode::Null));
    start();
    let refused = registry.write_input(&null, input(b"x\n", false)).await;
    assert!(
        matches!(refused, Err(InputError::NotPiped(id)) if id == null),
        "{refused:?}"
    );

    let (piped, start) = launch(&fx, shell("sleep 1000", StdinMode::Piped));
    start();
    registry
        .write_input(&piped, input(b"", true))
        .await
        .unwrap();
    let refused = registry.write_input(&piped, input(b"x\n", false)).await;
    assert!(matches!(refused, Err(InputError::Closed(_))), "{refused:?}");

    let (gone, start) = launch(
        &fx,
        shell("exec 0<&-; echo closed; sleep 1000", StdinMode::Piped),
    );
    start();
    let output = fx.dir.path().join(format!("{gone}.output"));
    wait_until("stdin closed by the task", || {
        std::fs::read_to_string(&output).unwrap_or_default() == "closed\n"
    })
    .await;
    for _ in 0..2 {
        let refused = registry.write_input(&gone, input(b"x\n", false)).await;
        assert!(
            matches!(refused, Err(InputError::ReaderGone(_))),
            "{refused:?}"
        );
    }

    let (done, start) = launch(&fx, shell("true", StdinMode::Piped));
    start();
    ended(&fx, &done).await;
    let refused = registry.write_input(&done, input(b"x\n", false)).await;
    assert!(
        matches!(
            refused,
            Err(InputError::Finished {
                status: TaskStatus::Completed,
                ..
            })
        ),
        "{refused:?}"
    );

    let monitor = MonitorStart {
        command: Some("sleep 1000".into()),
        ws: None,
        description: "m".into(),
        timeout_ms: None,
        persistent: true,
    };
    let monitor = Monitors(fx.executor.clone())
        .launch(monitor, caller())
        .unwrap()
        .id;
    let refused = registry.write_input(&monitor, input(b"x\n", false)).await;
    assert!(
        matches!(refused, Err(InputError::NotAccepted { .. })),
        "{refused:?}"
    );

    let unknown = TaskId::parse("b00000000").unwrap();
    let refused = registry.write_input(&unknown, input(b"x\n", false)).await;
    assert!(
        matches!(refused, Err(InputError::NotFound(_))),
        "{refused:?}"
    );

    for id in [null, piped, gone, monitor] {
        fx.executor.kill(&id).await.unwrap();
    }
}

#[tokio::test]
async fn a_task_that_does_not_read_stalls_the_writer_with_what_went_through() {
    let fx = Fixture::new(ShellConfig::default());
    let (id, start) = launch(&fx, shell("sleep 1000", StdinMode::Piped));
    start();
    let big = vec![b'x'; 1024 * 1024];
    let patient = Input {
        bytes: &big,
        close: false,
        patience: Duration::from_millis(200),
    };
    let refused = fx.registry.write_input(&id, patient).await;
    match refused {
        Err(InputError::Stalled { written, total, .. }) => {
            assert!(written < total, "{written} of {total}");
            assert_eq!(total, big.len());
        }
        other => panic!("{other:?}"),
    }
    fx.executor.kill(&id).await.unwrap();
}
