//! The supervisor's memory and speed over a long life: 100 000 short tasks (`true`) started one
//! after another through one supervisor, by the session layer's client (`Session::start`, the
//! path every front end takes, without the cost of a process per start).
//!
//! Reports the supervisor's RSS once the first 1 000 tasks have ended and been swept, and once
//! all 100 000 have, and the time per task of the first and the last 10 000 starts (each start
//! answered by the supervisor; the tasks run and end meanwhile). Targets: RSS at the end ≤ 1.2×
//! RSS after 1 000, and the last 10 000 within 1.2× of the first.
//!
//! Run with `cargo bench -p benches --bench soak` (`TASKS_SOAK_TASKS=N` for a shorter run). It
//! builds the `tasks` binary as shipped, runs on a temporary root, and kills the supervisor at
//! the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use benches::{build_tasks_binary, rss_kib};
use task_core::TaskId;
use task_session::client::SupervisorCommand;
use task_session::config::Config;
use task_session::paths::SessionPaths;
use task_session::session::Session;
use task_shell::ShellStart;

const WINDOW: usize = 10_000;
const EARLY: usize = 1_000;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("soak: bench");
        return;
    }
    let total: usize = std::env::var("TASKS_SOAK_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let tasks = build_tasks_binary();
    let root = tempfile::tempdir().unwrap();
    let paths = SessionPaths::new(root.path(), "default").unwrap();
    paths.create_dirs().unwrap();
    std::fs::write(paths.config(), r#"{"idle_exit_ms": 600000}"#).unwrap();
    let session = Session::with_config(paths.clone(), Config::load(&paths.config()).unwrap())
        .with_supervisor(SupervisorCommand {
            program: tasks.into(),
            args: vec!["__supervise".into()],
        });
    let caller = Session::caller().unwrap();
    let start = || {
        let request = ShellStart {
            command: "true".into(),
            description: "soak".into(),
            timeout_ms: None,
            stdin: task_shell::process::StdinMode::Null,
            placement: None,
        };
        session.start(request, caller.clone()).unwrap()
    };
    let supervisor = || -> i32 {
        std::fs::read_to_string(paths.lock())
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let settle = |last: TaskId| {
        // Until the last task ended and the supervisor holds no task any more (it evicts each
        // one a sweep after its final record is on disk), with a deadline.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !session.task(&last).unwrap().is_terminal() || session.ping().unwrap().1 > 0 {
            assert!(
                Instant::now() < deadline,
                "tasks still held after {last} ended"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    let mut rss_early = 0;
    let mut first_window = Duration::ZERO;
    let mut last_window = Duration::ZERO;
    let mut window_start = Instant::now();
    let began = Instant::now();
    for n in 1..=total {
        let id = start();
        if n % WINDOW == 0 {
            let elapsed = window_start.elapsed();
            if n == WINDOW {
                first_window = elapsed;
            }
            last_window = elapsed;
            println!(
                "{n:>7} tasks: {:.3} ms per task over the last {WINDOW}, supervisor RSS {:.1} MiB",
                elapsed.as_secs_f64() * 1000.0 / WINDOW as f64,
                rss_kib(supervisor()) as f64 / 1024.0
            );
        }
        if n == EARLY {
            let paused = Instant::now();
            settle(id);
            rss_early = rss_kib(supervisor());
            window_start += paused.elapsed(); // the pause is not the first window's time
        }
        if n == total {
            settle(id);
        }
        if n % WINDOW == 0 {
            window_start = Instant::now();
        }
    }
    let rss_end = rss_kib(supervisor());
    println!(
        "soak_{total}: {:.1} s in all; RSS after {EARLY}: {:.1} MiB, after {total}: {:.1} MiB ({:.2}x, target <= 1.2x); \
         per task: first {WINDOW} {:.3} ms, last {WINDOW} {:.3} ms ({:.2}x, target <= 1.2x)",
        began.elapsed().as_secs_f64(),
        rss_early as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        rss_end as f64 / rss_early.max(1) as f64,
        first_window.as_secs_f64() * 1000.0 / WINDOW as f64,
        last_window.as_secs_f64() * 1000.0 / WINDOW as f64,
        last_window.as_secs_f64() / first_window.as_secs_f64().max(f64::MIN_POSITIVE),
    );
    if let Some(pid) = rustix::process::Pid::from_raw(supervisor()) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}
