//! The command line of the short commands (clap derive): what the `tasks` executable parses
//! itself ([`ShortCli`]), and the options the other commands share with them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use task_core::TaskType;
use task_protocol::start::{Placement, StdinMode};

/// The environment and exit codes, after every command's help.
pub const AFTER_HELP: &str = "\
Environment:
  TASKS_ROOT       state root (default $XDG_STATE_HOME/tasks, else ~/.local/state/tasks)
  TASKS_SESSION    session name (default \"default\")
  TASKS_LIST_ROOT  task-list root (default {root}/lists)
  TASKS_LIST_ID    task-list id (default: the session name, so \"default\")
  Supervisor settings (TASKS_IDLE_EXIT_MS, TASKS_STALL_*): see the task-cli README.

Exit codes:
  0 success · 1..=255 from `wait`/`run --wait`: the task's own exit code
  65 malformed or ambiguous task id · 66 unknown task · 69 supervisor unavailable · 70 other error
  74 I/O failure · 124 `wait --timeout` expired · 137 task was killed · 2 usage error";
/// The short commands alone: what the `tasks` executable parses itself (everything else it
/// hands to `tasksd`, whose command line includes these).
#[derive(Debug, Parser)]
#[command(name = "tasks", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct ShortCli {
    /// The options every command takes.
    #[command(flatten)]
    pub globals: Globals,
    /// The command to run.
    #[command(subcommand)]
    pub command: ShortCommand,
}

/// The options every command takes.
#[derive(Debug, Args)]
pub struct Globals {
    /// State root directory.
    #[arg(long, global = true, env = "TASKS_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Session name: a separate set of tasks under the root.
    #[arg(long, global = true, env = "TASKS_SESSION", value_name = "NAME")]
    pub session: Option<String>,
    /// Print JSON (one document, or JSON lines for streams) instead of human output.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The short commands: started as often as `tail`, so the `tasks` executable runs them itself
/// and links nothing else (no agent runtime, HTTP, database client, terminal UI or MCP).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ShortCommand {
    /// Start a shell command in the background and print its task id.
    Run(Box<RunArgs>),
    /// List the session's tasks.
    Ps(PsArgs),
    /// Print a one-line summary of the background work, for a shell prompt or a status bar.
    Status,
    /// Read a task's output: a delta from an offset, a tail, or follow it until the task ends.
    Output(OutputArgs),
    /// Wait until every named task has ended; the exit status mirrors the task's.
    Wait(WaitArgs),
    /// Kill tasks and their whole process trees.
    Kill(KillArgs),
    /// Deliver pending notifications (each exactly once across all readers), in priority order.
    Notifications(NotificationsArgs),
    /// Manage task lists (the persistent checklist with dependencies).
    List(Box<ListArgs>),
}

impl ShortCommand {
    /// The names of the short commands, as typed.
    pub const NAMES: [&'static str; 8] = [
        "run",
        "ps",
        "status",
        "output",
        "wait",
        "kill",
        "notifications",
        "list",
    ];
}

/// Start a shell command in the background and print its task id.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Human description (default: the command).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Kill the task after this long (`90s`, `10m`, `1h30m`; a bare number is milliseconds;
    /// exit 143).
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration_ms)]
    pub timeout: Option<u64>,
    /// The agent that owns the task (its tasks are killed when it ends): its task id.
    #[arg(long, value_name = "ID", value_parser = task_core::TaskId::parse)]
    pub agent_id: Option<task_core::TaskId>,
    /// Wait for the task to end and exit with its exit code. On a terminal its output is
    /// streamed, then one line says how it ended; elsewhere the id and the notification print.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: stream the output and the summary even off a terminal.
    #[arg(long, requires = "wait", conflicts_with = "for_model")]
    pub follow: bool,
    /// With --wait: print the id and the notification a model reads, even on a terminal.
    #[arg(long, requires = "wait")]
    pub for_model: bool,
    /// The command's stdin: null (/dev/null, read gets end of file at once) or pipe (kept open
    /// for `tasks input ID`).
    #[arg(long, value_enum, default_value = "null", value_name = "MODE")]
    pub stdin: StdinChoice,
    /// Group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// What makes it ready (`tasks wait --ready ID`).
    #[command(flatten)]
    pub ready: ReadyArgs,
    /// What the task brings for its end.
    #[command(flatten)]
    pub ends: EndArgs,
    /// Where it runs (`--on slurm`).
    #[command(flatten)]
    pub on: PlacementArgs,
    /// The command: one argument is shell text (`'a | b'`); several are quoted words.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Where a task runs: on this machine, or as a batch job.
