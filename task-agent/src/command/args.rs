//! The command line and first input of each CLI format.

use std::ffi::{OsStr, OsString};

use crate::error::AgentError;
use crate::format::CliFormat;
use crate::runner::AgentSpec;

/// How to start the CLI: its arguments and what goes to its stdin first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    /// The arguments after the program.
    pub(crate) args: Vec<OsString>,
    /// The first stream-json user line, when the CLI reads turns on stdin (then stdin stays
    /// open); `None`: stdin is closed.
    pub(crate) first_turn: Option<String>,
    /// A user turn the CLI does not show in its own stream (Codex takes its prompt as an
    /// argument), which the runner records in the transcript before the spawn
    /// ([`user_turn_line`](crate::format::user_turn_line)), so that the conversation holds it.
    pub(crate) unshown_turn: Option<String>,
}

/// The stream-json line of a user turn (Claude's `--input-format stream-json`).
pub(crate) fn user_turn(text: &str) -> String {
    serde_json::json!({"type": "user", "message": {"role": "user", "content": text}}).to_string()
}

/// The plan for `format`: `args` as given plus the flags the format needs when absent.
/// `resume`: (session id, message) of a resumed session.
pub(crate) fn plan(
    format: CliFormat,
    given: &[OsString],
    spec: &AgentSpec,
    resume: Option<(&str, &str)>,
) -> Result<LaunchPlan, AgentError> {
    let mut args = given.to_vec();
    let model = spec.model.as_deref();
    match format {
        CliFormat::Claude => {
            ensure(&mut args, &["-p"], &["-p", "--print"]);
            ensure(
                &mut args,
                &["--output-format", "stream-json"],
                &["--output-format"],
            );
            ensure(&mut args, &["--verbose"], &["--verbose"]);
            ensure(
                &mut args,
                &["--input-format", "stream-json"],
                &["--input-format"],
            );
            // The user turns it reads on stdin come back in its stream, so the conversation
            // (`tasks output`) holds them.
            ensure(
                &mut args,
                &["--replay-user-messages"],
                &["--replay-user-messages"],
            );
            push_model(&mut args, "--model", model);
            if let Some(schema) = &spec.json_schema {
                args.extend(["--json-schema".into(), schema.into()]);
            }
            let text = match resume {
                Some((session_id, message)) => {
                    args.extend(["--resume".into(), session_id.into()]);
                    message
                }
                None => spec.prompt.as_str(),
            };
            Ok(LaunchPlan {
                args,
                first_turn: Some(user_turn(text)),
                unshown_turn: None,
            })
        }
        CliFormat::Codex => {
            // `codex exec`'s own flags go before its `resume` subcommand.
            ensure(&mut args, &["--json"], &["--json", "--experimental-json"]);
            // Headless outside a git repository Codex refuses to start without it.
            ensure(
                &mut args,
                &["--skip-git-repo-check"],
                &["--skip-git-repo-check"],
            );
            push_model(&mut args, "--model", model);
            let text = match resume {
                Some((thread_id, message)) => {
                    args.extend(["resume".into(), thread_id.into(), message.into()]);
                    message
                }
                None => {
                    args.push(spec.prompt.clone().into());
                    spec.prompt.as_str()
                }
            };
            Ok(LaunchPlan {
                args,
                first_turn: None,
                unshown_turn: Some(text.to_owned()),
            })
        }
        CliFormat::Gemini => {
            if resume.is_some() {
                return Err(AgentError::ResumeUnsupported("gemini"));
            }
            ensure(
                &mut args,
                &["--output-format", "stream-json"],
                &["--output-format", "-o"],
            );
            // Headless, Gemini offers no shell tool (and runs no edit) unless tools are
            // approved up front; an explicit `--approval-mode` is left as given.
            ensure(&mut args, &["--yolo"], &["--yolo", "-y", "--approval-mode"]);
            push_model(&mut args, "--model", model);
            args.extend(["-p".into(), spec.prompt.clone().into()]);
            // Its stream starts with the prompt as a user message.
            Ok(LaunchPlan {
                args,
                first_turn: None,
                unshown_turn: None,
            })
        }
    }
}

