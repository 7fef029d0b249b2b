//! `tasks group`: the parallelism limits of the session's groups, and how full each is.

use std::collections::BTreeMap;

use serde::Serialize;
use task_core::TaskStatus;
use task_session::queue::{DEFAULT_GROUP, GroupLimits};
use task_session::session::Session;

use crate::cli::{GroupArgs, GroupOp};
use crate::error::{Result, exit};
use crate::printer::Printer;

/// One line of `tasks group ls`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupLine {
    /// Its limit (`None`: the per-type defaults of the configuration; 0: unlimited).
    parallel: Option<u32>,
    /// Its tasks running (or started and not ended).
    running: usize,
    /// Its tasks waiting.
    queued: usize,
}

/// Runs `tasks group set|ls`.
pub fn group(session: &Session, args: GroupArgs, printer: Printer) -> Result<u8> {
    match args.op {
        GroupOp::Set { group, parallel } => {
            session.set_group_limit(&group, parallel)?;
            // Text says nothing.
            let value = serde_json::json!({ "group": group, "parallel": parallel });
            printer.emit(&value, "")?;
            Ok(exit::OK)
        }
        GroupOp::Ls => ls(session, printer),
    }
}

fn ls(session: &Session, printer: Printer) -> Result<u8> {
    let limits = GroupLimits::read(session.paths())?;
    let mut groups: BTreeMap<String, GroupLine> = BTreeMap::new();
    groups.entry(DEFAULT_GROUP.to_owned()).or_default();
    for (group, parallel) in &limits.groups {
        groups.entry(group.clone()).or_default().parallel = Some(*parallel);
    }
    for record in session.tasks()?.tasks {
        // A task with no place of its own was started at once in the default group.
        let (group, waiting) = record
            .queue
            .as_ref()
            .map_or((DEFAULT_GROUP, false), |p| (p.group.as_str(), p.waiting));
        let line = groups.entry(group.to_owned()).or_default();
        match record.status() {
            TaskStatus::Pending if waiting => line.queued += 1,
            status if !status.is_terminal() => line.running += 1,
            _ => {}
        }
    }
    let config = session.config();
    let mut text = format!(
        "{:<20} {:>10} {:>8} {:>7}\n",
        "GROUP", "PARALLEL", "RUNNING", "QUEUED"
    );
    for (group, line) in &groups {
        let parallel = match line.parallel {
            Some(0) => "unlimited".to_owned(),
            Some(n) => n.to_string(),
            None => format!(
                "{}/{}",
                limit_text(config.parallel.agents),
                limit_text(config.parallel.shells)
            ),
        };
        text.push_str(&format!(
            "{group:<20} {parallel:>10} {:>8} {:>7}\n",
            line.running, line.queued
        ));
    }
    text.push_str("(a group without a limit of its own: agents/shells from the configuration)\n");
    printer.emit(&groups, &text)?;
    Ok(exit::OK)
}

fn limit_text(limit: u32) -> String {
    match limit {
        0 => "∞".to_owned(),
        n => n.to_string(),
    }
}
