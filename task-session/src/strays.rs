//! What a task leaves running when it ends: its *strays* (task-core's
//! [`strays_of`](task_core::process::strays_of), found by the task's marker).
//!
//! When the supervisor writes a task's end, it looks for them once, under the task's policy
//! (`tasks run --strays`, else the session's `strays` setting, else [`StrayPolicy::Report`];
//! a session's `report` is [`StrayPolicy::Kill`] for an agent, a teammate or a dream, whose
//! tools' daemons die with it: [`task_core::TaskKind::kills_strays`]):
//! reported ones go into the task's record ([`TaskRecord::strays`](crate::record::TaskRecord))
//! and its completion says "left 2 processes running: 4121 `sleep 301`, …"; under
//! [`StrayPolicy::Kill`] they are killed there and then, and the completion says so. A task
//! killed on request has none (its kill took every process carrying its marker).
//! `tasks strays` lists the live ones, `tasks kill --strays` ends them: each is signalled only
//! while it is still the process that was found (same pid and start time, and the marker).

use task_core::TaskId;
use task_core::process::{Stray, kill_strays_of, strays_of};

pub use task_protocol::StrayPolicy;

/// What became of the strays of one end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Found {
    /// The processes found (none when not looked for).
    pub(crate) strays: Vec<Stray>,
    /// They were killed (under [`StrayPolicy::Kill`]).
    pub(crate) killed: bool,
}

impl Found {
    /// Looks for the strays of each task of `ended` (each just ended) and applies its policy to
    /// them: one look through `/proc` for every task reported, one per round of kills for
    /// every task whose strays are killed, however many tasks ended together. In the order of
    /// `ended`.
    pub(crate) fn at_ends(ended: &[(TaskId, StrayPolicy)]) -> Vec<Self> {
        let markers: Vec<String> = ended.iter().map(|(id, _)| id.to_string()).collect();
        let under = |wanted: StrayPolicy| -> Vec<&str> {
            ended
                .iter()
                .zip(&markers)
                .filter(|((_, policy), _)| *policy == wanted)
                .map(|(_, marker)| marker.as_str())
                .collect()
        };
        let mut killed_of = kill_strays_of(&under(StrayPolicy::Kill));
        let mut left_by = strays_of(&under(StrayPolicy::Report));
        ended
            .iter()
            .zip(&markers)
            .map(|((id, policy), marker)| {
                let (strays, killed) = match policy {
                    StrayPolicy::Ignore => return Self::default(),
                    StrayPolicy::Kill => (killed_of.remove(marker), true),
                    StrayPolicy::Report => (left_by.remove(marker), false),
                };
                let strays = strays.unwrap_or_default();
                let killed = killed && !strays.is_empty();
                if !strays.is_empty() {
                    tracing::info!(task = %id, count = strays.len(), killed, "it left processes running");
                }
                Self { strays, killed }
            })
            .collect()
    }

    /// The strays the record keeps: those left running.
    pub(crate) fn running(&self) -> Vec<Stray> {
        if self.killed {
            Vec::new()
        } else {
            self.strays.clone()
        }
    }

    /// What the completion adds: `left 2 processes running: 4121 `sleep 301`, …` (or `…,
    /// killed: …`); `None` when it left none.
    pub(crate) fn note(&self) -> Option<String> {
        if self.strays.is_empty() {
            return None;
        }
        let count = self.strays.len();
        let plural = if count == 1 { "process" } else { "processes" };
        let listed: Vec<String> = self
            .strays
            .iter()
            .map(|stray| format!("{} `{}`", stray.pid, stray.command))
            .collect();
        let what = if self.killed {
            "running, killed"
        } else {
            "running"
        };
        Some(format!(
            "left {count} {plural} {what}: {}",
            listed.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_note_names_each_stray_and_whether_it_was_killed() {
        let stray = |pid, command: &str| Stray {
            pid,
            started: 1,
            command: command.into(),
        };
        let mut found = Found {
            strays: vec![stray(4121, "sleep 301"), stray(4122, "yes")],
            killed: false,
        };
        assert_eq!(
            found.note().unwrap(),
            "left 2 processes running: 4121 `sleep 301`, 4122 `yes`"
        );
        assert_eq!(found.running().len(), 2);
        found.killed = true;
        assert!(
            found
                .note()
                .unwrap()
                .starts_with("left 2 processes running, killed: ")
        );
        assert!(found.running().is_empty());
        assert_eq!(Found::default().note(), None);
        assert_eq!("kill".parse(), Ok(StrayPolicy::Kill));
        assert!("maybe".parse::<StrayPolicy>().is_err());
    }
}
