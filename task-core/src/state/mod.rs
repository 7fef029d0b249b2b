//! What a task is at one moment: the base state every task carries (SPEC §2) and the data of
//! its type (SPEC §5–11). Data only: executors add behaviour in their own crates.

mod agent;
mod capped;
mod other;
mod shell;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use agent::{
    AgentBudget, AgentProgress, AgentState, MessageUsage, RECENT_ACTIVITIES_CAP,
    TEAMMATE_MESSAGES_CAP, TeammateIdentity, TeammateState, ToolActivity, Worktree,
};
pub use capped::CappedVec;
pub use other::{
    DREAM_TURNS_CAP, DreamPhase, DreamState, DreamTurn, RemoteState, RemoteSubtype, WorkflowState,
    WorkflowStep,
};
pub use shell::{BatchDependency, BatchJob, ProcessOwner, ShellKind, ShellProcess, ShellState};

use crate::{Address, EndReason, TaskId, TaskStatus, TaskType};

/// Milliseconds since the Unix epoch, the unit of every time in a task's state.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The fields every task carries (SPEC §2). JSON names are camelCase (`toolUseId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStateBase {
    /// The task's id.
    pub id: TaskId,
    /// The task's type; always the type of `id`'s prefix.
    #[serde(rename = "type")]
    pub task_type: TaskType,
    /// Where the task is in its life.
    pub status: TaskStatus,
    /// What the task is for, in the caller's words.
    pub description: String,
    /// The tool call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// When it was registered (ms epoch): its creation, queue time included.
    pub start_time: u64,
    /// When it began running (ms epoch): set on its transition to `running` (by the registry,
    /// [`Registry::update`](crate::Registry::update)); none while it waits and for a task that
    /// ended without ever running (killed in the queue, a dependency failed). Every run time
    /// shown to people is measured from it ([`TaskStateBase::run_ms`]). Absent from records
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    /// When it reached a terminal status (ms epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<u64>,
    /// Why it ended, once terminal: set by the executor with the terminal status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<EndReason>,
    /// The agent that started it: when that agent ends, this task is killed and its queued
    /// notifications are dropped (SPEC §5's orphan cleanup, for every type). A record whose
    /// owner is not a task id (written by hand, or by a version that kept any text) reads as
    /// owned by nobody.
    #[serde(
        default,
        deserialize_with = "crate::lenient_task_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_id: Option<TaskId>,
    /// Time spent paused, if it was ever paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_paused_ms: Option<u64>,
    /// The absolute path of its output file.
    pub output_file: PathBuf,
    /// Bytes of output consumed so far.
    #[serde(default)]
    pub output_offset: u64,
    /// The one-way latch: set once the task's one notification has been sent (or suppressed).
    #[serde(default)]
    pub notified: bool,
    /// Held in the registry while someone looks at it (never evicted while set).
    #[serde(default)]
    pub retain: bool,
    /// Not evicted before this time (ms epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evict_after: Option<u64>,
}

impl TaskStateBase {
    /// The base of a new task: `pending`, offset 0, not notified, started now.
    pub fn new(
        id: TaskId,
        description: impl Into<String>,
        output_file: impl Into<PathBuf>,
    ) -> Self {
        TaskStateBase {
            id,
            task_type: id.task_type(),
            status: TaskStatus::Pending,
            description: description.into(),
            tool_use_id: None,
            start_time: now_ms(),
            started_at: None,
            end_time: None,
            end_reason: None,
            agent_id: None,
            total_paused_ms: None,
            output_file: output_file.into(),
            output_offset: 0,
            notified: false,
            retain: false,
            evict_after: None,
        }
    }

    /// How long it ran, in ms, as of `now` (ms epoch): from [`started_at`](Self::started_at)
    /// to its end, or to `now` while it runs; none for a task that never ran. Time spent
    /// waiting in a queue is not run time.
    pub fn run_ms(&self, now: u64) -> Option<u64> {
        let started = self.started_at?;
        Some(self.end_time.unwrap_or(now).saturating_sub(started))
    }
}

/// The data of a task's type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
///
/// The variants but a shell's are boxed: a supervisor may hold ten thousand shells, and each
/// would otherwise take the size of the largest variant (an agent's, three times a shell's).
pub enum TaskKind {
    /// `local_bash` (kind `shell`) or `monitor_mcp` (kind `monitor`).
    Shell(ShellState),
    /// `local_agent`, including the main session.
    Agent(Box<AgentState>),
    /// `in_process_teammate`.
    Teammate(Box<TeammateState>),
    /// `local_workflow`.
    Workflow(Box<WorkflowState>),
    /// `remote_agent`.
    Remote(Box<RemoteState>),
    /// `dream`.
    Dream(Box<DreamState>),
}

