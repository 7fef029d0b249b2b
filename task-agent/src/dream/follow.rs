//! Following one dream's agent session: phase, files touched, turns, the end and the lock.

use std::sync::Arc;

use serde_json::Value;
use task_core::{DreamState, DreamTurn, EndReason, Registry, TaskId, TaskKind, TaskStatus};
use tokio::sync::{mpsc, oneshot};

use super::{DreamLock, FILE_WRITE_TOOLS, end};
use crate::event::{AgentEvent, TurnOutcome};
use crate::runner::{AgentSession, SessionEvent};

pub(super) struct Follow {
    pub(super) registry: Arc<Registry>,
    pub(super) id: TaskId,
    pub(super) session: Box<dyn AgentSession>,
    pub(super) held: DreamLock,
    pub(super) cancel: mpsc::Receiver<oneshot::Sender<()>>,
}

impl Follow {
    pub(super) async fn run(mut self) {
        let mut turn = DreamTurn::default();
        let mut outcome = None;
        loop {
            let event = tokio::select! {
                biased;
                ack = self.cancel.recv() => {
                    self.session.cancel().await;
                    self.held.roll_back();
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                    return;
                }
                event = self.session.next_event() => event,
            };
            match event {
                SessionEvent::Agent(AgentEvent::Text(text)) => turn.text.push_str(&text),
                SessionEvent::Agent(AgentEvent::ToolStarted(tool)) => {
                    turn.tool_use_count += 1;
                    if FILE_WRITE_TOOLS.contains(&tool.name.as_str()) {
                        let path = file_of(&tool.input);
                        self.edit(|dream| dream.record_file_touched(path.clone()));
                    }
                }
                SessionEvent::Agent(AgentEvent::TurnEnded(result)) => {
                    let done = std::mem::take(&mut turn);
                    self.edit(|dream| dream.turns.push(done.clone()));
                    // A dream is one prompt: its input closes after the first turn.
                    self.session.close_input().await;
                    // A failed turn fails the dream, whatever follows it.
                    if !matches!(outcome, Some(TurnOutcome::Error { .. })) {
                        outcome = Some(result);
                    }
                }
                SessionEvent::Agent(_) => {}
                SessionEvent::Ended(ended) => {
                    self.finish(outcome, ended.exit_code);
                    return;
                }
            }
        }
    }

    fn finish(self, outcome: Option<TurnOutcome>, exit_code: Option<i32>) {
        let (status, reason) = match (outcome, exit_code) {
            (Some(TurnOutcome::Success { .. }), Some(0) | None) => {
                (TaskStatus::Completed, EndReason::Succeeded)
            }
            (Some(failed @ TurnOutcome::Error { .. }), _) => (
                TaskStatus::Failed,
                EndReason::Errored {
                    message: failed.error_text().unwrap_or_default(),
                },
            ),
            (_, code) => (
                TaskStatus::Failed,
                EndReason::Exited {
                    code: code.unwrap_or(-1),
                },
            ),
        };
        let ended = end(&self.registry, self.id, status, reason);
        if ended && status == TaskStatus::Completed {
            self.held.succeed();
        } else {
            self.held.roll_back();
        }
    }

    fn edit(&self, mut change: impl FnMut(&mut DreamState)) {
        let _ = self.registry.update(&self.id, |current| {
            let mut next = current.clone();
            match &mut next.kind {
                TaskKind::Dream(dream) if !current.status().is_terminal() => change(dream),
                _ => return None,
            }
            Some(next)
        });
    }
}

/// The file a write tool names (`file_path`, or `notebook_path`).
fn file_of(input: &Value) -> String {
    ["file_path", "notebook_path", "path"]
        .iter()
        .find_map(|key| input.get(key).and_then(Value::as_str))
        .unwrap_or("")
        .to_owned()
}
