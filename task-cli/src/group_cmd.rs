//! `tasks group`: the parallelism limits of the session's groups, pausing and resuming them,
//! and how full each is.

use std::collections::BTreeMap;

use serde::Serialize;
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
    /// It starts none of its queued tasks until it is resumed.
    paused: bool,
    /// Its tasks running (or started and not ended).
    running: usize,
    /// Its tasks waiting.
    queued: usize,
}

/// Runs `tasks group set|pause|resume|ls`.
pub fn group(session: &Session, args: GroupArgs, printer: Printer) -> Result<u8> {
    match args.op {
        GroupOp::Set { group, parallel } => {
            session.set_group_limit(&group, parallel)?;
            let limit = match parallel {
                0 => "any number of its tasks run at once (unlimited)".to_owned(),
                1 => "at most 1 of its tasks runs at once".to_owned(),
                n => format!("at most {n} of its tasks run at once"),
            };
            let value = serde_json::json!({ "group": group, "parallel": parallel });
            printer.emit(&value, &format!("group {group}: {limit}\n"))?;
            Ok(exit::OK)
        }
        GroupOp::Pause { group } => pause(session, &group, true, printer),
        GroupOp::Resume { group } => pause(session, &group, false, printer),
        GroupOp::Ls => ls(session, printer),
    }
}

/// `tasks group pause|resume G`: one line says what the group does now and how many of its
/// tasks wait.
fn pause(session: &Session, group: &str, paused: bool, printer: Printer) -> Result<u8> {
    session.pause_group(group, paused)?;
    let queued = queued_in(session, group)?;
    let text = if paused {
        format!(
            "group {group} paused ({queued} queued): no queued task starts until `tasks group resume {group}`; running tasks go on\n"
        )
    } else {
        format!(
            "group {group} resumed ({queued} queued): its queued tasks start as its limit allows\n"
        )
    };
    let value = serde_json::json!({ "group": group, "paused": paused, "queued": queued });
    printer.emit(&value, &text)?;
    Ok(exit::OK)
}

/// How many tasks of `group` wait in its queue now.
fn queued_in(session: &Session, group: &str) -> Result<usize> {
    Ok(session
        .group_tasks(group)?
        .iter()
        .filter(|record| record.waits_in_queue())
        .count())
}

fn ls(session: &Session, printer: Printer) -> Result<u8> {
    let limits = GroupLimits::read(session.paths())?;
    let mut groups: BTreeMap<String, GroupLine> = BTreeMap::new();
    groups.entry(DEFAULT_GROUP.to_owned()).or_default();
    for (group, parallel) in &limits.groups {
        groups.entry(group.clone()).or_default().parallel = Some(*parallel);
    }
    for group in &limits.paused {
        groups.entry(group.clone()).or_default().paused = true;
    }
    for record in session.tasks()?.tasks {
        let line = groups.entry(record.group().to_owned()).or_default();
        if record.waits_in_queue() {
            line.queued += 1;
        } else if !record.is_terminal() {
            line.running += 1;
        }
    }
    let config = session.config();
    let mut text = format!(
        "{:<20} {:>10} {:>8} {:>7}  {}\n",
        "GROUP", "PARALLEL", "RUNNING", "QUEUED", "STATE"
    );
    for (group, line) in &groups {
        let parallel = match line.parallel {
            Some(0) => "unlimited".to_owned(),
            Some(n) => n.to_string(),
            None => format!(
                "{}/{}",
                limit_text(config.parallel.of(task_core::Admission::AGENTS)),
                limit_text(config.parallel.of(task_core::Admission::SHELLS))
            ),
        };
        let state = if line.paused { "paused" } else { "" };
        let row = format!(
            "{group:<20} {parallel:>10} {:>8} {:>7}  {state}",
            line.running, line.queued
        );
        text.push_str(row.trim_end());
        text.push('\n');
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