impl TaskKind {
    /// Whether this data belongs to a task of `task_type`.
    pub fn fits(&self, task_type: TaskType) -> bool {
        match self {
            TaskKind::Shell(shell) => match shell.kind {
                ShellKind::Shell => task_type == TaskType::LocalBash,
                ShellKind::Monitor => task_type == TaskType::MonitorMcp,
            },
            TaskKind::Agent(_) => task_type == TaskType::LocalAgent,
            TaskKind::Teammate(_) => task_type == TaskType::InProcessTeammate,
            TaskKind::Workflow(_) => task_type == TaskType::LocalWorkflow,
            TaskKind::Remote(_) => task_type == TaskType::RemoteAgent,
            TaskKind::Dream(_) => task_type == TaskType::Dream,
        }
    }

    /// Whether the task's data changes without a [`TaskEvent`](crate::TaskEvent): an agent's
    /// usage and text are counted as they arrive and only its tool uses are reported, so a
    /// mirror of the state must compare it now and then; shells and monitors change by events
    /// alone.
    pub fn changes_quietly(&self) -> bool {
        !matches!(self, TaskKind::Shell(_))
    }

    /// Whether a message can bring an ended task of this data back to life (an agent or a
    /// teammate resumes its conversation), so a supervisor that could resume it must keep it.
    pub fn resumes_on_message(&self) -> bool {
        matches!(self, TaskKind::Agent(_) | TaskKind::Teammate(_))
    }

    /// Whether the processes the task leaves running when it ends are killed unless it asks
    /// otherwise: an agent's (a teammate's, a dream's) tools daemonize on their own, which
    /// nobody asked for, so they die with it; a shell's command may mean to leave a daemon,
    /// so its strays are only reported (issue #28).
    pub fn kills_strays(&self) -> bool {
        matches!(
            self,
            TaskKind::Agent(_) | TaskKind::Teammate(_) | TaskKind::Dream(_)
        )
    }

    /// What the task runs, in one line: a shell's command, an agent's prompt, a remote
    /// session's command; empty for the other types.
    pub fn command_line(&self) -> &str {
        match self {
            TaskKind::Shell(shell) => &shell.command,
            TaskKind::Agent(agent) => &agent.prompt,
            TaskKind::Remote(remote) => &remote.command,
            _ => "",
        }
    }

    /// Whether `address`, a name, names this task: an agent given that name (`--name`), a
    /// teammate of that name (`name`, in any team, or `name@team`). An id names no task here
    /// (the caller compares ids).
    pub fn answers_to(&self, address: &Address) -> bool {
        match (self, address) {
            (TaskKind::Agent(agent), Address::Name(name)) => agent.name.as_ref() == Some(name),
            (TaskKind::Teammate(mate), Address::Name(name)) => mate.identity.agent_name == *name,
            (TaskKind::Teammate(mate), Address::Teammate { name, team }) => {
                mate.identity.agent_name == *name && mate.identity.team_name == *team
            }
            _ => false,
        }
    }

    /// The git worktree an agent or a teammate runs in (or ran in, kept for its changes).
    pub fn worktree(&self) -> Option<&Worktree> {
        match self {
            TaskKind::Agent(agent) => agent.worktree.as_deref(),
            TaskKind::Teammate(mate) => mate.worktree.as_deref(),
            _ => None,
        }
    }

    /// Sets (or with `None` forgets) the worktree of an agent or a teammate; whether this data
    /// had a worktree to replace (other kinds have none, and are left alone).
    pub fn set_worktree(&mut self, worktree: Option<Worktree>) -> bool {
        let slot = match self {
            TaskKind::Agent(agent) => &mut agent.worktree,
            TaskKind::Teammate(mate) => &mut mate.worktree,
            _ => return false,
        };
        std::mem::replace(slot, worktree.map(Box::new)).is_some()
    }

    /// The exit code of a shell command or monitor, once it ended (none for other types).
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            TaskKind::Shell(shell) => shell.exit_code,
            _ => None,
        }
    }

    /// Copies the UI-held fields of `previous` (messages, diskLoaded, pendingMessages) into
    /// this data, for the executors whose resume carries them forward
    /// ([`Task::carry_forward`](crate::Task::carry_forward)). Data of another kind is left alone.
    pub fn carry_ui_fields_from(&mut self, previous: &TaskKind) {
        match (self, previous) {
            (TaskKind::Agent(next), TaskKind::Agent(prev)) => {
                next.messages.clone_from(&prev.messages);
                next.disk_loaded = prev.disk_loaded;
                next.pending_messages.clone_from(&prev.pending_messages);
            }
            (TaskKind::Teammate(next), TaskKind::Teammate(prev)) => {
                next.messages.clone_from(&prev.messages);
                next.pending_messages.clone_from(&prev.pending_messages);
            }
            _ => {}
        }
    }
}

