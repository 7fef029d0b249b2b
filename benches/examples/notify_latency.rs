//! From a task's end to the moment its notification reaches the model: median, p99 and max
//! over 200 background `Bash` tasks, for each way a notification is delivered, in one run.
//!
//! Modes, each on a fresh `TASKS_ROOT` (a temp dir; its supervisor is started on demand):
//!
//! 1. `tasks mcp --deliver channel` (watcher at its default 500 ms), then again with
//!    `--watch-ms 50`: the arrival of `notifications/claude/channel` is the delivery.
//! 2. `tasks mcp` (default delivery, `result`): once the tasks are started, `TaskList` is called
//!    back to back; a notification in a result's `structuredContent.notifications` is delivered
//!    when that result arrives (so this mode also waits for the next call: the loop's period is
//!    printed beside it).
//! 3. `tasks notifications --follow --format json`, started before the tasks, which are started
//!    with `tasks run -- CMD`: the arrival of a line is the delivery.
//! 4. The same with 1 000 tasks ending at one instant (`together`): the latency of a burst of
//!    ends, each still from its own recorded end; and 1 000 ending together delivered as
//!    channel events by `tasks mcp --deliver channel` (`channel_together`). These tasks do not
//!    sleep: each waits to read a line from a FIFO (its gate), which the bench fills with one
//!    line per task a second after the last start was answered, so every end comes after
//!    every start, however slow the starts were.
//!
//! `TASKS_BENCH_MODES=follow,together` runs only the modes named (`channel`, `channel50`,
//! `result`, `follow`, `together`, `channel_together`).
//!
//! The MCP modes speak newline-delimited JSON-RPC to the server on its stdin/stdout, introducing
//! themselves as Claude Code (`clientInfo.name` `claude-code`). Each task is
//! `sleep S; date +%s%N > MARKER` with its own marker file, so it records its own end
//! (`CLOCK_REALTIME`, the clock the deliveries are stamped with here); the shell exits right
//! after. All tasks are started first, with `S` chosen so that their ends fall one every 23 ms
//! after the last start: no start (and no start's result) overlaps the ends. Each latency is
//! split in two at the moment the task's final record lands in the session's tasks directory
//! (the supervisor's rename onto `{id}.json`, seen with inotify): before it, the supervisor's
//! part (the task's `endTime` from `tasks ps --all --json`, stamped when it reaped the task, is
//! printed too); after it, the deliverer's part (what every reader waits for: a reader finds
//! ended tasks by reading those records). A polling deliverer delivers in bursts, one a look:
//! the time from one burst to the next, its real period, is printed too, and the deliverer
//! process's CPU (`/proc/PID/stat`) from the last start to the end of the mode.
//! Every task must be delivered exactly once: a lost or repeated notification fails the run.
//!
//! Run with `cargo run --release -p benches --example notify_latency` (it builds the shipped
//! `tasks`/`tasksd` first, as the other whole-process benches; `TASKS_BENCH_BIN` measures another
//! build; `TASKS_BENCH_QUICK=1` runs 40 tasks a mode). Every process it started, and every
//! process whose environment names one of its roots, is killed when a mode ends.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{HashMap, VecDeque};
use std::error::Error;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use benches::processes_of;
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Tasks a mode (`TASKS_BENCH_QUICK`: [`QUICK_TASKS`]).
const TASKS: usize = 200;
const QUICK_TASKS: usize = 40;
/// Tasks of the mode whose tasks all end at once (`TASKS_BENCH_QUICK`: [`QUICK_TOGETHER`]).
const TOGETHER: usize = 1000;
const QUICK_TOGETHER: usize = 200;
/// Between two planned ends.
const GAP: Duration = Duration::from_millis(23);
/// The shortest sleep a task is given (if the starts ran late).
const MIN_SLEEP: Duration = Duration::from_millis(50);
/// How long a deliverer may take past the last planned end before the run fails.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(30);
/// How long one request, start or short command may take.
const STEP_DEADLINE: Duration = Duration::from_secs(20);
/// After the last delivery, how long to keep watching for a notification delivered again.
const SETTLE: Duration = Duration::from_millis(1500);

fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(message.into().into())
}

/// Now on `CLOCK_REALTIME`, in ns (the clock of `date +%s%N`).
fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}

/// One line read from a child's stdout, stamped when it was read.
struct Line {
    at: i128,
    text: String,
}

