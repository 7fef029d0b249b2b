//! The command line surface of `tasks` (clap derive).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use task_agent::RunnerFormat;
use task_core::{Address, RemoteSubtype, TaskType};
use task_serve::{DEFAULT_LISTEN, DEFAULT_MAX_BODY, PageLimits};

const AFTER_HELP: &str = "\
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

/// Background tasks that outlive the command that started them, and task lists.
///
/// `tasks run` hands a command to the session's supervisor (started on demand) and prints the
/// task id at once; any later `tasks` process, from any terminal, can list, read, wait on and kill
/// that task, and receive its completion notification exactly once.
#[derive(Debug, Parser)]
#[command(name = "tasks", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// The options every command takes.
    #[command(flatten)]
    pub globals: Globals,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The short commands alone: what the `tasks` executable parses itself (everything else it
/// hands to `tasksd`, which parses [`Cli`]).
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

/// The subcommands.
///
/// Each subcommand's arguments are built only when it is the one invoked (`defer`): building
/// every subcommand's arguments up front was most of the parser's start-up cost.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// The short commands.
    #[command(flatten)]
    Short(ShortCommand),
    /// Start a monitor: each stdout line of the command is an event notification.
    Monitor(MonitorArgs),
    /// Start a background agent: an agent CLI speaking a JSON event stream, followed as it works.
    Agent(AgentArgs),
    /// Run, resume or show JavaScript workflow scripts whose agent() calls are background agents.
    Workflow(WorkflowArgs),
    /// Send a message to an agent or teammate (by id or name).
    ///
    /// Queued while an agent works, or it resumes; a teammate gets it as soon as it is idle.
    Send(SendArgs),
    /// Teammates NAME@TEAM with mailboxes: spawn, list, shut down (message them with `send`).
    Team(TeamArgs),
    /// The git worktrees of agents started with --worktree: list them, remove a kept one.
    Worktree(WorktreeArgs),
    /// Start a dream: a memory-consolidation agent under the consolidation lock.
    Dream(DreamArgs),
    /// A live dashboard of the session's tasks, their output and the task list.
    Top(TopArgs),
    /// Start a task again (same command, directory and options) under a new id.
    Restart(RestartArgs),
    /// Set the parallelism limits of groups, pause and resume them, list them.
    Group(GroupArgs),
    /// List the processes tasks left running when they ended: pid, task, age, CPU, RSS, command.
    Strays(StraysArgs),
    /// Remove finished tasks (record and output) whose completion was delivered.
    Rm(RmArgs),
    /// Remove finished, delivered tasks by age, count or total output size.
    Prune(PruneArgs),
    /// Write a line, or this command's stdin, to the stdin of a task run with --stdin pipe.
    ///
    /// `tasks input ID TEXT` writes TEXT and a newline; `tasks input ID -` copies this
    /// command's stdin until end of file (the task's stdin stays open); `--close` then closes
    /// it, so commands that read to the end (`sort`, `wc`, `cat`) finish.
    Input(InputArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Serve the task tools over the Model Context Protocol on stdio (for agents).
    Mcp(McpArgs),
    /// Start a remote agent: a session on a sessions server (`tasks serve` on another machine).
    Remote(RemoteArgs),
    /// Serve this machine's agents over the sessions API (for `tasks remote` elsewhere).
    Serve(ServeArgs),
    /// Run the session supervisor (started on demand by `run`; not for direct use).
    #[command(name = "__supervise", hide = true)]
    Supervise,
    /// List completion candidates (used by the completion scripts; not for direct use).
    #[command(name = "__complete", hide = true)]
    Complete {
        /// What to list.
        what: Candidates,
    },
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
    #[arg(long = "on", value_name = "WHERE", value_parser = task_shell::launch::Placement::parse)]
    pub placement: Option<task_shell::launch::Placement>,
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
    pub fn placement(&self) -> Option<task_shell::launch::Placement> {
        use task_shell::launch::Placement;
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

/// Set the parallelism limits of groups, pause and resume them, list them.
#[derive(Debug, Args)]
pub struct GroupArgs {
    /// The operation.
    #[command(subcommand)]
    pub op: GroupOp,
}

/// `tasks group …` operations.
#[derive(Debug, Subcommand)]
pub enum GroupOp {
    /// Set how many tasks of a group run at once (0: unlimited); kept across supervisors.
    Set {
        /// The group.
        group: String,
        /// The limit.
        #[arg(long, value_name = "N")]
        parallel: u32,
    },
    /// Start no queued task of a group until it is resumed; its running tasks keep running.
    /// Kept across supervisors, like its limit.
    Pause {
        /// The group.
        group: String,
    },
    /// Let a paused group start its queued tasks again (as many as its limit allows).
    Resume {
        /// The group.
        group: String,
    },
    /// List the groups: limit, whether paused, running and queued tasks.
    Ls,
}

/// What a started command's stdin is (`tasks run --stdin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StdinChoice {
    /// `/dev/null`, as in the reference harness.
    Null,
    /// A pipe the supervisor keeps open; write to it with `tasks input`.
    Pipe,
}

impl From<StdinChoice> for task_shell::process::StdinMode {
    fn from(choice: StdinChoice) -> Self {
        match choice {
            StdinChoice::Null => Self::Null,
            StdinChoice::Pipe => Self::Piped,
        }
    }
}

/// Write a line, or this command's stdin, to the stdin of a task run with --stdin pipe.
///
/// `tasks input ID TEXT` writes TEXT and a newline; `tasks input ID -` copies this command's
/// stdin until end of file (the task's stdin stays open); `--close` then closes it, so commands
/// that read to the end (`sort`, `wc`, `cat`) finish.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The task: a task id, a unique prefix of one (3+ characters), an agent's NAME or a teammate's
    /// NAME@TEAM.
    pub id: String,
    /// One line to write (a newline is added), or `-` to copy this command's stdin until end
    /// of file.
    #[arg(required_unless_present = "close", value_name = "TEXT")]
    pub text: Option<String>,
    /// Close the task's stdin afterwards (end of file: `sort`, `wc`, `cat` finish).
    #[arg(long)]
    pub close: bool,
}

/// Start a background agent: an agent CLI speaking a JSON event stream, followed as it works.
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
    /// The first user turn, when the command does not carry it (`claude -p "do X"`, `codex
    /// exec "do X"`, `gemini -p "do X"`: given in both places is an error). With `--runner
    /// auto`, only recorded: the command carries it.
    #[arg(long, short)]
    pub prompt: Option<String>,
    /// Wait for the agent to stop, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// `--worktree`, `--worktree-branch`.
    #[command(flatten)]
    pub isolation: WorktreeFlags,
    /// Group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// `--timeout`, `--max-turns`, `--max-tokens`.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// What the task brings for its end.
    #[command(flatten)]
    pub ends: EndArgs,
    /// Where the agent CLI runs (`--on slurm`: inside a batch job whose output is its
    /// transcript; a message to it once stopped resumes it as a new job).
    #[command(flatten)]
    pub on: PlacementArgs,
    /// The agent CLI: program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The budgets of `tasks agent` and `tasks team spawn`.
#[derive(Debug, Clone, Default, Args)]
pub struct BudgetArgs {
    /// Stop the agent after it has run this long (`90s`, `10m`, `1h30m`; a bare number is
    /// milliseconds): interrupted, then killed after the grace; it ends failed, `budget: time`.
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration_ms)]
    pub timeout: Option<u64>,
    /// Stop the agent once it has made this many model responses.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u64>,
    /// Stop the agent once it has used this many tokens (its latest input plus every output,
    /// as `ps` counts them).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
}

