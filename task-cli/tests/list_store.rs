//! `tasks list --store` / `$TASKS_LIST_STORE` and the MCP Task tools on PostgreSQL, and
//! `tasks list export` / `import` between stores, through the built binary.
//!
//! The PostgreSQL cases use the server `TASKS_TEST_PG_URL` names (`.ci/postgres.sh start`),
//! each in a schema of its own; without it they say so and skip (under CI they fail).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// A private schema on the test server, dropped at the end.
struct Schema {
    url: String,
    name: String,
    admin: postgres::Client,
}

impl Schema {
    fn new() -> Option<Self> {
        let Ok(base) = std::env::var("TASKS_TEST_PG_URL") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "TASKS_TEST_PG_URL unset under CI"
            );
            eprintln!("skipped: TASKS_TEST_PG_URL is not set (eval \"$(.ci/postgres.sh start)\")");
            return None;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("cli_{}_{nanos}", std::process::id());
        let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-csearch_path%3D{name}");
        Some(Self { url, name, admin })
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

fn tasks(root: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tasks"))
        .args(args)
        .env("TASKS_ROOT", root)
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_LIST_ID")
        .env_remove("TASKS_LIST_ROOT")
        .env_remove("TASKS_LIST_STORE")
        .env_remove("CLAUDE_CONFIG_DIR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A session of `tasks list` commands.
type Steps<'a> = &'a [&'a [&'a str]];

/// Every command but `claim --next`.
const SESSION: Steps<'static> = &[
    &["create", "--subject", "Set up schema"],
    &[
        "create",
        "--subject",
        "Write API",
        "--metadata",
        r#"{"p":1}"#,
    ],
    &["create", "--subject", "Docs"],
    &["update", "2", "--add-blocked-by", "1"],
    &["update", "1", "--add-blocked-by", "2"],
    &["update", "3", "--add-blocked-by", "3"],
    &["claim", "2", "--owner", "ann"],
    &["claim", "1", "--owner", "ann", "--check-busy"],
    &["claim", "1", "--owner", "bob"],
    &["claim", "1", "--owner", "ann"],
    &["get", "2"],
    &["ready"],
    &["unassign", "--owner", "bob"],
    &["delete", "3"],
    &["create", "--subject", "After delete"],
    &["update", "1", "--status", "completed"],
    &["update", "2", "--status", "completed"],
    &["update", "4", "--status", "completed"],
    &["graph"],
    &["doctor"],
];

/// `claim --next` (after [`SESSION`]): by priority, blockers, `--check-busy`, nothing ready.
const CLAIM_NEXT: Steps<'static> = &[
    &[
        "create",
        "--subject",
        "Low",
        "--metadata",
        r#"{"priority":4}"#,
    ],
    &["create", "--subject", "Urgent", "--priority", "0"],
    &["update", "5", "--priority", "5"],
    &["update", "5", "--add-blocked-by", "6"],
    &["claim", "--next", "--owner", "cy"],
    &["claim", "--next", "--owner", "cy", "--check-busy"],
    &["claim", "--next", "--owner", "dee"],
    &["update", "6", "--status", "completed"],
    &["claim", "--next", "--owner", "dee", "--json"],
    &["claim", "--next", "--owner", "eve", "--json"],
    &["create", "--subject", "Later"],
    &["update", "7", "--add-blocked-by", "5"],
    &["claim", "--next", "--owner", "fay"],
    &["update", "7", "--remove-blocked-by", "5"],
    &["claim", "--next", "--owner", "fay"],
];

/// `ls` filters (after [`SESSION`], which leaves #1, #2 and #4, completed).
const LS_FILTERS: Steps<'static> = &[
    &[
        "create",
        "api",
        "--label",
        "backend",
        "--label",
        "v2",
        "--priority",
        "0",
    ],
    &["create", "docs", "--label", "docs"],
    &["create", "db", "--label", "backend", "--priority", "1"],
    &["update", "5", "--add-blocked-by", "7"],
    &["claim", "6", "--owner", "ann"],
    &["ls", "--label", "backend"],
    &["ls", "--label", "backend", "--label", "v2"],
    &["ls", "--priority", "2", "--status", "pending"],
    &["ls", "--owner", "ann"],
    &["ls", "--status", "completed"],
    &["ls", "--ready"],
    &["ls", "--blocked", "--json"],
    &["ls", "--status", "bogus"],
    &["update", "6", "--label", "later"],
    &["ls", "--label", "docs"],
    &["ls", "--label", "later"],
];

