//! `tasks run --on slurm` against a real Slurm cluster, through the built `tasks` binary: the
//! private one `.ci/slurm.sh start` runs (it exports `SLURM_CONF` and `TASKS_TEST_SLURM=1`).
//! Without them every test skips with a message (under `CI=true` that is a failure).
//!
//! Each test has its own state root (a temp dir the single-node cluster sees, since it is this
//! machine) and cancels every job named by one of its tasks when it ends ([`Cluster`]'s drop,
//! even on a panic), then waits until Slurm runs none of them. The tests take the node one at
//! a time ([`NODE`]): one of them asks for more CPUs than it has, and a job waiting for a CPU
//! another test holds would only make the waits longer. Every wait is on a condition with a
//! deadline, never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use support::root::TasksRoot;
use support::{fake_agent, poll_until, sigkill};

mod support;

/// How long a job may take to reach the state it is headed for (a loaded machine included).
const DEADLINE: Duration = Duration::from_secs(120);

/// Taken by each test for its whole run.
static NODE: Mutex<()> = Mutex::new(());

/// A state root whose supervisor places tasks on the test cluster, and the tasks it started.
struct Cluster {
    root: TasksRoot,
    ids: Mutex<Vec<String>>,
}

impl Cluster {
    /// `None` (with the skip's message) when no cluster is configured.
    fn new() -> Option<Self> {
        Self::with_env(&[])
    }

    /// [`Cluster::new`], its `tasks` commands (and so its tasks) run with `env` as well.
    fn with_env(env: &[(&str, &str)]) -> Option<Self> {
        let configured = std::env::var_os("SLURM_CONF").is_some()
            && std::env::var_os("TASKS_TEST_SLURM").is_some();
        if !configured {
            support::skip(
                "no Slurm cluster (SLURM_CONF and TASKS_TEST_SLURM unset; start one with \
                 eval \"$(.ci/slurm.sh start)\")",
            );
            return None;
        }
        let mut root = TasksRoot::new()
            .env("TASKS_SLURM_POLL_MS", "100")
            // Long enough for a node that shares the state root to write its marker on a
            // loaded machine; this cluster shares it, so the check must never fire here.
            .env("TASKS_SLURM_START_GRACE_MS", "60000");
        for (key, value) in env {
            root = root.env(key, value);
        }
        Some(Self {
            root,
            ids: Mutex::new(Vec::new()),
        })
    }

    /// `tasks run OPTIONS -- COMMAND`; returns the id.
    fn run(&self, options: &[&str], command: &str) -> String {
        let mut args = vec!["run"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["--", command]);
        let id = self.root.ok(&args).trim().to_owned();
        self.ids.lock().unwrap().push(id.clone());
        id
    }

    /// `tasks run --on slurm -- COMMAND`.
    fn slurm(&self, command: &str) -> String {
        self.run(&["--on", "slurm"], command)
    }

    /// A Slurm task that runs `before`, waits for its [`Gate`] to open, then runs `after`.
    fn gated(&self, before: &str, after: &str) -> (Gate, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate");
        let id = self.slurm(&format!(
            "{before}while [ ! -e '{}' ]; do sleep 0.1; done; {after}",
            path.display()
        ));
        (Gate { _dir: dir, path }, id)
    }

    /// The task's `ps --all --json` row.
    fn task(&self, id: &str) -> Value {
        let row = self.root.listed(id);
        assert!(!row.is_null(), "{id} is not listed");
        row
    }

    /// Waits until the task's row satisfies `accept`; returns it.
    fn until(&self, id: &str, what: &str, accept: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        poll_until(DEADLINE, || {
            last = self.task(id);
            accept(&last).then(|| last.clone())
        })
        .unwrap_or_else(|| panic!("{id} not {what} within {DEADLINE:?}; last: {last}"))
    }

    /// Waits until the task has ended; returns its row.
    fn ended(&self, id: &str) -> Value {
        self.until(id, "ended", |t| {
            matches!(
                t["status"].as_str(),
                Some("completed" | "failed" | "killed")
            )
        })
    }

