//! `local_bash` tasks over real processes: exit mapping, notifications, kill, timeout,
//! watchdogs, foreground→background, orphan cleanup and the kill-vs-exit race.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{DEADLINE, Fixture, fast_config, is_alive, wait_until};
use task_core::{EndReason, Priority, TaskId, TaskStatus, TerminalStatus};
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;
use task_shell::{ShellConfig, ShellError, TaskHandle};

fn bg(command: &str, description: &str) -> ShellRequest {
    ShellRequest::new(CommandSpec::new(command).unwrap(), description).background(true)
}

/// A background request whose shell does not exist.
fn unstartable() -> ShellRequest {
    let spec = CommandSpec::new("true")
        .unwrap()
        .shell("/nonexistent/shell");
    ShellRequest::new(spec, "broken").background(true)
}

fn output_of(handle: &TaskHandle) -> String {
    std::fs::read_to_string(handle.output_file()).unwrap()
}

#[tokio::test]
async fn exit_codes_map_to_statuses_with_one_later_notification_each() {
    let fx = Fixture::new(ShellConfig::default());
    let mut ok = fx
        .executor
        .spawn(bg("exit 0", "ok").tool_use_id("toolu_1"))
        .unwrap();
    let mut bad = fx
        .executor
        .spawn(bg("echo hello; exit 3", "bg test"))
        .unwrap();
    assert_eq!(ok.wait().await.unwrap().status, TaskStatus::Completed);
    let failed = bad.wait().await.unwrap();
    assert_eq!((failed.status, failed.exit_code), (TaskStatus::Failed, 3));
    assert_eq!(fx.exit_code(&bad.id()), Some(3));
    assert_eq!(output_of(&bad), "hello\n");

    assert!(
        fx.registry
            .notifications()
            .drain_up_to(Priority::Next)
            .is_empty(),
        "completions are `later`"
    );
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 2);
    let ok_note = notes.iter().find(|n| n.task_id == ok.id()).unwrap();
    assert_eq!(ok_note.status, Some(TerminalStatus::Completed));
    assert_eq!(
        ok_note.summary,
        "Background command \"ok\" completed (exit code 0)"
    );
    assert_eq!(ok_note.tool_use_id.as_deref(), Some("toolu_1"));
    let bad_note = notes.iter().find(|n| n.task_id == bad.id()).unwrap();
    let rendered = bad_note.render();
    assert!(rendered.contains("<status>failed</status>"), "{rendered}");
    assert!(
        rendered
            .contains("<summary>Background command \"bg test\" failed with exit code 3</summary>")
    );
    assert!(fx.state(&bad.id()).base.notified);
}

#[tokio::test]
async fn child_gets_git_editor_null_stdin_and_one_output_file_for_both_streams() {
    let fx = Fixture::new(ShellConfig::default());
    let command = "echo editor=$GIT_EDITOR; if read line; then echo read-ok; else echo read-eof; fi; echo err >&2";
    let mut task = fx.executor.spawn(bg(command, "env")).unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Completed);
    assert_eq!(output_of(&task), "editor=true\nread-eof\nerr\n");
}

#[tokio::test]
async fn piped_stdin_reaches_the_command() {
    use tokio::io::AsyncWriteExt;
    let fx = Fixture::new(ShellConfig::default());
    let spec = CommandSpec::new("read line; echo got $line")
        .unwrap()
        .stdin(task_shell::process::StdinMode::Piped);
    let mut task = fx.executor.spawn(ShellRequest::new(spec, "stdin")).unwrap();
    let mut stdin = task.take_stdin().unwrap();
    stdin.write_all(b"y\n").await.unwrap();
    drop(stdin);
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Completed);
    assert_eq!(output_of(&task), "got y\n");
}

#[tokio::test]
async fn a_spawn_error_is_pending_to_failed_with_exit_code_1() {
    let fx = Fixture::new(ShellConfig::default());
    let err = fx.executor.spawn(unstartable()).unwrap_err();
    assert!(matches!(err, ShellError::Spawn { .. }), "{err}");
    let state = fx.registry.snapshot().pop().unwrap();
    assert_eq!(state.status(), TaskStatus::Failed);
    assert_eq!(fx.exit_code(&state.id()), Some(1));
    assert!(
        matches!(&state.base.end_reason, Some(EndReason::SpawnFailed { error }) if !error.is_empty()),
        "{:?}",
        state.base.end_reason
    );
    assert!(
        state.base.notified,
        "the caller got the error; no notification follows"
    );
    assert!(fx.registry.notifications().is_empty());
}