/// Parents and positions (after [`SESSION`], which leaves #1, #2 and #4, completed).
const PARENTS: Steps<'static> = &[
    &["create", "epic"],
    &["create", "first", "--parent", "5"],
    &["create", "second", "--parent", "#5"],
    &["create", "orphan", "--parent", "99"],
    &["update", "5", "--parent", "6"],
    &["update", "7", "--before", "6"],
    &["update", "7", "--after", "7"],
    &["ready"],
    &["get", "5"],
    &["get", "7", "--json"],
    &["ls", "--parent", "5"],
    &["graph"],
    &["claim", "--next", "--owner", "ann"],
    &["update", "7", "--status", "completed"],
    &["claim", "--next", "--owner", "bob"],
    &["claim", "--next", "--owner", "cy"],
    &["update", "6", "--status", "completed"],
    &["claim", "--next", "--owner", "cy"],
    &["update", "6", "--parent", ""],
    &["ls", "--parent", "5"],
];

/// The same session of `tasks list` commands; every output, in order.
fn session(root: &Path, store: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    run_steps(root, store, env, SESSION)
}

/// Runs `steps`; every output, in order.
fn run_steps(root: &Path, store: &[&str], env: &[(&str, &str)], steps: Steps<'_>) -> Vec<String> {
    steps
        .iter()
        .map(|step| {
            let mut args = vec!["list"];
            args.extend_from_slice(store);
            args.extend_from_slice(step);
            let output = tasks(root, env, &args);
            format!("{step:?} → {:?}\n{}", output.status.code(), stdout(&output))
        })
        .collect()
}

#[test]
fn every_list_command_prints_the_same_on_postgres_as_on_files() {
    let Some(schema) = Schema::new() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let on_files = session(root.path(), &[], &[]);
    let on_pg = session(root.path(), &["--store", &schema.url, "--list", "p"], &[]);
    assert_eq!(on_pg, on_files);
    assert!(
        on_files
            .iter()
            .any(|s| s.contains("would create a cycle: 2 → 1 → 2"))
    );
    // `$TASKS_LIST_STORE` selects the same store as `--store`.
    let listed = tasks(
        root.path(),
        &[("TASKS_LIST_STORE", &schema.url)],
        &["list", "--list", "p", "get", "4"],
    );
    assert_eq!(
        stdout(&listed),
        "Task #4: After delete\nStatus: completed\nDescription: \nOwner: (none)\n"
    );
}

/// Runs [`SESSION`] then `steps` on files and on PostgreSQL; the outputs of `steps` (the same
/// on both, or the test fails), `None` without a server.
fn after_session_on_both_stores(steps: Steps<'_>) -> Option<Vec<String>> {
    let schema = Schema::new()?;
    let root = tempfile::tempdir().unwrap();
    let pg = ["--store", schema.url.as_str(), "--list", "p"];
    session(root.path(), &[], &[]);
    session(root.path(), &pg, &[]);
    let on_files = run_steps(root.path(), &[], &[], steps);
    assert_eq!(run_steps(root.path(), &pg, &[], steps), on_files);
    Some(on_files)
}