impl BudgetArgs {
    /// The budgets asked for, if any.
    pub fn budget(&self) -> Option<task_core::AgentBudget> {
        let budget = task_core::AgentBudget {
            max_tokens: self.max_tokens,
            max_turns: self.max_turns,
            timeout_ms: self.timeout,
            turns_used: 0,
        };
        (!budget.is_unlimited()).then_some(budget)
    }
}

/// `--worktree` / `--worktree-branch` of `tasks agent` and `tasks team spawn`.
#[derive(Debug, Clone, Default, Args)]
pub struct WorktreeFlags {
    /// Run the agent in a new git worktree made from the current HEAD, on a new branch
    /// `tasks/{description}-{id}`, under the session's `worktrees/` directory: removed with its
    /// branch when the agent stops without changes, kept (and named in its notification)
    /// otherwise. Outside a git repository, during a merge or rebase, or with staged changes,
    /// the start fails.
    #[arg(long)]
    pub worktree: bool,
    /// The new worktree's branch (implies `--worktree`); it must not exist yet.
    #[arg(long, value_name = "NAME")]
    pub worktree_branch: Option<String>,
}

impl WorktreeFlags {
    /// The worktree asked for, if any.
    pub fn request(&self) -> Option<task_agent::WorktreeRequest> {
        (self.worktree || self.worktree_branch.is_some()).then(|| task_agent::WorktreeRequest {
            branch: self.worktree_branch.clone(),
        })
    }
}

