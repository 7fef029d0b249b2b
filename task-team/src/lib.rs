//! `in_process_teammate` tasks (SPEC §8): named agents of a team, `name@team`, coordinated
//! through per-agent mailboxes.
//!
//! - Each teammate is one long-lived agent session (with the [`CommandRunner`](task_agent::CommandRunner),
//!   one agent CLI process fed through its streaming input). Its code runs inside a
//!   [`context`] task-local that names the teammate.
//! - **Idle within running**: when a turn ends the teammate is `running` and idle; it posts an
//!   `idle_notification` to the lead, fires the [`on_idle`](TeamExecutor::on_idle) hooks and
//!   wakes [`until_idle`](TeamExecutor::until_idle) waiters.
//! - **Mailboxes**: `{teams root}/{team}/inboxes/{name}.jsonl`, task-output
//!   [`Mailbox`]es. Anyone, in any process, appends
//!   ([`post`]); the teammate's loop is the one reader. As soon as the teammate is idle its new
//!   messages (woken at once in this process, within [`TeamConfig::mailbox_poll`] from others)
//!   become its next user turn, and the cursor is committed only after the turn was written to
//!   the session: each message reaches the teammate exactly once, in mailbox order.
//! - **Plan mode**: the first turn's text is the plan; the lead gets a `plan_approval_request`
//!   and the teammate gets nothing else until a `plan_approval_response` approves it (messages
//!   meanwhile are held, in order); a rejection is delivered with its feedback and the next
//!   turn's text is the revised plan.
//! - **Outgoing messages**: the teammate's `SendMessage` tool uses (`{to, message, summary?}`)
//!   are posted to the recipient's mailbox (the lead is `team-lead`). A `shutdown_response`
//!   that approves ends the teammate (`completed`).
//! - **The end**: however a teammate ends, the [`on_end`](TeamExecutor::on_end) hooks run
//!   (a host unassigns its task-list tasks there); no model notification is sent (`notified`
//!   is set with the terminal status); a killed teammate is evicted
//!   [`TeamConfig::stopped_display`] after the kill.
//!
//! # Example
//!
//! Anyone, in any process, posts to a teammate's mailbox:
//!
//! ```no_run
//! use std::sync::Arc;
//! use task_core::Registry;
//! use task_team::{TeamConfig, TeamExecutor, TeamMessage};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Arc::new(Registry::default());
//! let team = TeamExecutor::new(registry, "/tmp/teams", "/tmp/tasks", TeamConfig::default());
//! task_team::post(team.teams_root(), "alpha", "writer", &TeamMessage::new("team-lead", "go"))?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod context;
mod executor;
mod launch;
mod message;

use std::path::Path;
use std::time::Duration;

pub use executor::{
    PendingTeammate, RESUMED_TURN, TEAMMATE_ENV, TeamExecutor, TeammateEnd, TeammateRequest,
};
pub use launch::TeammateStart;
pub use message::{Protocol, TeamMessage, render_turn};
use task_output::mailbox::{Mailbox, MailboxError};

/// The lead's name in every team.
pub const TEAM_LEAD: &str = "team-lead";

/// How often an idle teammate looks for messages written by other processes.
pub const DEFAULT_MAILBOX_POLL: Duration = Duration::from_millis(200);

/// How long a teammate asked to shut down has to approve before it is ended.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);

/// Knobs of the [`TeamExecutor`]; `Default` is the project's values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TeamConfig {
    /// Period of an idle teammate's mailbox check (messages from this process wake it at once).
    pub mailbox_poll: Duration,
    /// How long a killed teammate stays visible (`STOPPED_DISPLAY_MS`).
    pub stopped_display: Duration,
    /// How long a teammate asked to shut down has to approve before it is ended `killed`
    /// ([`EndReason::ShutdownUnanswered`](task_core::EndReason::ShutdownUnanswered)).
    pub shutdown_timeout: Duration,
    /// The budgets of every teammate spawned without budgets of its own (as
    /// [`AgentConfig::default_budget`](crate::AgentConfig::default_budget) for agents); `None`:
    /// none.
    pub default_budget: Option<task_core::AgentBudget>,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            mailbox_poll: DEFAULT_MAILBOX_POLL,
            stopped_display: task_core::STOPPED_DISPLAY,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            default_budget: None,
        }
    }
}

/// The mailbox of `name` in `team` under `teams_root` (`{root}/{team}/inboxes/{name}.jsonl`).
///
/// # Errors
/// [`MailboxError::InvalidName`] for a team or name that is not a plain name.
pub fn mailbox(teams_root: &Path, team: &str, name: &str) -> Result<Mailbox, MailboxError> {
    task_output::mailbox::validate_name(team)?;
    Mailbox::open(&teams_root.join(team).join("inboxes"), name)
}

/// Appends `message` to `name@team`'s mailbox; safe from any process at any time.
///
/// # Errors
/// As [`mailbox`], and append errors.
pub fn post(
    teams_root: &Path,
    team: &str,
    name: &str,
    message: &TeamMessage,
) -> Result<u64, MailboxError> {
    mailbox(teams_root, team, name)?.append(message)
}
