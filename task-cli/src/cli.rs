//! The command line surface of `tasks` (clap derive): every command, as `tasksd` parses it.
//! The short commands' definitions are task-client's ([`task_client::cli::args`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use task_agent::RunnerFormat;
use task_client::cli::args::AFTER_HELP;
pub use task_client::cli::args::{EndArgs, Globals, PlacementArgs, ScheduleArgs, ShortCommand};
use task_core::{Address, RemoteSubtype};
use task_serve::{DEFAULT_LISTEN, DEFAULT_MAX_BODY, PageLimits};

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
    /// How often to look at subscribed outputs for changes to push (and at everything where
    /// the records cannot be watched), in milliseconds.
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