#[tokio::test]
async fn bad_input_gets_clear_errors() {
    let fx = Fixture::new(ShellConfig::default());
    assert!(matches!(
        CommandSpec::new("  "),
        Err(ShellError::EmptyCommand)
    ));
    let missing = fx.dir.path().join("missing");
    let spec = CommandSpec::new("true").unwrap().current_dir(&missing);
    let err = fx
        .executor
        .spawn(ShellRequest::new(spec, "cwd"))
        .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(
        fx.registry.is_empty(),
        "nothing registered for a bad working dir"
    );

    let unknown = TaskId::parse("b00000000").unwrap();
    assert!(
        matches!(fx.executor.kill(&unknown).await, Err(ShellError::UnknownTask(id)) if id == unknown)
    );
    assert!(matches!(
        fx.executor.background(&unknown).await,
        Err(ShellError::UnknownTask(_))
    ));

    let mut done = fx.executor.spawn(bg("true", "done")).unwrap();
    done.wait().await.unwrap();
    let err = fx.executor.kill(&done.id()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ShellError::AlreadyFinished {
                status: TaskStatus::Completed,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("task {} has already finished (completed)", done.id())
    );
    assert_eq!(fx.state(&done.id()).status(), TaskStatus::Completed);
}

#[tokio::test]
async fn kill_is_137_killed_notified_at_kill_time_and_silent() {
    let fx = Fixture::new(ShellConfig::default());
    let mut task = fx.executor.spawn(bg("sleep 300", "sleeper")).unwrap();
    let pid = task.pid().unwrap();
    fx.executor.kill(&task.id()).await.unwrap();
    let state = fx.state(&task.id());
    assert_eq!(state.status(), TaskStatus::Killed);
    assert!(state.base.notified);
    assert_eq!(fx.exit_code(&task.id()), Some(137));
    let outcome = task.wait().await.unwrap();
    assert_eq!(
        (outcome.status, outcome.exit_code),
        (TaskStatus::Killed, 137)
    );
    assert!(!is_alive(pid));
    assert!(
        fx.registry.notifications().is_empty(),
        "a requested kill is not notified"
    );
}

#[tokio::test]
async fn timeout_kills_with_143_and_says_so() {
    let fx = Fixture::new(ShellConfig::default());
    let mut task = fx
        .executor
        .spawn(bg("echo started; sleep 300", "slow").timeout(Duration::from_millis(200)))
        .unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!(
        (outcome.status, outcome.exit_code),
        (TaskStatus::Failed, 143)
    );
    assert_eq!(
        outcome.message.as_deref(),
        Some("Command timed out after 200ms")
    );
    assert_eq!(output_of(&task), "started\nCommand timed out after 200ms\n");
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        notes[0].summary,
        "Background command \"slow\" failed with exit code 143 (Command timed out after 200ms)"
    );
    assert_eq!(
        fx.registry.get(&task.id()).unwrap().base.end_reason,
        Some(EndReason::TimedOut { limit_ms: 200 })
    );
}

#[tokio::test]
async fn size_cap_kills_a_command_writing_past_it() {
    let mut config = fast_config();
    config.size_cap_bytes = 64 * 1024;
    let fx = Fixture::new(config);
    let mut task = fx.executor.spawn(bg("yes", "flood")).unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Failed);
    let message = "Background command killed: output file exceeded 64KB";
    assert_eq!(outcome.message.as_deref(), Some(message));
    let output = output_of(&task);
    assert!(output.len() > 64 * 1024);
    assert!(output.ends_with(&format!("\n{message}\n")));
    assert_eq!(
        fx.registry.get(&task.id()).unwrap().base.end_reason,
        Some(EndReason::OutputCapExceeded {
            cap_bytes: 64 * 1024
        })
    );
}

/// A fixture whose size cap (1 MiB) has its poll an hour away: only the write-driven check can
/// stop a flood.
fn fixture_with_a_write_driven_cap() -> Fixture {
    let mut config = fast_config();
    config.size_cap_bytes = 1024 * 1024;
    config.size_check_interval = Duration::from_secs(3_600);
    Fixture::new(config)
}

