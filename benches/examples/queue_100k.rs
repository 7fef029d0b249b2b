//! 100 000 tasks in one supervisor: `TASKS_BENCH_QUEUED` (default 100 000) `true` tasks queued
//! in a group of `--parallel 50` while the group is paused, then drained.
//!
//! Reports, in one run:
//! - the cost of one start (a task queued in the paused group) with 1 000 tasks held and with
//!   all of them held: the mean over the 1 000 starts before each point, and the median of 50
//!   starts of a task that runs at once (another group, unlimited) at each point, with the
//!   supervisor's CPU per such start;
//! - the supervisor's RSS with every task queued, its peak over the run (`VmHWM`) and per task,
//!   its open descriptors and the files in the session's tasks directory at that point;
//! - the drain: the group resumed, the time until every task ended and the supervisor holds
//!   none, and the rate;
//! - the peak RSS of this process (the client every start went through).
//!
//! Starts go through the session layer's client (`Session::start_with`, the path of every front
//! end), not a process per start, as `benches/benches/soak.rs` does. Run with `cargo run
//! --release -p benches --example queue_100k` (it builds the shipped `tasks`/`tasksd` first;
//! `TASKS_BENCH_BIN` measures another build). The root is a temporary directory (`TMPDIR=/dev/shm`
//! puts it on tmpfs); the supervisor is killed by its pid at the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use benches::{build_tasks_binary, cpu_time, median, rss_kib, status_kib};
use task_core::TaskId;
use task_session::client::SupervisorCommand;
use task_session::config::Config;
use task_session::paths::SessionPaths;
use task_session::protocol::Ends;
use task_session::queue::Schedule;
use task_session::session::Session;
use task_shell::ShellStart;

/// The queued group and its parallelism.
const GROUP: &str = "q";
const PARALLEL: u32 = 50;
/// Where the start cost is measured first (tasks held).
const EARLY: usize = 1_000;
/// Starts of a task that runs at once, at each point.
const PROBES: usize = 50;

