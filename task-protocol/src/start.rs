//! The typed start requests of the task kinds, as [`Start::request`](crate::wire::Start::request)
//! carries them, tagged by [`Start::kind`](crate::wire::Start::kind).

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

/// A typed start request: what a client sends in [`Start::request`](crate::wire::Start::request)
/// under [`Start::kind`](crate::wire::Start::kind) = [`StartRequest::KIND`], and what the
/// launcher of that kind decodes.
pub trait StartRequest: Serialize + DeserializeOwned + Send + 'static {
    /// The kind's name on the wire.
    const KIND: &'static str;

    /// Whether a task of this kind can be resumed after it stopped (a message to an agent or a
    /// teammate): its start is then remembered with its caller's whole environment, so that a
    /// resume runs where the task started, whoever asks for it.
    const RESUMABLE: bool = false;
}

macro_rules! kinds {
    ($($request:ty => $kind:literal $(, resumable = $resumable:literal)?);* $(;)?) => {
        $(impl StartRequest for $request {
            const KIND: &'static str = $kind;
            $(const RESUMABLE: bool = $resumable;)?
        })*
    };
}

kinds! {
    ShellStart => "shell";
    MonitorStart => "monitor";
    AgentStart => "agent", resumable = true;
    TeammateStart => "teammate", resumable = true;
    DreamStart => "dream";
    WorkflowStart => "workflow";
    RemoteStart => "remote";
}

/// A shell command to start (`local_bash`), as `tasks run` or the MCP `Bash` tool asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShellStart {
    /// Shell text, run with `sh -c`.
    pub command: String,
    /// The one-line description shown in notifications.
    pub description: String,
    /// Kill the command after this many milliseconds (exit code 143).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `/dev/null` (the default), or a pipe the host holds for the task's life and writes to
    /// through the supervisor's input operation ([`Op::Input`](crate::wire::Op::Input)).
    #[serde(default, skip_serializing_if = "StdinMode::is_null")]
    pub stdin: StdinMode,
    /// Where the command runs: absent, on this machine (as a child of the supervisor); else on
    /// a batch system ([`Placement`]), as a job named by the task's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where a shell command or an agent CLI runs when not on this machine: a batch system that
/// takes it as a job; or [`Placement::Local`], this machine even when a default placement is
/// configured.
///
/// On the wire `{"engine": "slurm", "partition": "debug", "args": ["--mem=1G"]}` (both fields
/// may be left out), or `{"engine": "local"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "engine", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Placement {
    /// A Slurm batch job (`sbatch`), its output the task's output file: the state directory
    /// must be on a filesystem the cluster's nodes share.
    Slurm {
        /// The partition (`--partition`); absent, the cluster's default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<String>,
        /// More `sbatch` options, each one argument (`--mem=1G`, `--cpus-per-task=4`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
    /// This machine, as a child of the supervisor: asked for explicitly (`--on local`), it
    /// overrides a configured default placement.
    Local,
}

impl Placement {
    /// The batch system's name (`slurm`), or `local`.
    pub fn engine(&self) -> &'static str {
        match self {
            Placement::Slurm { .. } => "slurm",
            Placement::Local => "local",
        }
    }

    /// Parses what a command line gives: `local`, `slurm` or `slurm:PARTITION` (no extra
    /// arguments).
    ///
    /// # Errors
    /// A word that names no batch system, or an empty partition.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (engine, partition) = match text.split_once(':') {
            Some((engine, partition)) => (engine, Some(partition)),
            None => (text, None),
        };
        match (engine, partition) {
            ("local", None) => Ok(Placement::Local),
            ("local", Some(_)) => Err("local takes no partition".into()),
            ("slurm", Some("")) => Err("an empty Slurm partition (slurm:PARTITION)".into()),
            ("slurm", partition) => Ok(Placement::Slurm {
                partition: partition.map(str::to_owned),
                args: Vec::new(),
            }),
            (other, _) => Err(format!(
                "unknown placement {other:?}: local, or the one batch system, slurm (slurm or slurm:PARTITION)"
            )),
        }
    }
}

/// What the child's stdin is (on the wire `"null"` or `"pipe"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum StdinMode {
    /// `/dev/null`: a `read` gets end-of-file at once (the default, as in the reference).
    #[default]
    #[serde(rename = "null")]
    Null,
    /// A pipe the caller can write to.
    #[serde(rename = "pipe")]
    Piped,
}

impl StdinMode {
    /// Whether this is the default, `/dev/null`.
    pub fn is_null(&self) -> bool {
        *self == StdinMode::Null
    }
}