/// Starts `yes` and asserts that the write-driven size check ends it; returns the task.
async fn a_flood_stopped_at_the_cap(fx: &Fixture) -> TaskHandle {
    let mut task = fx.executor.spawn(bg("yes", "flood")).unwrap();
    let outcome = tokio::time::timeout(DEADLINE, task.wait())
        .await
        .expect("the write-driven size check never fired")
        .unwrap();
    assert_eq!(
        outcome.reason,
        EndReason::OutputCapExceeded {
            cap_bytes: 1024 * 1024
        }
    );
    task
}

#[tokio::test]
async fn the_size_cap_is_checked_on_every_write_not_only_on_the_poll() {
    let fx = fixture_with_a_write_driven_cap();
    let task = a_flood_stopped_at_the_cap(&fx).await;
    assert!(output_of(&task).len() > 1024 * 1024);
}

/// The most inotify instances one user may hold (`fs.inotify.max_user_instances`, 128 by
/// default).
fn inotify_instance_limit() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(128)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stderr)]
async fn the_size_cap_is_checked_on_every_write_beyond_the_users_inotify_instance_limit() {
    // With an inotify instance per task, the tasks past the user's limit had the poll alone
    // (here an hour away), and no other program of the user could watch a file meanwhile.
    let limit = inotify_instance_limit();
    let sleepers = limit.min(1024);
    if sleepers < limit {
        eprintln!("the inotify instance limit is {limit}: starting {sleepers} tasks, not past it");
    }
    let fx = fixture_with_a_write_driven_cap();
    // The fixture kills every task's group when dropped, pass or fail.
    for i in 0..sleepers {
        fx.executor
            .spawn(bg("sleep 1000", &format!("s{i}")))
            .unwrap();
    }
    // The last task started: past the limit, had each task an instance of its own.
    a_flood_stopped_at_the_cap(&fx).await;
}

#[tokio::test]
async fn commands_longer_than_an_argument_may_be_still_run() {
    let fx = Fixture::new(ShellConfig::default());
    // 200 KB and 1.5 MB: over Linux's 128 KiB limit on one exec argument.
    for size in [200_000, 1_500_000] {
        let filler = "x".repeat(size);
        let command = format!(
            "filler='{filler}'; echo \"${{#filler}} $1\"; ls -l /proc/self/fd/; read line; echo \"stdin: $line\""
        );
        assert!(command.len() > task_shell::process::MAX_ARGUMENT_COMMAND_BYTES);
        let mut task = fx.executor.spawn(bg(&command, "long")).unwrap();
        let outcome = task.wait().await.unwrap();
        let output = output_of(&task);
        assert_eq!(outcome.status, TaskStatus::Completed, "{output}");
        assert!(output.starts_with(&format!("{size} \n")), "{output}");
        assert!(
            !output.contains("memfd:tasks-command"),
            "the script's descriptor leaked into the command: {output}"
        );
        assert!(
            output.ends_with("stdin: \n"),
            "stdin is still /dev/null: {output}"
        );
    }
}

async fn stall_notes(fx: &Fixture, task: &TaskHandle) -> Vec<task_core::Notification> {
    // After the first warning the watchdog stops; give it many more check periods to (wrongly)
    // warn again before counting.
    let later = tokio::time::Instant::now() + fx.executor.config().stall_threshold * 5;
    tokio::time::sleep_until(later).await;
    fx.executor.kill(&task.id()).await.unwrap();
    fx.registry.notifications().drain()
}

#[tokio::test]
async fn a_prompt_produces_exactly_one_stall_notification() {
    let fx = Fixture::new(fast_config());
    let task = fx
        .executor
        .spawn(bg("printf 'Continue? [y/N] '; sleep 300", "ask"))
        .unwrap();
    fx.wait_for_notification().await;
    let notes = stall_notes(&fx, &task).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    let rendered = notes[0].render();
    assert!(!rendered.contains("<status>"), "{rendered}");
    assert!(rendered.contains(
        "<summary>Background command \"ask\" appears to be waiting for interactive input</summary>"
    ));
    assert!(
        rendered.contains(
            "</task-notification>\nLast output:\nContinue? [y/N]\n\nThe command is likely blocked"
        ),
        "{rendered}"
    );
}

