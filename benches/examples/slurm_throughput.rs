//! 100 shell tasks on a Slurm cluster through `tasks`, against the same 100 jobs submitted with
//! `sbatch` directly, in one run; and the supervisor's CPU per Slurm task.
//!
//! Needs a cluster (`eval "$(.ci/slurm.sh start)"`: `SLURM_CONF` set, `sbatch` on `PATH`).
//! Each round, alternately:
//! - **tasks**: 100 × `tasks run --on slurm -- true` (each a `tasks` process), then one
//!   `tasks wait` of all 100; the supervisor polls each job every `TASKS_SLURM_POLL_MS`;
//! - **sbatch**: 100 × `sbatch --parsable --wrap true`, then `squeue` every poll interval until
//!   none of the 100 is pending, running or completing (what `sbatch --wait` does for one job,
//!   for all of them, at the same poll interval as the supervisor).
//!
//! The supervisor's CPU (`utime`+`stime` of `/proc/PID/stat`, and `cutime`+`cstime`: the
//! `sbatch`/`squeue` processes it ran and reaped) is read before and after the 100 tasks of
//! each round (it was started by one local task first, so its start-up is not counted).
//!
//! ```text
//! cargo run --release -p benches --example slurm_throughput
//! ```
//! `TASKS_BENCH_BIN` (a `tasks` binary; default: built), `TASKS_BENCH_ROUNDS` (default 3),
//! `TASKS_SLURM_POLL_MS` (default 250). Prints the medians and their ratio.
//!
//! `TASKS_BENCH_BASELINE_BIN` (another `tasks` binary, its `tasksd` beside it: an earlier
//! build) adds, each round, the same 100 tasks under that binary's supervisor, the two taking
//! turns to go first; the supervisors' CPU per task are then compared side by side.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const JOBS: usize = 100;

fn main() {
    if std::env::var_os("SLURM_CONF").is_none() {
        eprintln!("no Slurm cluster: start one with eval \"$(.ci/slurm.sh start)\"");
        std::process::exit(2);
    }
    let bin = benches::build_tasks_binary();
    let rounds: usize = env_or("TASKS_BENCH_ROUNDS", 3);
    let poll_ms: u64 = env_or("TASKS_SLURM_POLL_MS", 250);
    let poll = Duration::from_millis(poll_ms);
    let baseline = std::env::var_os("TASKS_BENCH_BASELINE_BIN").map(PathBuf::from);
    let (mut tasks, mut sbatch, mut own, mut children) = (vec![], vec![], vec![], vec![]);
    let (mut base_took, mut base_own, mut base_children) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let baseline_run = || {
            let bin = baseline.as_ref()?;
            let root = tempfile::tempdir().unwrap();
            let (took, cpu) = TasksRun::new(bin, root.path(), poll_ms).hundred_on_slurm();
            println!(
                "round {round}: baseline {:.2} s (supervisor {:.1} ms own + {:.1} ms children per task)",
                took.as_secs_f64(),
                cpu.own_ms / JOBS as f64,
                cpu.children_ms / JOBS as f64,
            );
            Some((took, cpu))
        };
        let before = if round % 2 == 0 { baseline_run() } else { None };
        let root = tempfile::tempdir().unwrap();
        let run = TasksRun::new(&bin, root.path(), poll_ms);
        let (took, cpu) = run.hundred_on_slurm();
        let after = if round % 2 == 1 { baseline_run() } else { None };
        if let Some((took, cpu)) = before.or(after) {
            base_took.push(took.as_secs_f64());
            base_own.push(cpu.own_ms / JOBS as f64);
            base_children.push(cpu.children_ms / JOBS as f64);
        }
        let took_sbatch = hundred_sbatch(poll);
        println!(
            "round {round}: tasks {:.2} s (supervisor {:.1} ms own + {:.1} ms children per task), sbatch {:.2} s",
            took.as_secs_f64(),
            cpu.own_ms / JOBS as f64,
            cpu.children_ms / JOBS as f64,
            took_sbatch.as_secs_f64()
        );
        tasks.push(took.as_secs_f64());
        sbatch.push(took_sbatch.as_secs_f64());
        own.push(cpu.own_ms / JOBS as f64);
        children.push(cpu.children_ms / JOBS as f64);
    }
    let (t, s) = (median(&mut tasks), median(&mut sbatch));
    println!("medians over {rounds} rounds, {JOBS} jobs each, poll {poll_ms} ms:");
    println!(
        "  100 × tasks run --on slurm -- true, then wait: {t:.2} s ({:.1} ms per task)",
        t * 1000.0 / JOBS as f64
    );
    println!(
        "  100 × sbatch --wrap true, then squeue until done: {s:.2} s ({:.1} ms per job)",
        s * 1000.0 / JOBS as f64
    );
    println!("  ratio tasks/sbatch: {:.2}×", t / s);
    let (own, children) = (median(&mut own), median(&mut children));
    println!(
        "  supervisor CPU per Slurm task: {own:.1} ms own, {children:.1} ms in the sbatch/squeue it ran"
    );
    if !base_own.is_empty() {
        let (b_own, b_children) = (median(&mut base_own), median(&mut base_children));
        println!(
            "  baseline: {:.2} s; supervisor CPU per Slurm task: {b_own:.1} ms own, {b_children:.1} ms in the sbatch/squeue it ran",
            median(&mut base_took)
        );
        println!(
            "  ratio this/baseline, own + children: {:.2}×",
            (own + children) / (b_own + b_children)
        );
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A state root and the `tasks` binary run in it.
struct TasksRun<'a> {
    bin: &'a Path,
    root: &'a Path,
    poll_ms: u64,
}