#[derive(Debug, Clone, Default, Args)]
pub struct PlacementArgs {
    /// Run it as a batch job instead of on this machine: `slurm` or `slurm:PARTITION`. The
    /// job is named by the task's id, its output is the task's output file (the state
    /// directory must be shared with the cluster's nodes); `TASKS_SLURM_*` configure it.
    /// `local`: on this machine, whatever `placement_default` says.
    #[arg(long = "on", value_name = "WHERE", value_parser = Placement::parse)]
    pub placement: Option<Placement>,
    /// With --on slurm: one more `sbatch` option (`--slurm-arg=--mem=1G`); repeat for more.
    #[arg(
        long = "slurm-arg",
        value_name = "ARG",
        requires = "placement",
        allow_hyphen_values = true
    )]
    pub slurm_args: Vec<String>,
}

impl PlacementArgs {
    /// Where the task runs: its placement with the `--slurm-arg`s, or `None` (here).
    pub fn placement(&self) -> Option<Placement> {
        match self.placement.clone()? {
            Placement::Slurm {
                partition,
                mut args,
            } => {
                args.extend(self.slurm_args.iter().cloned());
                Some(Placement::Slurm { partition, args })
            }
            other => Some(other),
        }
    }
}

/// When and where a task starts: its group's turn, after other tasks, at a time.
#[derive(Debug, Clone, Default, Args)]
pub struct ScheduleArgs {
    /// The group to queue in (default: $TASKS_GROUP, else `default`): at most its parallelism
    /// limit of tasks run at once (`tasks group set`); the rest wait `pending`, in order.
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Higher starts first in its group (default 0; ties in order of arrival).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        default_value_t = 0
    )]
    pub priority: i32,
    /// Start only once each of these tasks completed; if one fails or is killed, this one ends
    /// `failed` (dependency failed) without running. Each an id, a unique prefix of one or a
    /// name.
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub after: Vec<String>,
    /// Wait this long before queuing (`90s`, `10m`; a bare number is milliseconds).
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration_ms)]
    pub delay: Option<u64>,
    /// Queue at this time: `HH:MM` (local, the next one) or RFC 3339.
    #[arg(long, value_name = "TIME", conflicts_with = "delay")]
    pub at: Option<String>,
}

/// What makes a task ready: one "ready" notification, and `tasks wait --ready` returns.
#[derive(Debug, Clone, Default, Args)]
#[group(multiple = false)]
pub struct ReadyArgs {
    /// Ready once a line of its output matches this regular expression.
    #[arg(long = "ready", value_name = "REGEX")]
    pub pattern: Option<String>,
    /// Ready once a TCP connection to this port of 127.0.0.1 succeeds.
    #[arg(long, value_name = "PORT")]
    pub ready_port: Option<u16>,
    /// Ready once a GET of this http:// URL answers 2xx.
    #[arg(long, value_name = "URL")]
    pub ready_http: Option<String>,
}

/// What a started command's stdin is (`tasks run --stdin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StdinChoice {
    /// `/dev/null`, as in the reference harness.
    Null,
    /// A pipe the supervisor keeps open; write to it with `tasks input`.
    Pipe,
}

impl From<StdinChoice> for StdinMode {
    fn from(choice: StdinChoice) -> Self {
        match choice {
            StdinChoice::Null => Self::Null,
            StdinChoice::Pipe => Self::Piped,
        }
    }
}

/// List the session's tasks.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// Include finished tasks whose notification was already delivered.
    #[arg(short, long)]
    pub all: bool,
    /// Refresh the table in place every second (until interrupted).
    #[arg(short, long, conflicts_with = "json")]
    pub watch: bool,
    /// Only tasks with these statuses (comma-separated; `live` and `ended` name groups).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "STATUS")]
    pub status: Vec<StatusFilter>,
    /// Only tasks of these types (comma-separated: bash, monitor, agent, remote, teammate,
    /// workflow, dream).
    #[arg(long, value_delimiter = ',', value_name = "TYPE", value_parser = parse_type)]
    pub r#type: Vec<TaskType>,
    /// Only tasks of this group (`default` for tasks started without one).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Colour the status column: auto (a terminal without NO_COLOR), always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: ColorChoice,
}

/// Read a task's output: a delta from an offset, a tail, or follow it until the task ends.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The task: a task id, a unique prefix of one (3+ characters), an agent's NAME or a teammate's
    /// NAME@TEAM.
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
    /// An agent's or teammate's stderr instead, kept whole beside its transcript (up to 8MB,
    /// every run of it).
    #[arg(long, conflicts_with_all = ["offset", "tail", "follow", "for_model"])]
    pub stderr: bool,
}