    /// Delivers what is due (twice: the second delivers nothing new) and returns how many
    /// notifications of `id` were ever delivered.
    fn delivered(&self, id: &str) -> usize {
        self.root.ok(&["notifications"]);
        self.root.ok(&["notifications"]);
        let log = std::fs::read_to_string(self.root.path("default/notifications.jsonl"))
            .unwrap_or_default();
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["notification"]["task_id"] == id)
            .count()
    }

    /// The ids of every job Slurm knows named `id`, in any state.
    fn jobs_named(id: &str) -> Vec<String> {
        let out = Command::new("squeue")
            .args(["--noheader", "--states=all", "--format=%i"])
            .arg(format!("--name={id}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// The pid of the session's supervisor.
    fn supervisor(&self) -> i32 {
        let text = std::fs::read_to_string(self.root.path("default/supervisor.lock")).unwrap();
        text.trim().parse().unwrap()
    }

    /// SIGKILLs the session's supervisor and waits until it is gone; its pid.
    fn kill_the_supervisor(&self) -> i32 {
        let pid = self.supervisor();
        sigkill(pid);
        poll_until(DEADLINE, || (!in_proc(pid)).then_some(())).expect("the supervisor gone");
        pid
    }
}

/// A file a job's command waits for.
struct Gate {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Gate {
    /// Lets the command go on.
    fn open(&self) {
        std::fs::write(&self.path, "").unwrap();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ids = self.ids.lock().map(|ids| ids.clone()).unwrap_or_default();
        for id in &ids {
            let status = Command::new("scancel").arg(format!("--name={id}")).status();
            if !matches!(status, Ok(s) if s.success()) {
                eprintln!("scancel --name={id}: {status:?}");
            }
        }
        // Until Slurm runs none of them any more (it has killed their processes).
        let busy = || {
            ids.iter().any(|id| {
                Command::new("squeue")
                    .args([
                        "--noheader",
                        "--states=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED",
                        "--format=%i",
                    ])
                    .arg(format!("--name={id}"))
                    .output()
                    .is_ok_and(|o| !o.stdout.trim_ascii().is_empty())
            })
        };
        if poll_until(DEADLINE, || (!busy()).then_some(())).is_none() {
            eprintln!("jobs of {ids:?} still there after {DEADLINE:?}");
        }
    }
}

/// The test's turn on the node (a test that panicked before does not poison it).
fn node() -> std::sync::MutexGuard<'static, ()> {
    NODE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn in_proc(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_job_that_completes_is_completed_and_its_output_read() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let id = cluster.slurm("echo hello; echo \"from $SLURM_JOB_NAME\" >&2");
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["exitCode"], 0, "{task}");
    let job = &task["kind"]["shell"]["batch"];
    assert_eq!(job["engine"], "slurm", "{task}");
    assert_eq!(
        Cluster::jobs_named(&id),
        [job["jobId"].as_str().unwrap()],
        "one job, the recorded one"
    );
    assert_eq!(
        cluster.root.ok(&["output", &id]),
        format!("hello\nfrom {id}\n")
    );
    assert_eq!(cluster.delivered(&id), 1);
}

#[test]
fn a_job_that_exits_3_fails_with_exit_code_3() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let id = cluster.slurm("echo failing; exit 3");
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["exitCode"], 3, "{task}");
    assert_eq!(
        task["endReason"],
        serde_json::json!({"reason": "batch_job", "engine": "slurm", "state": "FAILED", "code": 3})
    );
    assert_eq!(cluster.root.ok(&["output", &id]), "failing\n");
    assert_eq!(cluster.delivered(&id), 1);
    let log = std::fs::read_to_string(cluster.root.path("default/notifications.jsonl")).unwrap();
    assert!(
        log.contains("failed with exit code 3 (slurm job FAILED)"),
        "{log}"
    );
}

#[test]
fn a_killed_job_is_killed_and_its_processes_are_gone() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (shell_pid, sleep_pid) = (dir.path().join("sh.pid"), dir.path().join("sleep.pid"));
    let id = cluster.slurm(&format!(
        "echo $$ > '{}'; sleep 300 & echo $! > '{}'; wait",
        shell_pid.display(),
        sleep_pid.display()
    ));
    let pids = poll_until(DEADLINE, || {
        Some([read_pid(&shell_pid)?, read_pid(&sleep_pid)?])
    })
    .expect("the job to write its pids");
    assert!(pids.iter().all(|&pid| in_proc(pid)));
    assert_eq!(
        cluster.until(&id, "running", |t| t["status"] == "running")["status"],
        "running"
    );
    cluster.root.ok(&["kill", &id]);
    let task = cluster.task(&id);
    assert_eq!(task["status"], "killed", "{task}");
    assert_eq!(task["endReason"]["reason"], "killed", "{task}");
    poll_until(DEADLINE, || {
        pids.iter().all(|&pid| !in_proc(pid)).then_some(())
    })
    .unwrap_or_else(|| panic!("processes {pids:?} of the cancelled job still there"));
    let state = poll_until(DEADLINE, || {
        let out = Command::new("squeue")
            .args(["--noheader", "--states=all", "--format=%T"])
            .arg(format!("--name={id}"))
            .output()
            .ok()?;
        let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (state == "CANCELLED").then_some(state)
    });
    assert_eq!(state.as_deref(), Some("CANCELLED"));
    // A kill on request is never notified.
    assert_eq!(cluster.delivered(&id), 0);
}

#[test]
fn output_is_read_by_delta_while_the_job_runs() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let (gate, id) = cluster.gated("echo first; ", "echo second");
    // Its output may show before the next look at the job marks it running.
    let first: Value = poll_until(DEADLINE, || {
        let read = cluster.root.json(&["output", &id, "--offset", "0"]);
        (read["output"] == "first\n" && read["status"] == "running").then_some(read)
    })
    .expect("the first line while the job runs");
    let offset = first["newOffset"].as_u64().unwrap().to_string();
    gate.open();
    assert_eq!(cluster.ended(&id)["status"], "completed");
    let delta = cluster.root.json(&["output", &id, "--offset", &offset]);
    assert_eq!(delta["output"], "second\n", "{delta}");
    assert_eq!(cluster.delivered(&id), 1);
}

#[test]
fn a_job_asking_for_more_cpus_than_the_node_has_is_pending_with_slurms_reason_then_killed() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let cpus: u32 = std::env::var("TASKS_TEST_SLURM_CPUS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| {
            u32::try_from(std::thread::available_parallelism().unwrap().get()).unwrap()
        });
    let too_many = format!("--slurm-arg=--cpus-per-task={}", cpus + 1);
    let id = cluster.run(&["--on", "slurm:debug", &too_many], "echo never");
    let task = cluster.until(&id, "waiting with a reason", |t| {
        t["kind"]["shell"]["batch"]["waiting"].is_string()
    });
    assert_eq!(task["status"], "pending", "{task}");
    assert_eq!(task["kind"]["shell"]["batch"]["waiting"], "PartitionConfig");
    let table = cluster.root.ok(&["ps"]);
    let row = table.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        row.contains("pending") && row.contains("slurm: PartitionConfig"),
        "{table}"
    );
    cluster.root.ok(&["kill", &id]);
    let task = cluster.task(&id);
    assert_eq!(task["status"], "killed", "{task}");
    assert_eq!(
        task["kind"]["shell"]["batch"].get("waiting"),
        None,
        "{task}"
    );
    assert_eq!(cluster.root.ok(&["output", &id]), "", "it never ran");
    assert_eq!(Cluster::jobs_named(&id).len(), 1);
    assert_eq!(cluster.delivered(&id), 0);
}

