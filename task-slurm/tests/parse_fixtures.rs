//! The parsers on outputs captured from a real Slurm 22.05 cluster (`tests/fixtures/`, made by
//! `tests/fixtures/capture.sh`). The jobs' ids change with each capture: they are found by name.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use task_slurm::parse::{is_unknown_job, parse_sbatch_parsable, parse_squeue, squeue_format};
use task_slurm::{JobId, JobInfo, JobState, PendingReason, Phase};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn by_name<'a>(jobs: &'a [JobInfo], name: &str) -> &'a JobInfo {
    jobs.iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("no job {name} in {jobs:#?}"))
}

#[test]
fn the_capture_used_the_crate_s_format() {
    assert_eq!(fixture("squeue-format.txt").trim_end(), squeue_format());
}

#[test]
fn sbatch_parsable_gives_the_job_id() {
    let text = fixture("sbatch-parsable.txt");
    let id = parse_sbatch_parsable(&text).unwrap();
    assert_eq!(id.to_string(), text.trim());
}

#[test]
fn every_state_of_the_capture_maps_to_its_phase() {
    let jobs = parse_squeue(&fixture("squeue-states.txt")).unwrap();
    assert_eq!(jobs.len(), 12, "{jobs:#?}");

    let completed = by_name(&jobs, "fx-completed");
    assert_eq!(completed.state, JobState::Completed);
    assert_eq!(completed.phase(), Phase::Completed);
    assert_eq!((completed.exit_code, completed.signal), (Some(0), None));
    assert_eq!(completed.nodes.as_deref(), Some("vm"));

    let exit3 = by_name(&jobs, "fx-exit3");
    assert_eq!(
        exit3.phase(),
        Phase::Failed {
            state: JobState::Failed,
            exit_code: Some(3),
            signal: None
        }
    );
    assert_eq!(exit3.reason.as_deref(), Some("NonZeroExitCode"));

    // A batch shell killed by scancel's SIGTERM (no wrapper to record it).
    let signalled = by_name(&jobs, "fx-signalled");
    assert_eq!(signalled.phase(), Phase::Killed);
    assert_eq!((signalled.exit_code, signalled.signal), (None, Some(15)));

    // Cancelled before it ran: no node, no exit code.
    let never_ran = by_name(&jobs, "fx-cancelled-pending");
    assert_eq!(never_ran.phase(), Phase::Killed);
    assert_eq!((never_ran.exit_code, never_ran.signal), (None, None));
    assert_eq!(never_ran.nodes, None);

    for name in ["fx-running", "fx-failing"] {
        let job = by_name(&jobs, name);
        assert_eq!(job.phase(), Phase::Running, "{job:?}");
        assert_eq!((job.exit_code, job.reason.as_deref()), (None, None));
    }

    let pending = |name: &str, reason: PendingReason| {
        let job = by_name(&jobs, name);
        assert_eq!(
            job.phase(),
            Phase::Pending {
                reason: Some(reason)
            },
            "{job:?}"
        );
        assert_eq!(job.exit_code, None);
        assert_eq!(job.nodes, None);
        job
    };
    pending("fx-resources", PendingReason::Resources);
    let toobig = pending("fx-toobig", PendingReason::PartitionConfig);
    assert!(toobig.phase() != Phase::Running);
    pending("fx-held", PendingReason::HeldByUser);
    let dependent = pending("fx-dependent-ok", PendingReason::Dependency);
    let running = by_name(&jobs, "fx-running").id;
    assert_eq!(
        dependent.dependency.as_deref(),
        Some(format!("afterok:{running}(unfulfilled)").as_str())
    );
    assert!(!dependent.dependency_never_satisfied());
}

#[test]
fn the_dependent_of_a_failed_job_is_never_satisfied() {
    let jobs = parse_squeue(&fixture("squeue-never-satisfied.txt")).unwrap();
    let failing = by_name(&jobs, "fx-failing");
    assert_eq!(
        failing.phase(),
        Phase::Failed {
            state: JobState::Failed,
            exit_code: Some(1),
            signal: None
        }
    );
    let dependent = by_name(&jobs, "fx-dependent");
    assert_eq!(
        dependent.phase(),
        Phase::Pending {
            reason: Some(PendingReason::DependencyNeverSatisfied)
        }
    );
    assert!(dependent.dependency_never_satisfied());
    assert_eq!(
        dependent.dependency.as_deref(),
        Some(format!("afterok:{}(failed)", failing.id).as_str())
    );
}

#[test]
fn an_unknown_job_is_recognised_in_squeue_s_stderr() {
    assert!(is_unknown_job(&fixture("squeue-unknown-job.stderr")));
    assert!(!is_unknown_job(
        "squeue: error: Unable to contact slurm controller"
    ));
}

#[test]
fn infos_round_trip_through_json() {
    let jobs = parse_squeue(&fixture("squeue-states.txt")).unwrap();
    let text = serde_json::to_string(&jobs).unwrap();
    let back: Vec<JobInfo> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, jobs);
    let phase = by_name(&jobs, "fx-exit3").phase();
    let json = serde_json::to_value(&phase).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"phase": "failed", "state": "FAILED", "exit_code": 3, "signal": null})
    );
    assert_eq!(serde_json::from_value::<Phase>(json).unwrap(), phase);
    assert_eq!(serde_json::to_string(&JobId(7)).unwrap(), "7");
}
