//! Agents in their own git worktree (`tasks agent --worktree`), on real repositories made in
//! temp dirs (git's author and configuration set here, so nothing depends on the machine's
//! git configuration), with task-agent's scripted `fake-agent` as the agent CLI: the base is
//! the caller's HEAD (a non-default branch), an unchanged worktree goes with its branch, a
//! changed one stays and is named in the notification, outside a repository the start fails,
//! and 20 agents started at once get 20 worktrees with no cross-talk and nothing left locked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::agent_sandbox::Sandbox;
use support::fake_agent;
use support::git::{GIT_ENV, git};
use support::tmux::Tmux;

fn sandbox() -> Sandbox {
    GIT_ENV
        .iter()
        .fold(Sandbox::for_agents(), |sandbox, (key, value)| {
            sandbox.env(key, value)
        })
}

/// A repository whose HEAD is `feature`, one commit (adding `feature.txt`) ahead of `main`.
fn repository(sandbox: &Sandbox) -> PathBuf {
    let repo = sandbox.path("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["-c", "init.defaultBranch=main", "init", "-q"]);
    std::fs::write(repo.join("readme.txt"), "hello\n").unwrap();
    git(&repo, &["add", "readme.txt"]);
    git(&repo, &["commit", "-qm", "first"]);
    git(&repo, &["checkout", "-qb", "feature"]);
    std::fs::write(repo.join("feature.txt"), "only on feature\n").unwrap();
    git(&repo, &["add", "feature.txt"]);
    git(&repo, &["commit", "-qm", "feature only"]);
    repo
}

impl Sandbox {
    /// `tasks ARGS` run in `dir`.
    fn run_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.command(args).current_dir(dir).output().unwrap()
    }

    /// `tasks agent OPTIONS -- fake-agent --script SCRIPT` in `dir`, as it ran.
    fn start_agent_in(&self, dir: &Path, options: &[&str], script: &str) -> Output {
        let fake = fake_agent();
        let mut args = vec!["agent"];
        args.extend_from_slice(options);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.run_in(dir, &args)
    }

    /// `tasks agent --wait EXTRA -- fake-agent --script SCRIPT` in `dir`; its stdout (the id,
    /// then the notification).
    fn agent_in(&self, dir: &Path, extra: &[&str], script: &str) -> String {
        let mut options = vec!["--wait"];
        options.extend_from_slice(extra);
        let out = self.start_agent_in(dir, &options, script);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn worktrees(&self) -> PathBuf {
        self.path("default/worktrees")
    }

    /// SIGKILLs the session's supervisor (as its lock names it) and waits until it is gone.
    fn kill_supervisor(&self) {
        let supervisor: i32 = std::fs::read_to_string(self.path("default/supervisor.lock"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        support::sigkill(supervisor);
        support::eventually("the supervisor gone", || {
            (!support::is_alive(supervisor)).then_some(())
        });
    }

    /// Runs an agent that writes `notes.txt` in its worktree, "Take notes", to its end: its
    /// id, and the path and branch of its worktree, kept for that change.
    fn notes_kept_in_a_worktree(&self, repo: &Path) -> (String, PathBuf, String) {
        let script = touching(self, "write.jsonl", "notes.txt", "done");
        let out = self.agent_in(
            repo,
            &["--worktree", "-d", "Take notes", "-p", "w"],
            &script,
        );
        let id = out.lines().next().unwrap().to_owned();
        let path = self.worktrees().join(&id);
        let branch = format!("tasks/take-notes-{id}");
        (id, path, branch)
    }
}

/// `(path, branch)` of each worktree `git worktree list` shows, the main one first.
fn listed_worktrees(repo: &Path) -> Vec<(String, String)> {
    let porcelain = git(repo, &["worktree", "list", "--porcelain"]);
    porcelain
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            assert!(
                !block.contains("\nlocked"),
                "a worktree left locked: {block}"
            );
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap_or_default()
                    .to_owned()
            };
            (field("worktree "), field("branch refs/heads/"))
        })
        .collect()
}

/// A fake-agent script that reads the prompt, creates `file` in its working directory and
/// answers `result`; its path.
fn touching(
    sandbox: &Sandbox,
    name: impl AsRef<str>,
    file: impl Into<Value>,
    result: impl Into<Value>,
) -> String {
    sandbox.script(
        name.as_ref(),
        &[
            json!({"read_user": true}),
            json!({"touch": file.into()}),
            json!({"result": result.into()}),
        ],
    )
}

