//! The poll loop on real files: deltas, a kill landing mid-read, eviction.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use task_core::{
    FileReader, OutputReader, PollLoop, Registry, TaskEvent, TaskId, TaskState, TaskStatus,
};
use task_output::OutputError;
use task_output::read::Delta;

use crate::common::{fast_config, registered_at, shell_task, wait_for_event};

/// A registry with one running shell task whose output file (in a temp dir) holds `initial`.
struct Running {
    _dir: tempfile::TempDir,
    path: PathBuf,
    registry: Arc<Registry>,
    id: TaskId,
}

impl Running {
    fn with_output(initial: &[u8]) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.output");
        append(&path, initial);
        let registry = Arc::new(Registry::new(fast_config()));
        let mut task: TaskState = shell_task("poll");
        task.base.output_file = path.clone();
        let id = registered_at(&registry, task, TaskStatus::Running);
        Running {
            _dir: dir,
            path,
            registry,
            id,
        }
    }
}

fn append(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn each_tick_consumes_only_new_output() {
    let Running {
        path, registry, id, ..
    } = &Running::with_output(b"hello\n");
    let mut events = registry.subscribe();
    let poll = PollLoop::new(Arc::clone(registry));

    let report = poll.tick();
    assert_eq!(
        (report.advanced.as_slice(), report.bytes),
        ([*id].as_slice(), 6)
    );
    append(path, b"world\n");
    assert_eq!(poll.tick().bytes, 6);
    assert_eq!(poll.tick().bytes, 0, "nothing new");
    assert_eq!(registry.get(id).unwrap().base.output_offset, 12);

    let outputs: Vec<_> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|e| match e {
            TaskEvent::TaskOutput { offset, bytes, .. } => Some((offset, bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, [(0, "hello\n".into()), (6, "world\n".into())]);
}

#[test]
fn tasks_that_are_not_running_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.output");
    append(&path, b"data");
    let registry = Arc::new(Registry::new(fast_config()));
    let mut pending = shell_task("pending");
    pending.base.output_file = path.clone();
    let id = registered_at(&registry, pending, TaskStatus::Pending);
    assert_eq!(PollLoop::new(Arc::clone(&registry)).tick().bytes, 0);
    assert_eq!(registry.get(&id).unwrap().base.output_offset, 0);
}

/// Reads the real file, then holds the read "in flight" until the test says go.
struct HeldReader {
    reading: Mutex<mpsc::Sender<()>>,
    resume: Mutex<mpsc::Receiver<()>>,
}

impl OutputReader for HeldReader {
    fn read_delta(&self, path: &Path, offset: u64, max: usize) -> Result<Delta, OutputError> {
        let delta = FileReader.read_delta(path, offset, max);
        self.reading.lock().unwrap().send(()).unwrap();
        self.resume.lock().unwrap().recv().unwrap();
        delta
    }
}

/// Starts a tick on another thread whose read pauses after reading: returns the tick, a
/// receiver signalled once the read is in flight, and the sender that lets it finish.
fn tick_with_held_read(
    registry: &Arc<Registry>,
) -> (
    std::thread::JoinHandle<task_core::PollReport>,
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
) {
    let (reading_tx, reading) = mpsc::channel();
    let (resume, resume_rx) = mpsc::channel();
    let poll = PollLoop::with_reader(
        Arc::clone(registry),
        HeldReader {
            reading: Mutex::new(reading_tx),
            resume: Mutex::new(resume_rx),
        },
    );
    (std::thread::spawn(move || poll.tick()), reading, resume)
}

#[test]
fn a_kill_during_a_read_in_flight_is_not_overwritten() {
    let Running { registry, id, .. } = &Running::with_output(b"partial output\n");
    let (ticking, reading, resume) = tick_with_held_read(registry);

    reading.recv_timeout(Duration::from_secs(10)).unwrap();
    // The read has happened and its result is not applied yet: the task is killed now.
    registry.transition(id, TaskStatus::Killed).unwrap();
    resume.send(()).unwrap();
    let report = ticking.join().unwrap();

    let state = registry.get(id).unwrap();
    assert_eq!(
        state.status(),
        TaskStatus::Killed,
        "the kill was overwritten"
    );
    assert!(state.base.end_time.is_some());
    assert_eq!(state.base.output_offset, 15, "the delta was still consumed");
    assert_eq!(report.advanced, [*id]);
    assert!(report.evicted.is_empty(), "not notified yet");
}

#[test]
fn a_task_settled_during_a_read_is_evicted_by_the_same_tick() {
    let Running { registry, id, .. } = &Running::with_output(b"bytes");
    let (ticking, reading, resume) = tick_with_held_read(registry);
    reading.recv_timeout(Duration::from_secs(10)).unwrap();
    registry
        .transition_with(id, TaskStatus::Completed, |s| s.base.notified = true)
        .unwrap();
    resume.send(()).unwrap();
    // Eviction looks at the state after the read, not the running snapshot taken before it.
    assert_eq!(ticking.join().unwrap().evicted, [*id]);
    assert!(registry.get(id).is_none());
}

#[test]
fn poll_eviction_honours_notified_retain_and_evict_after() {
    let registry = Arc::new(Registry::new(fast_config()));
    let done = registered_at(&registry, shell_task("done"), TaskStatus::Completed);
    let unnotified = registered_at(&registry, shell_task("unnotified"), TaskStatus::Completed);
    let retained = registered_at(&registry, shell_task("retained"), TaskStatus::Failed);
    let later = registered_at(&registry, shell_task("later"), TaskStatus::Killed);
    let expired = registered_at(&registry, shell_task("expired"), TaskStatus::Completed);
    let pending = registered_at(&registry, shell_task("pending"), TaskStatus::Pending);
    for id in [done, retained, later, expired, pending] {
        assert!(registry.mark_notified(&id));
    }
    registry.set_retained(&retained, true).unwrap();
    let now = task_core::now_ms();
    for (id, at) in [(later, now + 3_600_000), (expired, now.saturating_sub(1))] {
        registry
            .update(&id, |s| {
                let mut next = s.clone();
                next.base.evict_after = Some(at);
                Some(next)
            })
            .unwrap();
    }

    let mut evicted = PollLoop::new(Arc::clone(&registry)).tick().evicted;
    evicted.sort();
    let mut expected = vec![done, expired];
    expected.sort();
    assert_eq!(evicted, expected);
    for id in [unnotified, retained, later, pending] {
        assert!(registry.get(&id).is_some());
    }
}

#[tokio::test]
async fn the_spawned_loop_polls_on_its_interval() {
    let Running {
        path, registry, id, ..
    } = &Running::with_output(b"");
    let mut events = registry.subscribe();
    let handle = task_core::spawn_poll_loop(Arc::clone(registry));

    append(path, b"first\n");
    let event = wait_for_event(&mut events, |e| matches!(e, TaskEvent::TaskOutput { .. })).await;
    assert!(matches!(event, TaskEvent::TaskOutput { task_id, offset: 0, .. } if task_id == *id));
    append(path, b"second\n");
    let event = wait_for_event(&mut events, |e| matches!(e, TaskEvent::TaskOutput { .. })).await;
    assert!(
        matches!(event, TaskEvent::TaskOutput { offset: 6, ref bytes, .. } if bytes == "second\n")
    );
    handle.abort();
}