#[test]
fn claim_next_prints_the_same_on_postgres_as_on_files() {
    let Some(on_files) = after_session_on_both_stores(CLAIM_NEXT) else {
        return;
    };
    let claims: Vec<&str> = on_files
        .iter()
        .filter(|s| s.contains("\"--next\""))
        .map(|s| s.split_once('\n').unwrap().1)
        .collect();
    assert_eq!(
        claims[..3],
        [
            "Claimed task #6 for cy: Urgent\n",
            "Cannot claim a task for cy: agent_busy (owns #6)\n",
            "No task is ready.\n",
        ]
    );
    assert!(claims[3].contains(r#""owner":"dee""#), "{}", claims[3]);
    assert_eq!(claims[4], "null\n", "nothing ready is null, and exit 0");
    assert_eq!(
        claims[5..],
        ["No task is ready.\n", "Claimed task #7 for fay: Later\n"]
    );
    assert!(
        on_files
            .iter()
            .any(|s| s.contains(r#"["update", "5", "--priority", "5"] → Some(2)"#))
    );
    assert!(
        on_files
            .iter()
            .any(|s| s.ends_with("→ Some(0)\nUpdated task #7 blockedBy\n"))
    );
    assert!(
        on_files
            .iter()
            .any(|s| s.contains(r#"["claim", "--next", "--owner", "eve", "--json"] → Some(0)"#))
    );
}

#[test]
fn ls_filters_print_the_same_on_postgres_as_on_files() {
    let Some(on_files) = after_session_on_both_stores(LS_FILTERS) else {
        return;
    };
    let out = |at: usize| on_files[at].split_once('\n').unwrap().1;
    assert_eq!(
        out(5),
        "#5 [pending] api [blocked by #7] · P0 · labels: backend, v2\n\
         #7 [pending] db · P1 · labels: backend\n"
    );
    assert_eq!(
        out(6),
        "#5 [pending] api [blocked by #7] · P0 · labels: backend, v2\n"
    );
    assert_eq!(out(7), "#6 [pending] docs (ann) · labels: docs\n");
    assert_eq!(
        out(8),
        "#1 [completed] Set up schema (ann)\n#6 [pending] docs (ann) · labels: docs\n"
    );
    assert_eq!(out(9).lines().count(), 3);
    assert_eq!(out(10), "#7 [pending] db · P1 · labels: backend\n");
    assert_eq!(
        serde_json::from_str::<Value>(out(11)).unwrap(),
        json!({"tasks": [{"id": "5", "subject": "api", "status": "pending", "blockedBy": ["7"],
                          "priority": 0, "labels": ["backend", "v2"]}]})
    );
    assert!(on_files[12].contains("→ Some(70)"), "{}", on_files[12]);
    assert_eq!(out(14), "No tasks found\n");
    assert_eq!(out(15), "#6 [pending] docs (ann) · labels: later\n");
}

#[test]
fn parents_and_positions_print_the_same_on_postgres_as_on_files() {
    let Some(on_files) = after_session_on_both_stores(PARENTS) else {
        return;
    };
    let out = |at: usize| on_files[at].split_once('\n').unwrap().1;
    assert!(on_files[3].contains("→ Some(70)"), "{}", on_files[3]);
    assert!(out(3).is_empty(), "the refusal is on stderr");
    assert!(
        out(4).contains("Cannot set parent: #6 is #5 or one of its descendants"),
        "{}",
        out(4)
    );
    assert_eq!(out(5), "Updated task #7 metadata\n");
    assert!(out(6).contains("next to itself"), "{}", out(6));
    assert!(
        out(7).starts_with("#7 ready: second\n#6 ready: first\n")
            && out(7).ends_with("#5 not ready: epic (open children #6, #7)\n"),
        "{}",
        out(7)
    );
    assert!(
        out(8).ends_with("Owner: (none)\nChildren: #6, #7\n"),
        "{}",
        out(8)
    );
    let seven: Value = serde_json::from_str(out(9)).unwrap();
    assert_eq!(seven["task"]["parent"], "5");
    assert_eq!(out(10), "#6 [pending] first\n#7 [pending] second\n");
    assert!(
        out(11).ends_with("#5 [pending] epic\n  #6 [pending] first\n  #7 [pending] second\n"),
        "{}",
        out(11)
    );
    assert_eq!(
        out(12),
        "Claimed task #7 for ann: second\n",
        "moved before #6"
    );
    assert_eq!(out(14), "Claimed task #6 for bob: first\n");
    assert_eq!(out(15), "No task is ready.\n", "the epic waits for #6");
    assert_eq!(out(17), "Claimed task #5 for cy: epic\n");
    assert_eq!(out(19), "#7 [completed] second (ann)\n");
}

#[test]
fn export_and_import_move_a_list_between_files_and_postgres() {
    let Some(schema) = Schema::new() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    session(root.path(), &[], &[]);
    let dump = root.path().join("dump.json");
    let run = |args: &[&str]| {
        let output = tasks(root.path(), &[], args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout(&output)
    };
    run(&["list", "export", "--output", dump.to_str().unwrap()]);
    let imported = run(&[
        "list",
        "--store",
        &schema.url,
        "import",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(imported, "Imported 3 task(s) into default\n");
    let from_files: Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    let from_pg: Value =
        serde_json::from_str(&run(&["list", "--store", &schema.url, "export"])).unwrap();
    assert_eq!(from_pg, from_files);
    assert_eq!(from_pg["highWaterMark"], json!(3));
    // 4 creates, 1 edge, 1 claim, 1 delete, 3 status changes.
    assert_eq!(from_pg["audit"].as_array().unwrap().len(), 10);

    // And back into a new file list, through stdin.
    let mut import = Command::new(env!("CARGO_BIN_EXE_tasks"));
    import
        .args(["list", "--list", "back", "import", "-"])
        .env("TASKS_ROOT", root.path())
        .env_remove("TASKS_LIST_STORE")
        .stdin(std::fs::File::open(&dump).unwrap());
    assert!(import.output().unwrap().status.success());
    let mut back: Value =
        serde_json::from_str(&run(&["list", "--list", "back", "export"])).unwrap();
    back["listId"] = json!("default");
    assert_eq!(back, from_files);
    // A used list refuses an import.
    let again = tasks(
        root.path(),
        &[],
        &[
            "list",
            "--store",
            &schema.url,
            "import",
            dump.to_str().unwrap(),
        ],
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("cannot import into list \"default\""));
}

#[test]
fn an_unknown_store_scheme_is_a_clear_error() {
    let root = tempfile::tempdir().unwrap();
    for store in ["mysql://h/db", "/var/lib/tasks"] {
        let output = tasks(root.path(), &[], &["list", "--store", store, "ready"]);
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("unsupported task-list store"), "{stderr}");
        assert!(
            stderr.contains("expected a postgres:// or postgresql:// URL"),
            "{stderr}"
        );
    }
    let output = tasks(
        root.path(),
        &[("TASKS_LIST_STORE", "sqlite:///x")],
        &["list", "create", "--subject", "x"],
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("unsupported task-list store \"sqlite\"")
    );
    assert!(
        !root.path().join("lists").exists(),
        "nothing was written to files"
    );
}

#[test]
fn mcp_task_tools_use_the_store_from_the_environment() {
    let Some(schema) = Schema::new() else {
        return;
    };
    use rmcp::ServiceExt;
    let root = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listed = runtime.block_on(async {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tasks"));
        command
            .args(["mcp", "--list", "shared"])
            .env("TASKS_ROOT", root.path())
            .env("TASKS_IDLE_EXIT_MS", "1000")
            .env("TASKS_LIST_STORE", &schema.url)
            .env_remove("TASKS_SESSION")
            .env_remove("TASKS_LIST_ROOT");
        let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
        let client = ().serve(transport).await.unwrap();
        let call = |tool: &'static str, args: Value| {
            let Value::Object(args) = args else {
                unreachable!()
            };
            client.call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(args))
        };
        call(
            "TaskCreate",
            json!({"subject": "From MCP", "description": "d"}),
        )
        .await
        .unwrap();
        call(
            "TaskCreate",
            json!({"subject": "Second", "description": "d"}),
        )
        .await
        .unwrap();
        call("TaskUpdate", json!({"taskId": "2", "addBlockedBy": ["1"]}))
            .await
            .unwrap();
        let listed = call("TaskList", json!({})).await.unwrap();
        client.cancel().await.unwrap();
        serde_json::to_value(&listed).unwrap()
    });
    assert!(
        listed
            .to_string()
            .contains("#2 [pending] Second [blocked by #1]"),
        "{listed}"
    );
    // The CLI, on the same database, sees what the MCP server wrote.
    let got = tasks(
        root.path(),
        &[],
        &[
            "list",
            "--store",
            &schema.url,
            "--list",
            "shared",
            "get",
            "2",
        ],
    );
    assert_eq!(
        stdout(&got),
        "Task #2: Second\nStatus: pending\nDescription: d\nBlocked by: #1\nOwner: (none)\n"
    );
}

#[test]
fn reference_lock_directories_are_honoured_only_where_the_reference_writes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let claude = dir.path().join("claude");
    // A reference harness holding the list lock of its `default` list, and of ours.
    for list in [claude.join("tasks/default"), root.join("lists/default")] {
        std::fs::create_dir_all(list.join(".lock.lock")).unwrap();
    }
    let ours = tasks(&root, &[], &["list", "create", "mine", "-q"]);
    assert!(ours.status.success(), "{ours:?}");
    assert_eq!(stdout(&ours).trim(), "1");

    let claude_env = [("CLAUDE_CONFIG_DIR", claude.to_str().unwrap())];
    let shared = tasks(&root, &claude_env, &["list", "create", "theirs", "-q"]);
    assert!(!shared.status.success(), "{shared:?}");
    let message = String::from_utf8_lossy(&shared.stderr);
    assert!(message.contains(".lock.lock"), "{message}");
    assert!(!claude.join("tasks/default/1.json").exists());

    // Forced on, our own list waits for the reference's lock as well.
    let forced = [("TASKS_LIST_REFERENCE_LOCKS", "1")];
    let waited = tasks(&root, &forced, &["list", "create", "again", "-q"]);
    assert!(!waited.status.success(), "{waited:?}");
}

/// `claim --start` (after [`SESSION`]): claimed and in progress in one step, by id and with
/// `--next`; a task already in progress keeps its status.
const CLAIM_START: Steps<'static> = &[
    &["create", "--subject", "Build"],
    &["create", "--subject", "Ship"],
    &["claim", "5", "--owner", "ann", "--start"],
    &["get", "5"],
    &["claim", "--next", "--owner", "bob", "--start"],
    &["get", "6"],
    &["claim", "5", "--owner", "ann", "--start"],
];

#[test]
fn claim_start_claims_and_starts_in_one_step_on_postgres_as_on_files() {
    let Some(on_files) = after_session_on_both_stores(CLAIM_START) else {
        return;
    };
    let shown = |step: usize| on_files[step].split_once('\n').unwrap().1.to_owned();
    assert!(shown(3).contains("Status: in_progress"), "{}", shown(3));
    assert!(shown(3).contains("Owner: ann"), "{}", shown(3));
    assert!(shown(5).contains("Status: in_progress"), "{}", shown(5));
    assert!(shown(5).contains("Owner: bob"), "{}", shown(5));
    assert!(
        on_files[6].contains("→ Some(0)"),
        "claimed again by its owner: {}",
        on_files[6]
    );
}
