//! The README says true things: its quick start prints what the commands print (replayed here,
//! ids and durations aside), and the test command it says CI runs is the one `.ci/run` runs.

use crate::sandbox::Sandbox;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

/// The first fenced block of `language` after `heading`.
fn block(text: &str, heading: &str, language: &str) -> String {
    let section = text.split(heading).nth(1).unwrap();
    let fence = format!("```{language}\n");
    let start = section.find(&fence).unwrap() + fence.len();
    let len = section[start..].find("```").unwrap();
    section[start..start + len].to_owned()
}

/// Shell words: spaces split, single and double quotes group.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, ' ') if any => {
                words.push(std::mem::take(&mut word));
                any = false;
            }
            (None, ' ') => {}
            _ => (word, any) = (word + &c.to_string(), true),
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// `completed in 1.0s:` → `completed in T:` (a duration is never the same twice).
fn without_durations(text: &str) -> String {
    text.lines()
        .map(|line| match (line.find(" in "), line.find(": ")) {
            (Some(at), Some(colon)) if line.starts_with('✓') && at < colon => {
                format!("{} in T{}", &line[..at], &line[colon..])
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_quick_start_prints_what_the_readme_shows() {
    replay(&block(&readme(), "## Quick start", "console"));
}

#[test]
fn the_stdin_pipe_example_prints_what_the_readme_shows() {
    replay(&block(&readme(), "write to it later", "console"));
}

/// Runs each `$ tasks …` step of `session` in a fresh sandbox and compares what it prints; the
/// first step starts a task whose id stands for the one shown.
fn replay(session: &str) {
    let sandbox = Sandbox::new();
    let mut steps = session.split("$ tasks ").skip(1);
    // The first step starts the task: its id stands for the one shown in every later step.
    let (command, shown_id) = steps.next().unwrap().split_once('\n').unwrap();
    let shown_id = shown_id.trim();
    assert_eq!(shown_id.len(), 9, "{session}");
    let real_id = sandbox.ok(&words(command)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    let real_id = real_id.trim();
    for step in steps {
        let (command, expected) = step.split_once('\n').unwrap();
        let command = command.replace(shown_id, real_id);
        let args = words(&command);
        let output = sandbox.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(output.status.success(), "tasks {command}: {output:?}");
        let printed =
            String::from_utf8(output.stdout).unwrap() + &String::from_utf8(output.stderr).unwrap();
        let expected = expected.replace(shown_id, real_id);
        assert_eq!(
            without_durations(&printed),
            without_durations(&expected),
            "tasks {command}"
        );
    }
}

#[test]
fn the_test_command_the_readme_names_is_the_one_ci_runs() {
    let text = readme();
    assert!(!text.contains("exactly what CI runs"));
    let command = block(&text, "Run the tests.", "sh");
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/run")).unwrap();
    for line in command.lines() {
        assert!(
            ci.lines().any(|l| l.trim() == line.trim()),
            ".ci/run does not run {line:?}"
        );
    }
}
