//! Every way a task can end, produced by a real process, and read back the same way by every
//! front end: `tasks wait` (text and `--json`), `tasks ps`, the MCP `TaskOutput` result and the
//! notification's summary. The end reason is what the executor recorded; no front end infers
//! it from an exit code or a duration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use task_session::client::SupervisorCommand;
use task_session::config::Config;
use task_session::paths::SessionPaths;
use task_session::session::Session;
use task_shell::ShellStart;
use tokio::process::Command;

/// Settings every process of the test shares (the supervisor inherits them from whichever
/// process starts it): a 64 KiB output cap checked often, and short idle and poll periods.
const ENV: [(&str, &str); 5] = [
    ("TASKS_SIZE_CAP_BYTES", "65536"),
    ("TASKS_SIZE_CHECK_MS", "20"),
    ("TASKS_IDLE_EXIT_MS", "2000"),
    ("TASKS_POLL_MS", "10"),
    ("TASKS_SWEEP_MS", "50"),
];

fn tasks(root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tasks"));
    command
        .args(args)
        .env("TASKS_ROOT", root)
        .env_remove("TASKS_SESSION")
        .envs(ENV)
        .stdin(std::process::Stdio::null());
    command
}

struct Fixture {
    root: tempfile::TempDir,
    mcp: RunningService<RoleClient, ()>,
}

