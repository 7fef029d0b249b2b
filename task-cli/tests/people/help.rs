//! Every subcommand's help opens with what it does, as `tasks help` lists it.

use crate::sandbox::Sandbox;

/// The subcommands `tasks help` (or `tasks list help`) lists, with their one-line summaries.
fn listed(sandbox: &Sandbox, args: &[&str]) -> Vec<(String, String)> {
    let help = sandbox.ok(args);
    let commands = help.split("Commands:\n").nth(1).unwrap();
    commands
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| {
            let (name, about) = line.trim().split_once(char::is_whitespace)?;
            (name != "help").then(|| (name.to_owned(), about.trim().to_owned()))
        })
        .collect()
}

fn assert_help_opens_with_about(sandbox: &Sandbox, prefix: &[&str], name: &str, about: &str) {
    let mut args = prefix.to_vec();
    args.extend([name, "--help"]);
    let help = sandbox.ok(&args);
    let first = help.lines().next().unwrap();
    assert!(
        !first.starts_with("`tasks"),
        "tasks {args:?} opens with the command's name: {first:?}"
    );
    // The listing may wrap or shorten the summary; the help's first line starts with it.
    let summary: String = about.chars().take(30).collect();
    assert!(
        first.starts_with(&summary),
        "tasks {args:?} opens with {first:?}, not with {about:?}"
    );
}

#[test]
fn every_subcommand_help_opens_with_what_it_does() {
    let sandbox = Sandbox::new();
    let top = listed(&sandbox, &["help"]);
    assert!(top.len() > 10, "{top:?}");
    for (name, about) in &top {
        assert_help_opens_with_about(&sandbox, &[], name, about);
    }
    for (name, about) in listed(&sandbox, &["list", "help"]) {
        assert_help_opens_with_about(&sandbox, &["list"], &name, &about);
    }
}
