//! The run of a `local_bash` task: one tokio task that waits for the process,
//! obeys kill and background requests, enforces the timeout and runs the watchdogs.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use task_core::process::Child;
use task_core::{EndReason, TaskId, TaskStatus};
use tokio::time::{Instant, MissedTickBehavior, Sleep, interval_at};

use crate::book::Book;
use crate::config::ShellConfig;
use crate::control::{
    Control, ControlReceiver, Controls, Outcome, OutcomePost, deadline, freeze_group, kill_and_reap,
};
use crate::growth::{Growth, Watches};
use crate::output::{append_line, output_size, output_tail};
use crate::process::{EXIT_KILLED, exit_code};
use crate::watchdog::{SizeCap, StallStep, StallWatchdog};

/// Why the supervision loop stopped.
#[derive(Debug)]
enum End {
    Exited(i32),
    Killed,
    TimedOut(Duration),
    OverCap(SizeCap),
}

/// Everything one run owns.
#[derive(Debug)]
pub(crate) struct ShellRun {
    pub(crate) id: TaskId,
    pub(crate) child: Child,
    pub(crate) pid: u32,
    pub(crate) output: PathBuf,
    pub(crate) timeout: Option<Duration>,
    pub(crate) backgrounded: bool,
    pub(crate) control: ControlReceiver,
    pub(crate) outcome: OutcomePost,
}

/// The stall and size watchdogs of one task, with their schedules.
///
/// Where its output is watched (inotify), a task is woken by its writes (each checked against
/// the size cap and noted by the stall watchdog) and by its stall watchdog when due: a task
/// that stays quiet costs one look in all (none if it wrote nothing). Elsewhere both poll, as
/// the reference does.
#[derive(Debug)]
struct Watchdogs {
    stall: StallWatchdog,
    /// When the stall watchdog looks next, while `stall_armed`.
    stall_check: Pin<Box<Sleep>>,
    /// Whether it has anything to look at: not once done, nor while watched output that it
    /// judged not a prompt has not grown.
    stall_armed: bool,
    size_cap: SizeCap,
    growth: Growth,
}

impl Watchdogs {
    fn new(config: &ShellConfig, watches: &Watches, output: &Path) -> Self {
        let now = Instant::now();
        let mut size_poll =
            interval_at(now + config.size_check_interval, config.size_check_interval);
        size_poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let growth = Growth::new(watches, output, size_poll);
        let mut stall = StallWatchdog::new(config.stall_threshold, now.into_std());
        stall.saw(output_size(output), now.into_std());
        let mut dogs = Self {
            stall,
            stall_check: Box::pin(tokio::time::sleep_until(now)),
            stall_armed: false,
            size_cap: SizeCap::new(config.size_cap_bytes),
            growth,
        };
        dogs.schedule_stall_check(config, now);
        dogs
    }

    /// Sets when the stall watchdog looks next: when it is due where writes are watched (they
    /// keep its quiet clock), one check interval on where they are polled; never while it has
    /// nothing to judge (done, or the output unchanged since its tail was judged: a growth,
    /// seen by the watch or the size poll, arms it again).
    fn schedule_stall_check(&mut self, config: &ShellConfig, now: Instant) {
        let next = match self.stall.due() {
            None => None,
            Some(due) if self.growth.is_watched() => Some(Instant::from_std(due)),
            Some(_) => Some(now + config.stall_check_interval),
        };
        self.stall_armed = next.is_some();
        if let Some(next) = next {
            self.stall_check.as_mut().reset(next);
        }
    }

    /// Feeds the output size seen after a wake of the growth watch; arms the stall watchdog
    /// again when that growth gives it something new to judge.
    fn saw_output(&mut self, size: u64, config: &ShellConfig) {
        if self.stall.saw(size, std::time::Instant::now()) && !self.stall_armed {
            self.schedule_stall_check(config, Instant::now());
        }
    }
}

impl ShellRun {
    /// Supervises the task until it ends, records the end and tells the waiting caller.
    ///
    /// A block, not an `async fn`: an `async fn` keeps its arguments twice in its state (as
    /// captured and as moved into its body), which every live task paid for (some 250 bytes).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice for the run's whole life"
    )]
    pub(crate) fn drive(
        mut self,
        book: Book,
        config: Arc<ShellConfig>,
        controls: Arc<Controls>,
        watches: Arc<Watches>,
    ) -> impl Future<Output = ()> + Send {
        async move {
            let end = self.run(&book, &config, &watches).await;
            controls.close(&self.id);
            let outcome = self.settle(&book, end);
            self.outcome.post(outcome);
        }
    }

    async fn run(&mut self, book: &Book, config: &ShellConfig, watches: &Watches) -> End {
        let mut dogs = Watchdogs::new(config, watches, &self.output);
        let timeout = deadline(self.timeout);
        tokio::pin!(timeout);
        loop {
            tokio::select! {
                status = self.child.wait() => {
                    return End::Exited(status.map_or(EXIT_KILLED, exit_code));
                }
                Some(control) = self.control.recv() => match control {
                    Control::Kill { done } => {
                        book.mark_killed(&self.id);
                        kill_and_reap(&mut self.child, self.pid, &self.id).await;
                        let _ = done.send(());
                        return End::Killed;
                    }
                    Control::Background => self.backgrounded = true,
                },
                () = &mut timeout => {
                    kill_and_reap(&mut self.child, self.pid, &self.id).await;
                    return End::TimedOut(self.timeout.unwrap_or_default());
                }
                () = &mut dogs.stall_check, if self.backgrounded && dogs.stall_armed => {
                    self.check_stall(book, config, &mut dogs.stall);
                    dogs.schedule_stall_check(config, Instant::now());
                }
                () = dogs.growth.next(), if self.backgrounded => {
                    let size = output_size(&self.output);
                    dogs.saw_output(size, config);
                    if dogs.size_cap.is_exceeded(size) {
                        // Stop the writers at once; the tree walk and the kill follow.
                        freeze_group(self.pid);
                        kill_and_reap(&mut self.child, self.pid, &self.id).await;
                        return End::OverCap(dogs.size_cap);
                    }
                }
            }
        }
    }

    /// One stall check: the tail judged once the output has been quiet for the threshold, and
    /// the stall notified if it looks like a prompt.
    fn check_stall(&self, book: &Book, config: &ShellConfig, stall: &mut StallWatchdog) {
        let size = output_size(&self.output);
        let now = std::time::Instant::now();
        if stall.observe(size, now) == StallStep::InspectTail {
            let tail = output_tail(&self.output, size, config.stall_tail_bytes);
            if stall.judge(&tail, now) {
                book.notify_stall(&self.id, tail.trim());
            }
        }
    }

    /// Records the end in the registry (exit mapping of SPEC §5) and builds the caller's outcome.
    fn settle(&self, book: &Book, end: End) -> Outcome {
        let reason = match end {
            End::Exited(code) => EndReason::Exited { code },
            End::Killed => EndReason::Killed,
            End::TimedOut(limit) => EndReason::timed_out(limit),
            End::OverCap(cap) => cap.end_reason(),
        };
        let message = reason.stderr_note();
        if let Some(message) = &message
            && let Err(error) = append_line(&self.output, message)
        {
            tracing::warn!(task = %self.id, %error, "could not append the end message");
        }
        let status = match end {
            End::Killed => TaskStatus::Killed,
            _ => book.finish_shell(&self.id, reason.clone()),
        };
        Outcome {
            status,
            exit_code: reason.exit_code().unwrap_or(EXIT_KILLED),
            message,
            reason,
        }
    }
}