fn assert_nothing_stale(repo: &Path) {
    let stale = git(repo, &["worktree", "prune", "--dry-run", "--verbose"]);
    assert!(stale.trim().is_empty(), "stale worktrees: {stale}");
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

#[test]
fn a_changed_worktree_is_based_on_the_callers_head_kept_and_named_in_the_notification() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let script = touching(&sandbox, "write.jsonl", "made-by-agent.txt", "wrote a file");
    let out = sandbox.agent_in(
        &repo,
        &["--worktree", "-d", "Write a file", "-p", "write"],
        &script,
    );
    let id = out.lines().next().unwrap();
    let path = between(&out, "<worktreePath>", "</worktreePath>").expect(&out);
    let branch = between(&out, "<worktreeBranch>", "</worktreeBranch>").expect(&out);
    assert_eq!(branch, format!("tasks/write-a-file-{id}"));
    let path = Path::new(path);
    assert_eq!(path, sandbox.worktrees().join(id));
    assert!(out.contains("<status>completed</status>"), "{out}");

    // Based on HEAD (the feature branch), not on the default branch.
    assert_eq!(git(path, &["rev-parse", "HEAD"]), head);
    assert!(path.join("feature.txt").is_file());
    // The agent worked there, and only there.
    assert!(path.join("made-by-agent.txt").is_file());
    assert!(!repo.join("made-by-agent.txt").exists());
    assert_eq!(
        git(path, &["status", "--porcelain"]),
        "?? made-by-agent.txt\n"
    );
    let listed = listed_worktrees(&repo);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[1], (path.display().to_string(), branch.to_owned()));
    assert_nothing_stale(&repo);

    // `tasks ps` shows the branch.
    let table = String::from_utf8(sandbox.run_in(&repo, &["ps", "--all"]).stdout).unwrap();
    let row = table.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(row.contains(&format!("⎇ {branch}")), "{row}");
}

#[test]
fn a_queued_agent_keeps_its_worktree_and_base_across_a_supervisor_sigkill() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let tasksd = Path::new(env!("CARGO_BIN_EXE_tasks")).with_file_name("tasksd");
    let mut limit = Command::new(tasksd);
    limit.args(["group", "set", "one", "--parallel", "1"]);
    sandbox.environment(&mut limit);
    assert!(limit.status().unwrap().success());
    let blocker = sandbox.ok(&[
        "run",
        "--group",
        "one",
        "--stdin",
        "pipe",
        "--",
        "read line",
    ]);
    let blocker = blocker.trim();
    support::eventually("the blocker running", || {
        (sandbox.listed(blocker)["status"] == "running").then_some(())
    });
    let script = touching(&sandbox, "write.jsonl", "made-by-agent.txt", "wrote a file");
    let options = [
        "--group",
        "one",
        "--worktree",
        "-d",
        "Write a file",
        "-p",
        "write",
    ];
    let out = sandbox.start_agent_in(&repo, &options, &script);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let queued = sandbox.listed(&id);
    assert_eq!(queued["status"], "pending", "{queued}");
    let worktree = queued["kind"]["agent"]["worktree"].clone();
    assert_eq!(worktree["baseCommit"], head.trim(), "{queued}");

    // The caller's HEAD moves on while the agent waits; then its supervisor dies.
    std::fs::write(repo.join("later.txt"), "after the start\n").unwrap();
    git(&repo, &["add", "later.txt"]);
    git(&repo, &["commit", "-qm", "later"]);
    let supervisor = queued["supervisorPid"].as_i64().unwrap() as i32;
    support::sigkill(supervisor);
    support::eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });

    // The next supervisor runs it under its id in the worktree it was queued with.
    sandbox.ok(&["wait", "--no-deliver", &id]);
    let ended = sandbox.listed(&id);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["kind"]["agent"]["worktree"], worktree, "{ended}");
    let path = sandbox.worktrees().join(&id);
    assert!(path.join("made-by-agent.txt").is_file());
    assert!(
        !path.join("later.txt").exists(),
        "based on the HEAD it was started from"
    );
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), head);
    let listed = listed_worktrees(&repo);
    assert_eq!(
        listed.len(),
        2,
        "one worktree for it, no second: {listed:?}"
    );
    assert_nothing_stale(&repo);
}

