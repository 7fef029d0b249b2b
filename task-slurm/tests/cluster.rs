//! Against a real Slurm cluster: the private one `.ci/slurm.sh start` runs (it exports
//! `SLURM_CONF` and `TASKS_TEST_SLURM=1`). Without them the tests are skipped with a message,
//! except under CI (`CI` set), where that is a failure.
//!
//! Every job a test submits is cancelled when the test ends ([`Jobs`], even on a panic), and
//! the test waits until Slurm has no process of them left. Each test works in its own
//! temporary directory, removed at the end.
//!
//! The node has few CPUs (the machine's) and the tests run in parallel, so a job may wait a
//! moment for a CPU: every wait is on a condition, with a deadline. The one test that must
//! occupy the whole node takes [`NODE`] exclusively; the others share it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use task_slurm::{
    Error, JobId, JobInfo, JobName, JobSpec, JobState, PendingReason, Phase, RecordedExit, Slurm,
    SlurmConfig, StartCheck, read_exit_status,
};
use tokio::sync::RwLock;

/// How long a job may take to reach a state it is headed for (a loaded CI machine included).
const DEADLINE: Duration = Duration::from_secs(90);
/// Between two looks at a job or a file.
const POLL: Duration = Duration::from_millis(100);

/// Shared by the tests whose jobs take one CPU at a time, taken alone by the test that fills
/// the node.
static NODE: RwLock<()> = RwLock::const_new(());

/// The cluster's client, or `None` (with a message) when no cluster is configured.
fn cluster() -> Option<Slurm> {
    let configured =
        std::env::var_os("SLURM_CONF").is_some() && std::env::var_os("TASKS_TEST_SLURM").is_some();
    if !configured {
        assert!(
            std::env::var_os("CI").is_none(),
            "SLURM_CONF / TASKS_TEST_SLURM are not set under CI: start the cluster with \
             eval \"$(.ci/slurm.sh start)\""
        );
        eprintln!(
            "skipped: no Slurm cluster (SLURM_CONF and TASKS_TEST_SLURM unset; start one with \
             eval \"$(.ci/slurm.sh start)\")"
        );
        return None;
    }
    let mut config = SlurmConfig::from_env().unwrap();
    config.poll_interval = POLL;
    Some(Slurm::new(config))
}

/// The jobs a test submitted: cancelled (and waited for) on drop.
struct Jobs {
    slurm: Slurm,
    dir: tempfile::TempDir,
    test: &'static str,
    ids: Mutex<Vec<JobId>>,
}

