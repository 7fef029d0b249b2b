//! `tasks rm` and `tasks prune`: removing finished tasks by hand ([`task_session::prune`]).

use crate::cli::{PruneArgs, RmArgs};
use crate::error::{Result, exit};
use crate::printer::Printer;
use crate::render;
use task_session::prune::{self, Policy, Removed};
use task_session::session::Session;

/// `tasks rm ID…`: removes the tasks, or none of them if one must be kept.
pub fn rm(session: &Session, args: &RmArgs, printer: Printer) -> Result<u8> {
    let ids = session.resolve_all(&args.ids)?;
    let removed = prune::remove_ids(session, &ids)?;
    report(&removed, printer)
}

/// `tasks prune`: removes the finished, delivered tasks the options select.
pub fn prune(session: &Session, args: &PruneArgs, printer: Printer) -> Result<u8> {
    let policy = Policy::new(args.older_than, args.keep_last, args.max_size);
    let removed = prune::prune(session, &policy)?;
    report(&removed, printer)
}

fn report(removed: &[Removed], printer: Printer) -> Result<u8> {
    let bytes: u64 = removed.iter().map(|r| r.bytes).sum();
    let what = if removed.len() == 1 { "task" } else { "tasks" };
    let text = format!(
        "removed {} {what} ({} of output)\n",
        removed.len(),
        render::size(bytes)
    );
    printer.emit(&removed, &text)?;
    Ok(exit::OK)
}
