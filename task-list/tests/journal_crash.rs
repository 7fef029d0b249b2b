//! Writers SIGKILLed at 200 random points of the write-ahead journal's protocol: each writer is
//! a real child process run under `strace`, which kills it on entry to its N-th system call of
//! the protocol's kinds (appends, flushes, renames, removals, truncations, opens, locks), N
//! drawn from a seeded generator: the point is the schedule's input, not a wait. After each
//! kill, a reader of the reference's file format (written here, independent of the crate)
//! reads every task file: none is torn, and every acknowledged write is there; then the list
//! is opened (which finishes an interrupted write) and its edges are whole.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::Rng;
use serde_json::Value;
use task_list::{LockConfig, StoreConfig, TaskList, UpdateRequest, UpdateStatus};

const KILLS: usize = 200;
const OPS_PER_WRITER: u64 = 6;
const WORKER_ENV: &str = "TASK_LIST_JOURNAL_WORKER";
/// The system calls a kill may land before: every step of a commit and of a recovery.
const SYSCALLS: &str = "open,openat,write,pwrite64,fdatasync,fsync,rename,renameat,renameat2,unlink,unlinkat,ftruncate,flock,mkdir,rmdir";

/// Durable, with a tiny journal so that checkpoints (and their flushes and renames) are among
/// the points killed; the reference's lock directories off, so a dead writer's locks do not
/// make the next one wait for them to go stale (the kernel's `flock`, released at death, still
/// orders the writers).
fn config() -> StoreConfig {
    StoreConfig {
        lock: LockConfig {
            reference_locks: false,
            ..LockConfig::default()
        },
        journal_checkpoint_bytes: 4096,
        ..StoreConfig::default()
    }
}

/// Not a test on its own: the body of each writer process. It reports `begin …` before each
/// operation and `done …` once it has returned (acknowledged), or `refused`.
#[test]
fn journal_worker() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let [root, seed, report] = spec.split('|').collect::<Vec<_>>()[..] else {
        panic!("bad worker spec {spec}")
    };
    let seed: u64 = seed.parse().unwrap();
    let mut report = std::fs::OpenOptions::new()
        .append(true)
        .open(report)
        .unwrap();
    let mut say = |line: String| report.write_all(format!("{line}\n").as_bytes()).unwrap();
    let list = TaskList::open(root, "list", config()).unwrap();
    let mut rng = Rng::new(seed);
    for i in 0..OPS_PER_WRITER {
        let ids: Vec<u64> = list
            .snapshot()
            .unwrap()
            .tasks
            .keys()
            .map(|id| id.get())
            .collect();
        let pick = |rng: &mut Rng| ids[rng.below(ids.len() as u64) as usize];
        match rng.below(if ids.len() < 2 { 1 } else { 4 }) {
            0 => {
                let subject = format!("s{seed}-{i}");
                say(format!("begin create {subject}"));
                let id = common::create(&list, &subject);
                say(format!("done create {id} {subject}"));
            }
            1 => {
                let id = pick(&mut rng);
                let (status, name) = match rng.below(2) {
                    0 => (UpdateStatus::InProgress, "in_progress"),
                    _ => (UpdateStatus::Completed, "completed"),
                };
                say(format!("begin status {id} {name}"));
                let mut update = UpdateRequest::new(id);
                update.status = Some(status);
                if list.update(&update).unwrap().success {
                    say(format!("done status {id} {name}"));
                } else {
                    say("refused".into());
                }
            }
            2 => {
                let (a, b) = (pick(&mut rng), pick(&mut rng));
                say(format!("begin edge {a} {b}"));
                let mut update = UpdateRequest::new(a);
                update.add_blocked_by = Some(vec![b.to_string()]);
                if list.update(&update).unwrap().success {
                    say(format!("done edge {a} {b}"));
                } else {
                    say("refused".into());
                }
            }
            _ => {
                let id = pick(&mut rng);
                say(format!("begin delete {id}"));
                let mut update = UpdateRequest::new(id);
                update.status = Some(UpdateStatus::Deleted);
                if list.update(&update).unwrap().success {
                    say(format!("done delete {id}"));
                } else {
                    say("refused".into());
                }
            }
        }
    }
}

