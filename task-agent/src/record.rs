//! What the executor remembers of each agent between its runs.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::runner::{AgentRunner, AgentSpec};

/// A request to a running agent's drive loop.
#[derive(Debug)]
pub(crate) enum Control {
    /// A message was queued: deliver it if the agent is between turns.
    Deliver,
    /// Stop the session; answer once its processes are gone.
    Cancel(oneshot::Sender<()>),
}

/// One agent: how to run it, its CLI session id, and the channel to its live run.
#[derive(Debug)]
pub(crate) struct AgentRecord {
    pub(crate) runner: Arc<dyn AgentRunner>,
    pub(crate) spec: AgentSpec,
    /// Whether it takes messages (the main session does not).
    pub(crate) accepts_messages: bool,
    /// Whether its end is reported silently (a workflow's agents).
    pub(crate) silent: bool,
    pub(crate) session_id: Mutex<Option<String>>,
    /// The last state of an agent taken back by [`AgentExecutor::adopt`](crate::AgentExecutor::adopt),
    /// until the resume it was taken back for registers it again.
    adopted: Mutex<Option<task_core::TaskState>>,
    /// The live run's control channel, tagged with its run number.
    control: Mutex<Option<(u64, mpsc::Sender<Control>)>>,
    /// Serialises message delivery, resume and a run's end.
    pub(crate) lifecycle: tokio::sync::Mutex<u64>,
}

impl AgentRecord {
    pub(crate) fn new(
        runner: Arc<dyn AgentRunner>,
        spec: AgentSpec,
        accepts_messages: bool,
    ) -> Self {
        AgentRecord {
            runner,
            spec,
            accepts_messages,
            silent: false,
            session_id: Mutex::new(None),
            adopted: Mutex::new(None),
            control: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(0),
        }
    }

    pub(crate) fn session_id(&self) -> Option<String> {
        self.session_id.lock().ok().and_then(|s| s.clone())
    }

    pub(crate) fn set_session_id(&self, id: String) {
        if let Ok(mut slot) = self.session_id.lock() {
            *slot = Some(id);
        }
    }

    /// Keeps `previous`, the state of an agent taken back, for the resume to come.
    pub(crate) fn set_adopted(&self, previous: task_core::TaskState) {
        if let Ok(mut slot) = self.adopted.lock() {
            *slot = Some(previous);
        }
    }

    /// How its end is delivered: queued for the model, or silently when it is silent.
    pub(crate) fn delivery(&self) -> task_core::Delivery {
        match self.silent {
            true => task_core::Delivery::Silent,
            false => task_core::Delivery::Queue(task_core::Priority::Later),
        }
    }

    /// The state kept by [`set_adopted`](Self::set_adopted), once.
    pub(crate) fn take_adopted(&self) -> Option<task_core::TaskState> {
        self.adopted.lock().ok().and_then(|mut s| s.take())
    }

    /// Opens the control channel of run `run`.
    pub(crate) fn open_control(&self, run: u64) -> mpsc::Receiver<Control> {
        let (tx, rx) = mpsc::channel(4);
        if let Ok(mut slot) = self.control.lock() {
            *slot = Some((run, tx));
        }
        rx
    }

    /// Closes the control channel if it is still run `run`'s.
    pub(crate) fn close_control(&self, run: u64) {
        if let Ok(mut slot) = self.control.lock()
            && slot.as_ref().is_some_and(|(r, _)| *r == run)
        {
            *slot = None;
        }
    }

    pub(crate) fn control(&self) -> Option<mpsc::Sender<Control>> {
        self.control
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|(_, tx)| tx.clone()))
    }
}