#[tokio::test]
async fn a_prompt_after_progress_is_still_caught() {
    let fx = Fixture::new(fast_config());
    let command = "for i in 1 2 3 4 5; do echo step $i; sleep 0.05; done; printf 'Do you want to overwrite the file? '; sleep 300";
    let task = fx.executor.spawn(bg(command, "prompt waiter")).unwrap();
    fx.wait_for_notification().await;
    let notes = stall_notes(&fx, &task).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    let trailer = notes[0].trailer.as_deref().unwrap();
    assert!(trailer.starts_with("Last output:\nstep 1\nstep 2\nstep 3\nstep 4\nstep 5\nDo you want to overwrite the file?\n"), "{trailer}");
}

#[tokio::test]
async fn a_prompt_is_caught_when_its_quiet_time_is_up_with_no_periodic_check_in_an_hour() {
    // Watched output: its writes keep the stall watchdog's clock and it looks when the output
    // has been quiet for the threshold; the hour-long check intervals are never waited for.
    let mut config = fast_config();
    config.stall_check_interval = Duration::from_secs(3_600);
    config.size_check_interval = Duration::from_secs(3_600);
    let fx = Fixture::new(config);
    let command =
        "for i in 1 2 3; do echo step $i; sleep 0.2; done; printf 'Continue? '; sleep 300";
    let task = fx.executor.spawn(bg(command, "quiet asker")).unwrap();
    fx.wait_for_notification().await;
    let notes = stall_notes(&fx, &task).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    let trailer = notes[0].trailer.as_deref().unwrap();
    assert!(
        trailer.starts_with("Last output:\nstep 1\nstep 2\nstep 3\nContinue?\n"),
        "the prompt after the last step, not a look at the first quiet step: {trailer}"
    );
}

#[tokio::test]
async fn slow_output_without_a_prompt_produces_none() {
    let fx = Fixture::new(fast_config());
    // Quiet for longer than the threshold between lines (so the tail is inspected), but the
    // last line is never a prompt.
    let command = "for i in 1 2 3 4; do echo line $i; sleep 0.4; done";
    let mut task = fx.executor.spawn(bg(command, "slow progress")).unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Completed);
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        notes[0].summary,
        "Background command \"slow progress\" completed (exit code 0)"
    );
}

#[tokio::test]
async fn foreground_tasks_move_to_the_background_without_restarting() {
    let fx = Fixture::new(ShellConfig::default());
    let gate = fx.dir.path().join("gate");
    let command = format!(
        "echo once; while [ ! -e {} ]; do sleep 0.01; done; exit 4",
        gate.display()
    );
    let mut task = fx
        .executor
        .spawn(ShellRequest::new(CommandSpec::new(command).unwrap(), "fg"))
        .unwrap();
    let pid = task.pid().unwrap();
    fx.executor.background(&task.id()).await.unwrap();
    assert!(
        matches!(&fx.state(&task.id()).kind, task_core::TaskKind::Shell(s) if s.is_backgrounded)
    );
    std::fs::write(&gate, "").unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!((outcome.status, outcome.exit_code), (TaskStatus::Failed, 4));
    assert_eq!(task.pid(), Some(pid));
    assert_eq!(output_of(&task), "once\n", "the command ran once");
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        notes[0].summary,
        "Background command \"fg\" failed with exit code 4"
    );
    let err = fx.executor.background(&task.id()).await.unwrap_err();
    assert!(matches!(err, ShellError::AlreadyFinished { .. }), "{err}");
}

#[tokio::test]
async fn foreground_completion_is_not_notified() {
    let fx = Fixture::new(ShellConfig::default());
    let mut task = fx
        .executor
        .spawn(ShellRequest::new(CommandSpec::new("exit 0").unwrap(), "fg"))
        .unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Completed);
    assert!(
        fx.state(&task.id()).base.notified,
        "evictable: its one notification went to the caller"
    );
    assert!(fx.registry.notifications().is_empty());
}