#[test]
fn an_unchanged_worktree_is_removed_with_its_branch() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let script = sandbox.script(
        "look.jsonl",
        &[json!({"read_user": true}), json!({"result": "looked only"})],
    );
    let out = sandbox.agent_in(&repo, &["--worktree", "-p", "look around"], &script);
    let id = out.lines().next().unwrap();
    assert!(out.contains("<result>looked only</result>"), "{out}");
    assert!(!out.contains("<worktree>"), "{out}");
    // Removed with its branch just after the notification.
    support::eventually("the worktree and its branch removed", || {
        let branches = git(&repo, &["branch", "--list", "tasks/*"]);
        (listed_worktrees(&repo).len() == 1 && branches.is_empty()).then_some(())
    });
    assert!(!sandbox.worktrees().join(id).exists());
    assert_nothing_stale(&repo);
}

#[test]
fn an_agent_started_in_a_subdirectory_runs_in_the_same_subdirectory_of_its_worktree() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    std::fs::create_dir(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/lib.rs"), "").unwrap();
    git(&repo, &["add", "src"]);
    git(&repo, &["commit", "-qm", "src"]);
    let script = touching(&sandbox, "write.jsonl", "here.txt", "done");
    let out = sandbox.agent_in(&repo.join("src"), &["--worktree", "-p", "w"], &script);
    let path = between(&out, "<worktreePath>", "</worktreePath>").expect(&out);
    assert!(Path::new(path).join("src/here.txt").is_file(), "{out}");
}

#[test]
fn a_named_branch_is_used_and_an_existing_one_is_refused() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let script = touching(&sandbox, "write.jsonl", "x.txt", "done");
    let out = sandbox.agent_in(&repo, &["--worktree-branch", "mine", "-p", "w"], &script);
    assert!(
        out.contains("<worktreeBranch>mine</worktreeBranch>"),
        "{out}"
    );

    // The same name again: git refuses, and so does the start (nothing runs unisolated).
    let again = sandbox.start_agent_in(&repo, &["--worktree-branch", "mine", "-p", "w"], &script);
    assert!(!again.status.success(), "{again:?}");
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("'mine' already exists"), "{stderr}");
    assert_eq!(listed_worktrees(&repo).len(), 2);
    assert_nothing_stale(&repo);
}

#[test]
fn outside_a_repository_the_start_fails_loudly_and_nothing_runs() {
    let sandbox = sandbox();
    let plain = sandbox.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let script = sandbox.script("s.jsonl", &[json!({"result": "ran"})]);
    let out = sandbox.start_agent_in(&plain, &["--worktree", "-p", "w"], &script);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not in a git repository"), "{stderr}");
    let listed: Value =
        serde_json::from_slice(&sandbox.run_in(&plain, &["ps", "--all", "--json"]).stdout).unwrap();
    assert_eq!(listed, json!([]), "no task was started");
}

#[test]
fn a_killed_agents_unchanged_worktree_is_removed_by_the_time_the_kill_returns() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let started = sandbox.path("started");
    let script = sandbox.script(
        "stuck.jsonl",
        &[
            json!({"read_user": true}),
            json!({"touch": started.to_str().unwrap()}),
            json!({"wait_file": sandbox.path("never").to_str().unwrap()}),
        ],
    );
    let out = sandbox.start_agent_in(&repo, &["--worktree", "-p", "w"], &script);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(sandbox.worktrees().join(&id).is_dir());
    support::eventually("the agent running", || started.exists().then_some(()));
    let killed = sandbox.run_in(&repo, &["kill", &id]);
    assert!(killed.status.success(), "{killed:?}");
    // Failed once in seven CI rehearsals beside two fuzzers, not reproduced since: say why.
    assert!(
        !sandbox.worktrees().join(&id).exists(),
        "the worktree outlived the kill; supervisor log:\n{}",
        std::fs::read_to_string(sandbox.path("default/supervisor.log")).unwrap_or_default()
    );
    assert_eq!(listed_worktrees(&repo).len(), 1);
    assert_eq!(git(&repo, &["branch", "--list", "tasks/*"]), "");
    assert_nothing_stale(&repo);
}