fn parse_runner(text: &str) -> Result<task_agent::RunnerFormat, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| format!("{text:?}: expected claude, codex, gemini or auto"))
}

/// Send a message to an agent or teammate (by id or name).
///
/// Queued while an agent works, or it resumes; a teammate gets it as soon as it is idle.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Who: a task id, an agent's NAME, or a teammate's NAME@TEAM.
    pub to: task_core::Address,
    /// The message.
    pub message: String,
}

/// Start a monitor: each stdout line of the command is an event notification.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Human description (default: the command).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Stop the monitor after this long (default 5m, max 1h; a bare number is milliseconds).
    #[arg(long, visible_alias = "timeout", value_name = "DURATION", conflicts_with = "persistent",
          value_parser = task_session::config::parse_duration_ms)]
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
    /// The group it counts in (a monitor starts at once, taking a slot of its group).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// The command whose stdout lines are events.
    #[arg(required_unless_present = "ws", last = true, value_name = "CMD")]
    pub command: Vec<String>,
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
    pub r#type: Vec<task_core::TaskType>,
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

/// Start a task again (same command, directory and options) under a new id.
#[derive(Debug, Args)]
pub struct RestartArgs {
    /// The task to run again (it may be live: the new one runs beside it): its id, a unique
    /// prefix of one or its name.
    pub id: String,
    /// Wait for the new task as `tasks run --wait` does.
    #[arg(long)]
    pub wait: bool,
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

/// Print a shell completion script.
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

/// The git worktrees of agents started with --worktree: list them, remove a kept one.
#[derive(Debug, Args)]
pub struct WorktreeArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WorktreeCommand,
}

/// `tasks worktree` subcommands.
#[derive(Debug, Subcommand)]
pub enum WorktreeCommand {
    /// List the worktrees that exist: the agent, its status, branch, changes and path.
    Ls,
    /// Remove a stopped agent's worktree and its branch (refused when it has changes, unless
    /// `--force`).
    Rm {
        /// The agent: its task id, a unique prefix of one or its name.
        id: String,
        /// Remove it even with commits or uncommitted files (they are lost).
        #[arg(long)]
        force: bool,
    },
}

/// The prompt of a dream when none is given.
pub const DEFAULT_DREAM_PROMPT: &str =
    "Review the recent sessions and consolidate what is worth remembering into the memory files.";

/// Teammates NAME@TEAM with mailboxes: spawn, list, shut down (message them with `send`).
#[derive(Debug, Args)]
pub struct TeamArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TeamCommand,
}

/// The `tasks team` subcommands.
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Spawn a teammate NAME@TEAM: one long-lived agent CLI fed through its stream-json input;
    /// messages sent to it (`tasks send NAME …`) reach it as soon as it is idle.
    Spawn(Box<TeamSpawnArgs>),
    /// List the session's teammates: NAME@TEAM, status, idle or working.
    Ls,
    /// Ask a teammate to shut down (a `shutdown_request`; it ends once it approves).
    Shutdown(TeamShutdownArgs),
}

/// Spawn a teammate NAME@TEAM: one long-lived agent CLI fed through its stream-json input.
#[derive(Debug, Args)]
pub struct TeamSpawnArgs {
    /// The teammate, `NAME@TEAM`.
    pub member: String,
    /// Plan mode: its first turn is a plan that the lead must approve before it acts.
    #[arg(long)]
    pub plan: bool,
    /// Its first turn.
    #[arg(
        long,
        short,
        default_value = "You have joined the team. Wait for instructions."
    )]
    pub prompt: String,
    /// Its display colour.
    #[arg(long)]
    pub color: Option<String>,
    /// Group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// `--worktree`, `--worktree-branch`: the teammate works in a git worktree of its own
    /// (its branch `tasks/{name}-{team}-{id}`), removed when it ends unchanged.
    #[command(flatten)]
    pub isolation: WorktreeFlags,
    /// `--timeout`, `--max-turns`, `--max-tokens`: it ends failed once it used one up.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// What the task brings for its end.
    #[command(flatten)]
    pub ends: EndArgs,
    /// `--on slurm[:PARTITION]`, `--slurm-arg`: its agent CLI runs as a batch job (one job
    /// per run: a message to it once its job ended resumes it as a new one); `--on local`
    /// keeps it here whatever the default placement.
    #[command(flatten)]
    pub on: PlacementArgs,
    /// The agent CLI (Claude Code's stream-json): program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Ask a teammate to shut down (a `shutdown_request`; it ends once it approves, or is ended
