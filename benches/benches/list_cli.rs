//! Whole-process task-list commands side by side with Taskwarrior 2.6, in one run, on lists of
//! 300 tasks: `tasks list create` against `task add`, an edge (`tasks list update N
//! --add-blocked-by M` against `task N modify depends:M`) and `tasks list ready` against
//! `task ready`. The `tasks` side runs on the file store with every write durable (the
//! default: fsync of the files, the directory and the audit log), and on PostgreSQL when
//! `TASKS_BENCH_PG_URL` / `TASKS_TEST_PG_URL` names a server (commits durable: the default
//! `synchronous_commit = on`).
//!
//! Run: `cargo bench -p benches --bench list_cli` (needs `task`: `apt-get install
//! taskwarrior`; without it only the `tasks` side is measured). It builds `tasks` as shipped
//! (`cargo build-tasks`). Samples alternate between the two sides; figures are medians.
//! `TASKS_BENCH_QUICK=1` takes fewer samples. `TASKS_BENCH_BASELINE_BIN=PATH` also measures
//! another `tasks` (an earlier build) on a list of its own, its samples alternating with the
//! other two sides, and prints its median and how many times faster the measured build is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benches::{build_tasks_binary, median};
use task_list::{EXPORT_FORMAT, ListExport, Task, TaskId};

const TASKS: u64 = 300;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("list_cli: bench");
        return;
    }
    let tasks = build_tasks_binary();
    let dir = tempfile::tempdir().unwrap();
    let samples = if std::env::var_os("TASKS_BENCH_QUICK").is_some() {
        7
    } else {
        25
    };
    let taskwarrior = Taskwarrior::new(dir.path());
    if taskwarrior.is_none() {
        println!("Taskwarrior (`task`) not found: measuring the tasks side only");
    }
    let pg = std::env::var("TASKS_BENCH_PG_URL").or_else(|_| std::env::var("TASKS_TEST_PG_URL"));
    let mut stores = vec![("files", None)];
    if let Ok(url) = pg {
        stores.push(("postgres", Some(url)));
    }
    let baseline = std::env::var_os("TASKS_BENCH_BASELINE_BIN").map(PathBuf::from);
    println!("{TASKS} tasks per list; {samples} samples per figure; medians");
    println!(
        "{:<10} {:<8} {:>10} {:>12} {:>7}{}",
        "store",
        "op",
        "tasks",
        "taskwarrior",
        "ratio",
        match baseline {
            Some(_) => "   baseline  speed-up",
            None => "",
        }
    );
    for (n, (store, url)) in stores.into_iter().enumerate() {
        let before = baseline
            .as_ref()
            .map(|bin| Tasks::new(bin, dir.path(), 100 + n, url.clone()));
        let side = Tasks::new(&tasks, dir.path(), n, url);
        for op in ["create", "edge", "ready"] {
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            let mut earlier = Vec::new();
            for i in 0..samples {
                ours.push(side.time(op, i));
                if let Some(tw) = &taskwarrior {
                    theirs.push(tw.time(op, i));
                }
                if let Some(before) = &before {
                    earlier.push(before.time(op, i));
                }
            }
            let ours = median(&mut ours);
            let line = match &taskwarrior {
                Some(_) => {
                    let theirs = median(&mut theirs);
                    format!(
                        "{:>10.2?} {:>12.2?} {:>6.2}×",
                        ours,
                        theirs,
                        theirs.as_secs_f64() / ours.as_secs_f64()
                    )
                }
                None => format!("{ours:>10.2?}"),
            };
            let against = match &before {
                Some(_) => {
                    let earlier = median(&mut earlier);
                    format!(
                        " {:>10.2?} {:>8.2}×",
                        earlier,
                        earlier.as_secs_f64() / ours.as_secs_f64()
                    )
                }
                None => String::new(),
            };
            println!("{store:<10} {op:<8} {line}{against}");
        }
        if let Some(tw) = &taskwarrior {
            tw.reset();
        }
    }
}

