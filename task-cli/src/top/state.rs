//! What the dashboard shows, refreshed from the session's files: the tasks grouped by type,
//! the selected task's output (followed by delta reads), and the session's task list.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use task_core::{TaskId, TaskType};
use task_worktree::Changes;

use crate::error::Result;
use crate::pill::{self, Pill};
use agent_stream::conversation::Conversation;
use task_session::record::TaskRecord;
use task_session::session::Session;

/// How many lines of the selected task's output the pane keeps.
pub const OUTPUT_LINES: usize = 500;
/// How much output the pane reads when a task is selected (its tail) and at most per refresh.
pub const OUTPUT_READ_BYTES: usize = 64 * 1024;

/// How long what git said of a worktree is shown before git is asked again: a dashboard
/// refreshing every 100 ms does not run `git status` in each worktree ten times a second.
pub const WORKTREE_RECHECK: Duration = Duration::from_secs(2);

/// One task as listed, with the size of its output.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its record.
    pub record: TaskRecord,
    /// Bytes of output.
    pub output_bytes: u64,
    /// What its git worktree holds beyond its base, when it has one that exists.
    pub worktree_changes: Option<Changes>,
}

/// What git last said of each task's worktree, and when.
#[derive(Debug, Default)]
pub struct WorktreeChecks {
    checked: HashMap<TaskId, (Instant, Option<Changes>)>,
}

impl WorktreeChecks {
    /// The changes of `record`'s worktree, if it has one that exists: asked of git at most
    /// once per [`WORKTREE_RECHECK`].
    fn changes(&mut self, record: &TaskRecord) -> Option<Changes> {
        let worktree = crate::render::existing_worktree(record)?;
        let now = Instant::now();
        match self.checked.get(&record.id()) {
            Some((at, changes)) if now.duration_since(*at) < WORKTREE_RECHECK => *changes,
            _ => {
                let changes = task_worktree::changes(worktree).ok();
                self.checked.insert(record.id(), (now, changes));
                changes
            }
        }
    }

    /// Forgets the tasks no longer shown.
    fn keep_only(&mut self, shown: &[Listed]) {
        self.checked
            .retain(|id, _| shown.iter().any(|t| t.record.id() == *id));
    }
}

/// The session's tasks, grouped by type (SPEC order), the newest first in each group.
#[derive(Debug, Default)]
pub struct Tasks {
    /// The tasks shown, in display order.
    pub shown: Vec<Listed>,
    /// The pill of the session's background work.
    pub pill: Option<Pill>,
    /// How many finished tasks are hidden (shown with `a`).
    pub hidden: usize,
    /// Record files that could not be read.
    pub problems: usize,
}

impl Tasks {
    /// Reads the session; `all`: also finished tasks whose completion was delivered. What the
    /// worktrees hold comes from `checks`.
    pub fn load(session: &Session, all: bool, checks: &mut WorktreeChecks) -> Result<Self> {
        let listing = session.tasks()?;
        let pill = pill::pill(listing.tasks.iter().map(|r| &r.task));
        let mut hidden = 0;
        let mut shown: Vec<Listed> = Vec::new();
        for record in listing.tasks {
            let id = record.id();
            if !all && record.is_settled(session.paths()) {
                hidden += 1;
                continue;
            }
            let output_bytes = std::fs::metadata(session.output_path(&id)).map_or(0, |m| m.len());
            let worktree_changes = checks.changes(&record);
            shown.push(Listed {
                record,
                output_bytes,
                worktree_changes,
            });
        }
        checks.keep_only(&shown);
        let order = |t: TaskType| TaskType::ALL.iter().position(|&x| x == t).unwrap_or(0);
        shown.sort_by(|a, b| {
            let (a, b) = (&a.record.task.base, &b.record.task.base);
            (order(a.task_type), std::cmp::Reverse(a.start_time))
                .cmp(&(order(b.task_type), std::cmp::Reverse(b.start_time)))
        });
        Ok(Self {
            shown,
            pill: Some(pill),
            hidden,
            problems: listing.problems.len(),
        })
    }

    /// The position of `id` among the shown tasks.
    pub fn position(&self, id: &TaskId) -> Option<usize> {
        self.shown.iter().position(|t| t.record.id() == *id)
    }
}

/// The selected task's output, followed from where the pane last read; an agent's transcript
/// is shown as a person reads it (what it said, its tools, how its turns ended).
#[derive(Debug, Default)]
pub struct OutputPane {
    /// The task followed.
    pub id: Option<TaskId>,
    /// The byte offset read up to.
    offset: u64,
    /// Complete lines, the newest last.
    pub lines: VecDeque<String>,
    /// The last line read, while it has no newline yet.
    partial: String,
    /// Reads the followed task's conversation; `None` for tasks that hold none.
    transcript: Option<Conversation>,
    /// The first line read is the end of a line cut by the tail read (a transcript skips it).
    cut: bool,
}

impl OutputPane {
    /// Follows `id`: a task newly selected starts from the tail of its output; afterwards only
    /// what was written since is read. `transcript`: the output is an agent's transcript.
    pub fn follow(
        &mut self,
        session: &Session,
        id: TaskId,
        size: u64,
        transcript: bool,
    ) -> Result<()> {
        if self.id != Some(id) {
            let offset = size.saturating_sub(OUTPUT_READ_BYTES as u64);
            *self = Self {
                id: Some(id),
                offset,
                transcript: transcript.then(Conversation::default),
                cut: offset > 0,
                ..Self::default()
            };
        }
        let delta = session.read_text_delta(&id, self.offset, OUTPUT_READ_BYTES)?;
        self.offset = delta.new_offset;
        self.push(&delta.text);
        Ok(())
    }