/// Reads `from` line by line on a thread of its own; the receiver ends when `from` does.
fn read_lines(from: impl Read + Send + 'static) -> Receiver<Line> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut from = BufReader::new(from);
        loop {
            let mut text = String::new();
            match from.read_line(&mut text) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let at = now_ns();
                    if send.send(Line { at, text }).is_err() {
                        return;
                    }
                }
            }
        }
    });
    receive
}

/// The next line before `deadline`: `None` at the deadline, an error if the stream ended.
fn next_line(lines: &Receiver<Line>, deadline: Instant, who: &str) -> Result<Option<Line>> {
    match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(line) => Ok(Some(line)),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => fail(format!("{who} closed its stdout")),
    }
}

/// Stamps each record the supervisor puts in the session's tasks directory `dir` (a rename
/// onto `{id}.json`): the task ids with the time each was seen, until `dir` is removed.
fn watch_records(dir: &Path) -> Result<Receiver<(String, i128)>> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC)?;
    inotify::add_watch(&fd, dir, inotify::WatchFlags::MOVED_TO)
        .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [std::mem::MaybeUninit::uninit(); 16 * 1024];
        let mut events = inotify::Reader::new(&fd, &mut buf);
        loop {
            let event = match events.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            };
            let at = now_ns();
            if event.events().contains(inotify::ReadFlags::IGNORED) {
                return; // the directory is gone
            }
            let id = event
                .file_name()
                .and_then(|name| name.to_str().ok())
                .and_then(|name| name.strip_suffix(".json"))
                .filter(|id| !id.contains('.'));
            if let Some(id) = id
                && send.send((id.to_owned(), at)).is_err()
            {
                return;
            }
        }
    });
    Ok(receive)
}

