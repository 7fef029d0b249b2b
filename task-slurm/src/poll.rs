//! [`JobPoller`]: one `squeue` per poll interval for every job followed through it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::error::{Error, Result};
use crate::id::JobId;
use crate::job::JobInfo;
use crate::slurm::Slurm;

/// Looks at many jobs with one `squeue` a poll interval ([`SlurmConfig::poll_interval`]),
/// however many callers follow them: a caller asks for its job ([`JobPoller::job`]) and is
/// answered by the next round, which looks at every job asked for since the one before,
/// together ([`Slurm::jobs`]). A round with nothing asked runs no command.
///
/// A supervisor following a hundred jobs so runs one `squeue` a poll instead of a hundred.
/// The price: an answer waits for the next round, up to one poll interval.
///
/// The rounds run on a tokio task started by the first question (on that caller's runtime)
/// and ended once every clone of the poller is dropped.
///
/// [`SlurmConfig::poll_interval`]: crate::SlurmConfig::poll_interval
#[derive(Clone, Debug)]
pub struct JobPoller {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    slurm: Slurm,
    /// The jobs asked for since the last round began.
    asked: Mutex<HashSet<JobId>>,
    /// The latest round.
    rounds: watch::Sender<Arc<Round>>,
    /// Starts the rounds' task once.
    started: std::sync::Once,
}

/// What one round found.
#[derive(Debug)]
struct Round {
    /// Its number (the first round is 1).
    number: u64,
    /// The jobs it looked at.
    asked: HashSet<JobId>,
    /// The ones Slurm knows, or why the look failed.
    found: std::result::Result<HashMap<JobId, JobInfo>, String>,
}

impl Default for Round {
    fn default() -> Self {
        Self {
            number: 0,
            asked: HashSet::new(),
            found: Ok(HashMap::new()),
        }
    }
}

impl JobPoller {
    /// A poller running `slurm`'s commands, a round every
    /// [`poll_interval`](crate::SlurmConfig::poll_interval) of its configuration.
    pub fn new(slurm: Slurm) -> Self {
        Self {
            inner: Arc::new(Inner {
                slurm,
                asked: Mutex::default(),
                rounds: watch::channel(Arc::new(Round::default())).0,
                started: std::sync::Once::new(),
            }),
        }
    }

    /// The client it runs.
    pub fn slurm(&self) -> &Slurm {
        &self.inner.slurm
    }

    /// Job `id` as the next round finds it: `None` when Slurm does not know it (as
    /// [`Slurm::job`]). Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Poll`] with why the round's `squeue` failed.
    pub async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        self.start();
        let mut rounds = self.inner.rounds.subscribe();
        let before = rounds.borrow_and_update().number;
        lock(&self.inner.asked).insert(id);
        loop {
            if rounds.changed().await.is_err() {
                return Err(Error::Poll("the poller stopped".to_owned()));
            }
            let round = Arc::clone(&rounds.borrow_and_update());
            if round.number > before && round.asked.contains(&id) {
                return match &round.found {
                    Ok(jobs) => Ok(jobs.get(&id).cloned()),
                    Err(error) => Err(Error::Poll(error.clone())),
                };
            }
        }
    }

    /// Starts the rounds' task, once.
    fn start(&self) {
        self.inner.started.call_once(|| {
            tokio::spawn(rounds(Arc::downgrade(&self.inner)));
        });
    }
}

/// Runs a round every poll interval while the poller lives.
async fn rounds(poller: Weak<Inner>) {
    let Some(interval) = poller.upgrade().map(|p| p.slurm.config().poll_interval) else {
        return;
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut number = 0;
    loop {
        tick.tick().await;
        let Some(inner) = poller.upgrade() else {
            return;
        };
        let asked = std::mem::take(&mut *lock(&inner.asked));
        if asked.is_empty() {
            continue;
        }
        let ids: Vec<JobId> = asked.iter().copied().collect();
        let found = match inner.slurm.jobs(&ids).await {
            Ok(jobs) => Ok(jobs.into_iter().map(|job| (job.id, job)).collect()),
            Err(error) => Err(error.to_string()),
        };
        number += 1;
        tracing::trace!(
            round = number,
            jobs = ids.len(),
            "looked at the followed Slurm jobs"
        );
        inner.rounds.send_replace(Arc::new(Round {
            number,
            asked,
            found,
        }));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