#[tokio::test]
async fn orphan_cleanup_kills_exactly_the_shells_of_the_ended_agent() {
    let fx = Fixture::new(ShellConfig::default());
    let agent = |id: &str| TaskId::parse(id).unwrap();
    let (agent_a, agent_b) = (agent("aagent00a"), agent("aagent00b"));
    let owned = |agent: TaskId| bg("sleep 300", "owned").agent_id(agent);
    let mut a1 = fx.executor.spawn(owned(agent_a)).unwrap();
    let mut a2 = fx.executor.spawn(owned(agent_a)).unwrap();
    let mut b = fx.executor.spawn(owned(agent_b)).unwrap();
    let mut a_done = fx
        .executor
        .spawn(bg("true", "quick").agent_id(agent_a))
        .unwrap();
    let mut b_done = fx
        .executor
        .spawn(bg("true", "quick").agent_id(agent_b))
        .unwrap();
    a_done.wait().await.unwrap();
    b_done.wait().await.unwrap();
    assert_eq!(fx.registry.notifications().len(), 2);

    let results = fx.registry.kill_tasks_for_agent(agent_a).await;
    let mut killed: Vec<_> = results.iter().map(|(id, r)| (*id, r.is_ok())).collect();
    killed.sort();
    let mut expected = vec![(a1.id(), true), (a2.id(), true)];
    expected.sort();
    assert_eq!(killed, expected);
    for task in [&mut a1, &mut a2] {
        assert_eq!(task.wait().await.unwrap().status, TaskStatus::Killed);
        assert!(!is_alive(task.pid().unwrap()));
    }
    assert_eq!(fx.state(&b.id()).status(), TaskStatus::Running);
    assert!(is_alive(b.pid().unwrap()));
    let left: Vec<_> = fx
        .registry
        .notifications()
        .drain()
        .into_iter()
        .map(|n| n.task_id)
        .collect();
    assert_eq!(
        left,
        [b_done.id()],
        "agent-a's queued notification was dropped"
    );

    fx.executor.kill(&b.id()).await.unwrap();
    b.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_racing_natural_exit_across_1000_tasks_settles_each_once() {
    let fx = Fixture::new(ShellConfig::default());
    let mut tasks = Vec::with_capacity(1000);
    let mut kills = Vec::with_capacity(1000);
    for i in 0..1000 {
        // Each kill is sent the moment its task starts, so some land before the exit and some
        // after it.
        let command = ["exit 0", "true", "sleep 0.001"][i % 3];
        let task = fx.executor.spawn(bg(command, "racer")).unwrap();
        let (executor, id) = (fx.executor.clone(), task.id());
        kills.push(tokio::spawn(async move { executor.kill(&id).await }));
        tasks.push(task);
    }
    let kills = futures_util::future::join_all(kills).await;
    let notes = fx.registry.notifications().drain();
    let (mut completed, mut killed) = (0, 0);
    for (task, kill) in tasks.iter_mut().zip(kills) {
        let kill = kill.unwrap();
        let outcome = task.wait().await.unwrap();
        let state = fx.state(&task.id());
        assert_eq!(state.status(), outcome.status);
        assert!(state.base.notified);
        let mine = notes.iter().filter(|n| n.task_id == task.id()).count();
        match outcome.status {
            TaskStatus::Killed => {
                assert!(kill.is_ok());
                assert_eq!(mine, 0);
                killed += 1;
            }
            TaskStatus::Completed => {
                assert!(
                    matches!(kill, Err(ShellError::AlreadyFinished { .. })),
                    "{kill:?}"
                );
                assert_eq!(mine, 1);
                completed += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(completed + killed, 1000);
    assert_eq!(notes.len(), completed);
}

#[tokio::test]
async fn a_child_outlives_the_tokio_task_that_spawned_it() {
    let fx = Fixture::new(ShellConfig::default());
    let executor = fx.executor.clone();
    let mut task =
        tokio::spawn(async move { executor.spawn(bg("sleep 300", "survivor")).unwrap() })
            .await
            .unwrap();
    let pid = task.pid().unwrap();
    // The spawning task has ended; the child must still be running, then die only by our kill.
    wait_until("the child to be running", || is_alive(pid)).await;
    assert_eq!(fx.state(&task.id()).status(), TaskStatus::Running);
    fx.executor.kill(&task.id()).await.unwrap();
    task.wait().await.unwrap();
}

#[test]
fn a_child_dies_with_the_thread_that_supervised_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let pid = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let registry = std::sync::Arc::new(task_core::Registry::default());
            let executor = task_shell::ShellExecutor::new(registry, &path, ShellConfig::default());
            executor
                .spawn(bg("sleep 300", "orphan"))
                .unwrap()
                .pid()
                .unwrap()
        })
    })
    .join()
    .unwrap();
    // The supervising thread is gone, so PR_SET_PDEATHSIG has SIGKILLed the shell (a `sleep 300`
    // would otherwise still run). Nobody supervises it any more: reap it if tokio's orphan
    // reaper has not already.
    let start = std::time::Instant::now();
    while is_alive(pid) {
        assert!(
            start.elapsed() < DEADLINE,
            "the orphaned child {pid} is still running"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let raw = rustix::process::Pid::from_raw(pid as i32).unwrap();
    // The signal reaches the shell only: its own `sleep` child lives on in the shell's process
    // group (the supervisor's tree kill is what reaches descendants). Leave nothing behind.
    match rustix::process::kill_process_group(raw, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(error) => panic!("killing the orphaned group: {error}"),
    }
    match rustix::process::waitpid(Some(raw), rustix::process::WaitOptions::NOHANG) {
        Ok(Some((_, status))) => assert_eq!(status.terminating_signal(), Some(9)),
        Ok(None) | Err(rustix::io::Errno::CHILD) => {}
        Err(error) => panic!("waitpid: {error}"),
    }
}

#[tokio::test]
async fn a_registered_task_is_pending_with_its_output_file_until_started() {
    let fx = Fixture::new(ShellConfig::default());
    let pending = fx.executor.register(bg("echo started", "later")).unwrap();
    let id = pending.id();
    let state = fx.state(&id);
    assert_eq!(state.status(), TaskStatus::Pending);
    assert_eq!(std::fs::read(&state.base.output_file).unwrap(), b"");
    let mut task = pending.start().unwrap();
    assert_eq!(task.id(), id);
    let outcome = task.wait().await.unwrap();
    assert_eq!(
        (outcome.status, outcome.exit_code),
        (TaskStatus::Completed, 0)
    );
    assert_eq!(output_of(&task), "started\n");
}

#[tokio::test]
async fn a_registered_task_dropped_unstarted_ends_failed_notified_if_in_the_background() {
    let fx = Fixture::new(ShellConfig::default());
    let background = fx.executor.register(bg("true", "never")).unwrap();
    let foreground = fx
        .executor
        .register(ShellRequest::new(
            CommandSpec::new("true").unwrap(),
            "never either",
        ))
        .unwrap();
    let (bg_id, fg_id) = (background.id(), foreground.id());
    drop(background);
    drop(foreground);
    for id in [bg_id, fg_id] {
        let state = fx.state(&id);
        assert_eq!(state.status(), TaskStatus::Failed);
        assert_eq!(fx.exit_code(&id), Some(1));
        assert!(state.base.notified);
        assert!(
            matches!(
                fx.executor.kill(&id).await,
                Err(ShellError::AlreadyFinished { .. })
            ),
            "no control channel is left behind"
        );
    }
    let notes = fx.registry.notifications().drain();
    assert_eq!(
        notes.len(),
        1,
        "only the background task is notified: {notes:?}"
    );
    assert_eq!(notes[0].task_id, bg_id);
    assert_eq!(notes[0].status, Some(TerminalStatus::Failed));
}

#[tokio::test]
async fn a_registered_background_task_that_cannot_start_is_notified() {
    let fx = Fixture::new(ShellConfig::default());
    let pending = fx.executor.register(unstartable()).unwrap();
    let id = pending.id();
    let err = pending.start().unwrap_err();
    assert!(matches!(err, ShellError::Spawn { .. }), "{err}");
    assert_eq!(fx.state(&id).status(), TaskStatus::Failed);
    assert_eq!(fx.exit_code(&id), Some(1));
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].render().contains("<status>failed</status>"),
        "{}",
        notes[0].render()
    );
}

#[tokio::test]
async fn a_kill_sent_while_pending_kills_the_process_once_started() {
    let fx = Fixture::new(ShellConfig::default());
    let pending = fx.executor.register(bg("sleep 300", "doomed")).unwrap();
    let id = pending.id();
    let executor = fx.executor.clone();
    let kill = tokio::spawn(async move { executor.kill(&id).await });
    tokio::task::yield_now().await;
    assert!(
        !kill.is_finished(),
        "the kill waits for the task's supervisor"
    );
    assert_eq!(fx.state(&id).status(), TaskStatus::Pending);
    let mut task = pending.start().unwrap();
    let pid = task.pid().unwrap();
    tokio::time::timeout(DEADLINE, kill)
        .await
        .expect("the kill completes once the supervisor runs")
        .unwrap()
        .unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!(
        (outcome.status, outcome.exit_code),
        (TaskStatus::Killed, 137)
    );
    assert!(!is_alive(pid));
}