    /// The last line while it has no newline yet (nothing for a transcript, whose lines are
    /// shown once complete).
    pub fn partial(&self) -> &str {
        match self.transcript {
            Some(_) => "",
            None => &self.partial,
        }
    }

    /// Adds text read from the output.
    pub(super) fn push(&mut self, text: &str) {
        let mut pieces = text.split('\n').peekable();
        while let Some(piece) = pieces.next() {
            self.partial.push_str(piece);
            if pieces.peek().is_some() {
                let line = std::mem::take(&mut self.partial);
                self.complete(line);
            }
        }
    }

    fn complete(&mut self, line: String) {
        let Some(conversation) = &mut self.transcript else {
            return self.keep(line);
        };
        if std::mem::take(&mut self.cut) {
            return;
        }
        let mut entries = Vec::new();
        conversation.read_line(line.as_bytes(), &mut entries);
        for entry in entries {
            entry
                .to_string()
                .lines()
                .for_each(|l| self.keep(l.to_owned()));
        }
    }

    fn keep(&mut self, line: String) {
        self.lines.push_back(line);
        if self.lines.len() > OUTPUT_LINES {
            self.lines.pop_front();
        }
    }

    /// Forgets the task followed.
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

/// One line of the task-list pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListLine {
    /// `#2`.
    pub id: String,
    /// Its status.
    pub status: String,
    /// Its subject.
    pub subject: String,
    /// Its owner.
    pub owner: Option<String>,
    /// Ready to be claimed.
    pub ready: bool,
    /// The unfinished tasks blocking it.
    pub blocked_by: Vec<String>,
}

/// The session's task list: each task with ready/blocked/owner, and the dependency graph.
#[derive(Debug, Default)]
pub struct ListPane {
    /// Which list.
    pub name: String,
    /// Its tasks.
    pub lines: Vec<ListLine>,
    /// The dependency graph as text.
    pub graph: String,
    /// Why the list could not be read.
    pub error: Option<String>,
}

impl ListPane {
    /// Reads the list named after the session (as `tasks list` does by default).
    pub fn load(session: &Session) -> Self {
        let name = session.paths().name().to_owned();
        match read_list(session) {
            Ok((lines, graph)) => Self {
                name,
                lines,
                graph,
                error: None,
            },
            Err(error) => Self {
                name,
                error: Some(error.to_string()),
                ..Self::default()
            },
        }
    }
}

fn read_list(session: &Session) -> task_list::Result<(Vec<ListLine>, String)> {
    let mut env = task_list::EnvValues::from_env();
    env.tasks_root = Some(session.paths().root().to_string_lossy().into_owned());
    let layout = task_list::Layout::Auto;
    let named = std::env::var("TASKS_LIST_ID").ok();
    let id = task_client::cli::list_open::session_list(named.as_deref(), false, session.paths())
        .unwrap_or(task_list::DEFAULT_LIST_ID);
    let store = std::env::var("TASKS_LIST_STORE").ok();
    let list = crate::list_open::open_in(store.as_deref(), &env, layout, id)?;
    let ready = list.ready()?;
    let lines = list
        .list()?
        .tasks
        .into_iter()
        .map(|entry| ListLine {
            ready: ready.ready.iter().any(|r| r.id == entry.id),
            id: format!("#{}", entry.id),
            status: entry.status.to_string(),
            subject: entry.subject,
            owner: entry.owner,
            blocked_by: entry.blocked_by.iter().map(|b| format!("#{b}")).collect(),
        })
        .collect();
    Ok((lines, list.graph()?.to_text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_cut_into_lines_across_reads() {
        let mut pane = OutputPane::default();
        pane.push("one\ntw");
        assert_eq!(pane.lines, ["one"]);
        assert_eq!(pane.partial, "tw");
        pane.push("o\nthree\n");
        assert_eq!(pane.lines, ["one", "two", "three"]);
        assert_eq!(pane.partial, "");
        for n in 0..OUTPUT_LINES {
            pane.push(&format!("{n}\n"));
        }
        assert_eq!(pane.lines.len(), OUTPUT_LINES);
        assert_eq!(pane.lines.back().map(String::as_str), Some("499"));
    }

    fn agent_pane(cut: bool) -> OutputPane {
        OutputPane {
            transcript: Some(Conversation::default()),
            cut,
            ..OutputPane::default()
        }
    }

    #[test]
    fn an_agents_transcript_reads_as_a_conversation() {
        let mut pane = agent_pane(false);
        let transcript = [
            r#"{"type":"system","subtype":"init","session_id":"s1"}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Looking at the files."}],"usage":{"input_tokens":10,"output_tokens":2}}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls","description":"List files"}}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a"}]}}"#,
            "plain text from the CLI",
            r#"{"type":"result","subtype":"success","result":"3 files"}"#,
        ];
        pane.push(&format!("{}\n", transcript.join("\n")));
        pane.push(r#"{"type":"assistant","mess"#);
        let lines: Vec<&str> = pane.lines.iter().map(String::as_str).collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[0], "Looking at the files.");
        assert!(
            lines[1].starts_with("  → ") && lines[1].contains("List files"),
            "{lines:?}"
        );
        assert_eq!(lines[2..], ["plain text from the CLI", "✓ 3 files"]);
        assert_eq!(pane.partial(), "", "half an event is not shown");
    }

    #[test]
    fn a_transcript_read_from_its_tail_skips_the_line_the_read_cut() {
        let mut pane = agent_pane(true);
        pane.push(
            "\"result\":\"old\"}\n{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"new\"}\n",
        );
        assert_eq!(pane.lines, ["✓ new"]);
    }
}
