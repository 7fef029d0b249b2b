//! `tasks completions SHELL`: clap's completion script for the visible commands (hidden ones
//! such as `__supervise` are left out), plus completion of the session's task ids and of list
//! names, which the script asks `tasks __complete ids|lists` for.

use clap::{Command, CommandFactory};

use crate::cli::{Candidates, Cli, CompletionShell};
use crate::error::{Result, exit};
use crate::render;
use task_session::paths::SessionPaths;
use task_session::session::Session;

/// Subcommands whose positional arguments are task ids.
const ID_COMMANDS: &str = "output wait kill rm restart input send";

/// Prints the completion script for `shell`.
pub fn completions(shell: CompletionShell) -> Result<u8> {
    let generator = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(
        generator,
        &mut visible(Cli::command()),
        "tasks",
        &mut script,
    );
    let clap_script = String::from_utf8_lossy(&script);
    let ids = ID_COMMANDS.replace(' ', "|");
    let script = match shell {
        CompletionShell::Bash => format!(
            "{clap_script}{}",
            BASH_DYNAMIC.replace("{ID_COMMANDS}", &ids)
        ),
        CompletionShell::Fish => format!(
            "{clap_script}{}",
            FISH_DYNAMIC.replace("{ID_COMMANDS}", ID_COMMANDS)
        ),
        CompletionShell::Zsh => with_zsh_dynamic(&clap_script, &ids),
    };
    render::out(&script).map(|()| exit::OK)
}

/// clap's zsh script with its `_tasks` renamed `_tasks_clap` and a `_tasks` of ours that
/// completes ids and list names and hands everything else to it, defined before clap's last
/// lines (which call `_tasks` when the file is autoloaded from `$fpath`, or `compdef` it when
/// it is sourced): both ways of installing the script get the dynamic completion.
/// `id_commands` is [`ID_COMMANDS`] as a zsh pattern (`a|b|c`).
fn with_zsh_dynamic(clap_script: &str, id_commands: &str) -> String {
    let renamed = clap_script.replacen("\n_tasks() {", "\n_tasks_clap() {", 1);
    let dynamic = ZSH_DYNAMIC.replace("{ID_COMMANDS}", id_commands);
    match renamed.rfind(ZSH_FOOTER) {
        Some(at) => format!("{}{dynamic}{}", &renamed[..at], &renamed[at..]),
        // A clap whose script ends otherwise: sourcing it still works; autoloading from
        // `$fpath` needs the footer (the zsh test loads it that way, so it would say).
        None => renamed + dynamic.as_str(),
    }
}

/// `command` without its hidden subcommands (clap's generators list them).
fn visible(command: Command) -> Command {
    let subcommands: Vec<Command> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .cloned()
        .collect();
    Command::new("tasks")
        .version(env!("CARGO_PKG_VERSION"))
        .args(command.get_arguments().cloned())
        .subcommands(subcommands)
}

/// `tasks __complete ids|lists`: one candidate a line; nothing at all when there is nothing
/// to read (completion never prints an error).
pub fn candidates(paths: Result<SessionPaths>, what: Candidates) -> Result<u8> {
    let names = match (paths, what) {
        (Ok(paths), Candidates::Ids) => Session::open(paths)
            .and_then(|s| s.tasks())
            .map(|listing| {
                let mut tasks = listing.tasks;
                tasks.reverse();
                tasks.iter().map(|t| t.id().to_string()).collect()
            })
            .unwrap_or_default(),
        (Ok(paths), Candidates::Lists) => list_names(&paths),
        (Err(_), _) => Vec::new(),
    };
    let text: String = names.iter().map(|n| format!("{n}\n")).collect();
    render::out(&text).map(|()| exit::OK)
}

fn list_names(paths: &SessionPaths) -> Vec<String> {
    let mut env = task_list::EnvValues::from_env();
    env.tasks_root = Some(paths.root().to_string_lossy().into_owned());
    let Ok(root) = task_list::resolve_lists_root(&env, task_list::Layout::Auto) else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

const BASH_DYNAMIC: &str = r#"
# Task ids and list names, read from the session when completing.
_tasks_dynamic() {
    _tasks "$@"
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$cur" in -*) return ;; esac
    if [[ "$prev" == "--list" ]]; then
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete lists 2>/dev/null)" -- "$cur"))
        return
    fi
    case "${COMP_WORDS[1]}" in
        {ID_COMMANDS})
            COMPREPLY+=($(compgen -W "$("${COMP_WORDS[0]}" __complete ids 2>/dev/null)" -- "$cur")) ;;
    esac
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _tasks_dynamic -o nosort -o bashdefault -o default tasks
else
    complete -F _tasks_dynamic -o bashdefault -o default tasks
fi
"#;

/// The start of the lines that end clap's zsh script.
const ZSH_FOOTER: &str = "\nif [ \"$funcstack[1]\" = \"_tasks\" ]; then";

const ZSH_DYNAMIC: &str = r#"
# Task ids and list names, read from the session when completing; the rest is clap's.
_tasks() {
    local -a expl candidates
    if [[ ${words[CURRENT-1]} == --list ]] || compset -P '--list='; then
        candidates=(${(f)"$(${words[1]} __complete lists 2>/dev/null)"})
        _wanted lists expl 'task list' compadd -a candidates
        return
    fi
    if (( CURRENT > 2 )) && [[ $PREFIX != -* && ${words[2]} == ({ID_COMMANDS}) ]]; then
        candidates=(${(f)"$(${words[1]} __complete ids 2>/dev/null)"})
        _wanted ids expl 'task id' compadd -a candidates
        return
    fi
    _tasks_clap "$@"
}
"#;

const FISH_DYNAMIC: &str = r#"
# Task ids and list names, read from the session when completing.
complete -c tasks -n "__fish_seen_subcommand_from {ID_COMMANDS}" -f -a "(tasks __complete ids 2>/dev/null)"
complete -c tasks -l list -f -r -a "(tasks __complete lists 2>/dev/null)"
"#;