/// Runs `command` to completion (output discarded) and returns its wall time.
fn time(command: &mut Command) -> Duration {
    let start = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "{command:?} failed: {status}");
    elapsed
}

/// The `tasks` side: one list of 300 tasks (loaded with `tasks list import`).
struct Tasks {
    bin: PathBuf,
    root: PathBuf,
    store: Option<String>,
    list: String,
}

impl Tasks {
    fn new(bin: &Path, dir: &Path, n: usize, store: Option<String>) -> Self {
        let side = Self {
            bin: bin.to_owned(),
            root: dir.join(format!("tasks-{n}")),
            store,
            list: format!("bench-{}-{n}", std::process::id()),
        };
        let export = ListExport {
            format: EXPORT_FORMAT.into(),
            list_id: side.list.clone(),
            high_water_mark: TASKS,
            tasks: (1..=TASKS)
                .map(|i| Task::new(TaskId::new(i).unwrap(), format!("task {i}"), "bench"))
                .collect(),
            audit: Vec::new(),
        };
        let file = dir.join(format!("export-{n}.json"));
        std::fs::write(&file, serde_json::to_vec(&export).unwrap()).unwrap();
        time(side.command().args(["import", file.to_str().unwrap()]));
        side
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .arg("list")
            .args(["--list", &self.list])
            .env("TASKS_ROOT", &self.root)
            .env_remove("TASKS_LIST_ROOT")
            .env_remove("TASKS_LIST_STORE");
        if let Some(url) = &self.store {
            command.args(["--store", url]);
        }
        command
    }

    /// Sample `i` of `op`; edges go between distinct pairs of the first 300 tasks.
    fn time(&self, op: &str, i: u64) -> Duration {
        let (blocked, blocker) = (2 + 2 * i, 1 + 2 * i);
        match op {
            "create" => time(self.command().args(["create", "--subject", "bench task"])),
            "edge" => time(self.command().args([
                "update",
                &blocked.to_string(),
                "--add-blocked-by",
                &blocker.to_string(),
            ])),
            _ => time(self.command().arg("ready")),
        }
    }
}

/// Taskwarrior with its own rc file and data directory, loaded with 300 pending tasks.
struct Taskwarrior {
    rc: PathBuf,
    data: PathBuf,
}

impl Taskwarrior {
    fn new(dir: &Path) -> Option<Self> {
        Command::new("task")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .ok()?;
        let tw = Self {
            rc: dir.join("taskrc"),
            data: dir.join("taskwarrior"),
        };
        tw.reset();
        Some(tw)
    }

    /// A fresh data directory with 300 pending tasks (`task import`).
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(&self.data);
        std::fs::create_dir_all(&self.data).unwrap();
        std::fs::write(
            &self.rc,
            format!(
                "data.location={}\nconfirmation=off\nnews.version=2.6.0\n",
                self.data.display()
            ),
        )
        .unwrap();
        let tasks: Vec<_> = (1..=TASKS)
            .map(|i| serde_json::json!({"description": format!("task {i}"), "status": "pending"}))
            .collect();
        let file = self.data.join("import.json");
        std::fs::write(&file, serde_json::to_vec(&tasks).unwrap()).unwrap();
        time(self.command().args(["import", file.to_str().unwrap()]));
    }

    fn command(&self) -> Command {
        let mut command = Command::new("task");
        command.env("TASKRC", &self.rc).arg("rc.hooks=off");
        command
    }

    fn time(&self, op: &str, i: u64) -> Duration {
        let (blocked, blocker) = (2 + 2 * i, 1 + 2 * i);
        match op {
            "create" => time(self.command().args(["add", "bench task"])),
            "edge" => time(
                self.command()
                    .arg(blocked.to_string())
                    .arg("modify")
                    .arg(format!("depends:{blocker}")),
            ),
            _ => time(self.command().arg("ready")),
        }
    }
}
