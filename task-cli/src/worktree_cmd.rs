//! `tasks worktree ls` and `tasks worktree rm ID`: the git worktrees agents run in
//! (`tasks agent --worktree`), the running ones, those kept because they have changes, and
//! those no task records (their supervisor died before the task's first record, and the next
//! one kept them). Read from the task records and the worktrees' own records; whether one has
//! changes is asked of git.

use serde_json::json;
use task_core::Worktree;
use task_session::paths::SessionPaths;
use task_session::record;
use task_worktree::{Intent, Worktrees};

use crate::cli::{WorktreeArgs, WorktreeCommand};
use crate::error::{CliError, Result, exit};
use crate::printer::Printer;
use crate::render::{self, existing_worktree};
use crate::worktree_wiring::Holders;

/// What `ls` says of a worktree no task records, in place of a status.
const UNRECORDED: &str = "unrecorded";

/// Runs `tasks worktree …`.
pub fn worktree(paths: &SessionPaths, args: WorktreeArgs, printer: Printer) -> Result<u8> {
    match args.command {
        WorktreeCommand::Ls => ls(paths, printer),
        WorktreeCommand::Rm { id, force } => rm(paths, &id, force, printer),
    }
}

/// The session's worktrees and the records no task holds.
fn unrecorded(paths: &SessionPaths, tasks: &record::Listing) -> Result<Vec<Intent>> {
    let holders = Holders::of(paths, tasks);
    let intents = worktrees(paths)
        .intents()
        .map_err(|error| CliError::invalid(error.to_string()))?;
    Ok(intents.into_iter().filter(|i| !holders.hold(i)).collect())
}

fn worktrees(paths: &SessionPaths) -> Worktrees {
    Worktrees::new(crate::wiring::worktrees_dir(paths))
}

fn ls(paths: &SessionPaths, printer: Printer) -> Result<u8> {
    let listing = record::list(paths)?;
    let unrecorded = unrecorded(paths, &listing)?;
    // (id, status, description, worktree)
    let rows: Vec<(String, &str, Option<&str>, &Worktree)> = listing
        .tasks
        .iter()
        .filter_map(|record| {
            let worktree = existing_worktree(record)?;
            let description = Some(record.task.base.description.as_str());
            Some((
                record.id().to_string(),
                record.status().as_str(),
                description,
                worktree,
            ))
        })
        .chain(
            unrecorded
                .iter()
                .map(|i| (i.name.clone(), UNRECORDED, None, &i.worktree)),
        )
        .collect();
    let checked: Vec<_> = rows
        .iter()
        .map(|row| (row, task_worktree::changes(row.3)))
        .collect();
    let items: Vec<_> = checked
        .iter()
        .map(|((id, status, description, worktree), changes)| {
            json!({
                "id": id,
                "status": status,
                "description": description,
                "path": worktree.worktree_path,
                "branch": worktree.worktree_branch,
                "base": worktree.base_commit,
                "changes": changes.as_ref().ok(),
            })
        })
        .collect();
    let mut text = String::new();
    for ((id, status, _, worktree), changes) in &checked {
        text.push_str(&format!(
            "{id}  {status:<9}  {}  changes: {}  {}\n",
            worktree.worktree_branch,
            render::changes_text(changes),
            worktree.worktree_path,
        ));
    }
    printer.emit(&items, &text)?;
    Ok(exit::OK)
}

fn rm(paths: &SessionPaths, id: &str, force: bool, printer: Printer) -> Result<u8> {
    let listing = record::list(paths)?;
    // A worktree no task records goes by the id it was added for.
    let found = unrecorded(paths, &listing)?
        .into_iter()
        .find(|intent| intent.name == id);
    let (id, worktree) = match &found {
        Some(intent) => (intent.name.clone(), &intent.worktree),
        None => {
            let id = task_session::resolve::resolve(id, &listing.tasks, paths.name())?;
            let record = listing.tasks.iter().find(|r| r.id() == id).ok_or_else(|| {
                task_session::Error::UnknownTask {
                    id: id.to_string(),
                    session: paths.name().to_owned(),
                }
            })?;
            let Some(worktree) = existing_worktree(record) else {
                return Err(CliError::invalid(format!("agent {id} has no worktree")));
            };
            if !record.is_terminal() {
                return Err(CliError::invalid(format!(
                    "agent {id} is still running in {}: kill it first",
                    worktree.worktree_path
                )));
            }
            (id.to_string(), worktree)
        }
    };
    match worktrees(paths).remove_unless_changed(worktree, force) {
        Ok(None) => {}
        Ok(Some(changes)) => {
            return Err(CliError::invalid(format!(
                "worktree {} (branch {}) has changes ({}): not removed; --force removes it and \
                 its branch",
                worktree.worktree_path,
                worktree.worktree_branch,
                changes.describe(),
            )));
        }
        Err(error) => return Err(CliError::invalid(error.to_string())),
    }
    let value = json!({
        "id": id,
        "removed": worktree.worktree_path,
        "branch": worktree.worktree_branch,
    });
    let text = format!(
        "removed {} and branch {}\n",
        worktree.worktree_path, worktree.worktree_branch
    );
    printer.emit(&value, &text)?;
    Ok(exit::OK)
}
