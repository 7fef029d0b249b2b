//! Where a CLI keeps its own record of a session, which itemises what its stream reports only
//! as totals.
//!
//! Codex's `exec --json` and Gemini's stream-json report token usage as running totals (a
//! Codex turn of three model requests prints one `turn.completed` with the three inputs
//! summed), so SPEC §7's rule (the latest request's input, every request's output) cannot be
//! had from the stream. Each CLI writes every request's usage to a file of its own as it goes:
//!
//! - Codex: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-{time}-{thread id}.jsonl` (`CODEX_HOME`
//!   defaults to `~/.codex`), one `token_count` event per request with `last_token_usage`
//!   and `total_token_usage`; `codex exec resume` appends to the same file.
//! - Gemini CLI: `{GEMINI_CLI_HOME or HOME}/.gemini/tmp/{project}/chats/session-{time}-{first 8
//!   characters of the session id}.jsonl`, one `gemini` message per request with its `tokens`
//!   (the model router's requests are not in it).
//!
//! [`SessionStore::locate`] finds the file of a session id (the id of the stream's
//! [`AgentEvent::Init`](crate::AgentEvent::Init)); its lines go to
//! [`LineParser::parse_session_line`](crate::LineParser::parse_session_line). The id is matched
//! against names read from the directories, never joined into a path.
//!
//! ```
//! use agent_stream::session_file::SessionStore;
//! use agent_stream::CliFormat;
//!
//! let home = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codex-0.171.0/home");
//! let env = |name: &str| (name == "CODEX_HOME").then(|| home.into());
//! let store = SessionStore::for_format(CliFormat::Codex, env).unwrap();
//! let rollout = store.locate("01a22153-52d1-7e32-9812-08b5730e410e").unwrap();
//! assert!(rollout.to_string_lossy().ends_with("-01a22153-52d1-7e32-9812-08b5730e410e.jsonl"));
//! ```

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::format::CliFormat;

/// How many day directories of Codex's sessions are searched, newest first, for a thread's
/// rollout (a thread resumed after longer is not found, and its usage counts from the stream).
const CODEX_DAYS_SEARCHED: usize = 400;

/// The directory a CLI keeps its session files in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStore {
    /// Codex's `sessions` directory (under `CODEX_HOME`).
    Codex {
        /// `$CODEX_HOME/sessions`.
        sessions: PathBuf,
    },
    /// Gemini CLI's project directories (`~/.gemini/tmp`).
    Gemini {
        /// `{home}/.gemini/tmp`.
        projects: PathBuf,
    },
}

impl SessionStore {
    /// The store of a CLI of `format` run with the environment `env` (a variable's value by
    /// name); `None` for Claude (whose stream is per request) or when no home is set.
    pub fn for_format(
        format: CliFormat,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Option<SessionStore> {
        let set = |name: &str| {
            env(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        match format {
            CliFormat::Claude => None,
            CliFormat::Codex => {
                let home = set("CODEX_HOME").or_else(|| set("HOME").map(|h| h.join(".codex")))?;
                Some(SessionStore::Codex {
                    sessions: home.join("sessions"),
                })
            }
            CliFormat::Gemini => {
                let home = set("GEMINI_CLI_HOME").or_else(|| set("HOME"))?;
                Some(SessionStore::Gemini {
                    projects: home.join(".gemini").join("tmp"),
                })
            }
        }
    }

    /// The session file of `session_id`, if it exists.
    pub fn locate(&self, session_id: &str) -> Option<PathBuf> {
        if session_id.is_empty() {
            return None;
        }
        match self {
            SessionStore::Codex { sessions } => codex_rollout(sessions, session_id),
            SessionStore::Gemini { projects } => gemini_chat(projects, session_id),
        }
    }
}

/// The entries of `dir` that are directories, by name, newest (largest) name first.
fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .collect();
    dirs.sort_unstable_by(|a, b| b.cmp(a));
    dirs
}

/// The first file of `dir` whose name `matches`.
fn file_in(dir: &Path, matches: impl Fn(&str) -> bool) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .find(|entry| entry.file_name().to_str().is_some_and(&matches))
        .map(|entry| entry.path())
}

/// `sessions/YYYY/MM/DD/rollout-…-{thread}.jsonl`, the newest days first.
fn codex_rollout(sessions: &Path, thread: &str) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    subdirectories(sessions)
        .iter()
        .flat_map(|year| subdirectories(year))
        .flat_map(|month| subdirectories(&month))
        .take(CODEX_DAYS_SEARCHED)
        .find_map(|day| {
            file_in(&day, |name| {
                name.starts_with("rollout-") && name.ends_with(&suffix)
            })
        })
}

/// `tmp/{project}/chats/session-…-{first 8 of id}.jsonl` whose first line names the session.
fn gemini_chat(projects: &Path, session: &str) -> Option<PathBuf> {
    let short: String = session.chars().take(8).collect();
    let suffix = format!("-{short}.jsonl");
    subdirectories(projects).iter().find_map(|project| {
        let chats = project.join("chats");
        let candidates = std::fs::read_dir(&chats).ok()?;
        candidates
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("session-") && n.ends_with(&suffix))
            })
            .find(|path| names_session(path, session))
    })
}

/// Whether the chat file's first line (its header) is of `session`.
fn names_session(path: &Path, session: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Header {
        #[serde(rename = "sessionId")]
        session_id: String,
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut first = Vec::new();
    let read = BufReader::new(file)
        .take(64 * 1024)
        .read_until(b'\n', &mut first);
    read.is_ok()
        && serde_json::from_slice::<Header>(first.trim_ascii_end())
            .is_ok_and(|header| header.session_id == session)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn homes_come_from_the_clis_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            SessionStore::for_format(CliFormat::Codex, env(&[("HOME", "/h")])),
            Some(SessionStore::Codex {
                sessions: "/h/.codex/sessions".into()
            })
        );
        assert_eq!(
            SessionStore::for_format(
                CliFormat::Codex,
                env(&[("HOME", "/h"), ("CODEX_HOME", "/c")])
            ),
            Some(SessionStore::Codex {
                sessions: "/c/sessions".into()
            })
        );
        assert_eq!(
            SessionStore::for_format(
                CliFormat::Gemini,
                env(&[("HOME", "/h"), ("GEMINI_CLI_HOME", "/g")])
            ),
            Some(SessionStore::Gemini {
                projects: "/g/.gemini/tmp".into()
            })
        );
        assert_eq!(
            SessionStore::for_format(CliFormat::Claude, env(&[("HOME", "/h")])),
            None
        );
        assert_eq!(SessionStore::for_format(CliFormat::Gemini, env(&[])), None);
    }
}