/// `killed` when it has not approved within `team_shutdown_timeout_ms`, 60 s by default).
#[derive(Debug, Args)]
pub struct TeamShutdownArgs {
    /// The teammate: NAME, NAME@TEAM or its task id.
    pub name: Address,
    /// Why (shown to the teammate).
    #[arg(long, conflicts_with = "force")]
    pub reason: Option<String>,
    /// End it at once (`killed`), without asking.
    #[arg(long)]
    pub force: bool,
}

/// Start a dream: a memory-consolidation agent under the consolidation lock.
#[derive(Debug, Args)]
pub struct DreamArgs {
    /// The consolidation prompt.
    #[arg(long, short, default_value = DEFAULT_DREAM_PROMPT)]
    pub prompt: String,
    /// The consolidation lock file (default `{session}/dream/.consolidate-lock`).
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// The agent CLI: program, then arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Run, resume or show JavaScript workflow scripts whose agent() calls are background agents.
#[derive(Debug, Args)]
pub struct WorkflowArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WorkflowCommand,
}

/// The `tasks workflow` subcommands.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Start a workflow script; prints its task id and run id.
    Run(RunWorkflowArgs),
    /// Run a script again, answering unchanged agent() calls from an earlier run's journal.
    Resume(ResumeWorkflowArgs),
    /// Show a run's phases and agents as a tree.
    Show(ShowWorkflowArgs),
}

/// How a workflow's agents run, and whether to wait.
#[derive(Debug, Args)]
pub struct AgentCli {
    /// The agent CLI's event format (claude, codex, gemini, auto); default: the configured one.
    #[arg(long, value_parser = parse_runner)]
    pub runner: Option<RunnerFormat>,
    /// Wait for the run to end, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// The run's group, priority, dependencies and start time.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// The agent CLI (program, then arguments); default: TASKS_AGENT_COMMAND / agent_command.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Start a workflow script; prints its task id and run id.
#[derive(Debug, Args)]
pub struct RunWorkflowArgs {
    /// The script (`export const meta = {…}` then the body).
    pub file: PathBuf,
    /// The script's `args`, as JSON.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// The agents' CLI.
    #[command(flatten)]
    pub agents: AgentCli,
}

/// Run a script again, answering unchanged agent() calls from an earlier run's journal.
#[derive(Debug, Args)]
pub struct ResumeWorkflowArgs {
    /// The run to resume (`wf_…`).
    pub run_id: String,
    /// The (edited) script; default: the run's own.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The script's `args`, as JSON.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// The agents' CLI.
    #[command(flatten)]
    pub agents: AgentCli,
}

/// Show a run's phases and agents as a tree.
#[derive(Debug, Args)]
pub struct ShowWorkflowArgs {
    /// The run (`wf_…`).
    pub run_id: String,
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

/// What `tasks __complete` lists.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Candidates {
    /// The ids of the session's tasks, newest first.
    Ids,
    /// The names of the task lists under the lists root.
    Lists,
}

/// Serve the task tools over the Model Context Protocol on stdio (for agents).
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The task list of the Task* list tools (default: $TASKS_LIST_ID, else the session name).
    #[arg(long = "list", env = "TASKS_LIST_ID", value_name = "ID")]
    pub list: Option<String>,
    /// Lists root directory (default {root}/lists).
    #[arg(long, env = "TASKS_LIST_ROOT", value_name = "DIR")]
    pub lists_root: Option<PathBuf>,
    /// Use the reference harness's lists ($CLAUDE_CONFIG_DIR/tasks, else ~/.claude/tasks).
    #[arg(long, conflicts_with = "lists_root")]
    pub claude: bool,
    /// Keep the list in a PostgreSQL database: `postgres://user@host/db` (as `tasks list`).
    #[arg(long, env = "TASKS_LIST_STORE", value_name = "URL",
          conflicts_with_all = ["lists_root", "claude"])]
    pub store: Option<String>,
    /// Who is acting on the list (recorded in its audit log).
    #[arg(long, env = "TASKS_ACTOR", value_name = "NAME", default_value = "mcp")]
    pub actor: String,
    /// Who delivers notifications: `result` (the next tool result; pushes only announce),
    /// `push` (the pushed `notifications/message` is the delivery) or `channel` (a Claude Code
    /// channel event, `notifications/claude/channel`, is the delivery).
    #[arg(long, value_enum, default_value_t = DeliverArg::Result)]
    pub deliver: DeliverArg,
    /// How often to look for notifications and output changes to push, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub watch_ms: u64,
}