#[test]
fn a_supervisor_killed_after_the_submission_leaves_one_job_whose_end_is_delivered_once() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let (gate, id) = cluster.gated("", "echo after");
    poll_until(DEADLINE, || {
        (!Cluster::jobs_named(&id).is_empty()).then_some(())
    })
    .expect("the job to be submitted");
    let first = cluster.kill_the_supervisor();
    // A read finds the task live under a dead supervisor: it outlives it, so the read starts
    // the next supervisor, which follows the job again instead of ending the task.
    let task = cluster.task(&id);
    assert!(
        matches!(task["status"].as_str(), Some("pending" | "running")),
        "{task}"
    );
    let second = cluster.supervisor();
    assert_ne!(first, second);
    gate.open();
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(cluster.root.ok(&["output", &id]), "after\n");
    let jobs = Cluster::jobs_named(&id);
    assert_eq!(jobs.len(), 1, "exactly one job for the task: {jobs:?}");
    assert_eq!(task["kind"]["shell"]["batch"]["jobId"], jobs[0].as_str());
    assert_eq!(cluster.delivered(&id), 1);
}

#[test]
fn a_supervisor_started_after_slurm_forgot_the_job_ends_it_from_its_exit_file_once() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let (gate, id) = cluster.gated("", "exit 4");
    cluster.until(&id, "running", |t| t["status"] == "running");
    let first = cluster.kill_the_supervisor();
    // The job ends while no supervisor lives: its wrapper records the exit status.
    gate.open();
    let exit_file = cluster.root.path(&format!("default/tasks/{id}.exit"));
    poll_until(DEADLINE, || exit_file.exists().then_some(())).expect("the job's exit file");
    // And Slurm forgets it (MinJobAge): only its exit file says how it ended.
    poll_until(DEADLINE, || {
        Cluster::jobs_named(&id).is_empty().then_some(())
    })
    .expect("Slurm to forget the ended job");
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["exitCode"], 4, "{task}");
    assert_eq!(
        task["endReason"],
        serde_json::json!({"reason": "exited", "code": 4}),
        "read from the exit file"
    );
    assert_ne!(cluster.supervisor(), first);
    assert_eq!(cluster.delivered(&id), 1);
}

/// The state a supervisor leaves when it dies between `sbatch` and the record of the job id:
/// the task's record is its first one (`pending`, a Slurm job without an id). Planted here as
/// that record (the window is microseconds wide: no kill can aim at it), the next supervisor
/// finds the job by its name, the task's id, follows it and submits nothing.
#[test]
fn a_job_whose_id_was_never_recorded_is_found_by_name_and_not_submitted_again() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let (gate, id) = cluster.gated("", "echo found");
    cluster.until(&id, "running", |t| t["status"] == "running");
    let first = cluster.kill_the_supervisor();
    let path = cluster.root.path(&format!("default/tasks/{id}.json"));
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let job = record["task"]["kind"]["shell"]["batch"]
        .as_object_mut()
        .unwrap()
        .remove("jobId")
        .expect("the job id was recorded");
    record["task"]["status"] = "pending".into();
    let planted = path.with_extension("planted");
    std::fs::write(&planted, serde_json::to_vec(&record).unwrap()).unwrap();
    std::fs::rename(&planted, &path).unwrap();
    // The next read starts the next supervisor, which looks the job up by name.
    let task = cluster.until(&id, "following its job again", |t| {
        t["kind"]["shell"]["batch"]["jobId"] == job
    });
    assert_ne!(cluster.supervisor(), first, "{task}");
    gate.open();
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(cluster.root.ok(&["output", &id]), "found\n");
    assert_eq!(
        Cluster::jobs_named(&id),
        [job.as_str().unwrap()],
        "no second job"
    );
    assert_eq!(cluster.delivered(&id), 1);
}

