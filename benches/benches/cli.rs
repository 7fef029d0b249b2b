//! Whole-process benchmarks of the `tasks` binary, each side by side with its baseline in one run:
//!
//! 1. `run_latency`: `tasks run -- true` until its id is on stdout (warm supervisor), against
//!    `sh -c true`; plus the cold start (first `run` of a fresh session, which starts the
//!    supervisor).
//! 2. `run_200_then_wait`: a shell loop of 200 `tasks run -- true`, then one `tasks wait` on all
//!    of them, against a shell loop of 200 `sh -c true` (target ≤ 2×).
//! 3. `tail_1gib`: `tasks output ID --tail 5` on a 1 GiB output against `tail -n 5` on the same
//!    file, both as whole processes (target ≤ 1.15×).
//! 4. `rss_sleeps`: the total RSS of every process supervising tasks (the session's one
//!    supervisor) while `TASKS_BENCH_SLEEPS` (default 1000) `sleep` tasks started by `tasks run`
//!    are alive (target ≤ 64 MiB at 10 000).
//! 5. `queue_200`: `run_200_then_wait` through a group of parallel 4 against the same through an
//!    unlimited group: what the queue adds per task.
//! 6. `queued_10000`: `TASKS_BENCH_QUEUED` (default 10 000) `tasks run -- true` queued behind
//!    the 4 blockers of a group of parallel 4: the supervisor's RSS with all of them waiting,
//!    then the time to drain them once the blockers go.
//! 7. `stray_tracking`: the cost of looking for the processes each task left running when it
//!    ends (`strays`: `report`, the default, against `ignore`): the supervisor's CPU time and
//!    the wall time of the 200-run loop of 2., the two policies interleaved in one run.
//! 8. `start_cost_held`: the cost of a start while the supervisor holds many live tasks: the
//!    200-run loop of 2. (wall time, and the supervisor's CPU per task) in a session holding
//!    100 live `sleep` tasks and in one holding `TASKS_BENCH_HELD` (default 10 000), the two
//!    interleaved (target: at most 1.2× the cost at 100); and first, what each supervisor
//!    spends over 10 s holding its live tasks with nothing started.
//!
//! With `TASKS_BENCH_BASE_BIN=PATH` (another build's `tasks`, its `tasksd` beside it), 2. and 8.
//! also measure that build, interleaved with the one under test in the same run: a before and
//! after side by side.
//!
//! `cargo bench -p benches --bench cli -- NAME…` runs only the benchmarks whose names start
//! with one of the NAMEs (`-- queue` runs 5 and 6, `-- stray` runs 7).
//!
//! Run with `cargo bench -p benches --bench cli`. It builds the executables as shipped first
//! (`cargo build-tasksd`, `cargo build-tasks`: release, static-pie), runs everything on temporary roots, and kills
//! every process it started. Figures are medians; `TASKS_BENCH_QUICK=1` shortens the sample
//! counts; `TASKS_BENCH_ROOT=DIR` puts the state roots in DIR instead of the system's temporary
//! directory (to compare filesystems).
//!
//! The roots are all deleted at the very end, not after each sample: on ext4 without a journal
//! (this project's benchmark machine) every deleted inode slows each later file creation in its
//! block group for up to minutes, so deleting one sample's files would tax the next sample (and
//! only the `tasks` side: the baselines create no files).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benches::{build_tasks_binary, cpu_time, rss_kib};

