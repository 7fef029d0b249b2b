//! The dashboard's state between frames and what each key does.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use task_core::{Address, TaskId, TaskKind};

use super::state::{ListPane, OutputPane, Tasks, WorktreeChecks};
use crate::error::Result;
use task_session::session::Session;

/// What the keys do at the moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Moving around.
    Browse,
    /// The key help is shown.
    Help,
    /// Asking whether to kill the task.
    ConfirmKill(TaskId),
    /// Typing a message to an agent.
    Send {
        /// The agent.
        to: TaskId,
        /// What was typed so far.
        text: String,
    },
}

/// What the event loop does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing more.
    Stay,
    /// Leave the dashboard.
    Quit,
    /// Open this task's output in the pager (an agent's as its conversation).
    Page(TaskId),
}

/// The dashboard.
#[derive(Debug)]
pub struct App {
    /// The session shown.
    pub session: Session,
    /// The tasks as last read.
    pub tasks: Tasks,
    /// What git last said of the tasks' worktrees.
    worktrees: WorktreeChecks,
    /// The selected task.
    pub selected: Option<TaskId>,
    /// The selected task's output.
    pub output: OutputPane,
    /// The task list, when its pane is open.
    pub list: Option<ListPane>,
    /// Show finished, delivered tasks too.
    pub all: bool,
    /// What the keys do.
    pub mode: Mode,
    /// The answer to the last action (`killed b…`), shown in the footer.
    pub message: Option<String>,
}

impl App {
    /// A dashboard of `session`, read once.
    pub fn new(session: Session) -> Result<Self> {
        let mut app = Self {
            tasks: Tasks::default(),
            worktrees: WorktreeChecks::default(),
            session,
            selected: None,
            output: OutputPane::default(),
            list: None,
            all: false,
            mode: Mode::Browse,
            message: None,
        };
        app.refresh()?;
        Ok(app)
    }

    /// Reads the session again; keeps the selection if its task is still shown.
    pub fn refresh(&mut self) -> Result<()> {
        self.tasks = Tasks::load(&self.session, self.all, &mut self.worktrees)?;
        let keep = self.selected.and_then(|id| self.tasks.position(&id));
        let index = keep.or((!self.tasks.shown.is_empty()).then_some(0));
        self.selected = index.map(|i| self.tasks.shown[i].record.id());
        match index.map(|i| &self.tasks.shown[i]) {
            Some(task) => {
                let (id, size) = (task.record.id(), task.output_bytes);
                let transcript = task.record.task.base.task_type.holds_conversation();
                self.output.follow(&self.session, id, size, transcript)?;
            }
            None => self.output.clear(),
        }
        if self.list.is_some() {
            self.list = Some(ListPane::load(&self.session));
        }
        Ok(())
    }

    fn move_selection(&mut self, by: isize) {
        let count = self.tasks.shown.len();
        if count == 0 {
            return;
        }
        let at = self
            .selected
            .and_then(|id| self.tasks.position(&id))
            .unwrap_or(0);
        let next = at.saturating_add_signed(by).min(count - 1);
        self.selected = Some(self.tasks.shown[next].record.id());
    }

    fn selected_takes_messages(&self) -> bool {
        let Some(index) = self.selected.and_then(|id| self.tasks.position(&id)) else {
            return false;
        };
        matches!(
            self.tasks.shown[index].record.task.kind,
            TaskKind::Agent(_) | TaskKind::Teammate(_)
        )
    }

    /// Handles one key press.
    pub fn on_key(&mut self, key: KeyEvent) -> Result<Action> {
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if ctrl_c {
            return Ok(Action::Quit);
        }
        match self.mode.clone() {
            Mode::Help => self.mode = Mode::Browse,
            Mode::ConfirmKill(id) => {
                self.mode = Mode::Browse;
                if matches!(key.code, KeyCode::Char('y' | 'Y') | KeyCode::Enter) {
                    self.kill(id)?;
                } else {
                    self.message = Some("not killed".into());
                }
            }
            Mode::Send { to, mut text } => match key.code {
                KeyCode::Esc => self.mode = Mode::Browse,
                KeyCode::Enter => {
                    self.mode = Mode::Browse;
                    self.send(to, &text);
                }
                KeyCode::Backspace => {
                    text.pop();
                    self.mode = Mode::Send { to, text };
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    self.mode = Mode::Send { to, text };
                }
                _ => self.mode = Mode::Send { to, text },
            },
            Mode::Browse => return self.browse(key),
        }
        Ok(Action::Stay)
    }

    fn browse(&mut self, key: KeyEvent) -> Result<Action> {
        self.message = None;
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(Action::Quit),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::Home => self.move_selection(isize::MIN / 2),
            KeyCode::End => self.move_selection(isize::MAX / 2),
            KeyCode::Char('?') | KeyCode::F(1) => self.mode = Mode::Help,
            KeyCode::Char('x') | KeyCode::Delete => {
                if let Some(id) = self.selected {
                    self.mode = Mode::ConfirmKill(id);
                }
            }
            KeyCode::Char('s') => match self.selected {
                Some(to) if self.selected_takes_messages() => {
                    self.mode = Mode::Send {
                        to,
                        text: String::new(),
                    };
                }
                _ => self.message = Some("only agents and teammates take messages".into()),
            },
            KeyCode::Char('o') | KeyCode::Enter => {
                if let Some(id) = self.selected {
                    return Ok(Action::Page(id));
                }
            }
            KeyCode::Char('a') => {
                self.all = !self.all;
                self.refresh()?;
            }
            KeyCode::Char('l') => {
                self.list = match self.list {
                    Some(_) => None,
                    None => Some(ListPane::load(&self.session)),
                };
            }
            _ => {}
        }
        Ok(Action::Stay)
    }

    fn kill(&mut self, id: TaskId) -> Result<()> {
        let reports = self.session.kill(&[id])?;
        let result = reports.first().map_or("unknown", |r| r.result.as_str());
        self.message = Some(format!("{id}: {result}"));
        self.refresh()
    }

    fn send(&mut self, to: TaskId, text: &str) {
        let address = Address::Task(to);
        self.message = Some(match self.session.send_message(&address, text) {
            Ok(sent) if sent.delivered() => format!("sent to {to}"),
            Ok(sent) => format!("not sent: {}", sent.text(&address)),
            Err(error) => format!("not sent: {error}"),
        });
    }
}