/// The Slurm job of task `id` as `squeue` shows it: `(state, reason)`.
fn job_state(id: &str) -> Option<(String, String)> {
    let out = Command::new("squeue")
        .args(["--noheader", "--states=all", "--format=%T %r"])
        .arg(format!("--name={id}"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (state, reason) = text.trim().split_once(' ')?;
    Some((state.to_owned(), reason.to_owned()))
}

/// `--after` between two Slurm tasks: the dependent is submitted at once with
/// `--dependency=afterok:JOB` and Slurm holds it (pending, reason `Dependency`) while its
/// dependency runs, then runs it.
#[test]
fn after_between_slurm_tasks_is_slurms_afterok_and_runs_once_the_dependency_completed() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let (gate, first) = cluster.gated("", "echo first");
    let second = cluster.run(&["--on", "slurm", "--after", &first], "echo second");
    // Submitted while its dependency still runs: Slurm waits, not the supervisor's queue.
    let waiting = cluster.until(&second, "submitted and held by Slurm", |t| {
        t["kind"]["shell"]["batch"]["waiting"] == "Dependency"
    });
    assert_eq!(waiting["status"], "pending", "{waiting}");
    let first_job = cluster.task(&first)["kind"]["shell"]["batch"]["jobId"].clone();
    assert_eq!(
        waiting["kind"]["shell"]["batch"]["after"],
        serde_json::json!([{"task": first, "jobId": first_job}]),
        "{waiting}"
    );
    assert_eq!(
        job_state(&second),
        Some(("PENDING".to_owned(), "Dependency".to_owned()))
    );
    assert!(matches!(
        cluster.task(&first)["status"].as_str(),
        Some("pending" | "running")
    ));
    gate.open();
    let task = cluster.ended(&second);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(cluster.task(&first)["status"], "completed");
    assert_eq!(cluster.root.ok(&["output", &second]), "second\n");
    assert_eq!(Cluster::jobs_named(&second).len(), 1);
    assert_eq!(cluster.delivered(&first), 1);
    assert_eq!(cluster.delivered(&second), 1);
}

/// A Slurm dependency that fails leaves its dependent's job pending for ever in Slurm
/// (`DependencyNeverSatisfied`): it is cancelled and its task ends `failed` with the queue's
/// "dependency failed" reason, and so does a task waiting for that one in turn.
#[test]
fn after_a_failed_slurm_dependency_the_dependents_jobs_are_cancelled_and_end_dependency_failed() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let (gate, failing) = cluster.gated("", "exit 3");
    let dependent = cluster.run(
        &["--on", "slurm", "--after", &failing],
        &format!("touch '{}'", ran.display()),
    );
    let chained = cluster.run(
        &["--on", "slurm", "--after", &dependent],
        &format!("touch '{}'", ran.display()),
    );
    for id in [&dependent, &chained] {
        cluster.until(id, "held by Slurm", |t| {
            t["kind"]["shell"]["batch"]["waiting"] == "Dependency"
        });
    }
    gate.open();
    assert_eq!(cluster.ended(&failing)["status"], "failed");
    for (id, dependency) in [(&dependent, &failing), (&chained, &dependent)] {
        let task = cluster.ended(id);
        assert_eq!(task["status"], "failed", "{task}");
        assert_eq!(
            task["endReason"],
            serde_json::json!({"reason": "dependency_failed", "id": dependency}),
            "{task}"
        );
        let state = poll_until(DEADLINE, || {
            job_state(id).filter(|(state, _)| state == "CANCELLED")
        });
        assert!(
            state.is_some(),
            "{id}'s job not cancelled: {:?}",
            job_state(id)
        );
        assert_eq!(cluster.root.ok(&["output", id]), "", "it never ran");
        assert_eq!(cluster.delivered(id), 1);
    }
    assert!(!ran.exists(), "no dependent ran");
    let log = std::fs::read_to_string(cluster.root.path("default/notifications.jsonl")).unwrap();
    assert!(
        log.contains(&format!("dependency failed: {failing}")),
        "{log}"
    );
}