const GIB: u64 = 1024 * 1024 * 1024;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("cli: bench");
        return;
    }
    let tasks = build_tasks_binary();
    let roots = match std::env::var_os("TASKS_BENCH_ROOT") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    println!("state roots in: {}", roots.path().display());
    let quick = std::env::var_os("TASKS_BENCH_QUICK").is_some();
    let samples = if quick { 3 } else { 9 };
    println!("tasks binary: {}", tasks.display());
    let base = std::env::var_os("TASKS_BENCH_BASE_BIN").map(PathBuf::from);
    if let Some(base) = &base {
        println!("base binary (before): {}", base.display());
    }
    let bench = Bench {
        tasks,
        base,
        roots: roots.path().to_owned(),
    };
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted =
        |name: &str| names.is_empty() || names.iter().any(|n| name.starts_with(n.as_str()));
    let number = |var: &str, default: usize| {
        std::env::var(var)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    };
    if wanted("run_latency") {
        run_latency(&bench, if quick { 20 } else { 60 });
    }
    if wanted("run_200_then_wait") {
        run_200_then_wait(&bench, samples);
    }
    if wanted("tail_1gib") {
        tail_1gib(&bench, if quick { 10 } else { 40 });
    }
    if wanted("rss_sleeps") {
        rss_sleeps(&bench, number("TASKS_BENCH_SLEEPS", 1000));
    }
    if wanted("queue_200") {
        queue_200(&bench, samples);
    }
    if wanted("queued_10000") {
        queued_10000(&bench, number("TASKS_BENCH_QUEUED", 10_000));
    }
    if wanted("stray_tracking") {
        stray_tracking(&bench, samples);
    }
    if wanted("start_cost_held") {
        start_cost_held(&bench, number("TASKS_BENCH_HELD", 10_000), samples);
    }
}

/// The binary under test, another build to compare it with, and where the state roots go
/// (deleted when the bench ends).
struct Bench {
    tasks: PathBuf,
    base: Option<PathBuf>,
    roots: PathBuf,
}

impl Bench {
    /// The builds to measure, named: the one under test (`after`), then the base, if any.
    fn builds(&self) -> Vec<(&'static str, &PathBuf)> {
        let mut builds = vec![("after", &self.tasks)];
        builds.extend(self.base.iter().map(|base| ("before", base)));
        builds
    }
}

/// A state root with its own supervisor; every process is killed on drop (the files stay until
/// the bench ends).
struct Root {
    dir: PathBuf,
    tasks: PathBuf,
    /// Settings of this root's commands (and so of its supervisor).
    env: Vec<(&'static str, &'static str)>,
}

impl Root {
    fn new(bench: &Bench) -> Self {
        Self::of(bench, &bench.tasks)
    }

    /// A root whose commands (and supervisor) are those of the build `tasks`.
    fn of(bench: &Bench, tasks: &std::path::Path) -> Self {
        let dir = tempfile::tempdir_in(&bench.roots).unwrap().keep();
        Self {
            dir,
            tasks: tasks.to_owned(),
            env: Vec::new(),
        }
    }

