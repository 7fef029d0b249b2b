//! Opening the task list a command works on: the list a session uses when none is named, in
//! the files of the lists root or in a database (`tasks list`, `tasks mcp`, `tasks top`, and the
//! unassigning of an ended teammate's tasks).

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

/// How `tasks list` opens a list: [`open_in`] (files or a database), or [`open_files`] (files
/// alone: the `tasks` executable, which links no database client).
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

fn open_files_in(env: &EnvValues, layout: Layout, id: &str) -> task_list::Result<TaskList> {
    let root = task_list::resolve_lists_root(env, layout)?;
    let mut config = StoreConfig::default();
    config.lock.reference_locks = task_list::reference_locks(env, &root);
    TaskList::open(root, id, config)
}

/// Opens list `id` in the store `store` names (a `postgres://` URL), or in the lists root
/// `env` and `layout` resolve to when there is none, taking the reference harness's lock
/// directories only where it may be writing too ([`task_list::reference_locks`]). Shared by
/// `tasks list` and `tasks mcp`.
pub fn open_in(
    store: Option<&str>,
    env: &EnvValues,
    layout: Layout,
    id: &str,
) -> task_list::Result<TaskList> {
    match store {
        Some(url) => TaskList::connect(url, id, StoreConfig::default()),
        None => open_files_in(env, layout, id),
    }
}
