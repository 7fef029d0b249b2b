//! Teammates with real (scripted) agent CLIs: mailboxes written by several processes, exactly
//! once and in order, plan approval, the shutdown handshake with the task-list unassign, kills
//! and crashes, and the task-local identity. Sender processes are this test binary re-run as
//! `sender_process`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../task-agent/tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{Fixture, wait_for};
use serde_json::{Value, json};
use task_agent::{
    AgentError, AgentEvent, AgentRunner, AgentSession, AgentSpec, SessionEvent, TurnOutcome,
};
use task_core::{TaskId, TaskKind, TaskStatus, TeammateState};
use task_team::{
    self as team, Protocol, TEAM_LEAD, TeamConfig, TeamExecutor, TeamMessage, TeammateEnd,
    TeammateRequest, context,
};

const ROOT_ENV: &str = "TEAMS_TEST_ROOT";
const SENDER_ENV: &str = "TEAMS_TEST_SENDER";
const MEMBERS_ENV: &str = "TEAMS_TEST_MEMBERS";
const COUNT_ENV: &str = "TEAMS_TEST_COUNT";
const PAD_ENV: &str = "TEAMS_TEST_PAD";

/// Not a test: a process that posts `COUNT` messages `{sender}#{seq}` to each member, round
/// robin (run by the tests below with `--ignored`).
#[test]
#[ignore = "run as a child process by the teammate tests"]
fn sender_process() {
    let root = PathBuf::from(std::env::var(ROOT_ENV).unwrap());
    let sender = std::env::var(SENDER_ENV).unwrap();
    let count: u64 = std::env::var(COUNT_ENV).unwrap().parse().unwrap();
    let pad = "p".repeat(std::env::var(PAD_ENV).unwrap().parse().unwrap());
    let members: Vec<String> = std::env::var(MEMBERS_ENV)
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    for seq in 0..count {
        for member in &members {
            let text = format!("{sender}#{seq}{pad}");
            team::post(&root, "crew", member, &TeamMessage::new(&sender, text)).unwrap();
        }
    }
}

fn sender(root: &Path, name: &str, members: &[String], count: u64, pad: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["sender_process", "--exact", "--ignored", "--quiet"])
        .env(ROOT_ENV, root)
        .env(SENDER_ENV, name)
        .env(MEMBERS_ENV, members.join(","))
        .env(COUNT_ENV, count.to_string())
        .env(PAD_ENV, pad.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

struct Team {
    fx: Fixture,
    team: TeamExecutor,
    root: PathBuf,
    ended: Arc<Mutex<Vec<(TaskId, String, TeammateEnd)>>>,
}

fn team() -> Team {
    let fx = Fixture::new();
    let root = fx.path("teams");
    let mut config = TeamConfig::default();
    config.mailbox_poll = Duration::from_millis(10);
    config.stopped_display = Duration::from_millis(50);
    let team = TeamExecutor::new(fx.registry.clone(), &root, fx.dir.path(), config)
        .register_with_registry();
    let ended = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&ended);
    team.on_end(move |id, who, how| log.lock().unwrap().push((id, who.agent_name.clone(), how)));
    Team {
        fx,
        team,
        root,
        ended,
    }
}

impl Team {
    /// A teammate whose first turn answers `first`, then echoes every turn (and approves
    /// shutdown requests).
    async fn spawn(&self, name: &str, first: &str, plan: bool) -> TaskId {
        let runner = self.fx.runner(&[
            json!({"read_user": true}),
            json!({"text": first}),
            json!({"result": first}),
            json!({"teammate": true}),
        ]);
        let mut request = TeammateRequest::new(name, "crew", runner, "join the crew");
        request.plan_mode = plan;
        self.team.spawn(request).await.unwrap()
    }

    /// Everything in the lead's mailbox, oldest first.
    fn lead_inbox(&self) -> Vec<TeamMessage> {
        let lead = team::mailbox(&self.root, "crew", TEAM_LEAD).unwrap();
        let batch = lead.read_from::<TeamMessage>(0, usize::MAX).unwrap();
        batch.messages.into_iter().map(|d| d.message).collect()
    }