#[test]
fn twenty_agents_started_at_once_get_twenty_worktrees_and_branches_with_no_cross_talk() {
    const AGENTS: usize = 20;
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let fake = fake_agent();
    let starts: Vec<_> = (0..AGENTS)
        .map(|n| {
            let script = touching(
                &sandbox,
                format!("agent-{n}.jsonl"),
                format!("file-{n}.txt"),
                format!("agent {n}"),
            );
            let description = format!("agent {n}");
            sandbox
                .command(&[
                    "agent",
                    "--worktree",
                    "-d",
                    &description,
                    "-p",
                    "w",
                    "--",
                    fake.to_str().unwrap(),
                    "--script",
                    &script,
                ])
                .current_dir(&repo)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ids: Vec<String> = starts
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .collect();
    let mut wait = vec!["wait", "--no-deliver"];
    wait.extend(ids.iter().map(String::as_str));
    let waited = sandbox.run_in(&repo, &wait);
    assert!(waited.status.success(), "{waited:?}");

    let listed = listed_worktrees(&repo);
    assert_eq!(listed.len(), AGENTS + 1, "{listed:?}");
    let mut branches: Vec<_> = listed[1..].iter().map(|(_, b)| b.clone()).collect();
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), AGENTS, "{listed:?}");
    for (n, id) in ids.iter().enumerate() {
        let path = sandbox.worktrees().join(id);
        let branch = format!("tasks/agent-{n}-{id}");
        assert!(
            listed.contains(&(path.display().to_string(), branch.clone())),
            "{branch} at {} missing in {listed:?}",
            path.display()
        );
        // Exactly its own file: nobody else's, nothing in the main checkout.
        assert_eq!(
            git(&path, &["status", "--porcelain"]),
            format!("?? file-{n}.txt\n"),
            "{id}"
        );
        assert!(!repo.join(format!("file-{n}.txt")).exists());
    }
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_nothing_stale(&repo);
}

#[test]
fn worktree_ls_lists_a_kept_worktree_and_rm_refuses_it_unless_forced() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let (id, path, branch) = sandbox.notes_kept_in_a_worktree(&repo);
    let id = id.as_str();

    let listed: Value =
        serde_json::from_slice(&sandbox.run_in(&repo, &["worktree", "ls", "--json"]).stdout)
            .unwrap();
    assert_eq!(
        listed,
        json!([{
            "id": id, "status": "completed", "description": "Take notes",
            "path": path.display().to_string(), "branch": branch,
            "base": git(&repo, &["rev-parse", "HEAD"]).trim(),
            "changes": {"commits": false, "dirty": true},
        }])
    );
    let table = sandbox.ok(&["worktree", "ls"]);
    assert!(
        table.contains(&branch) && table.contains("changes: uncommitted"),
        "{table}"
    );

    // Dirty: refused without --force, and nothing is touched.
    let refused = sandbox.run_in(&repo, &["worktree", "rm", id]);
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("has changes") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(path.join("notes.txt").is_file());

    // Forced: the worktree and its branch are gone, nothing stale is left.
    let removed = sandbox.ok(&["worktree", "rm", "--force", id]);
    assert!(removed.contains(&branch), "{removed}");
    assert!(!path.exists());
    assert_eq!(listed_worktrees(&repo).len(), 1);
    assert_eq!(git(&repo, &["branch", "--list", "tasks/*"]), "");
    assert_nothing_stale(&repo);
    assert_eq!(sandbox.ok(&["worktree", "ls"]), "");
}

