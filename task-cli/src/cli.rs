//! The command line surface of `tasks` (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Environment:
  TASKS_ROOT       state root (default $XDG_STATE_HOME/tasks, else ~/.local/state/tasks)
  TASKS_SESSION    session name (default \"default\")
  TASKS_LIST_ROOT  task-list root (default {root}/lists)
  TASKS_LIST_ID    task-list id (default \"default\")
  Supervisor settings (TASKS_IDLE_EXIT_MS, TASKS_STALL_*): see the task-cli README.

Exit codes:
  0 success · 1..=255 from `wait`/`run --wait`: the task's own exit code
  65 malformed task id · 66 unknown task · 69 supervisor unavailable · 70 other error
  74 I/O failure · 124 `wait --timeout` expired · 137 task was killed · 2 usage error";

/// Background tasks that outlive the command that started them, and task lists.
///
/// `tasks run` hands a command to the session's supervisor (started on demand) and prints the
/// task id at once; any later `tasks` process, from any terminal, can list, read, wait on and kill
/// that task, and receive its completion notification exactly once.
#[derive(Debug, Parser)]
#[command(name = "tasks", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// State root directory.
    #[arg(long, global = true, env = "TASKS_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Session name: a separate set of tasks under the root.
    #[arg(long, global = true, env = "TASKS_SESSION", value_name = "NAME")]
    pub session: Option<String>,
    /// Print JSON (one document, or JSON lines for streams) instead of human output.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
///
/// Each subcommand's arguments are built only when it is the one invoked (`defer`): building
/// every subcommand's arguments up front was most of the parser's start-up cost.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Start a shell command in the background and print its task id.
    Run(RunArgs),
    /// Start a monitor: each stdout line of the command is an event notification.
    Monitor(MonitorArgs),
    /// Start a background agent: an agent CLI speaking a JSON event stream, followed as it works.
    Agent(AgentArgs),
    /// Run, resume or show JavaScript workflow scripts whose agent() calls are background agents.
    Workflow(crate::workflow_cmd::WorkflowArgs),
    /// Send a message to an agent (by id or name): queued while it works, or it resumes.
    Send(SendArgs),
    /// List the session's tasks.
    Ps(PsArgs),
    /// Read a task's output: a delta from an offset, a tail, or follow it until the task ends.
    Output(OutputArgs),
    /// Wait until every named task has ended; the exit status mirrors the task's.
    Wait(WaitArgs),
    /// Kill tasks and their whole process trees.
    Kill(KillArgs),
    /// Deliver pending notifications (each exactly once across all readers), in priority order.
    Notifications(NotificationsArgs),
    /// Manage task lists (the persistent checklist with dependencies).
    List(ListArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Serve the task tools over the Model Context Protocol on stdio (for agents).
    Mcp(crate::mcp::McpArgs),
    /// Run the session supervisor (started on demand by `run`; not for direct use).
    #[command(name = "__supervise", hide = true)]
    Supervise,
}

/// `tasks run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Human description (default: the command).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Kill the task after this many milliseconds (exit 143).
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// The agent that owns the task (its tasks are killed when it ends).
    #[arg(long, value_name = "ID")]
    pub agent_id: Option<String>,
    /// Wait for the task to end, print its notification and exit with its exit code.
    #[arg(long)]
    pub wait: bool,
    /// The command: one argument is shell text (`'a | b'`); several are quoted words.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `tasks agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The CLI's event format (claude, codex, gemini): the flags it needs are added when absent.
    /// `auto`: the command runs exactly as given (the prompt in it, stdin closed) and the format
    /// is detected from its first line.
    #[arg(long, default_value = "claude", value_parser = parse_runner)]
    pub runner: task_agent::RunnerFormat,
    /// A name the agent can be addressed by (`tasks send NAME …`).
    #[arg(long)]
    pub name: Option<String>,
    /// Human description (default: the prompt).
    #[arg(short, long)]
    pub description: Option<String>,
    /// The first user turn (with `--runner auto`, only recorded: the command carries it).
    #[arg(long, short)]
    pub prompt: String,
    /// Wait for the agent to stop, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// The agent CLI: program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn parse_runner(text: &str) -> Result<task_agent::RunnerFormat, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| format!("{text:?}: expected claude, codex, gemini or auto"))
}

/// `tasks send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The agent's task id or name.
    pub to: String,
    /// The message.
    pub message: String,
}

/// `tasks monitor`.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Human description (default: the command).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Stop the monitor after this many milliseconds (default 300000, max 3600000).
    #[arg(long, value_name = "MS", conflicts_with = "persistent")]
    pub timeout_ms: Option<u64>,
    /// Keep the monitor until it is killed or its command exits.
    #[arg(long)]
    pub persistent: bool,
    /// Watch a WebSocket instead of a command: each message it sends is an event.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub ws: Option<String>,
    /// A subprotocol to offer the WebSocket (repeatable, in order of preference).
    #[arg(long = "ws-protocol", value_name = "NAME", requires = "ws")]
    pub ws_protocols: Vec<String>,
    /// The command whose stdout lines are events.
    #[arg(required_unless_present = "ws", last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `tasks ps`.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// Include finished tasks whose notification was already delivered.
    #[arg(short, long)]
    pub all: bool,
    /// Refresh the table in place every second (until interrupted).
    #[arg(short, long, conflicts_with = "json")]
    pub watch: bool,
}

