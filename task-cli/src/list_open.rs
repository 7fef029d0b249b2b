//! Opening the task list a command works on in `tasksd`: in the files of the lists root
//! (task-client's [`open_files_in`]) or in a database (`tasks list --store`, `tasks mcp`,
//! `tasks top`, and the unassigning of an ended teammate's tasks).

use task_client::cli::list_open::open_files_in;
use task_list::{EnvValues, Layout, StoreConfig, TaskList};

/// Opens list `id` in the store `store` names (a `postgres://` URL), or in the lists root
/// `env` and `layout` resolve to when there is none. Shared by `tasks list` and `tasks mcp`.
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
