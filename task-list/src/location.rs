//! Where lists live: the lists root and the list id, resolved from explicit values and the
//! environment (SPEC §12, DESIGN "Persistence").
//!
//! The resolution is pure ([`resolve_lists_root`], [`resolve_list_id`] take an [`EnvValues`]);
//! [`EnvValues::from_env`] reads the real environment.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::id::sanitize_name;

/// The environment variables that matter, captured as plain values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvValues {
    /// `$TASKS_LIST_ROOT`: this project's lists root.
    pub tasks_list_root: Option<String>,
    /// `$TASKS_ROOT`: this project's state root (lists go to `{root}/lists`).
    pub tasks_root: Option<String>,
    /// `$XDG_STATE_HOME`.
    pub xdg_state_home: Option<String>,
    /// `$HOME`.
    pub home: Option<String>,
    /// `$CLAUDE_CONFIG_DIR`: the reference harness's config directory.
    pub claude_config_dir: Option<String>,
    /// `$CLAUDE_CODE_TASK_LIST_ID`: the reference's list id override.
    pub claude_code_task_list_id: Option<String>,
    /// `$TASKS_LIST_REFERENCE_LOCKS`: `1` (or `true`, `on`) takes the reference's lock
    /// directories on every list, `0` (or `false`, `off`) on none; unset, only on lists in the
    /// reference's directory (see [`reference_locks`]).
    pub tasks_list_reference_locks: Option<String>,
}

impl EnvValues {
    /// Reads the variables from the process environment (empty values count as unset).
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            tasks_list_root: var("TASKS_LIST_ROOT"),
            tasks_root: var("TASKS_ROOT"),
            xdg_state_home: var("XDG_STATE_HOME"),
            home: var("HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            claude_code_task_list_id: var("CLAUDE_CODE_TASK_LIST_ID"),
            tasks_list_reference_locks: var("TASKS_LIST_REFERENCE_LOCKS"),
        }
    }
}

/// Which directory layout to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// This project's: `$TASKS_LIST_ROOT`, else `{root}/lists` (`$TASKS_ROOT`, else
    /// `$XDG_STATE_HOME/tasks`, else `~/.local/state/tasks`); switches to the reference's
    /// layout when `$CLAUDE_CONFIG_DIR` is set and `$TASKS_LIST_ROOT` is not.
    #[default]
    Auto,
    /// The reference harness's own directory (`--claude`): `$CLAUDE_CONFIG_DIR/tasks`, else
    /// `~/.claude/tasks`.
    Claude,
}

impl Layout {
    /// Whether this layout, with these variables, means the reference's directory.
    pub fn is_claude(self, env: &EnvValues) -> bool {
        match self {
            Self::Claude => true,
            Self::Auto => env.claude_config_dir.is_some() && env.tasks_list_root.is_none(),
        }
    }
}

/// Resolves the lists root.
pub fn resolve_lists_root(env: &EnvValues, layout: Layout) -> Result<PathBuf> {
    let home = || {
        env.home
            .as_ref()
            .map(PathBuf::from)
            .ok_or(Error::NoListsRoot)
    };
    if layout.is_claude(env) {
        return match &env.claude_config_dir {
            Some(dir) => Ok(PathBuf::from(dir).join("tasks")),
            None => Ok(home()?.join(".claude").join("tasks")),
        };
    }
    if let Some(root) = &env.tasks_list_root {
        return Ok(PathBuf::from(root));
    }
    let state_root = match (&env.tasks_root, &env.xdg_state_home) {
        (Some(root), _) => PathBuf::from(root),
        (None, Some(state)) => PathBuf::from(state).join("tasks"),
        (None, None) => home()?.join(".local").join("state").join("tasks"),
    };
    Ok(state_root.join("lists"))
}

/// Whether lists under `lists_root` should take the reference's lock directories
/// ([`crate::LockConfig::reference_locks`]): as `$TASKS_LIST_REFERENCE_LOCKS` says when it is set
/// to a yes or a no, else only when `lists_root` is the reference harness's own directory
/// (`$CLAUDE_CONFIG_DIR/tasks`, else `~/.claude/tasks`, compared after resolving symlinks), the
/// one place a running reference harness writes lists.
pub fn reference_locks(env: &EnvValues, lists_root: &Path) -> bool {
    let forced = env
        .tasks_list_reference_locks
        .as_deref()
        .map(str::to_ascii_lowercase);
    match forced.as_deref() {
        Some("1" | "true" | "on" | "yes") => return true,
        Some("0" | "false" | "off" | "no") => return false,
        Some(other) => {
            tracing::warn!(
                value = other,
                "TASKS_LIST_REFERENCE_LOCKS is not a yes or a no: ignored"
            );
        }
        None => {}
    }
    resolve_lists_root(env, Layout::Claude)
        .is_ok_and(|reference| same_directory(&reference, lists_root))
}