    fn lead_messages(&self) -> Vec<(String, Option<Protocol>)> {
        self.lead_inbox()
            .into_iter()
            .map(|m| (m.from.clone(), m.as_protocol()))
            .collect()
    }

    fn lead_texts(&self) -> Vec<String> {
        self.lead_inbox().into_iter().map(|m| m.text).collect()
    }

    fn teammate(&self, id: &TaskId) -> TeammateState {
        match &self.fx.state(id).kind {
            TaskKind::Teammate(t) => (**t).clone(),
            other => panic!("not a teammate: {other:?}"),
        }
    }
}

/// The texts the agent CLI itself answered (`echo: …`), from its transcript.
fn echoed(transcript: &Path) -> Vec<String> {
    std::fs::read_to_string(transcript)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["type"] == "assistant")
        .filter_map(|v| {
            v["message"]["content"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .filter_map(|text| text.strip_prefix("echo: ").map(str::to_owned))
        .collect()
}

/// The `<teammate-message>` bodies the agent received, in order, from its echoes.
fn received(transcript: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for turn in echoed(transcript) {
        for part in turn.split("<teammate-message teammate_id=\"").skip(1) {
            let (from, rest) = part.split_once('"').unwrap();
            let body = rest.split_once(">\n").unwrap().1;
            let body = body.split_once("\n</teammate-message>").unwrap().0;
            out.push((from.to_owned(), body.to_owned()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_teammates_get_100_messages_each_from_several_processes_exactly_once_in_order() {
    let t = team();
    let names: Vec<String> = (0..20).map(|n| format!("mate{n}")).collect();
    let mut ids = Vec::new();
    for name in &names {
        ids.push(t.spawn(name, "ready", false).await);
    }
    for id in &ids {
        t.team.until_idle(*id).await.unwrap();
        assert!(t.teammate(id).is_idle);
    }
    // Four CLI-like sender processes (20 each per teammate), the supervisor (20 each), and a
    // writer SIGKILLed in the middle of its (8 KiB) appends to every mailbox.
    let mut senders: Vec<Child> = (0..4)
        .map(|n| sender(&t.root, &format!("proc{n}"), &names, 20, 0))
        .collect();
    let mut doomed = sender(&t.root, "doomed", &names, 1_000_000, 8 * 1024);
    for seq in 0..20 {
        for name in &names {
            let message = TeamMessage::new("lead", format!("lead#{seq}"));
            t.team.send(&format!("{name}@crew"), &message).unwrap();
        }
    }
    let first = team::mailbox(&t.root, "crew", "mate19").unwrap();
    wait_for(|| (std::fs::metadata(first.path()).map_or(0, |m| m.len()) > 256 << 10).then_some(()))
        .await;
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    for child in &mut senders {
        assert!(child.wait().unwrap().success());
    }
    // One more message after the kill, through each mailbox's possibly torn end.
    for name in &names {
        t.team
            .send(name, &TeamMessage::new("lead", "lead#20"))
            .unwrap();
    }
    for id in &ids {
        let transcript = t.fx.state(id).base.output_file.clone();
        let got = wait_for(|| {
            let got = received(&transcript);
            got.iter().any(|(_, body)| body == "lead#20").then_some(got)
        })
        .await;
        let mut next: HashMap<String, u64> = HashMap::new();
        for (from, body) in &got {
            let (sender, rest) = body.split_once('#').unwrap();
            assert_eq!(sender, from);
            let seq: u64 = rest.trim_end_matches('p').parse().unwrap();
            let expected = next.entry(from.clone()).or_default();
            assert_eq!(seq, *expected, "{id}: {from} duplicated or out of order");
            *expected += 1;
        }
        for source in ["proc0", "proc1", "proc2", "proc3"] {
            assert_eq!(next[source], 20, "{id}: {source}");
        }
        assert_eq!(next["lead"], 21, "{id}");
        // Kept for display: the newest 50 delivered, marked read.
        let shown = t.teammate(id).messages;
        assert_eq!(shown.len(), 50, "{id}");
        let newest = shown.iter().last().unwrap();
        assert_eq!(newest["text"], "lead#20");
        assert_eq!(newest["read"], true);
    }
    // Every teammate told the lead it was idle.
    let idle: Vec<String> = t
        .lead_messages()
        .into_iter()
        .filter(|(_, p)| matches!(p, Some(Protocol::IdleNotification { .. })))
        .map(|(from, _)| from)
        .collect();
    assert!(names.iter().all(|n| idle.contains(n)));
    for id in &ids {
        t.team.request_shutdown(id.as_str(), None).unwrap();
    }
    for id in &ids {
        let done = t.fx.wait_done(id).await;
        assert_eq!(done.status(), TaskStatus::Completed);
    }
    assert!(t.fx.registry.notifications().drain().is_empty());
}

#[tokio::test]
async fn a_plan_mode_teammate_does_nothing_else_until_its_plan_is_approved() {
    let t = team();
    let id = t.spawn("planner", "PLAN: rename the module", true).await;
    let request = wait_for(|| {
        t.lead_messages().into_iter().find_map(|(_, p)| match p {
            Some(Protocol::PlanApprovalRequest { request_id, plan }) => Some((request_id, plan)),
            _ => None,
        })
    })
    .await;
    assert_eq!(request.1, "PLAN: rename the module");
    assert!(t.teammate(&id).awaiting_plan_approval);
    // A message meanwhile is read from the mailbox but held back.
    t.team
        .send("planner", &TeamMessage::new("lead", "start coding"))
        .unwrap();
    let inbox = team::mailbox(&t.root, "crew", "planner").unwrap();
    let cursor = inbox.path().with_extension("cursor");
    let size = std::fs::metadata(inbox.path()).unwrap().len();
    wait_for(|| {
        let read: u64 = std::fs::read_to_string(&cursor).ok()?.parse().ok()?;
        (read == size).then_some(())
    })
    .await;
    let transcript = t.fx.state(&id).base.output_file.clone();
    assert!(received(&transcript).is_empty());
    // Rejected: the feedback reaches it, and its next turn is a new plan request.
    t.team
        .answer_plan("planner", &request.0, false, Some("smaller steps".into()))
        .unwrap();
    let second = wait_for(|| {
        t.lead_messages().into_iter().find_map(|(_, p)| match p {
            Some(Protocol::PlanApprovalRequest { request_id, .. }) if request_id != request.0 => {
                Some(request_id)
            }
            _ => None,
        })
    })
    .await;
    let got = received(&transcript);
    assert_eq!(got.len(), 1);
    assert!(got[0].1.contains("smaller steps") && got[0].1.contains("\"approve\":false"));
    // Approved: the approval, then the held message.
    t.team.answer_plan("planner", &second, true, None).unwrap();
    let got = wait_for(|| Some(received(&transcript)).filter(|g| g.len() == 3)).await;
    assert!(got[1].1.contains("\"approve\":true"));
    assert_eq!(got[2].1, "start coding");
    assert!(!t.teammate(&id).awaiting_plan_approval);
}

#[tokio::test]
async fn an_approved_shutdown_ends_the_teammate_and_unassigns_its_open_tasks() {
    let t = team();
    let lists = t.fx.path("lists");
    let list =
        task_list::TaskList::open(&lists, "crew", task_list::StoreConfig::default()).unwrap();
    for subject in ["write docs", "fix bug", "ship"] {
        list.create(&task_list::CreateRequest::new(subject, ""))
            .unwrap();
    }
    for (task, status) in [
        ("1", None),
        ("2", Some(task_list::UpdateStatus::Completed)),
        ("3", Some(task_list::UpdateStatus::InProgress)),
    ] {
        let mut update = task_list::UpdateRequest::new(task);
        update.owner = Some("alice".into());
        update.status = status;
        list.update(&update).unwrap();
    }
    // The host's end hook: unassign, and tell the lead.
    let root = t.root.clone();
    t.team.on_end(move |_, who, how| {
        let reason = match how {
            TeammateEnd::Shutdown => task_list::UnassignReason::Shutdown,
            _ => task_list::UnassignReason::Terminated,
        };
        let list =
            task_list::TaskList::open(&lists, "crew", task_list::StoreConfig::default()).unwrap();
        let result = list.unassign(&who.agent_name, reason).unwrap();
        if let Some(text) = result.notification_message {
            team::post(
                &root,
                &who.team_name,
                TEAM_LEAD,
                &TeamMessage::new("system", text),
            )
            .unwrap();
        }
    });
    let id = t.spawn("alice", "ready", false).await;
    t.team.until_idle(id).await.unwrap();
    let request = t
        .team
        .request_shutdown("alice", Some("done".into()))
        .unwrap();
    let done = t.fx.wait_done(&id).await;
    assert_eq!(done.status(), TaskStatus::Completed);
    let lead = t.lead_messages();
    assert!(lead.iter().any(|(from, p)| from == "alice"
        && *p
            == Some(Protocol::ShutdownResponse {
                request_id: request.clone(),
                approve: true,
                reason: None
            })));
    let texts = t.lead_texts();
    assert!(texts.contains(&"alice has shut down. 2 task(s) were unassigned: #1 \"write docs\", #3 \"ship\". Use TaskList to check availability and TaskUpdate with owner to reassign them to idle teammates.".to_owned()), "{texts:?}");
    assert_eq!(
        list.get(task_list::TaskId::parse("2").unwrap())
            .unwrap()
            .unwrap()
            .owner
            .as_deref(),
        Some("alice")
    );
    assert_eq!(
        t.ended.lock().unwrap().as_slice(),
        [(id, "alice".to_owned(), TeammateEnd::Shutdown)]
    );
    // Its name is free again.
    assert!(t.team.resolve("alice").is_none());
}

#[tokio::test]
async fn idle_hooks_and_until_idle_fire_each_time_a_turn_ends() {
    let t = team();
    let idled = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&idled);
    t.team
        .on_idle(move |id, who| log.lock().unwrap().push((id, who.agent_name.clone())));
    let id = t.spawn("ivy", "ready", false).await;
    t.team.until_idle(id).await.unwrap();
    assert_eq!(idled.lock().unwrap().as_slice(), [(id, "ivy".to_owned())]);
    t.team
        .send("ivy", &TeamMessage::new("lead", "one more"))
        .unwrap();
    wait_for(|| (idled.lock().unwrap().len() == 2).then_some(())).await;
    t.team.until_idle(id).await.unwrap();
    assert!(t.teammate(&id).is_idle);
    t.fx.registry.kill(&id).await.unwrap();
    assert!(t.team.until_idle(id).await.is_err());
}

#[tokio::test]
async fn a_killed_teammate_is_not_notified_and_is_evicted_after_the_stopped_display() {
    let t = team();
    let id = t.spawn("bob", "ready", false).await;
    t.team.until_idle(id).await.unwrap();
    t.fx.registry.kill(&id).await.unwrap();
    let state = t.fx.state(&id);
    assert_eq!(state.status(), TaskStatus::Killed);
    assert!(state.base.notified);
    assert!(t.fx.registry.notifications().drain().is_empty());
    wait_for(|| t.fx.registry.get(&id).is_none().then_some(())).await;
    assert_eq!(t.ended.lock().unwrap()[0].2, TeammateEnd::Terminated);
}

#[tokio::test]
async fn a_teammate_killed_before_it_started_stays_killed_and_frees_its_name() {
    let t = team();
    let runner =
        t.fx.runner(&[json!({"touch": t.fx.path("ran").display().to_string()})]);
    let pending = t
        .team
        .register(TeammateRequest::new("zed", "crew", runner, "go"))
        .unwrap();
    let id = pending.id();
    t.fx.registry.kill(&id).await.unwrap();
    assert!(pending.start().await.is_err());
    assert_eq!(t.fx.state(&id).status(), TaskStatus::Killed);
    assert_eq!(
        t.ended.lock().unwrap().as_slice(),
        [(id, "zed".to_owned(), TeammateEnd::Terminated)]
    );
    // Its name is free again, and its mailbox has no reader left.
    t.spawn("zed", "ready", false).await;
}

#[tokio::test]
async fn a_crashed_teammate_fails_and_is_terminated() {
    let t = team();
    let runner =
        t.fx.runner(&[json!({"read_user": true}), json!({"exit": 3})]);
    let id = t
        .team
        .spawn(TeammateRequest::new("carl", "crew", runner, "go"))
        .await
        .unwrap();
    let done = t.fx.wait_done(&id).await;
    assert_eq!(done.status(), TaskStatus::Failed);
    assert_eq!(t.ended.lock().unwrap()[0].2, TeammateEnd::Terminated);
    assert!(matches!(
        t.team.send("carl", &TeamMessage::new("lead", "hi")),
        Err(AgentError::NoSuchAgent(_))
    ));
}

#[tokio::test]
async fn bad_names_and_duplicate_live_names_are_refused() {
    let t = team();
    let runner =
        t.fx.runner(&[json!({"read_user": true}), json!({"result": "x"})]);
    for (name, team_name) in [("../x", "crew"), ("a@b", "crew"), ("ok", "")] {
        let request = TeammateRequest::new(name, team_name, runner.clone(), "go");
        assert!(matches!(
            t.team.spawn(request).await,
            Err(AgentError::InvalidTeammate(_))
        ));
    }
    t.spawn("dana", "ready", false).await;
    let again = TeammateRequest::new("dana", "crew", runner, "go");
    assert!(matches!(
        t.team.spawn(again).await,
        Err(AgentError::NameTaken(_))
    ));
}

/// An embedded runner whose code asks the task-local context who it runs for.
#[derive(Debug)]
struct WhoAmI;

struct WhoAmISession {
    said: bool,
}

#[async_trait]
impl AgentRunner for WhoAmI {
    fn name(&self) -> &'static str {
        "who-am-i"
    }
    async fn start(&self, _spec: &AgentSpec) -> Result<Box<dyn AgentSession>, AgentError> {
        assert!(context::current().is_some(), "start runs as the teammate");
        Ok(Box::new(WhoAmISession { said: false }))
    }
    async fn resume(
        &self,
        _: &AgentSpec,
        _: &str,
        _: &str,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        Err(AgentError::ResumeUnsupported("who-am-i"))
    }
}

#[async_trait]
impl AgentSession for WhoAmISession {
    async fn next_event(&mut self) -> SessionEvent {
        if !self.said {
            self.said = true;
            let me = context::current()
                .map(|c| format!("{}@{}", c.identity.agent_name, c.identity.team_name));
            let text = me.unwrap_or_else(|| "nobody".into());
            let input = json!({"to": "team-lead", "message": text});
            return SessionEvent::Agent(AgentEvent::ToolStarted(task_agent::ToolUse {
                id: "t1".into(),
                name: "SendMessage".into(),
                input,
            }));
        }
        std::future::pending::<()>().await;
        SessionEvent::Agent(AgentEvent::TurnEnded(TurnOutcome::Success { result: None }))
    }
    async fn send(&mut self, _message: &str) -> Result<(), AgentError> {
        Ok(())
    }
    async fn close_input(&mut self) {}
    async fn cancel(&mut self) {}
}

#[tokio::test]
async fn an_embedded_runner_sees_its_teammate_identity_through_the_task_local_context() {
    let t = team();
    let id = t
        .team
        .spawn(TeammateRequest::new("eve", "crew", Arc::new(WhoAmI), "go"))
        .await
        .unwrap();
    let texts = wait_for(|| {
        let texts = t.lead_texts();
        (!texts.is_empty()).then_some(texts)
    })
    .await;
    assert_eq!(texts, ["eve@crew"]);
    assert!(context::current().is_none());
    t.fx.registry.kill(&id).await.unwrap();
}
