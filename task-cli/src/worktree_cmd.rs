//! `tasks worktree ls` and `tasks worktree rm ID`: the git worktrees agents run in
//! (`tasks agent --worktree`), the running ones and those kept because they have changes.
//! Read from the task records; whether one has changes is asked of git.

use serde_json::json;
use task_agent::worktree::Worktrees;
use task_core::Worktree;
use task_session::paths::SessionPaths;
use task_session::record::{self, TaskRecord};

use crate::cli::{WorktreeArgs, WorktreeCommand};
use crate::error::{CliError, Result, exit};
use crate::printer::Printer;
use crate::render;

/// Runs `tasks worktree …`.
pub fn worktree(paths: &SessionPaths, args: WorktreeArgs, printer: Printer) -> Result<u8> {
    match args.command {
        WorktreeCommand::Ls => ls(paths, printer),
        WorktreeCommand::Rm { id, force } => rm(paths, &id, force, printer),
    }
}

/// The worktree a record (an agent's or a teammate's) names, if its directory still exists.
pub(crate) fn existing(record: &TaskRecord) -> Option<&Worktree> {
    record
        .task
        .kind
        .worktree()
        .filter(|w| std::path::Path::new(&w.worktree_path).is_dir())
}

fn ls(paths: &SessionPaths, printer: Printer) -> Result<u8> {
    let listing = record::list(paths)?;
    let rows: Vec<_> = listing
        .tasks
        .iter()
        .filter_map(|record| existing(record).map(|w| (record, w)))
        .map(|(record, worktree)| {
            let changes = task_agent::worktree::changes(worktree);
            (record, worktree, changes)
        })
        .collect();
    let items: Vec<_> = rows
        .iter()
        .map(|(record, worktree, changes)| {
            json!({
                "id": record.id().as_str(),
                "status": record.status().as_str(),
                "description": record.task.base.description,
                "path": worktree.worktree_path,
                "branch": worktree.worktree_branch,
                "base": worktree.base_commit,
                "changes": changes.as_ref().ok(),
            })
        })
        .collect();
    let mut text = String::new();
    for (record, worktree, changes) in &rows {
        text.push_str(&format!(
            "{}  {:<9}  {}  changes: {}  {}\n",
            record.id(),
            record.status().as_str(),
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
    let id = task_session::resolve::resolve(id, &listing.tasks, paths.name())?;
    let record = listing.tasks.iter().find(|r| r.id() == id).ok_or_else(|| {
        task_session::Error::UnknownTask {
            id: id.to_string(),
            session: paths.name().to_owned(),
        }
    })?;
    let Some(worktree) = existing(record) else {
        return Err(CliError::invalid(format!("agent {id} has no worktree")));
    };
    if !record.is_terminal() {
        return Err(CliError::invalid(format!(
            "agent {id} is still running in {}: kill it first",
            worktree.worktree_path
        )));
    }
    let worktrees = Worktrees::new(crate::wiring::worktrees_dir(paths));
    match worktrees.remove_unless_changed(worktree, force) {
        Ok(None) => {}
        Ok(Some(changes)) => {
            return Err(CliError::invalid(format!(
                "worktree {} (branch {}) has changes ({}): not removed; --force removes it and \
                 its branch",
                worktree.worktree_path,
                worktree.worktree_branch,
                render::changes_text(&Ok(changes)),
            )));
        }
        Err(error) => return Err(CliError::invalid(error.to_string())),
    }
    let value = json!({
        "id": id.as_str(),
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