impl Jobs {
    fn new(slurm: Slurm, test: &'static str) -> Self {
        Self {
            slurm,
            dir: tempfile::tempdir().unwrap(),
            test,
            ids: Mutex::new(Vec::new()),
        }
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A name unique to this test run.
    fn name(&self, what: &str) -> JobName {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        JobName::new(&format!(
            "tasks-test-{}-{}-{what}-{n}",
            std::process::id(),
            self.test
        ))
        .unwrap()
    }

    /// A job running `script` with `sh -c` in the test's directory, its output in
    /// `NAME.out` there, with `PATH` as its whole environment.
    fn spec(&self, what: &str, script: &str) -> JobSpec {
        let name = self.name(what);
        let output = self.dir().join(format!("{name}.out"));
        JobSpec::shell(name, script, self.dir(), output)
            .with_env("PATH", std::env::var("PATH").unwrap())
    }

    async fn submit(&self, spec: &JobSpec) -> JobId {
        let id = self.slurm.submit(spec).await.unwrap();
        self.ids.lock().unwrap().push(id);
        id
    }

    /// Waits until job `id` is in a state `accept` takes, and returns it.
    async fn wait(&self, id: JobId, what: &str, accept: impl Fn(&JobInfo) -> bool) -> JobInfo {
        let last = Mutex::new(None);
        let found = self
            .slurm
            .wait_for(id, DEADLINE, |job| {
                *last.lock().unwrap() = job.cloned();
                job.is_some_and(&accept)
            })
            .await;
        match found {
            Ok(job) => job.unwrap(),
            Err(e) => panic!(
                "job {id}: not {what}: {e}; last seen: {:?}",
                last.lock().unwrap()
            ),
        }
    }

    /// Waits until job `id` has ended (completed, failed or killed).
    async fn wait_end(&self, id: JobId) -> JobInfo {
        self.wait(id, "ended", |job| job.phase().is_terminal())
            .await
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let ids: Vec<String> = self
            .ids
            .lock()
            .map(|ids| ids.iter().map(JobId::to_string).collect())
            .unwrap_or_default();
        if ids.is_empty() {
            return;
        }
        // Synchronous: a test's runtime may be gone by now.
        let status = std::process::Command::new("scancel").args(&ids).status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("scancel {ids:?}: {status:?}");
        }
        // Until none of them runs any more (Slurm has killed their processes).
        let deadline = Instant::now() + DEADLINE;
        let jobs = format!("--jobs={}", ids.join(","));
        loop {
            let out = std::process::Command::new("squeue")
                .args(["--noheader", "--states=all", "--format=%T", &jobs])
                .output();
            let busy = match &out {
                Ok(o) => String::from_utf8_lossy(&o.stdout).lines().any(|s| {
                    matches!(
                        s.trim(),
                        "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING"
                    )
                }),
                Err(_) => false,
            };
            if !busy {
                break;
            }
            if Instant::now() >= deadline {
                eprintln!("jobs {ids:?} still there after {DEADLINE:?}");
                break;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Polls `f` until it gives a value, panicking after [`DEADLINE`].
async fn poll_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(POLL).await;
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn read_pid(path: &Path) -> Option<u32> {
    read(path).trim().parse().ok()
}

fn in_proc(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A script that waits until the file `gate` exists (created by the test), then runs `then`.
fn gated(gate: &Path, then: &str) -> String {
    format!(
        "while [ ! -e '{}' ]; do sleep 0.1; done; {then}",
        gate.display()
    )
}

#[tokio::test]
async fn a_job_that_succeeds_is_completed_with_its_output_and_exit_file() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "ok");
    // A `%` in the output path is taken literally (not as Slurm's `%j`).
    let name = jobs.name("ok");
    let output = jobs.dir().join(format!("{name}-100%j.out"));
    let spec = JobSpec::shell(
        name.clone(),
        "echo to-stdout; echo to-stderr >&2; pwd",
        jobs.dir(),
        &output,
    )
    .with_env("PATH", std::env::var("PATH").unwrap());
    let id = jobs.submit(&spec).await;

    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Completed, "{job:?}");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.exit_code, Some(0));
    assert_eq!(job.name, name.as_str());
    assert_eq!(
        spec.files().exit_status().await.unwrap(),
        RecordedExit::Code { code: 0 }
    );
    let marker = spec.files().start_marker().await.unwrap().unwrap();
    assert_eq!(marker.job_id, Some(id));
    assert!(marker.node.is_some() && marker.pid.is_some(), "{marker:?}");
    let out = read(&output);
    assert_eq!(
        out,
        format!("to-stdout\nto-stderr\n{}\n", jobs.dir().display()),
        "stdout and stderr in one file, in the job's working directory"
    );
}

#[tokio::test]
async fn a_job_that_exits_3_fails_with_exit_code_3() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "exit3");
    let spec = jobs.spec("exit3", "echo failing; exit 3");
    let id = jobs.submit(&spec).await;

    let job = jobs.wait_end(id).await;
    assert_eq!(
        job.phase(),
        Phase::Failed {
            state: JobState::Failed,
            exit_code: Some(3),
            signal: None
        },
        "{job:?}"
    );
    assert_eq!(job.reason.as_deref(), Some("NonZeroExitCode"));
    assert_eq!(
        spec.files().exit_status().await.unwrap(),
        RecordedExit::Code { code: 3 }
    );
    assert_eq!(read(&spec.output), "failing\n");
}

#[tokio::test]
async fn a_cancelled_job_is_killed_and_its_processes_are_gone() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "cancel");
    let d = jobs.dir().display().to_string();
    // The command's shell and a background child of it, each writing its pid.
    let script = format!("echo $$ > '{d}/shell.pid'; sleep 600 & echo $! > '{d}/child.pid'; wait");
    let spec = jobs.spec("cancel", &script);
    let id = jobs.submit(&spec).await;

    let dir = jobs.dir().to_owned();
    let (shell, child) = poll_until("both pid files", || {
        Some((
            read_pid(&dir.join("shell.pid"))?,
            read_pid(&dir.join("child.pid"))?,
        ))
    })
    .await;
    assert!(in_proc(shell) && in_proc(child));
    let running = jobs.slurm.job(id).await.unwrap().unwrap();
    assert_eq!(running.phase(), Phase::Running, "{running:?}");
    let StartCheck::Started(marker) = spec
        .files()
        .check_started(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap()
    else {
        panic!("no start marker of a running job")
    };
    assert_eq!(marker.job_id, Some(id));

    jobs.slurm.cancel(id).await.unwrap();
    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Killed, "{job:?}");
    assert_eq!(job.state, JobState::Cancelled);
    // Slurm reports the job ended once its step is gone: its processes are gone then too.
    poll_until("the job's processes gone from /proc", || {
        (!in_proc(shell) && !in_proc(child)).then_some(())
    })
    .await;
    // The wrapper outlived the SIGTERM and recorded how the command ended (128 + 15).
    assert_eq!(
        spec.files().exit_status().await.unwrap(),
        RecordedExit::Code { code: 143 }
    );
    // Cancelling again, or a job Slurm does not know, is not an error.
    jobs.slurm.cancel(id).await.unwrap();
}

