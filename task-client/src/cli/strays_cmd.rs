//! `tasks strays` and `tasks kill --strays`/`--all-strays`: the processes tasks left running
//! when they ended ([`task_session::strays`]), read from their records and `/proc`, and ended
//! by pid, each only while it is still the process that was found.

use serde_json::json;
use std::collections::HashSet;
use task_core::TaskId;

use task_core::process::{Stray, strays_of_any};
use task_session::session::Session;

use crate::cli::error::{Result, exit};
use crate::cli::printer::Printer;
use crate::cli::render;

/// The ended tasks among `ids`, or among every task of the session (a live task's processes
/// are its own, not strays).
fn ended(session: &Session, ids: Option<&[TaskId]>) -> Result<HashSet<String>> {
    let records = match ids {
        Some(ids) => session.tasks_by_id(ids)?,
        None => session.tasks()?.tasks,
    };
    Ok(records
        .iter()
        .filter(|record| record.is_terminal())
        .map(|record| record.id().to_string())
        .collect())
}

/// The most rounds of "find, kill" before giving up on strays that keep forking.
const MAX_KILL_ROUNDS: usize = 50;

/// Every live process carrying the marker of one of `tasks`, with its task (one look at
/// `/proc`).
fn live(tasks: &HashSet<String>) -> Vec<(String, Stray)> {
    if tasks.is_empty() {
        return Vec::new();
    }
    strays_of_any(|marker| tasks.contains(marker))
}

/// `tasks strays [ID]`: the strays of the task `id` names, or of every ended task.
pub fn strays(session: &Session, id: Option<&str>, printer: Printer) -> Result<u8> {
    let ids = id
        .map(|id| session.resolve(id))
        .transpose()?
        .map(|id| vec![id]);
    let tasks = ended(session, ids.as_deref())?;
    let rows: Vec<_> = live(&tasks)
        .into_iter()
        .filter_map(|(id, stray)| {
            let usage = stray.usage()?;
            Some((id, stray, usage))
        })
        .collect();
    let values: Vec<_> = rows
        .iter()
        .map(|(id, stray, usage)| {
            json!({
                "task": id, "pid": stray.pid, "command": stray.command,
                "ageMs": usage.age.as_millis(), "cpuMs": usage.cpu.as_millis(),
                "rssBytes": usage.rss_bytes,
            })
        })
        .collect();
    let mut text = String::new();
    if !rows.is_empty() {
        text.push_str("PID      TASK       AGE   CPU      RSS     COMMAND\n");
    }
    for (id, stray, usage) in &rows {
        text.push_str(&format!(
            "{:<8} {:<10} {:<5} {:<8} {:<7} {}\n",
            stray.pid,
            id,
            render::age(u64::try_from(usage.age.as_millis()).unwrap_or(u64::MAX)),
            task_core::human_duration(usage.cpu),
            render::size(usage.rss_bytes),
            render::one_line(&stray.command, 80),
        ));
    }
    printer.emit(&values, &text)?;
    Ok(exit::OK)
}

/// `tasks kill --strays ID…` (`ids`) or `--all-strays` (`None`): kills what the ended tasks
/// left running, each process checked to be the one found (same pid and start time, still
/// carrying the task's marker).
pub fn kill_strays(session: &Session, ids: Option<&[TaskId]>, printer: Printer) -> Result<u8> {
    let tasks = ended(session, ids)?;
    let mut killed: Vec<(String, Vec<u32>)> = Vec::new();
    for id in ids.unwrap_or_default() {
        let id = id.to_string();
        if tasks.contains(&id) {
            killed.push((id, Vec::new()));
        } else {
            render::warn(&format!(
                "{id} has not ended: it has no strays (kill it instead)"
            ));
        }
    }
    // Again until a look finds none: a child forked just before its parent was killed is
    // found by the next look.
    for _ in 0..MAX_KILL_ROUNDS {
        let found = live(&tasks);
        let mut any = false;
        for (id, stray) in found {
            match stray.kill(&id) {
                Ok(true) => match killed.iter_mut().find(|(task, _)| *task == id) {
                    // Signalled before and not dead yet.
                    Some((_, pids)) if pids.contains(&stray.pid) => {}
                    Some((_, pids)) => {
                        any = true;
                        pids.push(stray.pid);
                    }
                    None => {
                        any = true;
                        killed.push((id, vec![stray.pid]));
                    }
                },
                Ok(false) => {}
                Err(error) => render::warn(&format!("cannot kill {} of {id}: {error}", stray.pid)),
            }
        }
        if !any {
            break;
        }
    }
    let rows: Vec<_> = killed
        .iter()
        .map(|(id, pids)| json!({"id": id, "killed": pids}))
        .collect();
    let text: String = killed
        .iter()
        .map(|(id, pids)| {
            let what = if pids.len() == 1 { "stray" } else { "strays" };
            format!("{id} killed {} {what}\n", pids.len())
        })
        .collect();
    printer.emit(&rows, &text)?;
    Ok(exit::OK)
}
