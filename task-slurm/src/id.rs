//! [`JobId`]: what names a job to Slurm.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A Slurm job id (what `sbatch --parsable` prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for JobId {
    type Err = std::num::ParseIntError;

    /// A decimal job id (surrounding whitespace ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().parse::<u64>().map(JobId)
    }
}
