//! `tasks completions zsh` in a real interactive zsh on a tmux terminal: the script installed
//! the usual way (a `_tasks` file on `$fpath`, then `compinit`), `TAB` completes a command and
//! `^D` (list the choices) offers the session's task ids after `tasks kill` and its list names
//! after `--list`.

use crate::sandbox::Sandbox;
use crate::support::tmux::Tmux;

/// zsh's prompt (tmux's capture drops the space after it at the end of a row).
const PROMPT: &str = "zsh-ready>";

/// A zsh on a tmux terminal with the `tasks` completion loaded from `$fpath`, at its prompt.
/// `None` when zsh or tmux is not installed (the test skips, except under `CI=true`).
fn zsh_with_completion(sandbox: &Sandbox) -> Option<Tmux> {
    if !crate::support::tool_installed("zsh", ".ci/zsh.sh") {
        return None;
    }
    let functions = sandbox.root().join("zfunc");
    std::fs::create_dir(&functions).unwrap();
    std::fs::write(
        functions.join("_tasks"),
        sandbox.ok(&["completions", "zsh"]),
    )
    .unwrap();
    let setup = sandbox.root().join("setup.zsh");
    // -D: no .zcompdump is written; -u: the temp dir's owner is not checked.
    std::fs::write(
        &setup,
        format!(
            "bindkey -e\nfpath=({} $fpath)\nautoload -U compinit && compinit -u -D\nPS1='{PROMPT} '\n",
            functions.display()
        ),
    )
    .unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_tasks"))
        .parent()
        .unwrap();
    let tmux = Tmux::start(
        sandbox,
        &format!("PATH={}:\"$PATH\" exec zsh -f -i", bin_dir.display()),
    )?;
    tmux.keys(&[&format!("source {}", setup.display()), "Enter"]);
    tmux.wait_for("zsh's prompt", |s| s.contains(PROMPT));
    Some(tmux)
}

/// Clears the screen and the line, types `line` and asks zsh for its choices there (`^D`).
fn choices_after(tmux: &Tmux, line: &str, what: &str, test: impl Fn(&str) -> bool) -> String {
    tmux.keys(&["C-u", "C-l"]);
    tmux.wait_for("a clear screen", |s| s.trim() == PROMPT);
    tmux.keys(&[line, "C-d"]);
    tmux.wait_for(what, |s| {
        let below = s.split_once(line.trim_end()).map_or("", |(_, rest)| rest);
        test(below)
    })
}

#[test]
fn zsh_completes_commands_task_ids_and_list_names() {
    let sandbox = Sandbox::new();
    let running = sandbox.start("sleep 1000");
    let finished = sandbox.start("true");
    sandbox.ok(&["list", "--list", "backlog", "create", "One"]);
    sandbox.ok(&["list", "--list", "sprint", "create", "Two"]);
    let Some(tmux) = zsh_with_completion(&sandbox) else {
        return;
    };

    // clap's completion still answers for everything else.
    tmux.keys(&["tasks ki", "Tab"]);
    tmux.wait_for("kill completed", |s| {
        s.contains(&format!("{PROMPT} tasks kill"))
    });

    let ids = choices_after(&tmux, "tasks kill ", "the task ids", |below| {
        below.contains(&running) && below.contains(&finished)
    });
    assert!(
        !ids.contains("backlog") && !ids.contains("--help"),
        "only ids are offered:\n{ids}"
    );
    let lists = choices_after(&tmux, "tasks list --list ", "the list names", |below| {
        below.contains("backlog") && below.contains("sprint")
    });
    assert!(
        !lists.contains(&running),
        "only lists are offered:\n{lists}"
    );
    choices_after(
        &tmux,
        "tasks list --list=",
        "the list names after =",
        |below| below.contains("backlog") && below.contains("sprint"),
    );
}