/// A monitor to start (`monitor_mcp`): a command xor a WebSocket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MonitorStart {
    /// Shell text whose stdout lines are events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A WebSocket whose frames are events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws: Option<WsTarget>,
    /// The one-line description shown in notifications.
    pub description: String,
    /// Lifetime in milliseconds (default and cap from the config); ignored when persistent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Live until killed or the source ends.
    #[serde(default)]
    pub persistent: bool,
}

/// A WebSocket to watch: its `ws://` URL and the subprotocols to offer, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WsTarget {
    /// The URL, `ws://host:port/path`.
    pub url: String,
    /// Subprotocols offered in `Sec-WebSocket-Protocol`, in order of preference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
}

impl WsTarget {
    /// A target without subprotocols.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            protocols: Vec::new(),
        }
    }

    /// Checks the URL's scheme, so a typo is refused before a monitor starts (by a front end,
    /// and again by the monitor's launcher).
    ///
    /// # Errors
    /// [`NotWebSocket`] unless the URL starts with `ws://` or `wss://` (in any case) and
    /// names something after it.
    ///
    /// ```
    /// use task_protocol::start::WsTarget;
    ///
    /// assert!(WsTarget::new("WSS://example.com/feed").check_scheme().is_ok());
    /// assert!(WsTarget::new("https://example.com").check_scheme().is_err());
    /// assert!(WsTarget::new("ws://").check_scheme().is_err());
    /// ```
    pub fn check_scheme(&self) -> Result<(), NotWebSocket> {
        let scheme_ok = ["ws://", "wss://"].iter().any(|scheme| {
            self.url.len() > scheme.len()
                && self
                    .url
                    .get(..scheme.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
        });
        if scheme_ok {
            Ok(())
        } else {
            Err(NotWebSocket(self.url.clone()))
        }
    }
}

/// A monitor was given a URL that is not a WebSocket's ([`WsTarget::check_scheme`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a WebSocket URL (ws://… or wss://…): {0:?}")]
pub struct NotWebSocket(pub String);

/// How long a monitor may live ([`MonitorStart::timeout_ms`]): its default and its cap. The
/// `Default` is SPEC §6's (5 minutes, at most an hour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorLimits {
    /// A monitor's lifetime when the caller gives none (SPEC: 300 000 ms).
    pub default_timeout: Duration,
    /// The longest lifetime a non-persistent monitor may ask for (SPEC: 3 600 000 ms).
    pub max_timeout: Duration,
}

impl Default for MonitorLimits {
    fn default() -> Self {
        MonitorLimits {
            default_timeout: Duration::from_millis(300_000),
            max_timeout: Duration::from_millis(3_600_000),
        }
    }
}

impl MonitorLimits {
    /// The lifetime of a monitor: `None` when persistent, else the requested timeout (or the
    /// default) clamped to the maximum.
    pub fn lifetime(&self, requested: Option<Duration>, persistent: bool) -> Option<Duration> {
        if persistent {
            return None;
        }
        let wanted = requested.unwrap_or(self.default_timeout);
        Some(wanted.min(self.max_timeout))
    }
}

/// An agent to start (`local_agent`): the CLI to run and what to ask it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentStart {
    /// The agent CLI, program then arguments (`["claude"]`, `["codex", "exec"]`); the runner
    /// adds the flags its format needs.
    pub command: Vec<String>,
    /// Its event format (`claude` when absent), or `auto`.
    #[serde(default)]
    pub runner: RunnerFormat,
    /// The one-line description shown in notifications.
    pub description: String,
    /// The first user turn.
    pub prompt: String,
    /// A name it can be addressed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A model override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The agent type (`general-purpose` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
    /// Run it in a git worktree of its own, made from the caller's `HEAD`
    /// (task-agent's `worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRequest>,
    /// Its budgets: tokens, turns, time (task-agent's `budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AgentBudget>,
    /// Where the agent CLI runs: absent, on this machine; else inside a batch job
    /// ([`Placement`]) whose output is its transcript (a time budget is the job's time limit
    /// too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The event format of an agent CLI as a front end names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum RunnerFormat {
    /// Claude Code's stream-json.
    #[default]
    Claude,
    /// OpenAI Codex's `exec --json` events.
    Codex,
    /// Gemini CLI's stream-json.
    Gemini,
    /// Detected from the first line of the transcript; the command runs exactly as given.
    Auto,
}

