//! `tasks status` labels against every row of the reference's pill table (the seed's "UI: The
//! Footer Pill", copied to `tests/fixtures/pill_table.txt`): each row is read from the fixture,
//! its tasks built from task-core's own types, and the label computed by [`task_client::cli::pill`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use task_client::cli::pill::{self, Pill};
use task_core::{
    RemoteState, RemoteSubtype, ShellKind, ShellState, TaskId, TaskKind, TaskState, TaskStatus,
    TaskType, TeammateIdentity, TeammateState,
};

fn task(task_type: TaskType, kind: TaskKind) -> TaskState {
    let id = TaskId::generate(task_type).unwrap();
    let mut state = TaskState::new(id, "d", "/o", kind).unwrap();
    state.base.status = TaskStatus::Running;
    state
}

fn shell(kind: ShellKind) -> TaskState {
    let task_type = match kind {
        ShellKind::Shell => TaskType::LocalBash,
        ShellKind::Monitor => TaskType::MonitorMcp,
    };
    let shell = ShellState {
        command: "sleep 1".into(),
        is_backgrounded: true,
        kind,
        ..ShellState::default()
    };
    task(task_type, TaskKind::Shell(shell))
}

fn ultraplan(phase: Option<&str>) -> TaskState {
    let remote = RemoteState {
        remote_task_type: RemoteSubtype::Ultraplan,
        remote_task_metadata: phase.map(|p| json!({ "ultraplanPhase": p })),
        ..RemoteState::default()
    };
    task(TaskType::RemoteAgent, TaskKind::Remote(Box::new(remote)))
}

fn teammate(team: &str) -> TaskState {
    let mate = TeammateState {
        identity: TeammateIdentity {
            agent_name: "a".into(),
            team_name: team.into(),
            color: None,
        },
        ..TeammateState::default()
    };
    task(
        TaskType::InProcessTeammate,
        TaskKind::Teammate(Box::new(mate)),
    )
}

fn dream() -> TaskState {
    task(TaskType::Dream, TaskKind::Dream(Box::default()))
}

/// The tasks of each row of the table, by the row's first column.
fn scenario(row: &str) -> Vec<TaskState> {
    match row {
        "1 bash task" => vec![shell(ShellKind::Shell)],
        "3 bash + 2 monitor tasks" => {
            let mut tasks: Vec<_> = (0..3).map(|_| shell(ShellKind::Shell)).collect();
            tasks.extend((0..2).map(|_| shell(ShellKind::Monitor)));
            tasks
        }
        "1 ultraplan (needs_input)" => vec![ultraplan(Some("needs_input"))],
        "1 ultraplan (plan_ready)" => vec![ultraplan(Some("plan_ready"))],
        "5 in-process teammates from 2 teams" => ["red", "red", "red", "blue", "blue"]
            .into_iter()
            .map(teammate)
            .collect(),
        "1 DreamTask" => vec![dream()],
        "Mixed types" => vec![
            shell(ShellKind::Shell),
            dream(),
            teammate("red"),
            task(TaskType::LocalWorkflow, TaskKind::Workflow(Box::default())),
        ],
        other => panic!("a row of the pill table has no scenario: {other:?}"),
    }
}

/// The table's rows: the scenario and the expected label (the fixture runs the two columns
/// together, so each row is split after the scenario it starts with).
fn rows() -> Vec<(String, String)> {
    const SCENARIOS: [&str; 7] = [
        "1 bash task",
        "3 bash + 2 monitor tasks",
        "1 ultraplan (needs_input)",
        "1 ultraplan (plan_ready)",
        "5 in-process teammates from 2 teams",
        "1 DreamTask",
        "Mixed types",
    ];
    let text = include_str!("fixtures/pill_table.txt");
    let table = text
        .split("Tasks in background Pill label\n")
        .nth(1)
        .expect("the table's header");
    table
        .lines()
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let scenario = SCENARIOS
                .iter()
                .find(|s| line.starts_with(*s))
                .unwrap_or_else(|| panic!("unknown row {line:?}"));
            (scenario.to_string(), line[scenario.len()..].to_owned())
        })
        .collect()
}

#[test]
fn every_row_of_the_reference_pill_table_gets_its_label() {
    let rows = rows();
    assert_eq!(rows.len(), 7, "{rows:?}");
    for (row, expected) in rows {
        let tasks = scenario(&row);
        let expected = expected.replace('N', &tasks.len().to_string());
        let pill = pill::pill(&tasks);
        assert_eq!(pill.label, expected, "row {row:?}");
        assert_eq!(pill.count, tasks.len(), "row {row:?}");
        let ultraplan_in_attention = row.starts_with("1 ultraplan");
        assert_eq!(pill.needs_attention, ultraplan_in_attention, "row {row:?}");
    }
}

#[test]
fn nothing_in_the_background_is_no_label() {
    let mut done = shell(ShellKind::Shell);
    done.base.status = TaskStatus::Completed;
    let expected = Pill {
        label: String::new(),
        needs_attention: false,
        count: 0,
    };
    assert_eq!(pill::pill(&[done]), expected);
    assert_eq!(pill::pill(&[]), expected);
}

#[test]
fn foreground_shells_and_ended_tasks_are_not_background_work() {
    let mut foreground = shell(ShellKind::Shell);
    if let TaskKind::Shell(state) = &mut foreground.kind {
        state.is_backgrounded = false;
    }
    let mut failed = dream();
    failed.base.status = TaskStatus::Failed;
    let pill = pill::pill(&[foreground, failed, shell(ShellKind::Monitor)]);
    assert_eq!(pill.label, "1 monitor");
}

#[test]
fn cloud_sessions_and_an_ultraplan_without_attention_keep_the_open_diamond() {
    let remote = || task(TaskType::RemoteAgent, TaskKind::Remote(Box::default()));
    assert_eq!(pill::pill(&[remote()]).label, "◇ 1 cloud session");
    assert_eq!(
        pill::pill(&[remote(), remote()]).label,
        "◇ 2 cloud sessions"
    );
    let quiet = pill::pill(&[ultraplan(None)]);
    assert_eq!(quiet.label, "◇ ultraplan");
    assert!(!quiet.needs_attention);
    let two = pill::pill(&[ultraplan(Some("plan_ready")), ultraplan(None)]);
    assert!(
        !two.needs_attention,
        "only a single ultraplan calls for attention"
    );
}
