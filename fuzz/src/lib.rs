//! Fuzz targets for every parser of untrusted input in the workspace.
//!
//! Each target is a plain function over bytes ([`Target::run`]) that panics when it finds
//! something: a panic of the code under test, or a broken invariant of the target's own (a
//! record that parses must re-serialize and parse to an equal value, a line reader must not
//! hold more than its limit, …). The same functions are driven two ways:
//!
//! - by libFuzzer, coverage-guided: one binary per target in `fuzz_targets/` (feature
//!   `libfuzzer`), built by `cargo fuzz` with `--sanitizer none`, which needs no nightly
//!   toolchain (see README.md);
//! - by `cargo test -p fuzz` on any toolchain: every file of `corpus/<target>/` and
//!   `regressions/<target>/`, then inputs made by mutating those files, for a bounded time
//!   ([`smoke`]).
//!
//! Targets that read files write the input into a private scratch directory of the calling
//! thread ([`scratch`]) and call the crate's real reader on it, so the code fuzzed is exactly
//! the code that reads state from disk.

// A fuzz target reports a finding by panicking: `unwrap`/`expect` on its own scratch files and
// on values an invariant says must exist are how it says "this must hold".
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod included;
pub mod scratch;
pub mod smoke;
pub mod targets;

/// One fuzz target: its name (the `fuzz_targets/` binary and the corpus directory) and the
/// function that runs one input.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The name of the target, of its binary and of its corpus directory.
    pub name: &'static str,
    /// What it parses, in one line.
    pub parser: &'static str,
    /// Runs one input; panics on a finding.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "session_record",
        parser: "task_session::record::read ({id}.json, either format) and the readers' renderers",
        run: targets::session::record,
    },
    Target {
        name: "session_event",
        parser: "task_session::notice::{peek_events, claim_events} (events/pending/*.json)",
        run: targets::session::event,
    },
    Target {
        name: "session_protocol",
        parser: "task_session::protocol::{Request, Response} lines; restart::recall ({id}.start.json)",
        run: targets::session::protocol,
    },
    Target {
        name: "session_config",
        parser: "task_session::config::Config::load (config.json), task_cli::settings::Settings::read, durations and sizes",
        run: targets::session::config,
    },
    Target {
        name: "session_lease",
        parser: "task_session::lease::Holder::decode",
        run: targets::session::lease,
    },
    Target {
        name: "list_task_file",
        parser: "task_list::Task::from_file_json and TaskList::get/list/ready over one {n}.json",
        run: targets::list::task_file,
    },
    Target {
        name: "list_dir",
        parser: "a whole task-list directory: task files, .highwatermark, .snapshot-cache, .journal, .events.jsonl",
        run: targets::list::dir,
    },
    Target {
        name: "agent_stream",
        parser: "agent_stream::format::{Claude,Codex,Gemini,Detecting}Parser lines, ProgressTracker, activity texts",
        run: targets::agent::stream,
    },
    Target {
        name: "agent_tail",
        parser: "task_agent::TranscriptTail over a transcript file (line framing, limits)",
        run: targets::agent::tail,
    },
    Target {
        name: "workflow_meta",
        parser: "task_workflow meta::parse (the `export const meta` literal, JSON5)",
        run: targets::workflow::meta,
    },
    Target {
        name: "workflow_files",
        parser: "task_workflow JournalRecord lines, call_key, show::render_tree over a run record",
        run: targets::workflow::files,
    },
    Target {
        name: "output_reads",
        parser: "task_output::read (delta, text delta, tail, last lines, progress tail), format_for_model, mailbox reads",
        run: targets::output::reads,
    },
    Target {
        name: "mcp_transport",
        parser: "task-mcp's stdio transport (BoundedTransport: line framing, IdScan, JSON-RPC answers)",
        run: targets::mcp::transport,
    },
    Target {
        name: "remote_api",
        parser: "task_remote::api bodies, EventLog::recover_last, Sidecars::read",
        run: targets::remote::api,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