/// `--deliver`: who delivers a notification ([`task_mcp::Deliverer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DeliverArg {
    /// The next tool result carries the envelope; pushes only announce it.
    #[default]
    Result,
    /// The push claims and carries the envelope; tool results carry what no push took yet.
    Push,
    /// A Claude Code channel event claims and carries the envelope (the client must be started
    /// with `--dangerously-load-development-channels server:NAME`).
    Channel,
}

/// A live dashboard of the session's tasks, their output and the task list.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// How often to read the session again (`500ms`, `2s`).
    #[arg(long, default_value = "1s", value_name = "DURATION",
          value_parser = task_session::config::parse_duration)]
    pub interval: Duration,
}

/// List the processes tasks left running when they ended: pid, task, age, CPU, RSS, command.
#[derive(Debug, Args)]
pub struct StraysArgs {
    /// Only this task's (its id, a unique prefix of one or its name).
    pub id: Option<String>,
}

/// Remove finished tasks (record and output) whose completion was delivered.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The tasks (ids, unique prefixes of ids or names): each must have ended and had its
    /// completion delivered.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// Remove finished, delivered tasks by age, count or total output size.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only tasks that ended longer ago than this (`7d`, `12h`, `30m`).
    #[arg(long, value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// Keep the newest N finished tasks.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Then remove the oldest finished tasks until all outputs fit in this size (`500M`, `1G`).
    #[arg(long, value_name = "SIZE", value_parser = task_session::prune::parse_size)]
    pub max_size: Option<u64>,
}

/// Start a remote agent: a session on a sessions server (`tasks serve` on another machine).
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// The server's base URL (`http://127.0.0.1:7070`, `https://build-box:7070`).
    #[arg(long, env = "TASKS_REMOTE_SERVER", value_name = "URL")]
    pub server: String,
    /// The file holding the server's bearer token.
    #[arg(long, env = "TASKS_REMOTE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
    /// The remote task type: remote-agent, ultraplan, ultrareview, autofix-pr, background-pr.
    #[arg(long = "type", default_value = "remote-agent", value_parser = parse_subtype)]
    pub subtype: RemoteSubtype,
    /// Human description (default: the prompt's first line).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Wait for it to end, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// The prompt: its words joined by spaces.
    #[arg(required = true, last = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

fn parse_subtype(text: &str) -> Result<RemoteSubtype, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        format!(
            "{text:?}: expected remote-agent, ultraplan, ultrareview, autofix-pr or background-pr"
        )
    })
}

/// Serve this machine's agents over the sessions API (for `tasks remote` elsewhere).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The file holding the bearer token clients must present (mode 0600).
    #[arg(long, value_name = "FILE", required_unless_present = "init_token")]
    pub token_file: Option<PathBuf>,
    /// Write a new random token to FILE (mode 0600; it must not exist), print it and exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["token_file", "tls_cert"])]
    pub init_token: Option<PathBuf>,
    /// The TLS certificate chain (PEM); required for a non-loopback address.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The largest request body accepted (bytes).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    pub max_body: usize,
    /// The most transcript bytes one events page holds.
    #[arg(long, default_value_t = PageLimits::default().max_bytes, value_name = "BYTES")]
    pub page_bytes: usize,
    /// The most connections served at once [default: 4096, lowered to leave 256 descriptors
    /// free below the descriptor limit, whose soft value is first raised to the hard one].
    /// Beyond it new connections wait in the listen queue until one closes; those already
    /// open go on being served.
    #[arg(long, env = "TASKS_SERVE_MAX_CONNECTIONS", value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: Option<usize>,
    /// A connection that has not sent a whole request head this long after it was accepted
    /// (TLS handshake included), or after the first byte of a later request, is closed (a
    /// client that connects and says nothing, or trickles its headers, holds no slot for
    /// long).
    #[arg(long, env = "TASKS_SERVE_HEADER_TIMEOUT", default_value = "10s", value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// A kept-alive connection with no request in flight that sends nothing this long is
    /// closed.
    #[arg(long, env = "TASKS_SERVE_IDLE_TIMEOUT", default_value = "30s", value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub idle_timeout: std::time::Duration,
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