#[tokio::test]
async fn output_grows_while_the_job_runs() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "grow");
    let gate = jobs.dir().join("go");
    let spec = jobs.spec(
        "grow",
        &format!("echo first; {}", gated(&gate, "echo second")),
    );
    let id = jobs.submit(&spec).await;

    let output = spec.output.clone();
    poll_until("the first line", || {
        (read(&output) == "first\n").then_some(())
    })
    .await;
    assert_eq!(
        jobs.slurm.job(id).await.unwrap().unwrap().phase(),
        Phase::Running
    );
    std::fs::write(&gate, "").unwrap();
    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Completed, "{job:?}");
    assert_eq!(read(&output), "first\nsecond\n");
}

#[tokio::test]
async fn a_job_asking_for_more_cpus_than_any_node_has_pends_until_cancelled() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "toobig");
    let cpus = node_cpus();
    let spec = jobs
        .spec("toobig", "echo never")
        .with_cpus_per_task(cpus + 1);
    let id = jobs.submit(&spec).await;

    let job = jobs
        .wait(id, "pending with a reason", |job| {
            matches!(job.phase(), Phase::Pending { reason: Some(_) })
        })
        .await;
    // Slurm 22.05 accepts the job and leaves it pending for the partition's configuration.
    let Phase::Pending {
        reason: Some(reason),
    } = job.phase()
    else {
        unreachable!()
    };
    assert_eq!(reason, PendingReason::PartitionConfig, "{job:?}");
    assert!(reason.never_starts_by_itself());

    jobs.slurm.cancel(id).await.unwrap();
    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Killed);
    assert_eq!(job.exit_code, None, "it never ran: {job:?}");
    assert_eq!(
        spec.files().exit_status().await.unwrap(),
        RecordedExit::Unknown
    );
    assert!(!spec.output.exists());
}

#[tokio::test]
async fn a_job_waiting_for_busy_cpus_pends_for_resources() {
    let Some(slurm) = cluster() else { return };
    // This test fills the node: alone.
    let _node = NODE.write().await;
    let jobs = Jobs::new(slurm, "busy");
    let gate = jobs.dir().join("go");
    let blocker = jobs
        .spec("blocker", &gated(&gate, "true"))
        .with_cpus_per_task(node_cpus());
    let blocker_id = jobs.submit(&blocker).await;
    jobs.wait(blocker_id, "running", |job| job.phase() == Phase::Running)
        .await;

    let waiter = jobs.spec("waiter", "echo ran");
    let id = jobs.submit(&waiter).await;
    let job = jobs
        .wait(id, "pending with a reason", |job| {
            matches!(job.phase(), Phase::Pending { reason: Some(_) })
        })
        .await;
    assert_eq!(
        job.phase(),
        Phase::Pending {
            reason: Some(PendingReason::Resources)
        },
        "{job:?}"
    );

    // Once the CPUs are free, it runs.
    std::fs::write(&gate, "").unwrap();
    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Completed, "{job:?}");
    assert_eq!(read(&waiter.output), "ran\n");
}