/// Wait until every named task has ended; the exit status mirrors the task's.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The tasks: each a task id, a unique prefix of one (3+ characters), an agent's NAME or a teammate's
    /// NAME@TEAM.
    #[arg(required_unless_present = "group", conflicts_with = "group")]
    pub ids: Vec<String>,
    /// Every task of this group that is live or whose completion was not delivered yet, as
    /// they are when the wait begins (as `tasks ps --group` lists them).
    #[arg(long, value_name = "GROUP", conflicts_with = "ready")]
    pub group: Option<String>,
    /// Stream each task's output as it is written, then one line saying how it ended.
    #[arg(short, long, conflicts_with = "timeout")]
    pub follow: bool,
    /// Give up after this long (`30s`, `5m`; a bare number is milliseconds; exit 124).
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration_ms)]
    pub timeout: Option<u64>,
    /// Leave the completions for `tasks notifications` (or an MCP server) to deliver, instead
    /// of delivering those this command reports.
    #[arg(long)]
    pub no_deliver: bool,
    /// Wait until the task (one id) is ready (`run --ready…`) instead of ended: 0 once it is,
    /// 1 if it ends first, 124 after --timeout.
    #[arg(long, conflicts_with = "follow")]
    pub ready: bool,
}

/// Kill tasks and their whole process trees.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// The tasks: each a task id, a unique prefix of one (3+ characters), an agent's NAME or a teammate's
    /// NAME@TEAM.
    #[arg(required_unless_present_any = ["all_strays", "group"])]
    pub ids: Vec<String>,
    /// Kill every live task of this group, queued or running.
    #[arg(long, value_name = "GROUP", conflicts_with_all = ["ids", "strays", "all_strays"])]
    pub group: Option<String>,
    /// Kill the processes these (ended) tasks left running instead (`tasks strays` lists them).
    #[arg(long)]
    pub strays: bool,
    /// Kill the processes every task of the session left running.
    #[arg(long, conflicts_with_all = ["ids", "strays"])]
    pub all_strays: bool,
}

/// What is done with the processes a task leaves running when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StraysChoice {
    /// Record them and name them in the task's notification (see `tasks strays`).
    Report,
    /// Kill them when the task ends.
    Kill,
    /// Do not look for them.
    Ignore,
}

impl From<StraysChoice> for task_session::strays::StrayPolicy {
    fn from(choice: StraysChoice) -> Self {
        match choice {
            StraysChoice::Report => Self::Report,
            StraysChoice::Kill => Self::Kill,
            StraysChoice::Ignore => Self::Ignore,
        }
    }
}

/// What `--on-end` and `--strays` bring to a start.
#[derive(Debug, Clone, Args)]
pub struct EndArgs {
    /// A command run by `sh -c` once the task ends (however it ends), instead of the session's
    /// `on_end`; the task is in its environment (TASKS_ID, TASKS_STATUS, TASKS_END_REASON, …).
    #[arg(long, value_name = "CMD")]
    pub on_end: Option<String>,
    /// What to do with processes the task leaves running when it ends (default: the session's
    /// `strays` setting, else report; an agent's or a teammate's are killed unless `report`).
    #[arg(long, value_enum, value_name = "POLICY")]
    pub strays: Option<StraysChoice>,
}

impl From<EndArgs> for task_session::protocol::Ends {
    fn from(args: EndArgs) -> Self {
        Self {
            on_end: args.on_end,
            strays: args.strays.map(Into::into),
        }
    }
}

/// Deliver pending notifications (each exactly once across all readers), in priority order.
#[derive(Debug, Args)]
pub struct NotificationsArgs {
    /// Keep delivering new notifications until interrupted.
    #[arg(short, long)]
    pub follow: bool,
    /// xml (the envelope a model reads), json, or text (a line each). Default: text on a
    /// terminal, xml elsewhere and with --for-model.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<NoticeFormat>,
    /// Print what a model reads (the XML envelope).
    #[arg(long, conflicts_with = "format")]
    pub for_model: bool,
}