/// A teammate to start (`in_process_teammate`): `name@team` and the agent CLI that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TeammateStart {
    /// Its name in the team.
    pub name: String,
    /// The team.
    pub team: String,
    /// The agent CLI, program then arguments (it must take stream-json input: `claude`).
    pub command: Vec<String>,
    /// Its first turn.
    pub prompt: String,
    /// Whether its plan needs the lead's approval first.
    #[serde(default)]
    pub plan: bool,
    /// Its display colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Run it in a git worktree of its own, made from the caller's `HEAD`
    /// (task-agent's `worktree`); a resumed teammate goes on in the one it had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRequest>,
    /// Its budgets (task-agent's `budget`); a resumed teammate has them again from its resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<AgentBudget>,
    /// Where its agent CLI runs: absent, where the configured default placement says (else on
    /// this machine); else as a batch job ([`Placement`]) whose output is its transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// A dream to start: the agent CLI, its prompt and the consolidation lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DreamStart {
    /// The agent CLI, program then arguments.
    pub command: Vec<String>,
    /// Its event format (`claude` when absent).
    #[serde(default)]
    pub runner: RunnerFormat,
    /// The consolidation prompt.
    pub prompt: String,
    /// The consolidation lock file.
    pub lock: PathBuf,
}

/// A workflow to start: the agent CLI its agents run, and the `Workflow` tool's inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStart {
    /// The agent CLI, program then arguments.
    pub command: Vec<String>,
    /// Its event format.
    #[serde(default)]
    pub runner: RunnerFormat,
    /// The script's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// A script file (takes precedence over `script` and `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_path: Option<PathBuf>,
    /// A saved workflow's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The script's `args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// The run whose journal answers unchanged calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_from_run_id: Option<String>,
}

/// A remote agent to start: where the server is and what to ask it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RemoteStart {
    /// The server's base URL (`http://127.0.0.1:7070`).
    pub server: String,
    /// The file holding its bearer token (relative to the caller's directory).
    pub token_file: PathBuf,
    /// The subtype (`remote-agent` when absent).
    #[serde(default)]
    pub remote_task_type: RemoteSubtype,
    /// The one-line description.
    pub description: String,
    /// The first user turn.
    pub prompt: String,
    /// Subtype data for its completion checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

/// A request to run an agent in a worktree of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorktreeRequest {
    /// The new branch's name (`tasks/{description-slug}-{id}` when absent). It must not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// The budgets of one agent run (`tasks agent --max-tokens N --max-turns N --timeout DUR`):
/// past one, it is stopped with [`EndReason::BudgetExceeded`](crate::EndReason::BudgetExceeded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentBudget {
    /// The most tokens (as its progress counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The most turns (model responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    /// The longest it may run, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The turns used so far in this run.
    #[serde(default)]
    pub turns_used: u64,
}

impl AgentBudget {
    /// Whether no budget is set.
    pub fn is_unlimited(&self) -> bool {
        self.max_tokens.is_none() && self.max_turns.is_none() && self.timeout_ms.is_none()
    }
}

/// The kind of remote session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RemoteSubtype {
    /// `remote-agent`
    #[default]
    RemoteAgent,
    /// `ultraplan`
    Ultraplan,
    /// `ultrareview`
    Ultrareview,
    /// `autofix-pr`
    AutofixPr,
    /// `background-pr`
    BackgroundPr,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_start_without_placement_reads_and_writes_as_before() {
        let old = r#"{"command":"make","description":"build"}"#;
        let start: ShellStart = serde_json::from_str(old).unwrap();
        assert_eq!(start.placement, None);
        assert_eq!(serde_json::to_string(&start).unwrap(), old);
    }

    #[test]
    fn a_slurm_placement_is_tagged_by_its_engine() {
        let start = ShellStart {
            command: "make".into(),
            description: "build".into(),
            timeout_ms: None,
            stdin: StdinMode::Null,
            placement: Some(Placement::Slurm {
                partition: Some("debug".into()),
                args: vec!["--mem=1G".into()],
            }),
        };
        let json = serde_json::to_value(&start).unwrap();
        assert_eq!(
            json["placement"],
            serde_json::json!({"engine": "slurm", "partition": "debug", "args": ["--mem=1G"]})
        );
        assert_eq!(serde_json::from_value::<ShellStart>(json).unwrap(), start);
        let bare: Placement = serde_json::from_str(r#"{"engine":"slurm"}"#).unwrap();
        assert_eq!(bare, Placement::parse("slurm").unwrap());
    }

    #[test]
    fn placements_parse_from_the_command_line() {
        assert_eq!(
            Placement::parse("slurm:gpu").unwrap(),
            Placement::Slurm {
                partition: Some("gpu".into()),
                args: Vec::new()
            }
        );
        assert!(Placement::parse("slurm:").is_err());
        assert!(Placement::parse("k8s").is_err());
        assert_eq!(Placement::parse("slurm").unwrap().engine(), "slurm");
        assert_eq!(Placement::parse("local").unwrap(), Placement::Local);
        assert!(Placement::parse("local:x").is_err());
        assert_eq!(
            serde_json::to_value(Placement::Local).unwrap(),
            serde_json::json!({"engine": "local"})
        );
    }
}