#[tokio::test]
async fn an_afterok_dependent_runs_after_its_dependency_succeeds() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "dep-ok");
    let gate = jobs.dir().join("go");
    let first = jobs.spec("first", &gated(&gate, "echo first"));
    let first_id = jobs.submit(&first).await;
    let then = jobs.spec("then", "echo then").with_after_ok(first_id);
    let then_id = jobs.submit(&then).await;

    let job = jobs
        .wait(then_id, "pending on its dependency", |job| {
            matches!(job.phase(), Phase::Pending { reason: Some(_) })
        })
        .await;
    assert_eq!(
        job.phase(),
        Phase::Pending {
            reason: Some(PendingReason::Dependency)
        },
        "{job:?}"
    );
    assert_eq!(
        job.dependency.as_deref(),
        Some(format!("afterok:{first_id}(unfulfilled)").as_str())
    );

    std::fs::write(&gate, "").unwrap();
    let job = jobs.wait_end(then_id).await;
    assert_eq!(job.phase(), Phase::Completed, "{job:?}");
    assert_eq!(read(&then.output), "then\n");
    assert_eq!(
        jobs.slurm.job(first_id).await.unwrap().unwrap().phase(),
        Phase::Completed
    );
}

#[tokio::test]
async fn an_afterok_dependent_of_a_failed_job_pends_for_ever_as_never_satisfied() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "dep-fail");
    let gate = jobs.dir().join("go");
    let first = jobs.spec("first", &gated(&gate, "exit 1"));
    let first_id = jobs.submit(&first).await;
    let then = jobs.spec("then", "echo then").with_after_ok(first_id);
    let then_id = jobs.submit(&then).await;
    std::fs::write(&gate, "").unwrap();

    let failed = jobs.wait_end(first_id).await;
    assert!(matches!(
        failed.phase(),
        Phase::Failed {
            exit_code: Some(1),
            ..
        }
    ));
    let job = jobs
        .wait(
            then_id,
            "never satisfied",
            JobInfo::dependency_never_satisfied,
        )
        .await;
    // Slurm 22.05 (without `kill_invalid_depend`) neither runs nor cancels it.
    assert_eq!(
        job.phase(),
        Phase::Pending {
            reason: Some(PendingReason::DependencyNeverSatisfied)
        },
        "{job:?}"
    );
    assert_eq!(
        job.dependency.as_deref(),
        Some(format!("afterok:{first_id}(failed)").as_str())
    );
    assert!(job.phase() != Phase::Running);

    jobs.slurm.cancel(then_id).await.unwrap();
    let job = jobs.wait_end(then_id).await;
    assert_eq!(job.phase(), Phase::Killed);
    assert!(job.dependency_never_satisfied(), "{job:?}");
    assert!(!then.output.exists(), "the dependent never ran");
}

#[tokio::test]
async fn a_dependency_slurm_does_not_know_is_refused() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "dep-unknown");
    // Slurm would take it as satisfied and run the job at once.
    let unknown = JobId(67_000_000);
    let spec = jobs.spec("then", "echo then").with_after_ok(unknown);
    match jobs.slurm.submit(&spec).await {
        Err(Error::UnknownDependency(id)) => assert_eq!(id, unknown),
        other => panic!("{other:?}"),
    }
    assert!(jobs.slurm.find_by_name(&spec.name).await.unwrap().is_none());
}

#[tokio::test]
async fn find_by_name_finds_the_newest_job_of_that_name() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "find");
    let gate = jobs.dir().join("go");
    let spec = jobs.spec("find", &gated(&gate, "true"));
    assert!(jobs.slurm.find_by_name(&spec.name).await.unwrap().is_none());
    let first = jobs.submit(&spec).await;
    let found = jobs.slurm.find_by_name(&spec.name).await.unwrap().unwrap();
    assert_eq!(found.id, first);
    assert_eq!(found.name, spec.name.as_str());

    // A second job of the same name (a resubmission): the newest is the one found.
    let second = jobs.submit(&spec).await;
    let found = jobs.slurm.find_by_name(&spec.name).await.unwrap().unwrap();
    assert_eq!(found.id, second);

    let other = jobs.name("never-submitted");
    assert!(jobs.slurm.find_by_name(&other).await.unwrap().is_none());
    std::fs::write(&gate, "").unwrap();
}

#[tokio::test]
async fn a_job_slurm_has_forgotten_is_known_by_its_exit_file() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "aged");
    let spec = jobs.spec("aged", "exit 7");
    let id = jobs.submit(&spec).await;
    jobs.wait_end(id).await;

    // MinJobAge (10 s on the test cluster) later, slurmctld drops the job.
    let min_job_age: u64 = std::env::var("TASKS_TEST_SLURM_MIN_JOB_AGE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let forgotten = jobs
        .slurm
        .wait_for(id, DEADLINE + Duration::from_secs(min_job_age), |job| {
            job.is_none()
        })
        .await
        .unwrap();
    assert!(forgotten.is_none());
    assert!(jobs.slurm.find_by_name(&spec.name).await.unwrap().is_none());
    assert_eq!(
        read_exit_status(&spec.files().exit).await.unwrap(),
        RecordedExit::Code { code: 7 }
    );
}