/// Every `<task-id>` in `text`.
fn task_ids_in(text: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("<task-id>") {
        rest = &rest[at + "<task-id>".len()..];
        let Some(end) = rest.find("</task-id>") else {
            break;
        };
        ids.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    ids
}

/// The tasks whose notifications a tool result carries: `structuredContent.notifications`
/// (where a Claude Code client reads them) and any text block holding an envelope.
fn notified_in_result(result: &Value) -> Vec<String> {
    let mut ids: Vec<String> = result["structuredContent"]["notifications"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(task_ids_in)
        .collect();
    for block in result["content"].as_array().into_iter().flatten() {
        if let Some(text) = block["text"].as_str()
            && text.contains("<task-notification>")
        {
            for id in task_ids_in(text) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    ids
}

/// The percentile `p` (nearest rank) of sorted `values`.
fn percentile(sorted: &[i128], p: f64) -> i128 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(values: &[i128]) -> i128 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}

/// One mode's session: its root, a directory for the markers and logs, and what it started.
struct Run {
    tasks: PathBuf,
    root: tempfile::TempDir,
    work: tempfile::TempDir,
    children: Vec<Child>,
    /// Records landing in the tasks directory, once [`Run::watch`] was called.
    records: Option<Receiver<(String, i128)>>,
}

impl Run {
    fn new(tasks: &Path) -> Result<Self> {
        Ok(Self {
            tasks: tasks.to_owned(),
            root: tempfile::Builder::new().prefix("notify-root").tempdir()?,
            work: tempfile::Builder::new().prefix("notify-work").tempdir()?,
            children: Vec::new(),
            records: None,
        })
    }

    /// `tasks ARGS` on this root, with no other `TASKS_*` setting of the caller's (every
    /// default is measured), stderr in a log named `log`.
    fn command(&self, args: &[&str], log: &str) -> Result<Command> {
        let mut command = Command::new(&self.tasks);
        command.args(args);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("TASKS_") || name.starts_with("TASK_") {
                command.env_remove(name.as_ref());
            }
        }
        command
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("TASKS_ROOT", self.root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(self.log_path(log))?);
        Ok(command)
    }

    fn log_path(&self, log: &str) -> PathBuf {
        self.work.path().join(format!("{log}.stderr"))
    }

    /// The end of the log `log`, for an error message.
    fn log_tail(&self, log: &str) -> String {
        let text = std::fs::read_to_string(self.log_path(log)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        if tail.is_empty() {
            format!("(its stderr, {log}, is empty)")
        } else {
            format!("its stderr ({log}) ends:\n{tail}")
        }
    }

    /// Starts `command`, kept to be killed when the run ends.
    fn spawn(&mut self, mut command: Command, what: &str) -> Result<&mut Child> {
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        self.children.push(child);
        Ok(self.children.last_mut().ok_or("no child")?)
    }

    /// Runs `tasks ARGS` to its end (at most [`STEP_DEADLINE`]) and returns its stdout.
    fn tasks_output(&self, args: &[&str]) -> Result<String> {
        let log = args.first().copied().unwrap_or("tasks");
        let child = self.command(args, log)?.spawn()?;
        let pid = child.id();
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(child.wait_with_output());
        });
        let output: Output = match receive.recv_timeout(STEP_DEADLINE) {
            Ok(output) => output?,
            Err(_) => {
                kill(pid as i32);
                return fail(format!(
                    "`tasks {}` did not end in {STEP_DEADLINE:?}",
                    args.join(" ")
                ));
            }
        };
        if !output.status.success() {
            return fail(format!(
                "`tasks {}` failed ({}); {}",
                args.join(" "),
                output.status,
                self.log_tail(log)
            ));
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    fn marker(&self, n: usize) -> PathBuf {
        self.work.path().join(format!("end-{n}"))
    }

    /// The command of task `n`: sleeps until its planned end (or waits at the plan's gate),
    /// then writes the time.
    fn task_command(&self, n: usize, plan: &Plan) -> String {
        let wait = match &plan.gate {
            Some(gate) => format!("read -r go < '{}'", gate.path.display()),
            None => {
                let sleep = plan.sleep_of(n);
                format!("sleep {}.{:03}", sleep.as_secs(), sleep.subsec_millis())
            }
        };
        format!("{wait}; date +%s%N > '{}'", self.marker(n).display())
    }

    /// The end task `n` wrote.
    fn ended(&self, n: usize) -> Result<i128> {
        let text = std::fs::read_to_string(self.marker(n))
            .map_err(|e| format!("task {n} wrote no end marker: {e}"))?;
        Ok(text
            .trim()
            .parse()
            .map_err(|e| format!("task {n}'s end marker {text:?}: {e}"))?)
    }

    /// Each task's `endTime` (ns), from `tasks ps --all --json`, and the session's tasks
    /// directory.
    fn end_times(&self) -> Result<(HashMap<String, i128>, PathBuf)> {
        let listing: Value = serde_json::from_str(&self.tasks_output(&["ps", "--all", "--json"])?)?;
        let mut ends = HashMap::new();
        let mut dir = None;
        for task in listing
            .as_array()
            .ok_or("`tasks ps --json` is not an array")?
        {
            let id = task["id"].as_str().ok_or("a task without an id")?;
            let output = task["outputFile"]
                .as_str()
                .ok_or_else(|| format!("task {id} has no outputFile"))?;
            dir = Path::new(output).parent().map(Path::to_path_buf);
            if let Some(end) = task["endTime"].as_i64() {
                ends.insert(id.to_owned(), i128::from(end) * 1_000_000);
            }
        }
        Ok((ends, dir.ok_or("`tasks ps` lists no task")?))
    }

    /// Starts stamping the records of the session's tasks (once a task was started).
    fn watch(&mut self) -> Result<()> {
        let (_, dir) = self.end_times()?;
        self.records = Some(watch_records(&dir)?);
        Ok(())
    }

    /// Every stamp of each task's record so far.
    fn landed(&self) -> Result<HashMap<String, Vec<i128>>> {
        let records = self
            .records
            .as_ref()
            .ok_or("the records were not watched")?;
        let mut landed: HashMap<String, Vec<i128>> = HashMap::new();
        for (id, at) in records.try_iter() {
            landed.entry(id).or_default().push(at);
        }
        Ok(landed)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The supervisor and any task still alive carry the root in their environment.
        for pid in processes_of(self.root.path()) {
            kill(pid);
        }
    }
}

/// CPU time (user + system) of process `pid` so far, in ns (`/proc/PID/stat`, 100 ticks a second).
fn cpu_ns(pid: u32) -> Result<i128> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("a /proc stat without its command")?
        .1
        .split_whitespace()
        .collect();
    // Fields 14 and 15 of stat(5), counted from the state (field 3).
    let ticks = |at: usize| -> Result<i128> {
        Ok(fields
            .get(at)
            .ok_or("a short /proc stat")?
            .parse::<i128>()?)
    };
    Ok((ticks(11)? + ticks(12)?) * 10_000_000)
}

/// CPU time of `pid` over a wall time, from two readings.
struct Cpu {
    pid: u32,
    cpu: i128,
    at: Instant,
}

impl Cpu {
    fn start(pid: u32) -> Result<Self> {
        Ok(Self {
            pid,
            cpu: cpu_ns(pid)?,
            at: Instant::now(),
        })
    }

    /// The share of one core used since the start, in percent, and the wall time.
    fn share(&self) -> Result<(f64, Duration)> {
        let wall = self.at.elapsed();
        let cpu = cpu_ns(self.pid)? - self.cpu;
        Ok((100.0 * cpu as f64 / wall.as_nanos() as f64, wall))
    }
}

fn kill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// When the tasks are to end: the first at `first_end`, then one every `gap`; or, with a
/// `gate`, all together once every start is answered.
struct Plan {
    first_end: Instant,
    gap: Duration,
    gate: Option<Gate>,
}

/// What the tasks of a burst wait at: a FIFO each reads a line from. The bench holds it open
/// for reading and writing (so no task's open of it blocks) and opens the gate by writing one
/// line per task in one write: every task waiting wakes at once, and one that reaches the gate
/// later still finds its line.
struct Gate {
    path: PathBuf,
    held: File,
}

/// How long the supervisor is given, after the last start was answered, to write every start
/// (its `running` records) before a gate opens.
const GATE_SETTLE: Duration = Duration::from_secs(1);

impl Gate {
    fn new(dir: &Path) -> Result<Self> {
        let path = dir.join("gate");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &path,
            rustix::fs::Mode::from_raw_mode(0o600),
        )?;
        let held = File::options().read(true).write(true).open(&path)?;
        Ok(Self { path, held })
    }

    /// Lets `count` tasks through.
    fn open(&mut self, count: usize) -> Result<()> {
        self.held.write_all(&vec![b'\n'; count])?;
        Ok(())
    }
}

impl Plan {
    /// Once the `count` starts (begun at `started`) are in: how long they took and how far
    /// they ran past the first end (a gate opens only now, after [`GATE_SETTLE`]), the
    /// deadline of the deliveries, and the CPU meter of the delivering process `pid`.
    fn started(
        &mut self,
        started: Instant,
        count: usize,
        pid: u32,
    ) -> Result<((Duration, Duration), Instant, Cpu)> {
        let starts = started.elapsed();
        let cpu = Cpu::start(pid)?;
        let overlap = match &mut self.gate {
            Some(gate) => {
                std::thread::sleep(GATE_SETTLE);
                self.first_end = Instant::now();
                gate.open(count)?;
                Duration::ZERO
            }
            None => Instant::now().saturating_duration_since(self.first_end),
        };
        Ok(((starts, overlap), self.deadline(count), cpu))
    }

    /// Ends start `lead` from now, one every `gap`; a zero `gap` puts every end behind a gate
    /// in `dir`, opened once every start is answered.
    fn new(lead: Duration, gap: Duration, dir: &Path) -> Result<Self> {
        Ok(Self {
            first_end: Instant::now() + lead,
            gap,
            gate: if gap.is_zero() {
                Some(Gate::new(dir)?)
            } else {
                None
            },
        })
    }

    fn end_of(&self, n: usize) -> Instant {
        self.first_end + self.gap * n as u32
    }

    fn sleep_of(&self, n: usize) -> Duration {
        self.end_of(n)
            .saturating_duration_since(Instant::now())
            .max(MIN_SLEEP)
    }

    /// The deadline for every delivery of `count` tasks.
    fn deadline(&self, count: usize) -> Instant {
        self.end_of(count) + DELIVERY_DEADLINE
    }
}

/// Who delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Channel,
    Result,
    Follow,
}