/// What the acknowledged writes say the list holds.
#[derive(Debug, Default)]
struct Model {
    /// Live tasks: subject and last acknowledged status.
    tasks: BTreeMap<u64, (String, String)>,
    deleted: BTreeSet<u64>,
    /// `(a, b)`: a is blocked by b.
    edges: BTreeSet<(u64, u64)>,
}

/// The operation a writer had begun and not acknowledged when it was killed.
#[derive(Debug, Clone, PartialEq)]
enum InFlight {
    Create(String),
    Status(u64),
    Edge(u64, u64),
    Delete(u64),
}

impl InFlight {
    fn parse(words: &[&str]) -> Self {
        match words {
            ["create", subject] => Self::Create((*subject).to_owned()),
            ["status", id, _] => Self::Status(id.parse().unwrap()),
            ["edge", a, b] => Self::Edge(a.parse().unwrap(), b.parse().unwrap()),
            ["delete", id] => Self::Delete(id.parse().unwrap()),
            other => panic!("bad report line {other:?}"),
        }
    }

    fn touches(&self, id: u64) -> bool {
        matches!(self, Self::Status(x) | Self::Delete(x) if *x == id)
            || matches!(self, Self::Edge(a, b) if *a == id || *b == id)
    }
}

impl Model {
    /// Takes in the report lines `lines`; returns the operation in flight, if any.
    fn take(&mut self, lines: &[String]) -> Option<InFlight> {
        let mut in_flight = None;
        for line in lines {
            let words: Vec<&str> = line.split(' ').collect();
            match words[..] {
                ["begin", ref rest @ ..] => in_flight = Some(InFlight::parse(rest)),
                ["refused"] => in_flight = None,
                ["done", "create", id, subject] => {
                    let id = id.parse().unwrap();
                    self.tasks
                        .insert(id, (subject.to_owned(), "pending".into()));
                    in_flight = None;
                }
                ["done", "status", id, status] => {
                    self.tasks.get_mut(&id.parse().unwrap()).unwrap().1 = status.into();
                    in_flight = None;
                }
                ["done", "edge", a, b] => {
                    self.edges.insert((a.parse().unwrap(), b.parse().unwrap()));
                    in_flight = None;
                }
                ["done", "delete", id] => {
                    self.delete(id.parse().unwrap());
                    in_flight = None;
                }
                _ => panic!("bad report line {line:?}"),
            }
        }
        in_flight
    }

    fn delete(&mut self, id: u64) {
        self.tasks.remove(&id);
        self.deleted.insert(id);
        self.edges.retain(|&(a, b)| a != id && b != id);
    }

    /// Once the list has recovered, what the interrupted operation did is settled: taken in
    /// from the files.
    fn settle(&mut self, in_flight: Option<InFlight>, files: &BTreeMap<u64, RefTask>) {
        match in_flight {
            None => {}
            Some(InFlight::Create(subject)) => {
                if let Some((id, task)) = files.iter().find(|(_, t)| t.subject == subject) {
                    self.tasks.insert(*id, (subject, task.status.clone()));
                }
            }
            Some(InFlight::Status(id)) => {
                if let (Some(model), Some(file)) = (self.tasks.get_mut(&id), files.get(&id)) {
                    model.1 = file.status.clone();
                }
            }
            Some(InFlight::Edge(a, b))
                if files.get(&a).is_some_and(|t| t.blocked_by.contains(&b)) =>
            {
                self.edges.insert((a, b));
            }
            Some(InFlight::Delete(id)) if !files.contains_key(&id) => self.delete(id),
            Some(InFlight::Edge(..) | InFlight::Delete(_)) => {}
        }
    }