#[tokio::test]
async fn the_job_gets_exactly_the_environment_it_was_given() {
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm, "env");
    let env_file = jobs.dir().join("env");
    let value = "two words\nand a 'quoted' line $HOME";
    let spec = jobs
        .spec("env", &format!("env -0 > '{}'", env_file.display()))
        .with_env("TASKS_SLURM_TEST_VALUE", value);
    let id = jobs.submit(&spec).await;
    let job = jobs.wait_end(id).await;
    assert_eq!(job.phase(), Phase::Completed, "{job:?}");

    let text = read(&env_file);
    let vars: Vec<(&str, &str)> = text
        .split('\0')
        .filter(|v| !v.is_empty())
        .map(|v| v.split_once('=').unwrap())
        .collect();
    assert!(
        vars.contains(&("TASKS_SLURM_TEST_VALUE", value)),
        "{vars:?}"
    );
    // What Slurm and the shell add to every job.
    let added = |name: &str| {
        name.starts_with("SLURM")
            || matches!(
                name,
                "HOSTNAME" | "ENVIRONMENT" | "TMPDIR" | "PWD" | "SHLVL" | "_"
            )
    };
    let names: Vec<&str> = vars.iter().map(|(n, _)| *n).filter(|n| !added(n)).collect();
    assert_eq!(
        names
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        ["PATH", "TASKS_SLURM_TEST_VALUE"].into_iter().collect(),
        "nothing of the test process's own environment: {vars:?}"
    );
}

/// The node's CPUs (`.ci/slurm.sh` exports them; the node is this machine).
fn node_cpus() -> u32 {
    std::env::var("TASKS_TEST_SLURM_CPUS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1)
        })
}

/// However many follow jobs through one [`JobPoller`], a round runs one `squeue` for all of
/// them (counted by a `squeue` in the configured `bin_dir` that logs its arguments and runs
/// the real one), and a job Slurm does not know is answered `None`.
#[tokio::test]
async fn a_poller_answers_every_follower_with_one_squeue_a_round() {
    use std::os::unix::fs::PermissionsExt;
    let Some(slurm) = cluster() else { return };
    let _node = NODE.read().await;
    let jobs = Jobs::new(slurm.clone(), "poller");
    let bin = jobs.dir().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let real = |command: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {command}")])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let log = jobs.dir().join("squeue.log");
    let squeue = bin.join("squeue");
    std::fs::write(
        &squeue,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real("squeue")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&squeue, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = slurm.config().clone();
    config.bin_dir = Some(bin);
    let poller = task_slurm::JobPoller::new(Slurm::new(config));

    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(jobs.submit(&jobs.spec(&format!("p{n}"), "true")).await);
    }
    let unknown: JobId = "999999".parse().unwrap();
    let mut rounds = 0;
    let deadline = Instant::now() + DEADLINE;
    loop {
        rounds += 1;
        let mut asking = tokio::task::JoinSet::new();
        for id in ids.iter().copied().chain([unknown]) {
            let poller = poller.clone();
            asking.spawn(async move { (id, poller.job(id).await.unwrap()) });
        }
        let mut ended = 0;
        while let Some(answer) = asking.join_next().await {
            let (id, job) = answer.unwrap();
            match job {
                None => assert_eq!(id, unknown, "a submitted job unknown to Slurm"),
                Some(job) => {
                    assert_eq!(job.id, id);
                    ended += usize::from(job.phase().is_terminal());
                }
            }
        }
        if ended == ids.len() {
            break;
        }
        assert!(Instant::now() < deadline, "the jobs did not end");
    }
    let lines: Vec<String> = read(&log).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), rounds, "one squeue a round: {lines:?}");
    let mut all: Vec<String> = ids.iter().chain([&unknown]).map(JobId::to_string).collect();
    all.sort();
    for line in &lines {
        let mut asked: Vec<String> = line
            .split_whitespace()
            .find_map(|arg| arg.strip_prefix("--jobs="))
            .unwrap_or_else(|| panic!("no --jobs in {line}"))
            .split(',')
            .map(str::to_owned)
            .collect();
        asked.sort();
        assert_eq!(asked, all, "{line}");
    }
}