/// Every delivery seen, by task id.
#[derive(Default)]
struct Deliveries {
    at: HashMap<String, Vec<(i128, Via)>>,
}

impl Deliveries {
    fn add(&mut self, id: String, at: i128, via: Via) {
        self.at.entry(id).or_default().push((at, via));
    }

    /// The failure of a mode that did not deliver every one of `ids` by its deadline.
    fn short_of<T>(&self, label: &str, ids: &[String], log_tail: String) -> Result<T> {
        let delivered = ids.iter().filter(|id| self.at.contains_key(*id)).count();
        fail(format!(
            "{label}: {delivered} of {} tasks delivered by the deadline; {log_tail}",
            ids.len()
        ))
    }

    fn has_all(&self, ids: &[String]) -> bool {
        ids.iter().all(|id| self.at.contains_key(id))
    }
}

/// A mode's figures.
struct Outcome {
    label: String,
    /// End to delivery, one per task.
    latencies: Vec<i128>,
    /// End to the supervisor's `endTime` (ms resolution).
    reaped: Vec<i128>,
    /// End to the final record landing in the tasks directory.
    landed: Vec<i128>,
    /// The final record landing to the delivery.
    delivered: Vec<i128>,
    /// Records stamped after their delivery: the bench's inotify thread ran late (a reader
    /// cannot deliver an end before its record lands), so the split of those is off.
    stamped_late: usize,
    /// From the first start to the last start's answer, and how far the last start went past
    /// the first planned end (zero if it did not).
    starts: Duration,
    overlap: Duration,
    /// Deliveries by another path than the mode's own.
    elsewhere: usize,
    /// The deliverer's CPU (percent of one core) from the last start to the end of the mode,
    /// and that wall time.
    cpu: (f64, Duration),
    /// The result mode's call loop: round trips of its calls.
    calls: Vec<i128>,
    /// Deliveries come in bursts (one a look of a polling deliverer): between the starts of
    /// two bursts, i.e. the deliverer's real period.
    bursts: Vec<i128>,
}