    /// Every acknowledged write is in `files`, except what `in_flight` may have changed since.
    fn check(&self, files: &BTreeMap<u64, RefTask>, in_flight: Option<&InFlight>, kill: usize) {
        let may_change = |id: u64| in_flight.is_some_and(|op| op.touches(id));
        for (id, (subject, status)) in &self.tasks {
            if matches!(in_flight, Some(InFlight::Delete(x)) if x == id) {
                continue;
            }
            let file = files
                .get(id)
                .unwrap_or_else(|| panic!("kill {kill}: acknowledged task {id} is missing"));
            assert_eq!(&file.subject, subject, "kill {kill}: task {id}");
            if !may_change(*id) {
                assert_eq!(&file.status, status, "kill {kill}: status of task {id}");
            }
        }
        for id in &self.deleted {
            assert!(
                !files.contains_key(id),
                "kill {kill}: deleted task {id} is back"
            );
        }
        for &(a, b) in &self.edges {
            if matches!(in_flight, Some(InFlight::Delete(x)) if *x == a || *x == b) {
                continue;
            }
            assert!(
                files[&a].blocked_by.contains(&b),
                "kill {kill}: {a} blocked by {b}"
            );
            assert!(files[&b].blocks.contains(&a), "kill {kill}: {b} blocks {a}");
        }
    }
}

/// A task file as the reference reads it.
#[derive(Debug)]
struct RefTask {
    subject: String,
    status: String,
    blocks: Vec<u64>,
    blocked_by: Vec<u64>,
}

/// Reads every `{digits}.json` of `dir` the way the reference does (the whole file, JSON, the
/// fields it needs with the types it needs); panics on any file that is not a whole task.
fn reference_read(dir: &Path, kill: usize) -> BTreeMap<u64, RefTask> {
    let mut tasks = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(id) = name
            .strip_suffix(".json")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let text = std::fs::read_to_string(dir.join(&name)).unwrap();
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kill {kill}: {name} is torn ({e}): {text:?}"));
        let field = |key: &str| {
            value[key]
                .as_str()
                .unwrap_or_else(|| panic!("kill {kill}: {name} has no {key}"))
                .to_owned()
        };
        let ids = |key: &str| -> Vec<u64> {
            value[key]
                .as_array()
                .unwrap_or_else(|| panic!("kill {kill}: {name} has no {key}"))
                .iter()
                .map(|v| v.as_str().unwrap().parse().unwrap())
                .collect()
        };
        assert_eq!(field("id"), id, "kill {kill}: {name}");
        field("description");
        let status = field("status");
        assert!(
            ["pending", "in_progress", "completed"].contains(&status.as_str()),
            "kill {kill}: {name}: status {status}"
        );
        tasks.insert(
            id.parse().unwrap(),
            RefTask {
                subject: field("subject"),
                status,
                blocks: ids("blocks"),
                blocked_by: ids("blockedBy"),
            },
        );
    }
    tasks
}

/// A point of a writer's run: the `n`-th call (from 1) of the system call `name` by a thread.
#[derive(Debug, Clone)]
struct Point {
    name: String,
    n: usize,
}

/// The calls of [`SYSCALLS`] the writer's worker thread (the one that reports) made, in
/// order, from `strace -f -o` output.
fn points(trace: &Path) -> Vec<Point> {
    let text = std::fs::read_to_string(trace).unwrap();
    let worker = text
        .lines()
        .find(|line| line.contains("\"begin "))
        .and_then(|line| line.split(' ').next())
        .expect("the writer reported nothing");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    text.lines()
        .filter_map(|line| {
            line.strip_prefix(worker)?
                .strip_prefix(' ')?
                .split('(')
                .next()
        })
        .map(|name| {
            let n = seen.entry(name).or_default();
            *n += 1;
            Point {
                name: name.to_owned(),
                n: *n,
            }
        })
        .collect()
}