/// Manage task lists (the persistent checklist with dependencies).
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The list id (default: $TASKS_LIST_ID, else the session's name; with --claude the reference's chain).
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
        /// One-line subject (`tasks list create "Write API"`).
        #[arg(
            value_name = "SUBJECT",
            required_unless_present = "subject_flag",
            conflicts_with = "subject_flag"
        )]
        subject: Option<String>,
        /// One-line subject, as an option.
        #[arg(long = "subject", value_name = "SUBJECT")]
        subject_flag: Option<String>,
        /// Print only the new task's id (for scripts).
        #[arg(short, long)]
        quiet: bool,
        /// What to do.
        #[arg(long, default_value = "")]
        description: String,
        /// Present-continuous form shown while in progress.
        #[arg(long)]
        active_form: Option<String>,
        /// A JSON object of metadata.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
        /// Priority, 0 (highest) to 4; a task without one counts as 2 (kept as
        /// `metadata.priority`).
        #[arg(long, value_name = "0..4", value_parser = clap::value_parser!(u8).range(0..=4))]
        priority: Option<u8>,
        /// A label (repeatable; kept as `metadata.labels`).
        #[arg(long = "label", value_name = "LABEL")]
        labels: Vec<String>,
        /// The task's parent: it is ready only once all its children are completed (kept as
        /// `metadata.parent`).
        #[arg(long, value_name = "ID")]
        parent: Option<String>,
    },
    /// Print every task of the list, one line each (status, owner, blockers)
    ///
    /// The filters given must all hold.
    Ls(ListLsArgs),
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
    /// Claim a task for an owner, if it is free and unblocked (or the best ready one)
    ///
    /// With `--next`, the best ready task: highest priority, then position, then lowest id.
    Claim {
        /// The task id.
        #[arg(required_unless_present = "next", conflicts_with = "next")]
        id: Option<String>,
        /// Claim the best ready task (pending, unowned, every blocker and child completed):
        /// priority 0 first (a task without one counts as 2), then the lowest position (see
        /// `update --before/--after`), then the lowest id. Nothing ready is not an error: it
        /// says so (`null` with `--json`) and exits 0.
        #[arg(long)]
        next: bool,
        /// The new owner.
        #[arg(long)]
        owner: String,
        /// Refuse if the owner already has an unfinished task.
        #[arg(long)]
        check_busy: bool,
        /// Also mark the claimed task in progress, in the same write (a worker's claim and
        /// start in one step).
        #[arg(long)]
        start: bool,
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

/// Update a task (fields, status, owner, edges, metadata).
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
    /// Tasks this one no longer blocks (the edge is removed from both tasks).
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub remove_blocks: Vec<String>,
    /// Tasks that no longer block this one (the edge is removed from both tasks).
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub remove_blocked_by: Vec<String>,
    /// A JSON object merged into the metadata (a key set to null is deleted).
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
    /// New priority, 0 (highest) to 4 (kept as `metadata.priority`).
    #[arg(long, value_name = "0..4", value_parser = clap::value_parser!(u8).range(0..=4))]
    pub priority: Option<u8>,
    /// The task's labels, replacing the ones it has (repeatable; kept as `metadata.labels`).
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// New parent (kept as `metadata.parent`; an empty string removes it).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// Move the task just before this one in the queue (kept as `metadata.position`).
    #[arg(long, value_name = "ID", conflicts_with = "after")]
    pub before: Option<String>,
    /// Move the task just after this one in the queue (kept as `metadata.position`).
    #[arg(long, value_name = "ID")]
    pub after: Option<String>,
}

/// Print every task of the list, one line each (status, owner, blockers)
///
/// The filters given must all hold.
#[derive(Debug, Args)]
pub struct ListLsArgs {
    /// Only tasks with this status: pending, in_progress or completed.
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks this agent owns.
    #[arg(long)]
    pub owner: Option<String>,
    /// Only tasks with this label (repeatable: every one).
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Only tasks of this priority (a task without one counts as 2).
    #[arg(long, value_name = "0..4", value_parser = clap::value_parser!(u8).range(0..=4))]
    pub priority: Option<u8>,
    /// Only ready tasks (pending, unowned, every blocker completed).
    #[arg(long, conflicts_with = "blocked")]
    pub ready: bool,
    /// Only tasks with a blocker that is not completed.
    #[arg(long)]
    pub blocked: bool,
    /// Only the children of this task.
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
}

/// When to colour the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// A `--status` filter: one status, or all live or all ended ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    /// Pending or running.
    Live,
    /// Completed, failed or killed.
    Ended,
    /// Registered, not started yet.
    Pending,
    /// Running.
    Running,
    /// Ended well.
    Completed,
    /// Ended badly.
    Failed,
    /// Killed.
    Killed,
}

/// Parses a `--type`: the type's name (`local_bash`) or a short one (`bash`, `shell`,
/// `monitor`, `agent`, `remote`, `teammate`, `workflow`, `dream`).
pub fn parse_type(text: &str) -> Result<TaskType, String> {
    let wanted = match text {
        "bash" | "shell" => TaskType::LocalBash,
        "monitor" => TaskType::MonitorMcp,
        "agent" => TaskType::LocalAgent,
        "remote" => TaskType::RemoteAgent,
        "teammate" => TaskType::InProcessTeammate,
        "workflow" => TaskType::LocalWorkflow,
        other => match TaskType::ALL.into_iter().find(|t| t.as_str() == other) {
            Some(found) => found,
            None => {
                return Err(format!(
                    "{other:?}: expected bash, monitor, agent, remote, teammate, workflow, dream (or a type such as local_bash)"
                ));
            }
        },
    };
    Ok(wanted)
}

/// How notifications are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NoticeFormat {
    /// The `<task-notification>` envelope a model reads.
    Xml,
    /// One JSON document per line.
    Json,
    /// One readable line per notification.
    Text,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_consistent() {
        ShortCli::command().debug_assert();
    }
}