#[test]
fn a_kept_worktree_no_task_records_is_listed_unrecorded_kept_by_the_next_supervisor_and_removed_by_its_id()
 {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let (id, path, branch) = sandbox.notes_kept_in_a_worktree(&repo);
    let id = id.as_str();
    // Its task goes (an agent, which a message would resume, only while no supervisor runs);
    // the worktree, kept for its changes, is recorded by its own record alone.
    sandbox.kill_supervisor();
    sandbox.ok(&["rm", id]);
    assert!(
        sandbox
            .path(&format!("default/worktrees/{id}.json"))
            .is_file()
    );
    let unrecorded = json!([{
        "id": id, "status": "unrecorded", "description": null,
        "path": path.display().to_string(), "branch": branch,
        "base": git(&repo, &["rev-parse", "HEAD"]).trim(),
        "changes": {"commits": false, "dirty": true},
    }]);
    let listed = |sandbox: &Sandbox| -> Value {
        serde_json::from_slice(&sandbox.run_in(&repo, &["worktree", "ls", "--json"]).stdout)
            .unwrap()
    };
    assert_eq!(listed(&sandbox), unrecorded);

    // A supervisor that starts keeps it (it has changes), still listed.
    sandbox.ok(&["run", "--", "true"]);
    assert!(path.join("notes.txt").is_file());
    assert_eq!(listed(&sandbox), unrecorded);
    let table = sandbox.ok(&["worktree", "ls"]);
    assert!(table.starts_with(&format!("{id}  unrecorded")), "{table}");

    // Removed by the id it was added for: refused while it has changes, then forced.
    let refused = sandbox.run_in(&repo, &["worktree", "rm", id]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("has changes (uncommitted)"),
        "{refused:?}"
    );
    let removed = sandbox.ok(&["worktree", "rm", "--force", id]);
    assert!(removed.contains(&branch), "{removed}");
    assert!(!path.exists());
    assert_eq!(listed_worktrees(&repo).len(), 1);
    assert_eq!(git(&repo, &["branch", "--list", "tasks/*"]), "");
    assert!(
        !sandbox
            .path(&format!("default/worktrees/{id}.json"))
            .exists()
    );
    assert_nothing_stale(&repo);
    assert_eq!(sandbox.ok(&["worktree", "ls"]), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_agent_tool_with_worktree_isolation_runs_the_agent_in_a_worktree() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let script = touching(&sandbox, "mcp.jsonl", "from-mcp.txt", "wrote it");
    let fake = fake_agent();
    let serve_in = |dir: &Path| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tasks"));
        command
            .arg("mcp")
            .current_dir(dir)
            .env("TASKS_ROOT", sandbox.root())
            .env("TASKS_IDLE_EXIT_MS", "2000")
            .env("TASKS_POLL_MS", "10")
            .env_remove("TASKS_SESSION")
            .env_remove("TASKS_AGENT_ID")
            .envs(GIT_ENV)
            .env(
                "TASKS_AGENT_COMMAND",
                format!("{} --script '{script}'", fake.display()),
            );
        rmcp::transport::TokioChildProcess::new(command).unwrap()
    };
    let agent = json!({"description": "mcp writer", "prompt": "write",
        "isolation": "worktree"});

    let client = ().serve(serve_in(&repo)).await.unwrap();
    let params =
        CallToolRequestParams::new("Agent").with_arguments(agent.as_object().unwrap().clone());
    let answer = client.call_tool(params.clone()).await.unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert_eq!(
        answer.content[0].as_text().unwrap().text,
        "wrote it",
        "{answer:?}"
    );
    client.cancel().await.unwrap();
    // The file is in the agent's worktree, on its branch, not in the checkout.
    let listed = listed_worktrees(&repo);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let (path, branch) = &listed[1];
    assert!(branch.starts_with("tasks/mcp-writer-"), "{listed:?}");
    assert!(Path::new(path).join("from-mcp.txt").is_file());
    assert!(!repo.join("from-mcp.txt").exists());

    // Outside a repository the tool answers an error, and no agent runs.
    let plain = sandbox.path("plain");
    std::fs::create_dir(&plain).unwrap();
    let client = ().serve(serve_in(&plain)).await.unwrap();
    let refused = client.call_tool(params).await;
    let text = format!("{refused:?}");
    assert!(text.contains("is not in a git repository"), "{text}");
    client.cancel().await.unwrap();
    assert!(!plain.join("from-mcp.txt").exists());
}