/// A writer run under `strace`, killed on entry to the system call at `kill_at` (strace counts
/// the calls of each name per thread); never, with `None`. Every call of [`SYSCALLS`] is
/// written to `trace`. Whether it was killed.
fn run_writer(
    root: &Path,
    seed: u64,
    report: &Path,
    kill_at: Option<&Point>,
    trace: &Path,
) -> bool {
    let mut strace = Command::new("strace");
    strace
        .args(["-f", "-qq", "-o"])
        .arg(trace)
        .arg(format!("-etrace={SYSCALLS}"));
    if let Some(point) = kill_at {
        strace.arg(format!(
            "-einject={}:signal=KILL:when={}",
            point.name, point.n
        ));
    }
    let status = strace
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "journal_worker", "--test-threads=1", "--quiet"])
        .env(
            WORKER_ENV,
            format!("{}|{seed}|{}", root.display(), report.display()),
        )
        .stdout(Stdio::null())
        .status()
        .unwrap();
    match status.code() {
        Some(0) => false,
        _ if kill_at.is_some() => true,
        other => panic!("the writer failed unkilled: {other:?}"),
    }
}

fn strace_present() -> bool {
    let found = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is needed (apt-get install strace)"
        );
        eprintln!("skipped: strace is not installed (apt-get install strace)");
    }
    found
}

#[test]
fn writers_killed_at_200_random_points_of_the_journal_lose_no_acknowledged_write() {
    if !strace_present() {
        return;
    }
    // On tmpfs where there is one: the flushes are still made (and killed before), only cheap.
    let shm = Path::new("/dev/shm");
    let root = match shm.is_dir() {
        true => tempfile::tempdir_in(shm),
        false => tempfile::tempdir(),
    }
    .unwrap();
    let dir: PathBuf = root.path().join("list");
    let report = root.path().join("report");
    let trace = root.path().join("trace");
    std::fs::write(&report, "").unwrap();
    let seed = std::env::var("TASK_LIST_CRASH_SEED").map_or(0x43_57a1, |s| s.parse().unwrap());
    eprintln!("seed {seed} (TASK_LIST_CRASH_SEED)");
    let mut rng = Rng::new(seed);
    let mut model = Model::default();
    // One writer unkilled: the calls a writer makes, to draw the points from.
    let mut read = 0;
    run_writer(root.path(), rng.below(u64::MAX), &report, None, &trace);
    let mut calls = points(&trace);
    assert!(model.take(&lines(&report, &mut read)).is_none());
    let (mut kills, mut runs) = (0, 0);
    while kills < KILLS {
        runs += 1;
        assert!(runs < 2 * KILLS, "only {kills} kills in {runs} runs");
        let kill_at = calls[rng.below(calls.len() as u64) as usize].clone();
        let seed = rng.below(u64::MAX);
        if !run_writer(root.path(), seed, &report, Some(&kill_at), &trace) {
            // This writer never made that call: draw from its calls from now on.
            calls = points(&trace);
            assert!(model.take(&lines(&report, &mut read)).is_none());
            continue;
        }
        kills += 1;
        let in_flight = model.take(&lines(&report, &mut read));
        // As the reference would find the list: no torn file, every acknowledged write.
        let files = reference_read(&dir, kills);
        model.check(&files, in_flight.as_ref(), kills);
        // Opened, the list finishes the interrupted write: whole edges, nothing pending.
        let list = TaskList::open(root.path(), "list", config()).unwrap();
        common::assert_consistent(&list);
        let pending = list.doctor(false).unwrap().problems;
        assert!(
            !pending
                .iter()
                .any(|p| matches!(p, task_list::Problem::UnfinishedJournal)),
            "kill {kills} ({kill_at:?}): {pending:?}"
        );
        let files = reference_read(&dir, kills);
        model.settle(in_flight, &files);
        model.check(&files, None, kills);
        let (_, torn) = list.audit_log().unwrap();
        assert!(torn.is_empty(), "kill {kills}: {torn:?}");
    }
    eprintln!(
        "{kills} kills in {runs} runs, {} live tasks",
        model.tasks.len()
    );
}

/// The report's lines after the first `read`, which is moved past them.
fn lines(report: &Path, read: &mut usize) -> Vec<String> {
    let all: Vec<String> = std::fs::read_to_string(report)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let new = all[*read..].to_vec();
    *read = all.len();
    new
}