/// Arrivals closer than this belong to one burst.
const BURST_GAP_NS: i128 = 10_000_000;

/// Between the starts of successive bursts of `arrivals`.
fn burst_periods(arrivals: &mut [i128]) -> Vec<i128> {
    arrivals.sort_unstable();
    let mut starts: Vec<i128> = Vec::new();
    let mut last: Option<i128> = None;
    for &at in arrivals.iter() {
        if last.is_none_or(|last| at - last > BURST_GAP_NS) {
            starts.push(at);
        }
        last = Some(at);
    }
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Checks every delivery and turns the run into figures: each task delivered exactly once,
/// nothing about a task not started here.
fn outcome(
    run: &Run,
    label: String,
    ids: &[String],
    deliveries: &Deliveries,
    via: Via,
    starts: (Duration, Duration),
) -> Result<Outcome> {
    let (end_times, _) = run.end_times()?;
    let landed = run.landed()?;
    let mut problems = Vec::new();
    for (id, seen) in &deliveries.at {
        if !ids.contains(id) {
            problems.push(format!(
                "a notification about {id}, a task this run did not start"
            ));
        } else if seen.len() > 1 {
            problems.push(format!("{id} delivered {} times: {seen:?}", seen.len()));
        }
    }
    let mut out = Outcome {
        label,
        latencies: Vec::new(),
        reaped: Vec::new(),
        landed: Vec::new(),
        delivered: Vec::new(),
        stamped_late: 0,
        starts: starts.0,
        overlap: starts.1,
        elsewhere: 0,
        cpu: (0.0, Duration::ZERO),
        calls: Vec::new(),
        bursts: Vec::new(),
    };
    let mut arrivals = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let Some(seen) = deliveries.at.get(id) else {
            problems.push(format!("{id} (task {n}) never delivered"));
            continue;
        };
        let (at, by) = seen[0];
        if by != via {
            out.elsewhere += 1;
        }
        let end = run.ended(n)?;
        let end_time = *end_times
            .get(id)
            .ok_or_else(|| format!("{id} has no endTime in `tasks ps --all`"))?;
        // The final record: the first to land after the end (the others, pending and running,
        // were written at the start).
        let record = landed
            .get(id)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&t| t > end)
            .min()
            .ok_or_else(|| format!("no record of {id} was seen after its end"))?;
        if record > at {
            out.stamped_late += 1;
        }
        arrivals.push(at);
        out.latencies.push(at - end);
        out.reaped.push(end_time - end);
        out.landed.push(record - end);
        out.delivered.push(at - record);
    }
    if !problems.is_empty() {
        return fail(format!("{}: {}", out.label, problems.join("; ")));
    }
    out.latencies.sort_unstable();
    if via != Via::Result {
        out.bursts = burst_periods(&mut arrivals);
    }
    Ok(out)
}

/// A `tasks mcp` server on stdio.
struct Mcp {
    stdin: ChildStdin,
    lines: Receiver<Line>,
    next_id: u64,
    /// Messages read while waiting for an answer, with their arrival.
    stash: VecDeque<(i128, Value)>,
}