fn count_entries(dir: impl AsRef<std::path::Path>) -> usize {
    std::fs::read_dir(dir).map_or(0, Iterator::count)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("queue_100k: bench");
        return;
    }
    let total: usize = std::env::var("TASKS_BENCH_QUEUED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let tasks = build_tasks_binary();
    let root = tempfile::tempdir().unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "queue_100k: {total} tasks, group of parallel {PARALLEL}; {} on {}; load {}",
        tasks.display(),
        root.path().display(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let paths = SessionPaths::new(root.path(), "default").unwrap();
    paths.create_dirs().unwrap();
    std::fs::write(paths.config(), r#"{"idle_exit_ms": 3600000}"#).unwrap();
    let session = Session::with_config(paths.clone(), Config::load(&paths.config()).unwrap())
        .with_supervisor(SupervisorCommand {
            program: tasks.into(),
            args: vec!["__supervise".into()],
        });
    let caller = Session::caller().unwrap();
    let start_in = |group: &str| -> TaskId {
        let request = ShellStart {
            command: "true".into(),
            description: "queue_100k".into(),
            timeout_ms: None,
            stdin: task_shell::process::StdinMode::Null,
            placement: None,
        };
        let schedule = Schedule {
            group: Some(group.into()),
            ..Schedule::default()
        };
        session
            .start_with(request, caller.clone(), schedule, Ends::default())
            .unwrap()
    };
    session.set_group_limit(GROUP, PARALLEL).unwrap();
    session.pause_group(GROUP, true).unwrap();
    let supervisor: i32 = std::fs::read_to_string(paths.lock())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    println!(
        "supervisor {supervisor}: RSS {:.1} MiB before any task",
        mib(rss_kib(supervisor))
    );

    // A start of a task that runs at once (the unlimited default group), `PROBES` times: the
    // median wall time and the supervisor's CPU per start.
    let probe = |held: usize| {
        let before = cpu_time(supervisor);
        let mut times: Vec<Duration> = (0..PROBES)
            .map(|_| {
                let began = Instant::now();
                start_in("default");
                began.elapsed()
            })
            .collect();
        let cpu = cpu_time(supervisor).saturating_sub(before);
        let wall = median(&mut times);
        println!(
            "  {held:>7} held: a start of a task that runs at once {:.3} ms (median of {PROBES}), \
             supervisor CPU {:.3} ms a start (with its task's run and end)",
            wall.as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e3 / PROBES as f64
        );
        (wall, cpu / PROBES as u32)
    };

    let mut queued_cost = Vec::new();
    let mut probes = Vec::new();
    let mut window = Instant::now();
    let began = Instant::now();
    let mut last = None;
    for n in 1..=total {
        last = Some(start_in(GROUP));
        if n == EARLY || n == total {
            let per_start = window.elapsed() / EARLY.min(n) as u32;
            println!(
                "  {n:>7} held: a queued start {:.3} ms (mean of the last {})",
                per_start.as_secs_f64() * 1e3,
                EARLY.min(n)
            );
            queued_cost.push(per_start);
            probes.push(probe(n));
        }
        if n % EARLY == 0 {
            window = Instant::now();
        }
        if n % 10_000 == 0 {
            println!(
                "  {n:>7} queued in {:.1} s, supervisor RSS {:.1} MiB",
                began.elapsed().as_secs_f64(),
                mib(rss_kib(supervisor))
            );
        }
    }
    let queued_in = began.elapsed();
    let tasks_dir = paths.tasks_dir();
    let held_rss = rss_kib(supervisor);
    let fds = count_entries(format!("/proc/{supervisor}/fd"));
    let files = count_entries(&tasks_dir);
    println!(
        "all {total} queued in {:.1} s: supervisor RSS {:.1} MiB ({:.2} KiB a task), {fds} open \
         descriptors, {files} files in the tasks directory",
        queued_in.as_secs_f64(),
        mib(held_rss),
        held_rss as f64 / total as f64
    );

    let drain_began = Instant::now();
    session.pause_group(GROUP, false).unwrap();
    let last = last.unwrap();
    let mut peak_sampled = held_rss;
    let deadline = Instant::now() + Duration::from_secs(3600);
    while !session.task(&last).unwrap().is_terminal() || session.ping().unwrap().1 > 0 {
        assert!(Instant::now() < deadline, "not drained in an hour");
        peak_sampled = peak_sampled.max(rss_kib(supervisor));
        std::thread::sleep(Duration::from_millis(200));
    }
    let drained = drain_began.elapsed();
    let hwm = status_kib(supervisor, "VmHWM:");
    let own = status_kib(std::process::id() as i32, "VmHWM:");
    println!(
        "drained in {:.1} s: {:.0} tasks/s ({:.2} ms a task, {PARALLEL} at a time); supervisor \
         RSS after {:.1} MiB, peak (VmHWM) {:.1} MiB = {:.2} KiB a task; this client's peak \
         {:.1} MiB; files left in the tasks directory {}",
        drained.as_secs_f64(),
        total as f64 / drained.as_secs_f64(),
        drained.as_secs_f64() * 1e3 / total as f64,
        mib(rss_kib(supervisor)),
        mib(hwm),
        hwm as f64 / total as f64,
        mib(own),
        count_entries(&tasks_dir)
    );
    let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64().max(f64::MIN_POSITIVE);
    println!(
        "start cost {total} / {EARLY} held: a queued start {:.2}×, a start that runs at once \
         {:.2}× (wall), {:.2}× (supervisor CPU); peak RSS {} 256 MiB",
        ratio(queued_cost[0], queued_cost[1]),
        ratio(probes[0].0, probes[1].0),
        ratio(probes[0].1, probes[1].1),
        if hwm.max(own) <= 256 * 1024 {
            "≤"
        } else {
            ">"
        }
    );
    if let Some(pid) = rustix::process::Pid::from_raw(supervisor) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}