/// Whether `path` names the directory `dir` (literally, or once both are resolved).
fn same_directory(dir: &Path, path: &Path) -> bool {
    dir == path
        || std::fs::canonicalize(dir)
            .is_ok_and(|dir| std::fs::canonicalize(path).is_ok_and(|path| path == dir))
}

/// What the caller knows that can name a list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListIdHints<'a> {
    /// An explicit `--list ID`.
    pub explicit: Option<&'a str>,
    /// The team name, when running as part of a team.
    pub team_name: Option<&'a str>,
    /// The session id.
    pub session_id: Option<&'a str>,
}

/// The list id used when nothing names one.
pub const DEFAULT_LIST_ID: &str = "default";

/// Resolves and sanitises the list id: an explicit id wins; in the reference's layout then
/// `$CLAUDE_CODE_TASK_LIST_ID`, the team name and the session id (SPEC §12); else `default`.
pub fn resolve_list_id(env: &EnvValues, layout: Layout, hints: ListIdHints<'_>) -> Result<String> {
    let reference_chain = layout.is_claude(env).then(|| {
        env.claude_code_task_list_id
            .as_deref()
            .or(hints.team_name)
            .or(hints.session_id)
    });
    let chosen = hints
        .explicit
        .or(reference_chain.flatten())
        .unwrap_or(DEFAULT_LIST_ID);
    sanitize_name(chosen)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn env() -> EnvValues {
        EnvValues {
            home: Some("/home/u".into()),
            ..EnvValues::default()
        }
    }

    #[test]
    fn native_root_chain() {
        let mut e = env();
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/home/u/.local/state/tasks/lists")
        );
        e.xdg_state_home = Some("/xdg".into());
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/xdg/tasks/lists")
        );
        e.tasks_root = Some("/tr".into());
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/tr/lists")
        );
        e.tasks_list_root = Some("/lr".into());
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/lr")
        );
    }

    #[test]
    fn claude_root_chain() {
        let mut e = env();
        assert_eq!(
            resolve_lists_root(&e, Layout::Claude).unwrap(),
            PathBuf::from("/home/u/.claude/tasks")
        );
        e.claude_config_dir = Some("/cc".into());
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/cc/tasks")
        );
        e.tasks_list_root = Some("/lr".into());
        assert_eq!(
            resolve_lists_root(&e, Layout::Auto).unwrap(),
            PathBuf::from("/lr")
        );
        assert_eq!(
            resolve_lists_root(&e, Layout::Claude).unwrap(),
            PathBuf::from("/cc/tasks")
        );
        assert!(resolve_lists_root(&EnvValues::default(), Layout::Claude).is_err());
    }

    #[test]
    fn reference_locks_only_in_the_reference_directory_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = env();
        e.home = Some(dir.path().to_string_lossy().into_owned());
        let reference = dir.path().join(".claude/tasks");
        std::fs::create_dir_all(&reference).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&reference, &link).unwrap();
        assert!(reference_locks(&e, &reference));
        assert!(reference_locks(&e, &link));
        assert!(!reference_locks(&e, &dir.path().join("lists")));
        e.tasks_list_reference_locks = Some("ON".into());
        assert!(reference_locks(&e, &dir.path().join("lists")));
        e.tasks_list_reference_locks = Some("0".into());
        assert!(!reference_locks(&e, &reference));
        e.tasks_list_reference_locks = Some("maybe".into());
        assert!(reference_locks(&e, &reference));
    }

    #[test]
    fn list_id_chain() {
        let mut e = env();
        let hints = ListIdHints {
            explicit: None,
            team_name: Some("my team"),
            session_id: Some("s-1"),
        };
        assert_eq!(resolve_list_id(&e, Layout::Auto, hints).unwrap(), "default");
        assert_eq!(
            resolve_list_id(&e, Layout::Claude, hints).unwrap(),
            "my-team"
        );
        e.claude_code_task_list_id = Some("shared/list".into());
        assert_eq!(
            resolve_list_id(&e, Layout::Claude, hints).unwrap(),
            "shared-list"
        );
        let explicit = ListIdHints {
            explicit: Some("x.y"),
            ..hints
        };
        assert_eq!(
            resolve_list_id(&e, Layout::Claude, explicit).unwrap(),
            "x-y"
        );
        let session_only = ListIdHints {
            team_name: None,
            ..hints
        };
        e.claude_code_task_list_id = None;
        assert_eq!(
            resolve_list_id(&e, Layout::Claude, session_only).unwrap(),
            "s-1"
        );
    }
}