impl Mcp {
    fn start(run: &mut Run, args: &[&str]) -> Result<(Self, u32)> {
        let mut command = run.command(args, "mcp")?;
        command.stdin(Stdio::piped());
        let child = run.spawn(command, "tasks mcp")?;
        let pid = child.id();
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut mcp = Self {
            stdin,
            lines: read_lines(stdout),
            next_id: 1,
            stash: VecDeque::new(),
        };
        let (_, init) = mcp
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "claude-code", "version": "2.1.332"}}),
            )
            .map_err(|e| format!("initialize: {e}; {}", run.log_tail("mcp")))?;
        if init["protocolVersion"] != "2025-11-25" {
            return fail(format!("the server answered initialize with {init}"));
        }
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok((mcp, pid))
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line)?;
        self.stdin.flush()?;
        Ok(())
    }

    /// The next message from the server before `deadline`, stashed ones first.
    fn next(&mut self, deadline: Instant) -> Result<Option<(i128, Value)>> {
        if let Some(message) = self.stash.pop_front() {
            return Ok(Some(message));
        }
        let Some(line) = next_line(&self.lines, deadline, "tasks mcp")? else {
            return Ok(None);
        };
        let value = serde_json::from_str(&line.text).map_err(|e| {
            format!(
                "tasks mcp wrote a line that is not JSON ({e}): {}",
                line.text
            )
        })?;
        Ok(Some((line.at, value)))
    }

    /// Sends a request and waits for its answer (at most [`STEP_DEADLINE`]): its arrival and
    /// its result. Other messages meanwhile are stashed.
    fn request(&mut self, method: &str, params: Value) -> Result<(i128, Value)> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + STEP_DEADLINE;
        let mut others = Vec::new();
        let answer = loop {
            let Some(line) = next_line(&self.lines, deadline, "tasks mcp")? else {
                return fail(format!("no answer to {method} in {STEP_DEADLINE:?}"));
            };
            let value: Value = serde_json::from_str(&line.text)?;
            if value["id"] == id {
                break (line.at, value);
            }
            others.push((line.at, value));
        };
        self.stash.extend(others);
        let (at, value) = answer;
        if let Some(error) = value.get("error") {
            return fail(format!("{method} failed: {error}"));
        }
        Ok((at, value["result"].clone()))
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Result<(i128, Value)> {
        let (at, result) =
            self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if result["isError"] == true {
            return fail(format!("{tool} failed: {result}"));
        }
        Ok((at, result))
    }
}

/// How the result mode asks for its next result.
const POLL_TOOL: &str = "TaskList";