#[test]
fn a_workflow_agent_with_worktree_isolation_runs_in_a_worktree_of_its_own() {
    let base = sandbox();
    let agent_script = touching(&base, "wf-agent.jsonl", "from-workflow.txt", "wrote");
    let sandbox = base.env(
        "TASKS_AGENT_COMMAND",
        format!("{} --script {agent_script}", fake_agent().display()),
    );
    let repo = repository(&sandbox);
    let workflow = sandbox.path("iso.js");
    std::fs::write(
        &workflow,
        "export const meta = {name: 'iso', description: 'isolated writers'}\n\
         const isolated = await agent('write in a worktree', {isolation: 'worktree'})\n\
         const shared = await agent('write here')\n\
         return [isolated, shared]\n",
    )
    .unwrap();
    let out = sandbox.run_in(
        &repo,
        &["workflow", "run", workflow.to_str().unwrap(), "--wait"],
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(r#"["wrote","wrote"]"#), "{text}");
    let listed = listed_worktrees(&repo);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed[1].1.starts_with("tasks/"), "{listed:?}");
    assert!(Path::new(&listed[1].0).join("from-workflow.txt").is_file());
    // The agent without isolation wrote in the checkout itself.
    assert!(repo.join("from-workflow.txt").is_file());
    assert_nothing_stale(&repo);
}

#[test]
fn after_a_supervisor_crash_the_next_supervisor_removes_unchanged_worktrees_and_keeps_changed_ones()
{
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let never = sandbox.path("never");
    let start = |name: &str, steps: &[Value]| {
        let script = sandbox.script(name, steps);
        let out = sandbox.start_agent_in(&repo, &["--worktree", "-d", name, "-p", "w"], &script);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let idle_started = sandbox.path("idle-started");
    let idle = start(
        "idle",
        &[
            json!({"read_user": true}),
            json!({"touch": idle_started.to_str().unwrap()}),
            json!({"wait_file": never.to_str().unwrap()}),
        ],
    );
    let busy = start(
        "busy",
        &[
            json!({"read_user": true}),
            json!({"touch": "work.txt"}),
            json!({"touch": sandbox.path("busy-started").to_str().unwrap()}),
            json!({"wait_file": never.to_str().unwrap()}),
        ],
    );
    support::eventually("both agents working", || {
        (idle_started.exists() && sandbox.path("busy-started").exists()).then_some(())
    });
    sandbox.kill_supervisor();

    // The next supervisor (started by any command that needs one) reconciles before serving.
    sandbox.ok(&["run", "--", "true"]);
    assert!(!sandbox.worktrees().join(&idle).exists());
    assert!(sandbox.worktrees().join(&busy).join("work.txt").is_file());
    let listed = listed_worktrees(&repo);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[1].1, format!("tasks/busy-{busy}"));
    assert_eq!(
        git(
            &repo,
            &[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads/tasks"
            ]
        )
        .trim(),
        format!("tasks/busy-{busy}")
    );
    assert_nothing_stale(&repo);
    let kept = sandbox.ok(&["worktree", "ls"]);
    assert!(kept.starts_with(&busy) && kept.contains("failed"), "{kept}");
}

impl Sandbox {
    /// `tasks team spawn MEMBER OPTIONS -- fake-agent --script SCRIPT` in `dir`, as it ran.
    fn spawn_teammate_in(
        &self,
        dir: &Path,
        member: &str,
        options: &[&str],
        script: &str,
    ) -> Output {
        let fake = fake_agent();
        let mut args = vec!["team", "spawn", member];
        args.extend_from_slice(options);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.run_in(dir, &args)
    }
}

impl Sandbox {
    /// Spawns `ann@crew`, a teammate that writes `by-mate.txt`, and `bob@crew`, one that
    /// changes nothing, each in a worktree of `repo`; their ids.
    fn writer_and_reader_in_worktrees(&self, repo: &Path) -> (String, String) {
        let steps = |work: &[Value]| {
            let mut steps = vec![json!({"read_user": true})];
            steps.extend_from_slice(work);
            steps.push(json!({"teammate": true}));
            steps
        };
        let writer = steps(&[json!({"touch": "by-mate.txt"}), json!({"result": "wrote"})]);
        let reader = steps(&[json!({"result": "read only"})]);
        let spawned = |member: &str, name: &str, steps: &[Value]| {
            let script = self.script(name, steps);
            let out = self.spawn_teammate_in(repo, member, &["--worktree"], &script);
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        (
            spawned("ann@crew", "writer.jsonl", &writer),
            spawned("bob@crew", "reader.jsonl", &reader),
        )
    }
}

#[test]
fn teammates_spawned_with_worktree_work_in_their_own_and_ps_shows_branch_and_changes() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let (writer, reader) = sandbox.writer_and_reader_in_worktrees(&repo);
    let rows = support::eventually("both teammates idle with their worktree checked", || {
        let rows = [sandbox.listed(&writer), sandbox.listed(&reader)];
        rows.iter()
            .all(|r| r["kind"]["teammate"]["isIdle"] == true && r["worktreeChanges"].is_object())
            .then_some(rows)
    });
    let branch = |id: &str| format!("tasks/ann-crew-{id}");
    assert_eq!(
        rows[0]["kind"]["teammate"]["worktree"]["worktreeBranch"],
        branch(&writer)
    );
    assert_eq!(
        rows[0]["worktreeChanges"],
        json!({"commits": false, "dirty": true})
    );
    assert_eq!(
        rows[1]["worktreeChanges"],
        json!({"commits": false, "dirty": false})
    );
    // Each works in its own worktree, based on HEAD; the checkout is untouched.
    let path = sandbox.worktrees().join(&writer);
    assert!(path.join("by-mate.txt").is_file());
    assert!(path.join("feature.txt").is_file());
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), head);
    assert!(!repo.join("by-mate.txt").exists());
    assert!(
        !sandbox
            .worktrees()
            .join(&reader)
            .join("by-mate.txt")
            .exists()
    );
    let table = sandbox.ok(&["ps"]);
    let row = |id: &str| {
        table
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap()
            .to_owned()
    };
    assert!(
        row(&writer).contains(&format!("⎇ {} (changes: uncommitted)", branch(&writer))),
        "{table}"
    );
    assert!(row(&reader).contains("(changes: none)"), "{table}");
    assert_eq!(listed_worktrees(&repo).len(), 3);

    // Ended: the unchanged worktree goes with its branch, the changed one stays, listed.
    for name in ["ann", "bob"] {
        sandbox.ok(&["team", "shutdown", name]);
    }
    support::eventually("the reader's worktree removed, the writer's kept", || {
        let listed = listed_worktrees(&repo);
        let branches = git(
            &repo,
            &["branch", "--list", "--format=%(refname:short)", "tasks/*"],
        );
        (listed.len() == 2 && branches.trim() == branch(&writer)).then_some(())
    });
    assert!(path.join("by-mate.txt").is_file());
    let kept = sandbox.ok(&["worktree", "ls"]);
    assert!(kept.contains(&branch(&writer)), "{kept}");
    assert_nothing_stale(&repo);
}