/// Appends `flag` unless one of `present` (or `present=…`) is already there.
fn ensure(args: &mut Vec<OsString>, flag: &[&str], present: &[&str]) {
    let has = args.iter().any(|arg| {
        let arg = arg.to_string_lossy();
        present
            .iter()
            .any(|p| arg == *p || arg.starts_with(&format!("{p}=")))
    });
    if !has {
        args.extend(flag.iter().map(OsString::from));
    }
}

fn push_model(args: &mut Vec<OsString>, flag: &str, model: Option<&str>) {
    if let Some(model) = model
        && !args.iter().any(|a| a == OsStr::new(flag))
    {
        args.extend([flag.into(), model.into()]);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn claude_gets_the_flags_it_lacks_and_the_prompt_on_stdin() {
        let spec = AgentSpec {
            model: Some("opus".into()),
            ..AgentSpec::new("do it", "/t")
        };
        let plan = plan(
            CliFormat::Claude,
            &["--output-format=stream-json".into()],
            &spec,
            None,
        )
        .unwrap();
        assert_eq!(
            strings(&plan.args),
            [
                "--output-format=stream-json",
                "-p",
                "--verbose",
                "--input-format",
                "stream-json",
                "--replay-user-messages",
                "--model",
                "opus"
            ]
        );
        assert_eq!(
            plan.first_turn.unwrap(),
            r#"{"type":"user","message":{"role":"user","content":"do it"}}"#
        );
        let resumed = super::plan(CliFormat::Claude, &[], &spec, Some(("S1", "more"))).unwrap();
        assert!(strings(&resumed.args).ends_with(&["--resume".to_owned(), "S1".to_owned()]));
        assert!(resumed.first_turn.unwrap().contains("\"more\""));
    }

    #[test]
    fn codex_and_gemini_take_the_prompt_as_an_argument_with_their_headless_flags() {
        let spec = AgentSpec::new("p; rm -rf /", "/t");
        let codex = plan(CliFormat::Codex, &["exec".into()], &spec, None).unwrap();
        assert_eq!(
            strings(&codex.args),
            ["exec", "--json", "--skip-git-repo-check", "p; rm -rf /"]
        );
        assert!(codex.first_turn.is_none());
        assert_eq!(codex.unshown_turn.as_deref(), Some("p; rm -rf /"));
        let gemini = plan(CliFormat::Gemini, &[], &spec, None).unwrap();
        assert_eq!(
            strings(&gemini.args),
            [
                "--output-format",
                "stream-json",
                "--yolo",
                "-p",
                "p; rm -rf /"
            ]
        );
        assert!(matches!(
            plan(CliFormat::Gemini, &[], &spec, Some(("s", "m"))),
            Err(AgentError::ResumeUnsupported(_))
        ));
    }

    #[test]
    fn flags_already_given_are_not_added_again() {
        let spec = AgentSpec::new("go", "/t");
        let given: Vec<OsString> = ["exec", "--skip-git-repo-check", "--json"]
            .map(OsString::from)
            .into();
        let codex = plan(CliFormat::Codex, &given, &spec, None).unwrap();
        assert_eq!(
            strings(&codex.args),
            ["exec", "--skip-git-repo-check", "--json", "go"]
        );
        let given: Vec<OsString> = ["-o", "stream-json", "--approval-mode", "auto_edit"]
            .map(OsString::from)
            .into();
        let gemini = plan(CliFormat::Gemini, &given, &spec, None).unwrap();
        assert_eq!(
            strings(&gemini.args),
            [
                "-o",
                "stream-json",
                "--approval-mode",
                "auto_edit",
                "-p",
                "go"
            ]
        );
    }

    #[test]
    fn a_codex_thread_is_resumed_with_exec_resume_and_the_message() {
        let spec = AgentSpec {
            model: Some("gpt-5".into()),
            ..AgentSpec::new("first prompt", "/t")
        };
        let resumed = plan(
            CliFormat::Codex,
            &["exec".into()],
            &spec,
            Some(("01a2-thread", "and now this")),
        )
        .unwrap();
        assert_eq!(
            strings(&resumed.args),
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--model",
                "gpt-5",
                "resume",
                "01a2-thread",
                "and now this"
            ]
        );
        assert!(resumed.first_turn.is_none());
        assert_eq!(resumed.unshown_turn.as_deref(), Some("and now this"));
    }
}