/// The MCP modes: `args` after `tasks`; `via` the delivery measured.
fn mcp_mode(tasks: &Path, count: usize, args: &[&str], via: Via, gap: Duration) -> Result<Outcome> {
    let label = if gap.is_zero() {
        format!("`tasks {}`, {count} ending together", args.join(" "))
    } else {
        format!("`tasks {}`", args.join(" "))
    };
    let mut run = Run::new(tasks)?;
    let (mut mcp, pid) = Mcp::start(&mut run, args)?;
    let (_, listed) = mcp.request("tools/list", json!({}))?;
    for tool in ["Bash", POLL_TOOL] {
        if !listed["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == tool))
        {
            return fail(format!("tools/list has no {tool}: {listed}"));
        }
    }
    let mut deliveries = Deliveries::default();
    let mut ids = Vec::with_capacity(count);
    // An MCP start answers in a few ms; ends begin once every start is in.
    let mut plan = Plan::new(
        Duration::from_millis(1000 + 10 * count as u64),
        gap,
        run.work.path(),
    )?;
    let started = Instant::now();
    for n in 0..count {
        let command = run.task_command(n, &plan);
        let (at, result) = mcp.call(
            "Bash",
            json!({"command": command, "run_in_background": true,
                   "description": format!("notify-latency {n}")}),
        )?;
        for id in notified_in_result(&result) {
            deliveries.add(id, at, Via::Result);
        }
        let id = result["structuredContent"]["backgroundTaskId"]
            .as_str()
            .ok_or_else(|| format!("a start's result has no backgroundTaskId: {result}"))?;
        ids.push(id.to_owned());
        if n == 0 {
            run.watch()?;
        }
    }
    let (starts, deadline, cpu) = plan.started(started, count, pid)?;
    let mut calls = Vec::new();
    match via {
        Via::Channel => {
            let mut settle: Option<Instant> = None;
            loop {
                let until = settle.map_or(deadline, |s| s.min(deadline));
                let Some((at, message)) = mcp.next(until)? else {
                    if settle.is_some() {
                        break;
                    }
                    return deliveries.short_of(&label, &ids, run.log_tail("mcp"));
                };
                if message["method"] == "notifications/claude/channel" {
                    let id = message["params"]["meta"]["task_id"]
                        .as_str()
                        .ok_or_else(|| {
                            format!("a channel event without meta.task_id: {message}")
                        })?;
                    let content = message["params"]["content"].as_str().unwrap_or_default();
                    if task_ids_in(content) != [id] {
                        return fail(format!(
                            "a channel event's content is not about {id}: {message}"
                        ));
                    }
                    deliveries.add(id.to_owned(), at, Via::Channel);
                }
                if settle.is_none() && deliveries.has_all(&ids) {
                    settle = Some(Instant::now() + SETTLE);
                }
            }
            // Nothing must be left for a tool result either.
            let (at, result) = mcp.call(POLL_TOOL, json!({}))?;
            for id in notified_in_result(&result) {
                deliveries.add(id, at, Via::Result);
            }
        }
        Via::Result => {
            let mut extra = 0;
            // Back to back until every task is delivered, then a few more calls (to see that
            // none is delivered again).
            while extra < 5 {
                if Instant::now() > deadline {
                    return deliveries.short_of(&label, &ids, run.log_tail("mcp"));
                }
                let sent = now_ns();
                let (at, result) = mcp.call(POLL_TOOL, json!({}))?;
                calls.push(at - sent);
                for id in notified_in_result(&result) {
                    deliveries.add(id, at, Via::Result);
                }
                // Pushed announcements (`notifications/message`, not a delivery) and list changes.
                mcp.stash.clear();
                if deliveries.has_all(&ids) {
                    extra += 1;
                }
            }
        }
        Via::Follow => return fail("not an MCP mode"),
    }
    let share = cpu.share()?;
    let mut out = outcome(&run, label, &ids, &deliveries, via, starts)?;
    out.calls = calls;
    out.cpu = share;
    Ok(out)
}

/// `tasks notifications --follow`, with the tasks started by `tasks run`.
fn follow_mode(tasks: &Path, count: usize, gap: Duration) -> Result<Outcome> {
    let args = ["notifications", "--follow", "--format", "json"];
    let label = if gap.is_zero() {
        format!("`tasks {}`, {count} ending together", args.join(" "))
    } else {
        format!("`tasks {}`", args.join(" "))
    };
    let mut run = Run::new(tasks)?;
    let command = run.command(&args, "notifications")?;
    let follower = run.spawn(command, "tasks notifications --follow")?;
    let pid = follower.id();
    let lines = read_lines(follower.stdout.take().ok_or("no stdout")?);
    let mut deliveries = Deliveries::default();
    let mut ids = Vec::with_capacity(count);
    // A `tasks run` process takes a few ms (the first one starts the supervisor).
    let mut plan = Plan::new(
        Duration::from_millis(1500 + 15 * count as u64),
        gap,
        run.work.path(),
    )?;
    let started = Instant::now();
    for n in 0..count {
        let command = run.task_command(n, &plan);
        let id =
            run.tasks_output(&["run", "-d", &format!("notify-latency {n}"), "--", &command])?;
        ids.push(id.trim().to_owned());
        if n == 0 {
            run.watch()?;
        }
    }
    let (starts, deadline, cpu) = plan.started(started, count, pid)?;
    let mut settle: Option<Instant> = None;
    loop {
        let until = settle.map_or(deadline, |s| s.min(deadline));
        let Some(line) = next_line(&lines, until, "tasks notifications --follow")? else {
            if settle.is_some() {
                break;
            }
            return deliveries.short_of(&label, &ids, run.log_tail("notifications"));
        };
        let value: Value = serde_json::from_str(&line.text).map_err(|e| {
            format!(
                "{label} printed a line that is not JSON ({e}): {}",
                line.text
            )
        })?;
        let id = value["taskId"]
            .as_str()
            .ok_or_else(|| format!("a notification without taskId: {value}"))?;
        deliveries.add(id.to_owned(), line.at, Via::Follow);
        if settle.is_none() && deliveries.has_all(&ids) {
            settle = Some(Instant::now() + SETTLE);
        }
    }
    let share = cpu.share()?;
    let mut out = outcome(&run, label, &ids, &deliveries, Via::Follow, starts)?;
    out.cpu = share;
    Ok(out)
}

/// Count, median, p99 and max of `values`, in ms.
fn stats(values: &[i128]) -> (usize, f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    (
        sorted.len(),
        ms(median(&sorted)),
        ms(percentile(&sorted, 0.99)),
        ms(sorted.last().copied().unwrap_or(0)),
    )
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        println!("notify_latency: bench");
        return Ok(());
    }
    let tasks = benches::build_tasks_binary();
    let count = if std::env::var_os("TASKS_BENCH_QUICK").is_some() {
        QUICK_TASKS
    } else {
        TASKS
    };
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "notify_latency: {count} tasks a mode, ends one every {GAP:?}; {} ({nproc} CPUs, load {})",
        tasks.display(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let together = if std::env::var_os("TASKS_BENCH_QUICK").is_some() {
        QUICK_TOGETHER
    } else {
        TOGETHER
    };
    // (name, arguments of `tasks`, who delivers, tasks, between two ends)
    let modes: Vec<(&str, &[&str], Via, usize, Duration)> = vec![
        (
            "channel",
            &["mcp", "--deliver", "channel"],
            Via::Channel,
            count,
            GAP,
        ),
        (
            "channel50",
            &["mcp", "--deliver", "channel", "--watch-ms", "50"],
            Via::Channel,
            count,
            GAP,
        ),
        ("result", &["mcp"], Via::Result, count, GAP),
        ("follow", &[], Via::Follow, count, GAP),
        ("together", &[], Via::Follow, together, Duration::ZERO),
        (
            "channel_together",
            &["mcp", "--deliver", "channel"],
            Via::Channel,
            together,
            Duration::ZERO,
        ),
    ];
    let chosen = std::env::var("TASKS_BENCH_MODES").ok();
    let wanted = |name: &str| {
        chosen
            .as_deref()
            .is_none_or(|list| list.split(',').any(|n| n.trim() == name))
    };
    let mut outcomes = Vec::new();
    for (_, args, via, count, gap) in modes.into_iter().filter(|mode| wanted(mode.0)) {
        let out = match via {
            Via::Follow => follow_mode(&tasks, count, gap)?,
            _ => mcp_mode(&tasks, count, args, via, gap)?,
        };
        eprintln!(
            "notify_latency: {} done (starts took {:.0?}{})",
            out.label,
            out.starts,
            if out.overlap.is_zero() {
                String::new()
            } else {
                format!(", {:.0?} past the first planned end", out.overlap)
            }
        );
        outcomes.push(out);
    }
    println!();
    println!("| mode | n | median ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    for out in &outcomes {
        let (n, median, p99, max) = stats(&out.latencies);
        println!(
            "| {} | {n} | {median:.1} | {p99:.1} | {max:.1} |",
            out.label
        );
    }
    println!();
    println!(
        "| mode | end → supervisor's endTime, median | end → final record on disk, median / p99 | record → delivered, median / p99 | delivered by another path |"
    );
    println!("|---|---|---|---|---|");
    for out in &outcomes {
        let (_, landed, landed_p99, _) = stats(&out.landed);
        let (_, delivered, delivered_p99, _) = stats(&out.delivered);
        println!(
            "| {} | {:.1} | {landed:.1} / {landed_p99:.1} | {delivered:.1} / {delivered_p99:.1} | {} |",
            out.label,
            ms(median(&out.reaped)),
            out.elsewhere
        );
    }
    println!();
    for out in outcomes.iter().filter(|o| o.stamped_late > 0) {
        println!(
            "{}: {} of {} final records were stamped after their delivery (the bench's inotify \
             thread ran late): their split is off by that much",
            out.label,
            out.stamped_late,
            out.latencies.len()
        );
    }
    for out in outcomes.iter().filter(|o| !o.bursts.is_empty()) {
        let (n, median, p99, max) = stats(&out.bursts);
        println!(
            "{}: deliveries in {} bursts (arrivals within {} ms of each other); from one burst \
             to the next: median {median:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
            out.label,
            n + 1,
            BURST_GAP_NS / 1_000_000
        );
    }
    for out in &outcomes {
        println!(
            "{}: the deliverer's process used {:.1} % of one core over the {:.1?} from the last \
             start to the end",
            out.label, out.cpu.0, out.cpu.1
        );
    }
    for out in outcomes.iter().filter(|o| !o.calls.is_empty()) {
        let (n, median, p99, max) = stats(&out.calls);
        println!(
            "{}: {n} `{POLL_TOOL}` calls back to back; a call's round trip (the loop's period): \
             median {median:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
            out.label
        );
    }
    Ok(())
}
