//! Pure parsers of Slurm's outputs and of the files a job writes (unit-tested on outputs
//! captured from a real Slurm 22.05 cluster, under `tests/fixtures/`).

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job::{JobInfo, JobState};

/// The separator ending every `squeue --Format` field: the ASCII unit separator, which no job
/// name, reason or node list carries.
pub const FIELD_END: char = '\x1f';

/// The `squeue --Format` fields, in the order [`parse_squeue`] reads them.
pub const SQUEUE_FIELDS: [&str; 7] = [
    "JobID",
    "State",
    "exit_code",
    "Reason",
    "NodeList",
    "Dependency",
    "Name",
];

/// The `--Format=` value for `squeue`: each field with [`FIELD_END`] as its suffix (and so no
/// width: nothing is truncated or padded).
pub fn squeue_format() -> String {
    SQUEUE_FIELDS
        .iter()
        .map(|field| format!("{field}:{FIELD_END}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The job id in `sbatch --parsable`'s output (`ID` or `ID;CLUSTER`, then a newline).
///
/// # Errors
///
/// [`Error::Parse`] when the first line is not a job id.
pub fn parse_sbatch_parsable(stdout: &str) -> Result<JobId> {
    let line = stdout.lines().map(str::trim).find(|l| !l.is_empty());
    let Some(line) = line else {
        return Err(Error::Parse {
            command: "sbatch",
            detail: "no job id on stdout".to_owned(),
        });
    };
    let id = line.split(';').next().unwrap_or(line);
    id.parse::<JobId>().map_err(|_| Error::Parse {
        command: "sbatch",
        detail: format!("{line:?} is not a job id"),
    })
}

/// Whether a Slurm command's stderr says the job id it was given is unknown to slurmctld
/// (`slurm_load_jobs error: Invalid job id specified`): never submitted, or ended and aged
/// out (`MinJobAge`).
pub fn is_unknown_job(stderr: &str) -> bool {
    stderr.contains("Invalid job id specified")
}

/// Splits Slurm's wait status of the batch script (`squeue`'s `exit_code`, a `wait(2)`
/// status) into the exit code and the signal: exactly one of them is `Some`.
pub fn decode_wait_status(raw: u32) -> (Option<i32>, Option<i32>) {
    let signal = (raw & 0x7f) as i32;
    if signal != 0 {
        (None, Some(signal))
    } else {
        (Some(((raw >> 8) & 0xff) as i32), None)
    }
}

fn optional(field: &str) -> Option<String> {
    match field.trim() {
        "" | "(null)" | "None" | "N/A" => None,
        value => Some(value.to_owned()),
    }
}

/// The jobs in the output of `squeue --noheader --Format=`[`squeue_format`]`()`, one a line.
///
/// The exit code and signal are filled in only for a job that ended ([`JobState::is_terminal`])
/// after it had a node: a pending job cancelled before it started has neither.
///
/// # Errors
///
/// [`Error::Parse`] when a line does not hold the seven fields or a job id or exit status is
/// not a number.
pub fn parse_squeue(stdout: &str) -> Result<Vec<JobInfo>> {
    let mut jobs = Vec::new();
    for line in stdout.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(FIELD_END).collect();
        // Seven fields, each ended by the separator: eight pieces, the last one blank.
        if fields.len() != SQUEUE_FIELDS.len() + 1 || !fields[SQUEUE_FIELDS.len()].trim().is_empty()
        {
            return Err(Error::Parse {
                command: "squeue",
                detail: format!(
                    "expected {} fields, got {} in {line:?}",
                    SQUEUE_FIELDS.len(),
                    fields.len().saturating_sub(1)
                ),
            });
        }
        let id: JobId = fields[0].parse().map_err(|_| Error::Parse {
            command: "squeue",
            detail: format!("job id {:?} in {line:?}", fields[0]),
        })?;
        let state = JobState::parse(fields[1]);
        let raw: u32 = fields[2].trim().parse().map_err(|_| Error::Parse {
            command: "squeue",
            detail: format!("exit code {:?} in {line:?}", fields[2]),
        })?;
        let nodes = optional(fields[4]);
        let (exit_code, signal) = if state.is_terminal() && nodes.is_some() {
            decode_wait_status(raw)
        } else {
            (None, None)
        };
        jobs.push(JobInfo {
            id,
            name: fields[6].to_owned(),
            state,
            reason: optional(fields[3]),
            exit_code,
            signal,
            nodes,
            dependency: optional(fields[5]),
        });
    }
    Ok(jobs)
}

/// The exit status in a job's exit status file (one decimal number and a newline, as the
/// job's wrapper writes it); `None` when the content is anything else.
pub fn parse_exit_status(content: &str) -> Option<i32> {
    let value = content.strip_suffix('\n').unwrap_or(content);
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// What a job's start marker says: written by the job's wrapper when the job starts, on its
/// node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartMarker {
    /// `SLURM_JOB_ID` on the node.
    pub job_id: Option<JobId>,
    /// `SLURMD_NODENAME`: the node the job runs on.
    pub node: Option<String>,
    /// The wrapper's pid on that node.
    pub pid: Option<u32>,
}

/// Parses a start marker (`JOB_ID NODE PID`, a newline; any field may be missing). Never
/// fails: its presence is what matters, its fields are for diagnostics.
pub fn parse_start_marker(content: &str) -> StartMarker {
    let mut words = content.split_whitespace();
    let job_id = words.next().and_then(|w| w.parse().ok());
    let node = words.next().map(str::to_owned);
    let pid = words.next().and_then(|w| w.parse().ok());
    StartMarker { job_id, node, pid }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn wait_statuses_split_into_code_or_signal() {
        assert_eq!(decode_wait_status(0), (Some(0), None));
        assert_eq!(decode_wait_status(768), (Some(3), None));
        assert_eq!(decode_wait_status(36608), (Some(143), None));
        assert_eq!(decode_wait_status(15), (None, Some(15)));
        assert_eq!(decode_wait_status(9 | 0x80), (None, Some(9)));
    }

    #[test]
    fn sbatch_ids_with_and_without_a_cluster() {
        assert_eq!(parse_sbatch_parsable("42\n").unwrap(), JobId(42));
        assert_eq!(parse_sbatch_parsable("42;tasks-test\n").unwrap(), JobId(42));
        assert!(parse_sbatch_parsable("").is_err());
        assert!(parse_sbatch_parsable("Submitted batch job 42\n").is_err());
    }

    #[test]
    fn exit_status_files_hold_one_number() {
        assert_eq!(parse_exit_status("0\n"), Some(0));
        assert_eq!(parse_exit_status("143\n"), Some(143));
        assert_eq!(parse_exit_status("3"), Some(3));
        assert_eq!(parse_exit_status(""), None);
        assert_eq!(parse_exit_status("\n"), None);
        assert_eq!(parse_exit_status("-1\n"), None);
        assert_eq!(parse_exit_status("3\n4\n"), None);
        assert_eq!(parse_exit_status("99999999999999\n"), None);
    }

    #[test]
    fn start_markers_tolerate_missing_fields() {
        let m = parse_start_marker("17 vm 4242\n");
        assert_eq!(m.job_id, Some(JobId(17)));
        assert_eq!(m.node.as_deref(), Some("vm"));
        assert_eq!(m.pid, Some(4242));
        assert_eq!(
            parse_start_marker(""),
            StartMarker {
                job_id: None,
                node: None,
                pid: None
            }
        );
    }

    #[test]
    fn short_lines_are_errors_not_panics() {
        assert!(parse_squeue("1\x1fRUNNING\x1f").is_err());
        assert!(parse_squeue("x\x1fRUNNING\x1f0\x1fNone\x1fvm\x1f(null)\x1fa\x1f").is_err());
        assert!(parse_squeue("1\x1fRUNNING\x1fx\x1fNone\x1fvm\x1f(null)\x1fa\x1f").is_err());
        assert!(parse_squeue("").unwrap().is_empty());
    }

    #[test]
    fn the_format_gives_every_field_the_separator() {
        assert_eq!(
            squeue_format(),
            "JobID:\x1f,State:\x1f,exit_code:\x1f,Reason:\x1f,NodeList:\x1f,Dependency:\x1f,Name:\x1f"
        );
    }
}