impl Fixture {
    async fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let transport = TokioChildProcess::new(tasks(root.path(), &["mcp"])).unwrap();
        let mcp = ().serve(transport).await.unwrap();
        Self { root, mcp }
    }

    async fn cli(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = tasks(self.root.path(), args).output().await.unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    }

    async fn start(&self, args: &[&str]) -> String {
        let (code, id) = self.cli(args).await;
        assert_eq!(code, Some(0), "{args:?}");
        id.trim().to_owned()
    }

    /// Everything every front end says about the ended task `id`.
    async fn views(&self, id: &str) -> Views {
        let (wait_code, wait_text) = self.cli(&["wait", "--no-deliver", id]).await;
        let (_, wait_json) = self.cli(&["wait", "--no-deliver", id, "--json"]).await;
        let wait_json: Value = serde_json::from_str(&wait_json).unwrap();
        let (_, table) = self.cli(&["ps", "--all"]).await;
        let ps_line = table
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap()
            .to_owned();
        let (_, notices) = self.cli(&["notifications", "--json"]).await;
        let summary = notices
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|n| n["taskId"] == id)
            .map(|n| n["notification"]["summary"].as_str().unwrap().to_owned());
        let params = CallToolRequestParams::new("TaskOutput").with_arguments(
            json!({"task_id": id, "block": false})
                .as_object()
                .unwrap()
                .clone(),
        );
        let result = self.mcp.call_tool(params).await.unwrap();
        let task = result.structured_content.unwrap()["task"].clone();
        Views {
            wait_code,
            wait_text: wait_text.trim().to_owned(),
            reason: wait_json["tasks"][0]["endReason"].clone(),
            ps_line,
            summary,
            mcp_reason: task["endReason"].clone(),
            mcp_error: task["error"].as_str().map(str::to_owned),
        }
    }

    fn supervisor_pid(&self) -> i32 {
        let lock = self.root.path().join("default").join("supervisor.lock");
        std::fs::read_to_string(lock)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(self.root.path().join("default/supervisor.lock"))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

#[derive(Debug)]
struct Views {
    wait_code: Option<i32>,
    wait_text: String,
    reason: Value,
    ps_line: String,
    summary: Option<String>,
    mcp_reason: Value,
    mcp_error: Option<String>,
}

impl Views {
    /// Every front end agrees on `reason`; the wait line ends with `why` (the status, then the
    /// reason in a few words), which the ps line shows too; the summary and the MCP error are
    /// as given.
    fn agree(&self, reason: &Value, why: &str, summary: Option<&str>, error: Option<&str>) {
        assert_eq!(&self.reason, reason, "{self:#?}");
        assert_eq!(&self.mcp_reason, reason, "{self:#?}");
        assert!(self.wait_text.ends_with(why), "{self:#?}");
        let (status, words) = why.split_once(" (").unwrap_or((why, ")"));
        let words = words.strip_suffix(')').unwrap();
        assert!(
            self.ps_line.contains(status) && self.ps_line.contains(words),
            "{self:#?}"
        );
        assert_eq!(self.summary.as_deref(), summary, "{self:#?}");
        assert_eq!(self.mcp_error.as_deref(), error, "{self:#?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_end_reason_reads_the_same_in_every_front_end() {
    let fx = Fixture::new().await;

    let ok = fx
        .start(&["run", "--description", "ok", "--", "true"])
        .await;
    let views = fx.views(&ok).await;
    assert_eq!(views.wait_code, Some(0));
    views.agree(
        &json!({"reason": "exited", "code": 0}),
        "completed (exit 0)",
        Some("Background command \"ok\" completed (exit code 0)"),
        None,
    );

    let three = fx
        .start(&["run", "--description", "three", "--", "exit 3"])
        .await;
    let views = fx.views(&three).await;
    assert_eq!(views.wait_code, Some(3));
    views.agree(
        &json!({"reason": "exited", "code": 3}),
        "failed (exit 3)",
        Some("Background command \"three\" failed with exit code 3"),
        None,
    );

    let slow = fx
        .start(&[
            "run",
            "--description",
            "slow",
            "--timeout",
            "300",
            "--",
            "sleep 30",
        ])
        .await;
    let views = fx.views(&slow).await;
    assert_eq!(views.wait_code, Some(143));
    views.agree(
        &json!({"reason": "timed_out", "limitMs": 300}),
        "failed (timeout 300ms)",
        Some(
            "Background command \"slow\" failed with exit code 143 (Command timed out after 300ms)",
        ),
        Some("Command timed out after 300ms"),
    );

    let flood = fx
        .start(&["run", "--description", "flood", "--", "yes"])
        .await;
    let views = fx.views(&flood).await;
    assert_eq!(views.wait_code, Some(137));
    views.agree(
        &json!({"reason": "output_cap_exceeded", "capBytes": 65536}),
        "failed (output cap 64KB)",
        Some(
            "Background command \"flood\" failed with exit code 137 (Background command killed: output file exceeded 64KB)",
        ),
        Some("Background command killed: output file exceeded 64KB"),
    );

    let stopped = fx
        .start(&["run", "--description", "stopped", "--", "sleep 30"])
        .await;
    let (code, text) = fx.cli(&["kill", &stopped]).await;
    assert_eq!(
        (code, text.trim()),
        (Some(0), format!("{stopped} killed").as_str())
    );
    let views = fx.views(&stopped).await;
    assert_eq!(views.wait_code, Some(137));
    views.agree(&json!({"reason": "killed"}), "killed", None, None);

    // A spawn the kernel refuses: one environment string past its 128 KiB limit (E2BIG), from
    // a caller that is not a process exec (a harness embedding the session layer).
    let paths = SessionPaths::new(fx.root.path(), "default").unwrap();
    let session =
        Session::with_config(paths, Config::default()).with_supervisor(SupervisorCommand {
            program: env!("CARGO_BIN_EXE_tasks").into(),
            args: vec!["__supervise".into()],
        });
    let mut caller = Session::caller().unwrap();
    caller
        .env
        .push(("HUGE".into(), "x".repeat(200 * 1024).into()));
    let start = ShellStart {
        command: "true".into(),
        description: "unstartable".into(),
        timeout_ms: None,
        stdin: task_shell::process::StdinMode::Null,
        placement: None,
    };
    let unstartable =
        tokio::task::spawn_blocking(move || session.start(start, caller).unwrap().to_string())
            .await
            .unwrap();
    let views = fx.views(&unstartable).await;
    assert_eq!(views.wait_code, Some(1));
    assert_eq!(views.reason["reason"], "spawn_failed", "{views:#?}");
    let error = views.reason["error"].as_str().unwrap();
    assert!(error.contains("Argument list too long"), "{error}");
    views.agree(
        &views.reason,
        "failed (spawn failed)",
        Some(&format!(
            "Background command \"unstartable\" failed with exit code 1 (could not start: {error})"
        )),
        Some(&format!("could not start: {error}")),
    );

    let orphan = fx
        .start(&["run", "--description", "orphan", "--", "sleep 30"])
        .await;
    support::eventually_async("the orphan running", async || {
        let (_, table) = fx.cli(&["ps"]).await;
        table
            .lines()
            .any(|l| l.starts_with(&orphan) && l.contains("running"))
            .then_some(())
    })
    .await;
    let pid = fx.supervisor_pid();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let views = fx.views(&orphan).await;
    assert_eq!(views.wait_code, Some(1));
    views.agree(
        &json!({"reason": "supervisor_died", "pid": pid}),
        "failed (supervisor died)",
        Some("Background command \"orphan\" failed: its supervisor exited"),
        Some(&format!("its supervisor (pid {pid}) exited")),
    );
}