/// An agent on Slurm: the scripted agent CLI runs inside a job (it writes the job's id from
/// there), its stream is the transcript; the notification carries its result and tokens; a
/// message once it stopped resumes it in the same task, as a new job (its answer names that
/// job's id).
#[test]
fn an_agent_on_slurm_reports_its_result_and_tokens_and_a_message_resumes_it_as_a_new_job() {
    let _node = node();
    let Some(cluster) = Cluster::with_env(&[("FAKE_AGENT_ECHO_ENV", "SLURM_JOB_ID")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job_file = dir.path().join("job");
    let script = dir.path().join("script.jsonl");
    let steps = [
        serde_json::json!({"read_user": true}),
        serde_json::json!({"spawn": format!("echo $SLURM_JOB_ID > '{}'", job_file.display()),
                           "pid_file": dir.path().join("pid")}),
        serde_json::json!({"tool": "Bash", "input": {"command": "ls", "description": "List files"},
                           "usage": {"input_tokens": 1200, "output_tokens": 5}, "output": "a\nb\nc"}),
        serde_json::json!({"text": "There are 3 files.", "usage": {"input_tokens": 1300, "output_tokens": 7}}),
        serde_json::json!({"result": "3 files"}),
    ];
    let lines: String = steps.iter().map(|step| format!("{step}\n")).collect();
    std::fs::write(&script, lines).unwrap();
    let fake = fake_agent();
    let id = cluster
        .root
        .ok(&[
            "agent",
            "--on",
            "slurm",
            "--name",
            "counter",
            "--prompt",
            "count the files",
            "--",
            fake.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
        ])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    cluster.ids.lock().unwrap().push(id.clone());
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    let first_job = poll_until(DEADLINE, || {
        let text = std::fs::read_to_string(&job_file).ok()?;
        text.ends_with('\n').then(|| text.trim().to_owned())
    })
    .expect("the CLI's job id, written from inside the job");
    assert!(
        first_job.parse::<u32>().is_ok(),
        "the CLI ran in a job: {first_job:?}"
    );
    let notice = cluster.root.ok(&["notifications"]);
    for part in [
        format!("<task-id>{id}</task-id>"),
        "<status>completed</status>".to_owned(),
        "<result>3 files</result>".to_owned(),
        "<tool_uses>1</tool_uses>".to_owned(),
        "<subagent_tokens>1312</subagent_tokens>".to_owned(),
    ] {
        assert!(notice.contains(&part), "{part} missing in {notice}");
    }
    let readable = cluster.root.ok(&["output", &id]);
    assert!(readable.contains("There are 3 files.\n"), "{readable}");

    let sent = cluster.root.ok(&["send", "counter", "and now?"]);
    assert!(sent.contains("resumed it"), "{sent}");
    let again = poll_until(DEADLINE, || {
        let text = cluster.root.ok(&["notifications"]);
        text.contains("<result>echo: and now?").then_some(text)
    })
    .expect("the resumed run's notification");
    let second_job = again
        .split("[SLURM_JOB_ID=")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no job id in {again}"))
        .to_owned();
    assert!(second_job.parse::<u32>().is_ok(), "{again}");
    assert_ne!(second_job, first_job, "a new job: {again}");
    assert!(
        again.contains(&format!("<task-id>{id}</task-id>")),
        "{again}"
    );
    assert_eq!(cluster.task(&id)["status"], "completed");
}

/// `placement_default` (here `TASKS_PLACEMENT_DEFAULT=slurm`) places a shell started without
/// `--on` on Slurm; one with a piped stdin (which a job cannot have) stays on this machine.
#[test]
fn a_default_placement_puts_shells_started_without_one_on_slurm() {
    let _node = node();
    let Some(cluster) = Cluster::with_env(&[("TASKS_PLACEMENT_DEFAULT", "slurm")]) else {
        return;
    };
    let placed = cluster.run(&[], "echo \"in $SLURM_JOB_NAME\"");
    let task = cluster.ended(&placed);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["kind"]["shell"]["batch"]["engine"], "slurm", "{task}");
    assert_eq!(
        cluster.root.ok(&["output", &placed]),
        format!("in {placed}\n")
    );
    let local = cluster.run(&["--stdin", "pipe"], "cat");
    cluster.root.ok(&["input", &local, "--close"]);
    let task = cluster.ended(&local);
    assert_eq!(task["status"], "completed", "{task}");
    assert!(task["kind"]["shell"].get("batch").is_none(), "{task}");
    assert!(Cluster::jobs_named(&local).is_empty());
}

/// Writes the fake agent's script `steps` in `dir`, as `{name}.jsonl`; its path.
fn agent_script(dir: &Path, name: &str, steps: &[Value]) -> String {
    let path = dir.join(format!("{name}.jsonl"));
    let lines: String = steps.iter().map(|step| format!("{step}\n")).collect();
    std::fs::write(&path, lines).unwrap();
    path.display().to_string()
}

/// Steps that write `$SLURM_JOB_ID` (`here` outside a job) to `file`, a new file, and wait
/// until it is written: where the CLI runs.
fn where_it_runs(file: &Path) -> [Value; 2] {
    let written = file.with_extension("written");
    [
        serde_json::json!({
            "spawn": format!(
                "echo \"${{SLURM_JOB_ID:-here}}\" > '{}' && mv '{}' '{}'",
                written.display(),
                written.display(),
                file.display()
            ),
            "pid_file": file.with_extension("pid"),
        }),
        serde_json::json!({"wait_file": file}),
    ]
}

/// Where the CLI that wrote `file` ([`where_it_runs`]) ran: its job id, or `here`.
fn ran_in(file: &Path) -> String {
    poll_until(DEADLINE, || {
        let text = std::fs::read_to_string(file).ok()?;
        text.ends_with('\n').then(|| text.trim().to_owned())
    })
    .unwrap_or_else(|| panic!("nothing written to {}", file.display()))
}

impl Cluster {
    /// `tasks OPTIONS -- FAKE-AGENT --script SCRIPT` (an `agent` or `team spawn` command);
    /// the task's id.
    fn fake(&self, options: &[&str], script: &str) -> String {
        let fake = fake_agent();
        let mut args = options.to_vec();
        args.extend_from_slice(&["--", fake.to_str().unwrap(), "--script", script]);
        let id = self
            .root
            .ok(&args)
            .lines()
            .next()
            .unwrap()
            .trim()
            .to_owned();
        self.ids.lock().unwrap().push(id.clone());
        id
    }
}

/// A teammate on Slurm: its agent CLI runs in a job (one run a turn: the job ends once it
/// answered), it stays live and idle between jobs, and a message resumes its session as a new
/// job in the same task.
#[test]
fn a_teammate_on_slurm_runs_its_turns_as_jobs_and_a_message_resumes_it_as_a_new_job() {
    let _node = node();
    let Some(cluster) = Cluster::with_env(&[("FAKE_AGENT_ECHO_ENV", "SLURM_JOB_ID")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (id, first_job) = cluster.teammate_on_slurm(
        dir.path(),
        &[
            serde_json::json!({"text": "joined"}),
            serde_json::json!({"result": "joined"}),
        ],
    );
    // Its first job ends once it answered; the teammate is live and idle, with no job.
    poll_until(DEADLINE, || {
        job_state(&id)
            .is_none_or(|(state, _)| state == "COMPLETED")
            .then_some(())
    })
    .expect("its first job to end");
    let idle = cluster.until(&id, "idle", |t| {
        t["kind"]["teammate"]["isIdle"] == true && t["status"] == "running"
    });
    assert_eq!(idle["status"], "running", "{idle}");

    cluster.root.ok(&["send", "worker@crew", "and now?"]);
    let second_job = cluster.job_answering(&id, "and now?");
    assert_ne!(second_job, first_job, "a new job");
    let task = cluster.until(&id, "idle again", |t| {
        t["kind"]["teammate"]["isIdle"] == true
    });
    assert_eq!(task["status"], "running", "{task}");
}

/// A teammate on Slurm whose supervisor is SIGKILLed in the middle of a turn: the next
/// supervisor takes it back as a local teammate's is (its CLI stopped, its session resumed,
/// nothing lost: the turn's messages were never committed): the turn's job is cancelled
/// before the resumed session's job is submitted, so two runs of one session never write into
/// its transcript at once, and the resumed one answers in a second job.
#[test]
fn a_teammate_on_slurm_whose_supervisor_died_mid_turn_has_that_job_cancelled_before_it_resumes() {
    let _node = node();
    let Some(cluster) = Cluster::with_env(&[("FAKE_AGENT_ECHO_ENV", "SLURM_JOB_ID")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let (id, first_job) = cluster.teammate_on_slurm(
        dir.path(),
        &[
            serde_json::json!({"wait_file": gate}),
            serde_json::json!({"text": "joined late"}),
            serde_json::json!({"result": "joined"}),
        ],
    );
    // Its CLI's session on disk (a teammate's record follows its state at each sweep): what
    // the next supervisor resumes.
    let record = cluster.root.path(&format!("default/tasks/{id}.json"));
    poll_until(DEADLINE, || {
        let text = std::fs::read_to_string(&record).ok()?;
        text.contains("\"sessionId\"").then_some(())
    })
    .expect("its session recorded");
    cluster.kill_the_supervisor();

    // A read starts the next supervisor, which takes the teammate back.
    assert_ne!(cluster.task(&id)["status"], "failed");
    let second_job = cluster.job_answering(&id, task_team::RESUMED_TURN);
    assert_ne!(second_job, first_job, "a new job");
    // Its gate still closed, the turn's job ends only if cancelled (and `squeue` forgets an
    // ended job after `MinJobAge`).
    let state = state_of_job(&first_job);
    assert!(
        matches!(state.as_deref(), None | Some("CANCELLED")),
        "the turn's job was cancelled, not left running beside the resumed one: {state:?}"
    );
    // Were the first job still running, opening its gate would write its late answer.
    std::fs::write(&gate, "").unwrap();
    cluster.until(&id, "idle", |t| t["kind"]["teammate"]["isIdle"] == true);
    let output = cluster.root.ok(&["output", &id]);
    assert!(!output.contains("joined late"), "{output}");
}

impl Cluster {
    /// Spawns teammate `worker@crew` on Slurm, its fake agent's script (in `dir`) reading its
    /// prompt, saying where it runs, then taking `steps`; its id and its first job's.
    fn teammate_on_slurm(&self, dir: &Path, steps: &[Value]) -> (String, String) {
        let ran = dir.join("ran");
        let [spawn, wait] = where_it_runs(&ran);
        let mut script = vec![serde_json::json!({"read_user": true}), spawn, wait];
        script.extend_from_slice(steps);
        let script = agent_script(dir, "script", &script);
        let spawn = [
            "team",
            "spawn",
            "worker@crew",
            "--on",
            "slurm",
            "--prompt",
            "join",
        ];
        let id = self.fake(&spawn, &script);
        let job = ran_in(&ran);
        assert!(job.parse::<u32>().is_ok(), "in a job: {job:?}");
        (id, job)
    }

    /// The job of the answer to `turn` in teammate `id`'s output: its fake agent echoes the
    /// turn and its `SLURM_JOB_ID` (`FAKE_AGENT_ECHO_ENV`).
    fn job_answering(&self, id: &str, turn: &str) -> String {
        let mut shown = String::new();
        let answer = poll_until(DEADLINE, || {
            shown = self.root.ok(&["output", id]);
            let (_, after) = shown.rsplit_once(turn)?;
            after.contains("[SLURM_JOB_ID=").then(|| after.to_owned())
        })
        .unwrap_or_else(|| panic!("no answer to {turn:?} in {shown}"));
        let job = answer
            .split("[SLURM_JOB_ID=")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .unwrap_or_else(|| panic!("no job id in {answer}"));
        assert!(job.parse::<u32>().is_ok(), "{answer}");
        job.to_owned()
    }
}

/// The state `squeue` shows for job `job` (`RUNNING`, `CANCELLED`, …).
fn state_of_job(job: &str) -> Option<String> {
    let out = Command::new("squeue")
        .args(["--noheader", "--states=all", "--format=%T"])
        .arg(format!("--jobs={job}"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// `agent(…, {on: "slurm"})` in a workflow runs that agent's CLI in a Slurm job, and
/// `{on: "local"}` runs it here.
#[test]
fn a_workflow_agent_with_on_slurm_runs_in_a_job() {
    let _node = node();
    let dir = tempfile::tempdir().unwrap();
    let files = [dir.path().join("here"), dir.path().join("there")];
    let rules: Vec<Value> = files
        .iter()
        .map(|file| {
            let [spawn, wait] = where_it_runs(file);
            serde_json::json!({
                "if": format!("go {}", file.file_name().unwrap().to_str().unwrap()),
                "steps": [spawn, wait, {"text": "42"}, {"result": "42"}],
            })
        })
        .collect();
    let script = agent_script(
        dir.path(),
        "script",
        &[
            serde_json::json!({"read_user": true}),
            serde_json::json!({"by_prompt": rules}),
        ],
    );
    let command = format!("{} --script {script}", fake_agent().display());
    let Some(cluster) = Cluster::with_env(&[("TASKS_AGENT_COMMAND", &command)]) else {
        return;
    };
    let workflow = dir.path().join("placed.js");
    std::fs::write(
        &workflow,
        "export const meta = { name: 'placed', description: 'One agent here, one on Slurm' }\n\
         const here = await agent('go here', {label: 'here', on: 'local'})\n\
         const there = await agent('go there', {label: 'there', on: 'slurm'})\n\
         return { here, there }\n",
    )
    .unwrap();
    let out = cluster
        .root
        .ok(&["workflow", "run", workflow.to_str().unwrap(), "--wait"]);
    assert!(
        out.contains(r#"<result>{"here":"42","there":"42"}</result>"#),
        "{out}"
    );
    let agents: Vec<String> =
        serde_json::from_str::<Value>(&cluster.root.ok(&["ps", "--all", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "local_agent")
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
    assert_eq!(agents.len(), 2, "{agents:?}");
    cluster.ids.lock().unwrap().extend(agents.iter().cloned());
    assert_eq!(ran_in(&files[0]), "here");
    let job = &ran_in(&files[1]);
    assert!(job.parse::<u32>().is_ok(), "one ran in a job: {job:?}");
    let jobs: Vec<Vec<String>> = agents.iter().map(|id| Cluster::jobs_named(id)).collect();
    assert!(
        jobs.contains(&vec![job.clone()]) && jobs.contains(&Vec::new()),
        "one agent's job is {job}, the other has none: {jobs:?}"
    );
}

/// An agent CLI's stderr, on Slurm as here, is kept beside its transcript (`tasks output
/// --stderr`), never in it: the transcript is the CLI's event stream.
#[test]
fn an_agent_on_slurm_keeps_its_stderr_beside_its_transcript() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = agent_script(
        dir.path(),
        "script",
        &[
            serde_json::json!({"read_user": true}),
            serde_json::json!({"stderr": "warning: from the CLI's stderr"}),
            serde_json::json!({"text": "done"}),
            serde_json::json!({"result": "done"}),
        ],
    );
    let id = cluster.fake(&["agent", "--on", "slurm", "--prompt", "go"], &script);
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(Cluster::jobs_named(&id).len(), 1);
    let transcript =
        std::fs::canonicalize(cluster.root.path(&format!("default/tasks/{id}.output"))).unwrap();
    let stream = std::fs::read_to_string(&transcript).unwrap();
    assert!(!stream.contains("from the CLI's stderr"), "{stream}");
    for line in stream.lines() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok(),
            "a transcript line that is not JSON: {line:?}"
        );
    }
    assert_eq!(
        cluster.root.ok(&["output", &id, "--stderr"]),
        "warning: from the CLI's stderr\n"
    );
}

/// With a default placement on Slurm, `--on local` runs a shell, an agent and a teammate
/// here; an agent started without `--on` goes to Slurm (the default is in force).
#[test]
fn on_local_escapes_a_default_slurm_placement() {
    let _node = node();
    let Some(cluster) = Cluster::with_env(&[("TASKS_PLACEMENT_DEFAULT", "slurm")]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ran = ["agent", "mate", "placed"].map(|name| dir.path().join(name));
    let scripts = ran.clone().map(|file| {
        let [spawn, wait] = where_it_runs(&file);
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let steps = [
            serde_json::json!({"read_user": true}),
            spawn,
            wait,
            serde_json::json!({"result": "done"}),
        ];
        agent_script(dir.path(), &name, &steps)
    });
    let shell = cluster.run(&["--on", "local"], "echo \"${SLURM_JOB_ID:-here}\"");
    let task = cluster.ended(&shell);
    assert_eq!(task["status"], "completed", "{task}");
    assert!(task["kind"]["shell"].get("batch").is_none(), "{task}");
    assert_eq!(cluster.root.ok(&["output", &shell]), "here\n");

    let agent = cluster.fake(&["agent", "--on", "local", "--prompt", "go"], &scripts[0]);
    assert_eq!(cluster.ended(&agent)["status"], "completed");
    assert_eq!(ran_in(&ran[0]), "here");

    let mate = cluster.fake(
        &[
            "team",
            "spawn",
            "local@crew",
            "--on",
            "local",
            "--prompt",
            "go",
        ],
        &scripts[1],
    );
    cluster.until(&mate, "idle", |t| t["kind"]["teammate"]["isIdle"] == true);
    assert_eq!(ran_in(&ran[1]), "here");

    let placed = cluster.fake(&["agent", "--prompt", "go"], &scripts[2]);
    assert_eq!(cluster.ended(&placed)["status"], "completed");
    let job = ran_in(&ran[2]);
    assert!(job.parse::<u32>().is_ok(), "the default placed it: {job:?}");
    assert_eq!(Cluster::jobs_named(&placed), [job]);
    for id in [&shell, &agent, &mate] {
        assert!(Cluster::jobs_named(id).is_empty(), "{id} has a job");
    }
}

/// The supervisor SIGKILLed while an agent's job runs on Slurm: the next supervisor follows
/// the job (nothing submitted again), reads its transcript again from where the job's output
/// began, and delivers its end once, with its result and its tokens counted once.
#[test]
fn an_agent_on_slurm_is_followed_again_after_its_supervisor_died_and_ends_once() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ran, gate) = (dir.path().join("ran"), dir.path().join("gate"));
    let [spawn, wait] = where_it_runs(&ran);
    let script = agent_script(
        dir.path(),
        "script",
        &[
            serde_json::json!({"read_user": true}),
            spawn,
            wait,
            serde_json::json!({"tool": "Bash", "input": {"command": "ls", "description": "List files"},
                               "usage": {"input_tokens": 1200, "output_tokens": 5}, "output": "a\nb\nc"}),
            serde_json::json!({"wait_file": gate}),
            serde_json::json!({"text": "There are 3 files.", "usage": {"input_tokens": 1300, "output_tokens": 7}}),
            serde_json::json!({"result": "3 files"}),
        ],
    );
    let id = cluster.fake(&["agent", "--on", "slurm", "--prompt", "count"], &script);
    let job = ran_in(&ran);
    assert!(job.parse::<u32>().is_ok(), "in a job: {job:?}");
    cluster.until(&id, "running with its job recorded", |t| {
        t["status"] == "running" && t["kind"]["agent"]["batch"]["jobId"] == job.as_str()
    });
    let first = cluster.kill_the_supervisor();
    // It outlives its supervisor: a read starts the next one, which follows the job.
    let task = cluster.task(&id);
    assert_eq!(task["status"], "running", "{task}");
    assert_ne!(cluster.supervisor(), first);
    std::fs::write(&gate, "").unwrap();
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    let notice = cluster.root.ok(&["notifications"]);
    for part in [
        format!("<task-id>{id}</task-id>"),
        "<status>completed</status>".to_owned(),
        "<result>3 files</result>".to_owned(),
        "<tool_uses>1</tool_uses>".to_owned(),
        "<subagent_tokens>1312</subagent_tokens>".to_owned(),
    ] {
        assert!(notice.contains(&part), "{part} missing in {notice}");
    }
    assert_eq!(cluster.delivered(&id), 1);
    assert_eq!(Cluster::jobs_named(&id), [job], "exactly one job");
}

#[test]
fn an_agent_whose_job_id_its_dead_supervisor_did_not_record_is_found_by_name_and_ends_once() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (id, job, gate) = cluster.agent_left_without_its_job_id(dir.path());
    // A read starts the next supervisor, which finds the job by its name and follows it.
    let task = cluster.until(&id, "followed again", |t| {
        t["kind"]["agent"]["batch"]["jobId"] == job.as_str()
    });
    assert_eq!(task["status"], "running", "{task}");
    std::fs::write(&gate, "").unwrap();
    let task = cluster.ended(&id);
    assert_eq!(task["status"], "completed", "{task}");
    let notice = cluster.root.ok(&["notifications"]);
    assert!(notice.contains("<result>done</result>"), "{notice}");
    assert_eq!(cluster.delivered(&id), 1, "notified once");
    assert_eq!(Cluster::jobs_named(&id), [job], "exactly one job");
}

#[test]
fn an_agent_whose_job_cannot_be_found_again_ends_failed_saying_why_and_is_notified_once() {
    let _node = node();
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (id, job, _gate) = cluster.agent_left_without_its_job_id(dir.path());
    // The job no longer answers to the task's id: nothing can find it.
    let renamed = Command::new("scontrol")
        .args([
            "update",
            &format!("JobId={job}"),
            "JobName=renamed-by-the-test",
        ])
        .status()
        .unwrap();
    let _cancel = CancelOnDrop(job.clone());
    assert!(renamed.success(), "scontrol update JobName");

    let task = cluster.ended(&id);
    assert_eq!(task["status"], "failed", "{task}");
    let reason = task["endReason"].to_string();
    assert!(
        reason.contains("cannot be followed again") && reason.contains("knows no job named"),
        "{task}"
    );
    let notice = cluster.root.ok(&["notifications"]);
    for part in [
        format!("<task-id>{id}</task-id>"),
        "<status>failed</status>".to_owned(),
        "cannot be followed again".to_owned(),
    ] {
        assert!(notice.contains(&part), "{part} missing in {notice}");
    }
    assert_eq!(cluster.delivered(&id), 1, "notified once");
}

/// Cancels its job when dropped (one the `Cluster`, which cancels by task name, cannot find).
struct CancelOnDrop(String);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(&self.0).status();
    }
}

impl Cluster {
    /// An agent on Slurm whose supervisor was SIGKILLed while its job ran, and whose record
    /// then lost the job's id (as when a supervisor dies between `sbatch` and its record):
    /// its id, the job's id and the gate file the job waits for before its result `done`.
    /// No `tasks` command has run since (the next supervisor has not started).
    fn agent_left_without_its_job_id(&self, dir: &Path) -> (String, String, std::path::PathBuf) {
        let (ran, gate) = (dir.join("ran"), dir.join("gate"));
        let [spawn, wait] = where_it_runs(&ran);
        let script = agent_script(
            dir,
            "script",
            &[
                serde_json::json!({"read_user": true}),
                spawn,
                wait,
                serde_json::json!({"wait_file": gate}),
                serde_json::json!({"result": "done"}),
            ],
        );
        let id = self.fake(&["agent", "--on", "slurm", "--prompt", "go"], &script);
        let job = ran_in(&ran);
        self.until(&id, "running with its job recorded", |t| {
            t["status"] == "running" && t["kind"]["agent"]["batch"]["jobId"] == job.as_str()
        });
        self.kill_the_supervisor();
        let record = self.root.path(&format!("default/tasks/{id}.json"));
        let text = std::fs::read_to_string(&record).unwrap();
        let mut value: Value = serde_json::from_str(&text).unwrap();
        assert!(forget_job_ids(&mut value), "no jobId in {text}");
        std::fs::write(&record, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        (id, job, gate)
    }
}

/// Removes every `jobId` of a `batch` object in `value`; whether there was one.
fn forget_job_ids(value: &mut Value) -> bool {
    match value {
        Value::Object(map) => {
            let mut found = map
                .get_mut("batch")
                .and_then(Value::as_object_mut)
                .is_some_and(|batch| batch.remove("jobId").is_some());
            for child in map.values_mut() {
                found |= forget_job_ids(child);
            }
            found
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |found, v| forget_job_ids(v) | found),
        _ => false,
    }
}