#[test]
fn top_shows_each_teammates_branch_and_what_its_worktree_holds() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let (writer, reader) = sandbox.writer_and_reader_in_worktrees(&repo);
    let top = format!(
        "{} top --interval 100ms; sleep 1000",
        env!("CARGO_BIN_EXE_tasks")
    );
    let Some(tmux) = Tmux::start_sized(&sandbox, &top, (200, 40)) else {
        return;
    };
    let row = |screen: &str, id: &str| {
        let found = screen.lines().find(|l| l.trim_start().starts_with(id));
        found.unwrap_or_default().to_owned()
    };
    let branch = |id: &str, member: &str| format!("tasks/{member}-crew-{id}");
    // The writer's file is in its worktree once it is idle; git is asked again every 2 s.
    let screen = tmux.wait_for("each row with its branch and changes", |s| {
        row(s, &writer).contains(&format!(
            "⎇ {} (changes: uncommitted)",
            branch(&writer, "ann")
        )) && row(s, &reader).contains(&format!("⎇ {} (changes: none)", branch(&reader, "bob")))
    });
    // The details pane of the selected teammate says the same, with the worktree's path.
    let selected = [&writer, &reader]
        .into_iter()
        .find(|id| screen.contains(&format!("Output of {id}")))
        .expect("a teammate is selected");
    let (member, held) = if *selected == writer {
        ("ann", "uncommitted")
    } else {
        ("bob", "none")
    };
    let path = sandbox.worktrees().join(selected);
    tmux.wait_for("the details of the selected teammate", |s| {
        s.contains(&format!("⎇ {} · changes: {held}", branch(selected, member)))
            && s.contains(&path.display().to_string())
    });
    tmux.keys(&["q"]);
    for name in ["ann", "bob"] {
        sandbox.ok(&["team", "shutdown", name]);
    }
    support::eventually("both teammates ended", || {
        [&writer, &reader]
            .iter()
            .all(|id| sandbox.listed(id)["status"] == "completed")
            .then_some(())
    });
}