/// Why a state cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// `base.task_type` is not the type of the id's prefix.
    #[error("task {id}: type {task_type} does not match the id's prefix (a {expected} id)")]
    TypeMismatch {
        /// The task.
        id: TaskId,
        /// The type the state claims.
        task_type: TaskType,
        /// The type of the id's prefix.
        expected: TaskType,
    },
    /// The per-type data is for another type.
    #[error("task {id}: its data does not belong to a {task_type} task")]
    KindMismatch {
        /// The task.
        id: TaskId,
        /// The task's type.
        task_type: TaskType,
    },
}

/// A task: its base state and the data of its type.
///
/// Serialized flat: the base fields at the top level (SPEC §2 names), the type's data under
/// `kind` (`{"id": …, "type": "local_bash", …, "kind": {"shell": {"command": …}}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// The fields every task has.
    #[serde(flatten)]
    pub base: TaskStateBase,
    /// The data of its type.
    pub kind: TaskKind,
}

impl TaskState {
    /// The batch job the task runs as, when it runs on a batch system (a shell placed there).
    pub fn batch(&self) -> Option<&BatchJob> {
        match &self.kind {
            TaskKind::Shell(shell) => shell.batch.as_deref(),
            _ => None,
        }
    }

    /// [`TaskState::batch`], to change.
    pub fn batch_mut(&mut self) -> Option<&mut BatchJob> {
        match &mut self.kind {
            TaskKind::Shell(shell) => shell.batch.as_deref_mut(),
            _ => None,
        }
    }

    /// A new `pending` task, checking that `kind` fits the type of `id`.
    pub fn new(
        id: TaskId,
        description: impl Into<String>,
        output_file: impl Into<PathBuf>,
        kind: TaskKind,
    ) -> Result<TaskState, StateError> {
        let state = TaskState {
            base: TaskStateBase::new(id, description, output_file),
            kind,
        };
        state.validate()?;
        Ok(state)
    }

    /// This state with `tool_use_id` set.
    #[must_use]
    pub fn with_tool_use_id(mut self, tool_use_id: impl Into<String>) -> TaskState {
        self.base.tool_use_id = Some(tool_use_id.into());
        self
    }

    /// Checks that the type agrees with the id and with the data.
    pub fn validate(&self) -> Result<(), StateError> {
        let TaskStateBase { id, task_type, .. } = self.base;
        if id.task_type() != task_type {
            return Err(StateError::TypeMismatch {
                id,
                task_type,
                expected: id.task_type(),
            });
        }
        if !self.kind.fits(task_type) {
            return Err(StateError::KindMismatch { id, task_type });
        }
        Ok(())
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.base.id
    }

    /// The task's status.
    pub fn status(&self) -> TaskStatus {
        self.base.status
    }

    /// The agent that owns this task ([`TaskStateBase::agent_id`]).
    pub fn owner_agent_id(&self) -> Option<TaskId> {
        self.base.agent_id
    }

    /// This state with its owner set.
    #[must_use]
    pub fn owned_by(mut self, agent_id: Option<TaskId>) -> TaskState {
        self.base.agent_id = agent_id;
        self
    }

    /// Ends this live task as an orphan: the process that supervised it (pid `supervisor_pid`)
    /// died while it was live, so it is `failed` with [`EndReason::SupervisorDied`], ended at
    /// `ended_at` (ms epoch: whoever finds the orphan gives the same time, the last time its
    /// supervisor was known alive, so every finder derives the same end). A terminal task is
    /// left as it is (returns false).
    pub fn end_as_orphan(&mut self, supervisor_pid: u32, ended_at: u64) -> bool {
        if self.status().is_terminal() {
            return false;
        }
        self.base.status = TaskStatus::Failed;
        self.base.end_time = Some(ended_at);
        self.base.end_reason = Some(EndReason::SupervisorDied {
            pid: supervisor_pid,
        });
        true
    }

    /// Records `reason` as this task's end (the status is the caller's transition): a shell's
    /// exit code follows it (137 for a kill, 1 for a start that never happened) and its
    /// process is forgotten.
    pub fn record_end(&mut self, reason: &EndReason) {
        self.base.end_reason = Some(reason.clone());
        if let TaskKind::Shell(shell) = &mut self.kind {
            shell.exit_code = reason.exit_code();
            shell.process = None;
            if let Some(batch) = &mut shell.batch {
                batch.waiting = None;
            }
        }
    }