/// CPU time in milliseconds.
struct Cpu {
    own_ms: f64,
    children_ms: f64,
}

impl<'a> TasksRun<'a> {
    fn new(bin: &'a Path, root: &'a Path, poll_ms: u64) -> Self {
        Self { bin, root, poll_ms }
    }

    fn tasks(&self, args: &[&str]) -> String {
        let out = Command::new(self.bin)
            .args(args)
            .env("TASKS_ROOT", self.root)
            .env("TASKS_SLURM_POLL_MS", self.poll_ms.to_string())
            .env("TASKS_IDLE_EXIT_MS", "3000")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tasks {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// 100 Slurm tasks then one wait: the wall time and the supervisor's CPU meanwhile.
    fn hundred_on_slurm(&self) -> (Duration, Cpu) {
        // Starts the supervisor, so its start-up is not counted.
        let first = self.tasks(&["run", "--", "true"]);
        self.tasks(&["wait", &first]);
        let pid: i32 = std::fs::read_to_string(self.root.join("default/supervisor.lock"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let before = cpu_of(pid);
        let began = Instant::now();
        let ids: Vec<String> = (0..JOBS)
            .map(|_| self.tasks(&["run", "--on", "slurm", "--", "true"]))
            .collect();
        let mut wait = vec!["wait"];
        wait.extend(ids.iter().map(String::as_str));
        self.tasks(&wait);
        let took = began.elapsed();
        let after = cpu_of(pid);
        let listed = self.tasks(&["ps", "--all", "--json"]);
        let rows: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let completed = rows
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| {
                ids.iter().any(|id| row["id"] == id.as_str()) && row["status"] == "completed"
            })
            .count();
        assert_eq!(completed, JOBS, "every Slurm task completed");
        (
            took,
            Cpu {
                own_ms: after.own_ms - before.own_ms,
                children_ms: after.children_ms - before.children_ms,
            },
        )
    }
}

/// `utime+stime` and `cutime+cstime` of process `pid`, in milliseconds.
fn cpu_of(pid: i32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<f64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    // utime is field 14 of the line, the 12th after the name and state (index 11).
    let tick_ms = 1000.0 / clock_ticks();
    Cpu {
        own_ms: (fields[11] + fields[12]) * tick_ms,
        children_ms: (fields[13] + fields[14]) * tick_ms,
    }
}

fn clock_ticks() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// 100 `sbatch --wrap true`, then `squeue` every `poll` until none is active.
fn hundred_sbatch(poll: Duration) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let output: PathBuf = dir.path().join("slurm-%j.out");
    // One name for the round's jobs: an ended job Slurm forgot does not make `squeue` fail.
    let name = format!(
        "bench-{}",
        dir.path().file_name().unwrap().to_string_lossy()
    );
    let began = Instant::now();
    for _ in 0..JOBS {
        let out = Command::new("sbatch")
            .args(["--parsable", "--wrap", "true"])
            .arg(format!("--job-name={name}"))
            .arg(format!("--output={}", output.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    loop {
        let out = Command::new("squeue")
            .args([
                "--noheader",
                "--states=PENDING,RUNNING,COMPLETING,CONFIGURING",
                "--format=%i",
            ])
            .arg(format!("--name={name}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if out.stdout.trim_ascii().is_empty() {
            break;
        }
        std::thread::sleep(poll);
    }
    began.elapsed()
}