#[test]
fn a_checkout_that_cannot_be_based_on_refuses_the_start_with_the_reason() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let script = sandbox.script(
        "s.jsonl",
        &[json!({"read_user": true}), json!({"result": "ran"})],
    );
    let refused = |expected: &str| {
        let agent = sandbox.start_agent_in(&repo, &["--worktree", "-p", "w"], &script);
        let mate = sandbox.spawn_teammate_in(&repo, "cy@crew", &["--worktree"], &script);
        for out in [agent, mate] {
            assert!(!out.status.success(), "{out:?}");
            assert!(out.stdout.is_empty(), "{out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("cannot be based on") && stderr.contains(expected),
                "{stderr}"
            );
        }
        assert_eq!(listed_worktrees(&repo).len(), 1, "no worktree was added");
        let listed: Value =
            serde_json::from_slice(&sandbox.run_in(&repo, &["ps", "--all", "--json"]).stdout)
                .unwrap();
        assert_eq!(listed, json!([]), "no task was started");
    };
    // Staged changes: the worktree, made from HEAD, would silently lack them.
    std::fs::write(repo.join("readme.txt"), "staged\n").unwrap();
    git(&repo, &["add", "readme.txt"]);
    refused("staged changes the worktree would not contain (1 path: readme.txt)");
    git(&repo, &["reset", "-q"]);

    // A merge in progress (stopped on a conflict): HEAD is a midpoint.
    git(&repo, &["commit", "-qam", "feature edit"]);
    git(&repo, &["checkout", "-q", "main"]);
    std::fs::write(repo.join("readme.txt"), "main\n").unwrap();
    git(&repo, &["commit", "-qam", "main edit"]);
    let merge = Command::new("git")
        .args(["-C", repo.to_str().unwrap(), "merge", "-q", "feature"])
        .envs(GIT_ENV)
        .output()
        .unwrap();
    assert!(!merge.status.success(), "the merge conflicts: {merge:?}");
    refused("a merge is in progress");
    git(&repo, &["merge", "--abort"]);

    // Unstaged edits and untracked files are the caller's own work: the start goes ahead.
    std::fs::write(repo.join("readme.txt"), "edited, not staged\n").unwrap();
    std::fs::write(repo.join("untracked.txt"), "new\n").unwrap();
    let out = sandbox.agent_in(&repo, &["--worktree", "-p", "w"], &script);
    assert!(out.contains("<result>ran</result>"), "{out}");
}

#[test]
fn a_teammate_resumed_after_a_supervisor_crash_goes_on_in_the_worktree_it_had() {
    let sandbox = sandbox();
    let repo = repository(&sandbox);
    let script = sandbox.script(
        "mate.jsonl",
        &[
            json!({"read_user": true}),
            json!({"touch": "by-mate.txt"}),
            json!({"result": "wrote"}),
            json!({"teammate": true}),
        ],
    );
    let out = sandbox.spawn_teammate_in(&repo, "dee@crew", &["--worktree"], &script);
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let path = sandbox.worktrees().join(&id);
    let idle = |row: &Value| row["kind"]["teammate"]["isIdle"] == true;
    let before = support::eventually("the teammate idle", || {
        Some(sandbox.listed(&id)).filter(idle)
    });
    let supervisor = before["supervisorPid"].as_i64().unwrap() as i32;
    support::sigkill(supervisor);
    support::eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });

    // The next supervisor resumes it in the same worktree, on the same branch.
    let after = support::eventually("the teammate resumed", || {
        let row = sandbox.listed(&id);
        (row["supervisorPid"].as_i64() != Some(i64::from(supervisor)) && idle(&row)).then_some(row)
    });
    assert_eq!(
        after["kind"]["teammate"]["worktree"],
        before["kind"]["teammate"]["worktree"]
    );
    let pgid = after["kind"]["teammate"]["process"]["pgid"]
        .as_i64()
        .unwrap();
    let cwd = std::fs::read_link(format!("/proc/{pgid}/cwd")).unwrap();
    assert_eq!(cwd, path, "its CLI runs in its worktree");
    assert_eq!(listed_worktrees(&repo).len(), 2, "no second worktree");
    assert!(!repo.join("by-mate.txt").exists());

    // Killed with changes: kept, and listed.
    sandbox.ok(&["kill", &id]);
    assert_eq!(sandbox.listed(&id)["status"], "killed");
    assert!(path.join("by-mate.txt").is_file());
    let kept = sandbox.ok(&["worktree", "ls"]);
    assert!(kept.starts_with(&id) && kept.contains("killed"), "{kept}");
    assert_nothing_stale(&repo);
}