    /// Whether eviction may remove this task at `now` (ms): terminal, notified, not retained,
    /// and past `evict_after` if set.
    pub fn may_evict(&self, now: u64) -> bool {
        let base = &self.base;
        base.status.is_terminal()
            && base.notified
            && !base.retain
            && base.evict_after.is_none_or(|at| now >= at)
    }

    /// This state as it should be after a resume that re-registers `self` over `previous`:
    /// retain and startTime come from `previous` (what else, the executor of the type says).
    pub(crate) fn resumed_over(mut self, previous: &TaskState) -> TaskState {
        self.base.retain = previous.base.retain;
        self.base.start_time = previous.base.start_time;
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_shells_state_is_not_sized_by_the_largest_kind() {
        // Ten thousand shells in one supervisor: each pays for `TaskKind`'s largest variant.
        let kind = std::mem::size_of::<TaskKind>();
        assert!(
            kind <= std::mem::size_of::<ShellState>() + 8,
            "TaskKind is {kind} bytes"
        );
    }

    fn shell(id: TaskId) -> TaskState {
        TaskState::new(
            id,
            "build",
            "/tmp/x.output",
            TaskKind::Shell(ShellState {
                command: "make".into(),
                ..ShellState::default()
            }),
        )
        .unwrap()
    }

    #[test]
    fn new_task_starts_pending_at_offset_zero_not_notified() {
        let state = shell(TaskId::generate(TaskType::LocalBash).unwrap());
        assert_eq!(state.status(), TaskStatus::Pending);
        assert_eq!(state.base.output_offset, 0);
        assert!(!state.base.notified);
        assert_eq!(state.base.task_type, TaskType::LocalBash);
    }

    #[test]
    fn kind_must_fit_the_type() {
        let id = TaskId::generate(TaskType::MonitorMcp).unwrap();
        let err = TaskState::new(id, "d", "/o", TaskKind::Shell(ShellState::default()));
        assert!(matches!(err, Err(StateError::KindMismatch { .. })));
        let monitor = ShellState {
            kind: ShellKind::Monitor,
            ..ShellState::default()
        };
        assert!(TaskState::new(id, "d", "/o", TaskKind::Shell(monitor)).is_ok());
        let agent = TaskId::main_session().unwrap();
        assert!(TaskState::new(agent, "d", "/o", TaskKind::Agent(Box::default())).is_ok());
    }

    #[test]
    fn base_fields_use_spec_json_names() {
        let mut state = shell(TaskId::parse("bsubuniyr").unwrap()).with_tool_use_id("toolu_1");
        state.base.end_time = Some(5);
        let json = serde_json::to_value(&state).unwrap();
        for key in [
            "id",
            "type",
            "status",
            "description",
            "toolUseId",
            "startTime",
            "endTime",
            "outputFile",
            "outputOffset",
            "notified",
            "retain",
        ] {
            assert!(json.get(key).is_some(), "missing {key} in {json}");
        }
        assert_eq!(json["type"], "local_bash");
        assert_eq!(json["kind"]["shell"]["command"], "make");
        let back: TaskState = serde_json::from_value(json).unwrap();
        assert_eq!(back, state);
    }

    #[test]
    fn token_count_uses_latest_input_and_summed_output() {
        let mut progress = AgentProgress::default();
        let usage = |input, output| MessageUsage {
            input_tokens: input,
            cache_creation_input_tokens: 10,
            cache_read_input_tokens: 100,
            output_tokens: output,
        };
        progress.record_usage(usage(1000, 50));
        progress.record_usage(usage(1200, 70));
        assert_eq!(progress.latest_input_tokens, 1310);
        assert_eq!(progress.cumulative_output_tokens, 120);
        assert_eq!(progress.token_count, 1430);
    }

    #[test]
    fn eviction_needs_terminal_notified_unretained_and_past_deadline() {
        let mut state = shell(TaskId::generate(TaskType::LocalBash).unwrap());
        state.base.status = TaskStatus::Completed;
        assert!(!state.may_evict(100), "not notified");
        state.base.notified = true;
        assert!(state.may_evict(100));
        state.base.retain = true;
        assert!(!state.may_evict(100), "retained");
        state.base.retain = false;
        state.base.evict_after = Some(200);
        assert!(!state.may_evict(199));
        assert!(state.may_evict(200));
        state.base.status = TaskStatus::Pending;
        assert!(
            !state.may_evict(200),
            "pending tasks that are notified are kept"
        );
    }
}