/// `tasks output`.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The task id.
    pub id: String,
    /// Read from this byte offset (a delta read; `--json` reports the new offset).
    #[arg(long, value_name = "BYTES", conflicts_with = "tail")]
    pub offset: Option<u64>,
    /// Read at most this many bytes (default 8 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_bytes: Option<u64>,
    /// Print only the last LINES lines.
    #[arg(long, value_name = "LINES")]
    pub tail: Option<usize>,
    /// Keep printing new output until the task ends.
    #[arg(short, long, conflicts_with_all = ["tail", "json", "for_model"])]
    pub follow: bool,
    /// Format as the model sees it: UTF-8 safe, truncated to TASK_MAX_OUTPUT_LENGTH (SPEC §4).
    #[arg(long)]
    pub for_model: bool,
}

/// `tasks wait`.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The task ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Give up after this many milliseconds (exit 124).
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
}

/// `tasks kill`.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// The task ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// `tasks notifications`.
#[derive(Debug, Args)]
pub struct NotificationsArgs {
    /// Keep delivering new notifications until interrupted.
    #[arg(short, long)]
    pub follow: bool,
}

/// `tasks completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: CompletionShell,
}

/// Shells with completion scripts.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompletionShell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

/// `tasks list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The list id (default: $TASKS_LIST_ID, else `default`; with --claude the reference's chain).
    #[arg(long = "list", global = true, env = "TASKS_LIST_ID", value_name = "ID")]
    pub list: Option<String>,
    /// Lists root directory (default {root}/lists).
    #[arg(long, global = true, env = "TASKS_LIST_ROOT", value_name = "DIR")]
    pub lists_root: Option<PathBuf>,
    /// Use the reference harness's lists ($CLAUDE_CONFIG_DIR/tasks, else ~/.claude/tasks).
    #[arg(long, global = true, conflicts_with = "lists_root")]
    pub claude: bool,
    /// Keep the list in a PostgreSQL database instead of files: `postgres://user@host/db`
    /// (TLS per the URL's `sslmode`).
    #[arg(long, global = true, env = "TASKS_LIST_STORE", value_name = "URL",
          conflicts_with_all = ["lists_root", "claude"])]
    pub store: Option<String>,
    /// Who is acting (recorded in the audit log).
    #[arg(long, global = true, env = "TASKS_ACTOR", value_name = "NAME")]
    pub actor: Option<String>,
    /// The operation.
    #[command(subcommand)]
    pub op: ListOp,
}

/// `tasks list …` operations.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ListOp {
    /// Create a task; prints its id.
    Create {
        /// One-line subject.
        #[arg(long)]
        subject: String,
        /// What to do.
        #[arg(long, default_value = "")]
        description: String,
        /// Present-continuous form shown while in progress.
        #[arg(long)]
        active_form: Option<String>,
        /// A JSON object of metadata.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
    },
    /// Show one task.
    Get {
        /// The task id ("1", "2", …).
        id: String,
    },
    /// Update a task (fields, status, owner, edges, metadata).
    Update(ListUpdateArgs),
    /// Delete a task (its id is never reused; edges to it are removed).
    Delete {
        /// The task id.
        id: String,
    },
    /// Claim a task for an owner, if it is free and unblocked.
    Claim {
        /// The task id.
        id: String,
        /// The new owner.
        #[arg(long)]
        owner: String,
        /// Refuse if the owner already has an unfinished task.
        #[arg(long)]
        check_busy: bool,
    },
    /// Return every unfinished task of an owner to pending, without owner.
    Unassign {
        /// The owner.
        #[arg(long)]
        owner: String,
        /// Why the owner left.
        #[arg(long, value_enum, default_value = "terminated")]
        reason: UnassignReason,
    },
    /// Explain for every task whether it is ready, and why not.
    Ready,
    /// Print the dependency graph.
    Graph {
        /// Graphviz DOT instead of text.
        #[arg(long)]
        dot: bool,
    },
    /// Check the list's integrity (edges, references, cycles, high-water mark).
    Doctor {
        /// Repair what can be repaired.
        #[arg(long)]
        fix: bool,
    },
    /// Print the list again whenever it changes (until interrupted).
    Watch,
    /// Write the whole list (tasks, high-water mark, audit log) as one JSON document.
    Export {
        /// Write to this file instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Load a `tasks list export` document into this (unused) list, ids and history intact.
    Import {
        /// The export document (`-`: stdin).
        file: PathBuf,
    },
}

/// Why an owner's tasks are unassigned.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum UnassignReason {
    /// The owner was terminated.
    Terminated,
    /// The owner shut down.
    Shutdown,
}

/// `tasks list update`.
#[derive(Debug, Args)]
pub struct ListUpdateArgs {
    /// The task id.
    pub id: String,
    /// New subject.
    #[arg(long)]
    pub subject: Option<String>,
    /// New description.
    #[arg(long)]
    pub description: Option<String>,
    /// New active form.
    #[arg(long)]
    pub active_form: Option<String>,
    /// New status: pending, in_progress, completed, or deleted.
    #[arg(long)]
    pub status: Option<String>,
    /// New owner.
    #[arg(long)]
    pub owner: Option<String>,
    /// Tasks this one blocks.
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub add_blocks: Vec<String>,
    /// Tasks that block this one.
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub add_blocked_by: Vec<String>,
    /// A JSON object merged into the metadata (a key set to null is deleted).
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