    fn with_env(mut self, key: &'static str, value: &'static str) -> Self {
        self.env.push((key, value));
        self
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.tasks);
        command
            .env("TASKS_ROOT", &self.dir)
            .env("TASKS_IDLE_EXIT_MS", "60000")
            .env("TASKS_POLL_MS", "5")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .envs(self.env.iter().copied());
        command
    }

    fn run(&self, args: &[&str]) -> String {
        let output = self.command().args(args).output().unwrap();
        assert!(
            output.status.success(),
            "tasks {args:?}: {:?}",
            output.status
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn start(&self, command: &str) -> String {
        self.run(&["run", "--", command]).trim().to_owned()
    }

    /// Runs `script` with `sh -c` in this root.
    fn sh(&self, script: &str) {
        let status = Command::new("sh")
            .args(["-c", script])
            .env("TASKS_ROOT", &self.dir)
            .env("TASKS_POLL_MS", "5")
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    }

    fn supervisor_pid(&self) -> Option<i32> {
        let lock = self.dir.join("default/supervisor.lock");
        std::fs::read_to_string(lock).ok()?.trim().parse().ok()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let live: Vec<String> = self
            .run(&["ps", "--json"])
            .split("\"id\":\"")
            .skip(1)
            .filter_map(|rest| rest.get(..9).map(str::to_owned))
            .collect();
        for chunk in live.chunks(200) {
            let mut args = vec!["kill"];
            args.extend(chunk.iter().map(String::as_str));
            let _ = self.command().args(&args).stdout(Stdio::null()).status();
        }
        if let Some(pid) = self.supervisor_pid() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn report(name: &str, ours: Duration, baseline_name: &str, baseline: Duration, target: &str) {
    println!(
        "{name:<22} tasks {:>10.3} ms | {baseline_name:<22} {:>10.3} ms | ratio {:>5.2}x {target}",
        ours.as_secs_f64() * 1e3,
        baseline.as_secs_f64() * 1e3,
        ours.as_secs_f64() / baseline.as_secs_f64()
    );
}

fn sh(script: &str) {
    let status = Command::new("sh").args(["-c", script]).status().unwrap();
    assert!(status.success(), "{script}");
}

fn run_latency(bench: &Bench, n: usize) {
    let cold: Vec<Duration> = (0..n.min(10))
        .map(|_| {
            let root = Root::new(bench);
            time(|| {
                root.start("true");
            })
        })
        .collect();
    let root = Root::new(bench);
    root.start("true");
    let mut ours = Vec::new();
    let mut baseline = Vec::new();
    for _ in 0..n {
        ours.push(time(|| {
            root.start("true");
        }));
        baseline.push(time(|| sh("true")));
    }
    report(
        "run_latency (warm)",
        median(ours),
        "sh -c true",
        median(baseline.clone()),
        "",
    );
    report(
        "run_latency (cold)",
        median(cold),
        "sh -c true",
        median(baseline),
        "",
    );
}

fn run_200_then_wait(bench: &Bench, samples: usize) {
    let builds = bench.builds();
    let mut ours = vec![Vec::new(); builds.len()];
    let mut cpu = vec![Vec::new(); builds.len()];
    let mut baseline = Vec::new();
    for _ in 0..samples {
        for (i, (_, tasks)) in builds.iter().enumerate() {
            let root = Root::of(bench, tasks);
            root.start("true"); // the supervisor is up, as in a session already in use
            let supervisor = root.supervisor_pid().unwrap();
            let before = cpu_time(supervisor);
            let script = run_200_script(tasks, "");
            ours[i].push(time(|| root.sh(&script)));
            cpu[i].push(cpu_time(supervisor).saturating_sub(before));
        }
        baseline.push(time(|| sh("for i in $(seq 200); do sh -c true; done")));
    }
    for (i, (build, _)) in builds.iter().enumerate() {
        let ratios: Vec<String> = ours[i]
            .iter()
            .zip(&baseline)
            .map(|(o, b)| format!("{:.2}", o.as_secs_f64() / b.as_secs_f64()))
            .collect();
        report(
            &format!("run_200_then_wait {build}"),
            median(ours[i].clone()),
            "200 × sh -c true",
            median(baseline.clone()),
            "(target ≤ 2.5×, goal 2×)",
        );
        println!("  per-sample ratios: {}", ratios.join(" "));
        println!(
            "  supervisor CPU per task (utime + stime / 200, median of {samples}): {:.3} ms",
            median(cpu[i].clone()).as_secs_f64() * 1e3 / 200.0
        );
    }
}

/// 200 × `tasks run OPTIONS -- true` of the build `tasks`, then one `tasks wait` on them all.
fn run_200_script(tasks: &std::path::Path, options: &str) -> String {
    format!(
        "ids=''; for i in $(seq 200); do ids=\"$ids $('{0}' run {options} -- true)\"; done; '{0}' wait $ids >/dev/null",
        tasks.display()
    )
}

/// The 200-run loop in a session holding 100 live tasks and in one holding `held`, interleaved,
/// for each build: whether a start costs more when the supervisor holds more.
fn start_cost_held(bench: &Bench, held: usize, samples: usize) {
    for (build, tasks) in bench.builds() {
        let roots: Vec<(usize, Root)> = [100, held]
            .into_iter()
            .map(|count| (count, holding(bench, tasks, count)))
            .collect();
        for (count, root) in &roots {
            let supervisor = root.supervisor_pid().unwrap();
            let before = cpu_time(supervisor);
            std::thread::sleep(IDLE_WINDOW); // the window measured, not a wait for an event
            let idle = cpu_time(supervisor).saturating_sub(before);
            println!(
                "start_cost_held {build:<6} {count:>6} live: idle supervisor CPU {:.0} ms in {} s",
                idle.as_secs_f64() * 1e3,
                IDLE_WINDOW.as_secs()
            );
        }
        let mut wall = vec![Vec::new(); roots.len()];
        let mut cpu = vec![Vec::new(); roots.len()];
        for _ in 0..samples {
            for (i, (_, root)) in roots.iter().enumerate() {
                let supervisor = root.supervisor_pid().unwrap();
                let before = cpu_time(supervisor);
                wall[i].push(time(|| root.sh(&run_200_script(tasks, ""))));
                cpu[i].push(cpu_time(supervisor).saturating_sub(before));
            }
        }
        let per_task = |d: Duration| d.as_secs_f64() * 1e3 / 200.0;
        let figures: Vec<(f64, f64)> = (0..roots.len())
            .map(|i| {
                (
                    per_task(median(wall[i].clone())),
                    per_task(median(cpu[i].clone())),
                )
            })
            .collect();
        for ((count, root), (wall, cpu)) in roots.iter().zip(&figures) {
            println!(
                "start_cost_held {build:<6} {count:>6} live: {wall:.3} ms a start (200-run loop), \
                 supervisor CPU {cpu:.3} ms a task, supervisor RSS {:.1} MiB",
                rss_kib(root.supervisor_pid().unwrap()) as f64 / 1024.0
            );
        }
        println!(
            "start_cost_held {build:<6} ratio {held} / 100 live: wall {:.2}×, supervisor CPU {:.2}× (target ≤ 1.2×)",
            figures[1].0 / figures[0].0,
            figures[1].1 / figures[0].1
        );
    }
}

/// How long `start_cost_held` watches each supervisor do nothing but hold its live tasks: what
/// they cost it while no start happens (the watchdogs of every live task).
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// A root of the build `tasks` whose supervisor holds `count` live `sleep` tasks.
fn holding(bench: &Bench, tasks: &std::path::Path, count: usize) -> Root {
    let root = Root::of(bench, tasks);
    let started = Instant::now();
    root.sh(&format!(
        "for i in $(seq {count}); do '{}' run -- sleep 100000 > /dev/null; done",
        tasks.display()
    ));
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let running = root
            .run(&["ps", "--json"])
            .matches("\"status\":\"running\"")
            .count();
        if running == count {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{running} of {count} sleeps running"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "  {count} live sleep tasks started in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    root
}

fn queue_200(bench: &Bench, samples: usize) {
    let mut limited = Vec::new();
    let mut unlimited = Vec::new();
    for _ in 0..samples {
        for (group, parallel, times) in [("four", "4", &mut limited), ("free", "0", &mut unlimited)]
        {
            let root = Root::new(bench);
            root.run(&["group", "set", group, "--parallel", parallel]);
            root.start("true"); // the supervisor is up
            let script = run_200_script(&bench.tasks, &format!("--group {group}"));
            times.push(time(|| root.sh(&script)));
        }
    }
    let per_task = |d: Duration| d.as_secs_f64() * 1e3 / 200.0;
    let (limited, unlimited) = (median(limited), median(unlimited));
    report("queue_200", limited, "unlimited group", unlimited, "");
    println!(
        "  per task: {:.3} ms through a group of parallel 4, {:.3} ms unlimited",
        per_task(limited),
        per_task(unlimited)
    );
}

fn queued_10000(bench: &Bench, count: usize) {
    let root = Root::new(bench);
    root.run(&["group", "set", "q", "--parallel", "4"]);
    let blockers: Vec<String> = (0..4)
        .map(|_| {
            let args = ["run", "--group", "q", "--stdin", "pipe", "--", "read line"];
            root.run(&args).trim().to_owned()
        })
        .collect();
    let supervisor = root.supervisor_pid().unwrap();
    let idle = rss_kib(supervisor);
    let ids = root.dir.join("ids");
    let submit = time(|| {
        root.sh(&format!(
            "for i in $(seq {count}); do '{}' run --group q -- true; done > '{}'",
            bench.tasks.display(),
            ids.display()
        ));
    });
    let queued = rss_kib(supervisor);
    let drain = time(|| {
        for blocker in &blockers {
            root.run(&["input", blocker, "go"]);
        }
        // Every queued task ended: `wait` on all of them (their ids, one a line).
        root.sh(&format!(
            "xargs '{}' wait --no-deliver < '{}' > /dev/null",
            bench.tasks.display(),
            ids.display()
        ));
    });
    let after = rss_kib(supervisor);
    println!(
        "queued_10000           supervisor RSS {:.1} MiB with {count} tasks queued (idle with the 4 \
         blockers: {:.1} MiB; after the drain: {:.1} MiB); queued in {:.1} s; drained in {:.1} s \
         ({:.2} ms per task, 4 at a time)",
        queued as f64 / 1024.0,
        idle as f64 / 1024.0,
        after as f64 / 1024.0,
        submit.as_secs_f64(),
        drain.as_secs_f64(),
        drain.as_secs_f64() * 1e3 / count as f64
    );
}

/// The cost of stray tracking: the supervisor's CPU time and the wall time of the loop of [`run_200_script`] with
/// `strays` set to `report` (each end looks at `/proc` for processes carrying the task's
/// marker) and to `ignore` (no look), interleaved.
fn stray_tracking(bench: &Bench, samples: usize) {
    let processes = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count()
        })
        .unwrap_or(0);
    println!("stray_tracking: {processes} processes on the machine");
    let policies = ["report", "ignore"];
    let mut cpu: [Vec<Duration>; 2] = Default::default();
    let mut wall: [Vec<Duration>; 2] = Default::default();
    for _ in 0..samples {
        for (i, policy) in policies.iter().enumerate() {
            let root = Root::new(bench).with_env("TASKS_STRAYS", policy);
            root.start("true");
            let pid = root.supervisor_pid().unwrap();
            let before = cpu_time(pid);
            let script = run_200_script(&bench.tasks, "");
            wall[i].push(time(|| root.sh(&script)));
            cpu[i].push(cpu_time(pid).saturating_sub(before));
        }
    }
    for (i, policy) in policies.iter().enumerate() {
        let cpu = median(cpu[i].clone());
        println!(
            "stray_tracking {policy:<6} supervisor CPU {:>8.1} ms ({:>6.1} µs a task) | 200 runs + wait {:>8.1} ms",
            cpu.as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e6 / 200.0,
            median(wall[i].clone()).as_secs_f64() * 1e3
        );
    }
}

fn tail_1gib(bench: &Bench, n: usize) {
    let root = Root::new(bench);
    let id = root.start("yes 'a line of output from a long build, 40 bytes' | head -c 1073741824");
    root.run(&["wait", &id]);
    let output = root.dir.join(format!("default/tasks/{id}.output"));
    assert_eq!(std::fs::metadata(&output).unwrap().len(), GIB);
    let mut ours = Vec::new();
    let mut baseline = Vec::new();
    for _ in 0..n {
        ours.push(time(|| {
            let out = root.run(&["output", &id, "--tail", "5"]);
            assert_eq!(out.lines().count(), 5);
        }));
        baseline.push(time(|| {
            let out = Command::new("tail")
                .arg("-n")
                .arg("5")
                .arg(&output)
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 5);
        }));
    }
    report(
        "tail_1gib",
        median(ours),
        "tail -n 5",
        median(baseline),
        "(target ≤ 1.15×)",
    );
    std::fs::remove_file(output).unwrap();
}

fn rss_sleeps(bench: &Bench, count: usize) {
    let root = Root::new(bench);
    root.start("true");
    let idle = rss_kib(root.supervisor_pid().unwrap());
    let started = Instant::now();
    let ids: Vec<String> = (0..count).map(|_| root.start("sleep 1000")).collect();
    let elapsed = started.elapsed();
    // The last ids were handed out before their processes started: wait for those.
    let deadline = Instant::now() + Duration::from_secs(120);
    let running = loop {
        let ps = root.run(&["ps", "--json"]);
        let running = ps.matches("\"status\":\"running\"").count();
        if running == ids.len() || Instant::now() > deadline {
            break running;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(running, ids.len(), "all {count} sleeps are alive");
    let supervisor = root.supervisor_pid().unwrap();
    let rss = rss_kib(supervisor);
    println!(
        "rss_sleeps             supervisor RSS {:.1} MiB with {running} live tasks (idle: {:.1} MiB; \
         the only supervising process; started in {:.1} s) (target ≤ 64 MiB)",
        rss as f64 / 1024.0,
        idle as f64 / 1024.0,
        elapsed.as_secs_f64()
    );
}
