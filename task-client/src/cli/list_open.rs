//! Opening the task list a command works on: the list a session uses when none is named, in
//! the files of the lists root (`tasksd` opens a database too, through an [`Opener`] of its
//! own).

use task_list::{EnvValues, Layout, StoreConfig, TaskList};
use task_session::paths::SessionPaths;

/// The list a session uses when none is named: `--list`/`$TASKS_LIST_ID`, else the list named
/// after the session (`default` for the default session), so `tasks list` and `tasks mcp` of one
/// session share a list. With `--claude`, an unnamed list follows the reference's chain instead.
pub fn session_list<'a>(
    named: Option<&'a str>,
    claude: bool,
    paths: &'a SessionPaths,
) -> Option<&'a str> {
    named.or((!claude).then(|| paths.name()))
}

/// How `tasks list` opens a list: [`open_files`] (files alone: the `tasks` executable, which
/// reaches no database client), or `tasksd`'s opener (files or a database).
pub type Opener = fn(Option<&str>, &EnvValues, Layout, &str) -> task_list::Result<TaskList>;

/// Opens list `id` in the lists root `env` and `layout` resolve to; a store named by URL is
/// refused (the `tasks` executable hands such commands to `tasksd` before it gets here).
pub fn open_files(
    store: Option<&str>,
    env: &EnvValues,
    layout: Layout,
    id: &str,
) -> task_list::Result<TaskList> {
    match store {
        Some(_) => Err(task_list::Error::Internal(
            "a database store reached the file-only opener".into(),
        )),
        None => open_files_in(env, layout, id),
    }
}

/// Opens list `id` in the lists root `env` and `layout` resolve to, taking the reference
/// harness's lock directories only where it may be writing too
/// ([`task_list::reference_locks`]).
pub fn open_files_in(env: &EnvValues, layout: Layout, id: &str) -> task_list::Result<TaskList> {
    let root = task_list::resolve_lists_root(env, layout)?;
    let mut config = StoreConfig::default();
    config.lock.reference_locks = task_list::reference_locks(env, &root);
    TaskList::open(root, id, config)
}
