//! `tasks rm` and `tasks prune`: removing finished tasks by hand ([`task_session::prune`]).

use clap::Args;

use crate::error::{Result, exit};
use crate::render;
use task_session::prune::{self, Policy, Removed};
use task_session::session::Session;

/// Remove finished tasks (record and output) whose completion was delivered.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The task ids: each must have ended and had its completion delivered.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// Remove finished, delivered tasks by age, count or total output size.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only tasks that ended longer ago than this (`7d`, `12h`, `30m`).
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// Keep the newest N finished tasks.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Then remove the oldest finished tasks until all outputs fit in this size (`500M`, `1G`).
    #[arg(long, value_name = "SIZE", value_parser = task_session::prune::parse_size)]
    pub max_size: Option<u64>,
}

/// `tasks rm ID…`: removes the tasks, or none of them if one must be kept.
pub fn rm(session: &Session, args: &RmArgs, json: bool) -> Result<u8> {
    let ids = args
        .ids
        .iter()
        .map(|id| Session::parse_id(id))
        .collect::<task_session::Result<Vec<_>>>()?;
    let removed = prune::remove_ids(session, &ids)?;
    report(&removed, json)
}

/// `tasks prune`: removes the finished, delivered tasks the options select.
pub fn prune(session: &Session, args: &PruneArgs, json: bool) -> Result<u8> {
    let policy = Policy::new(args.older_than, args.keep_last, args.max_size);
    let removed = prune::prune(session, &policy)?;
    report(&removed, json)
}

fn report(removed: &[Removed], json: bool) -> Result<u8> {
    if json {
        render::json(&removed)?;
    } else {
        let bytes: u64 = removed.iter().map(|r| r.bytes).sum();
        let what = if removed.len() == 1 { "task" } else { "tasks" };
        render::out(&format!(
            "removed {} {what} ({} of output)\n",
            removed.len(),
            render::size(bytes)
        ))?;
    }
    Ok(exit::OK)
}
