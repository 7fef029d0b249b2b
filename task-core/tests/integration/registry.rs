//! Registration, resume, update, the latch, grace periods and eviction.

use std::sync::Arc;

use serde_json::json;
use task_core::{
    Delivery, Notification, Priority, Registration, Registry, RegistryError, SdkStatus, TaskEvent,
    TaskId, TaskKind, TaskState, TaskStatus, TaskType, TerminalStatus, UpdateOutcome,
};

use crate::common::{
    agent_task, fast_config, pending_events, registered_at, registry_with_policy, shell_task,
};

#[test]
fn register_emits_task_started() {
    let registry = Registry::default();
    let mut events = registry.subscribe();
    let task = shell_task("build").with_tool_use_id("toolu_1");
    let id = task.id();
    assert_eq!(registry.register(task).unwrap(), Registration::Started);
    assert_eq!(
        pending_events(&mut events),
        [TaskEvent::TaskStarted {
            task_id: id,
            tool_use_id: Some("toolu_1".into()),
            description: "build".into(),
            task_type: TaskType::LocalBash,
        }]
    );
    assert_eq!(registry.get(&id).unwrap().base.description, "build");
}

#[test]
fn resume_carries_ui_fields_forward_and_emits_no_second_start() {
    let registry = registry_with_policy(TaskType::LocalAgent, None);
    let first = agent_task("research");
    let id = first.id();
    registry.register(first.clone()).unwrap();
    registry
        .update(&id, |state| {
            let mut next = state.clone();
            next.base.retain = true;
            next.base.start_time = 42;
            if let TaskKind::Agent(agent) = &mut next.kind {
                agent.messages = vec![json!({"role": "user"})];
                agent.disk_loaded = true;
                agent.pending_messages = vec!["later".into()];
            }
            Some(next)
        })
        .unwrap();
    let mut events = registry.subscribe();

    let mut again = first;
    again.base.description = "research, resumed".into();
    assert_eq!(registry.register(again).unwrap(), Registration::Resumed);

    assert!(
        pending_events(&mut events).is_empty(),
        "no second task_started"
    );
    let state = registry.get(&id).unwrap();
    assert_eq!(state.base.description, "research, resumed");
    assert!(state.base.retain);
    assert_eq!(state.base.start_time, 42);
    let TaskKind::Agent(agent) = &state.kind else {
        panic!("not an agent")
    };
    assert_eq!(agent.messages, [json!({"role": "user"})]);
    assert!(agent.disk_loaded);
    assert_eq!(agent.pending_messages, ["later"]);
    assert_eq!(registry.len(), 1);
}

#[test]
fn register_rejects_data_of_another_type() {
    let registry = Registry::default();
    let mut task = shell_task("x");
    task.kind = TaskKind::Teammate(Box::default());
    assert!(matches!(
        registry.register(task),
        Err(RegistryError::InvalidState(_))
    ));
    assert!(registry.is_empty());
}

#[test]
fn unchanged_update_writes_nothing_and_wakes_nobody() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    let before = registry.get(&id).unwrap();
    let mut events = registry.subscribe();
    assert_eq!(
        registry.update(&id, |_| None).unwrap(),
        UpdateOutcome::Unchanged
    );
    assert!(Arc::ptr_eq(&before, &registry.get(&id).unwrap()));
    assert!(pending_events(&mut events).is_empty());
}

#[test]
fn written_update_emits_task_updated_only_for_status_changes() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    let mut events = registry.subscribe();
    registry
        .update(&id, |s| {
            let mut next = s.clone();
            next.base.output_offset = 7;
            Some(next)
        })
        .unwrap();
    assert!(pending_events(&mut events).is_empty());
    let done = registry.transition(&id, TaskStatus::Failed).unwrap();
    let events = pending_events(&mut events);
    assert!(matches!(
        &events[..],
        [TaskEvent::TaskUpdated { task_id, patch }]
            if *task_id == id && patch.status == TaskStatus::Failed && patch.end_time == done.base.end_time
    ));
    assert_eq!(done.base.output_offset, 7);
}

#[test]
fn updates_of_unknown_ids_are_not_found() {
    let registry = Registry::default();
    let id = TaskId::generate(TaskType::LocalBash).unwrap();
    assert_eq!(
        registry.update(&id, |s| Some(s.clone())).unwrap_err(),
        RegistryError::NotFound(id)
    );
    assert!(!registry.mark_notified(&id));
    assert!(registry.get(&id).is_none());
}

#[test]
fn updates_cannot_change_identity_or_clear_the_latch() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    let other = TaskId::generate(TaskType::LocalBash).unwrap();
    let moved = registry.update(&id, |s| {
        let mut next = s.clone();
        next.base.id = other;
        Some(next)
    });
    assert_eq!(moved.unwrap_err(), RegistryError::IdentityChanged(id));
    assert!(registry.mark_notified(&id));
    let cleared = registry.update(&id, |s| {
        let mut next = s.clone();
        next.base.notified = false;
        Some(next)
    });
    assert_eq!(cleared.unwrap_err(), RegistryError::LatchCleared(id));
    assert!(registry.get(&id).unwrap().base.notified);
}

#[test]
fn the_latch_gives_true_exactly_once() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Completed);
    assert!(registry.mark_notified(&id));
    assert!(!registry.mark_notified(&id));
    assert!(!registry.mark_notified(&id));
}

#[test]
fn notify_once_queues_one_notification_and_emits_the_sdk_event() {
    let registry = Registry::default();
    let id = registered_at(
        &registry,
        shell_task("t").with_tool_use_id("toolu_9"),
        TaskStatus::Completed,
    );
    let state = registry.get(&id).unwrap();
    let mut events = registry.subscribe();
    let n = Notification::for_task(&state, Some(TerminalStatus::Completed), "done");
    assert!(registry.notify_once(&id, n.clone(), Delivery::Queue(Priority::Later)));
    assert!(!registry.notify_once(&id, n.clone(), Delivery::Queue(Priority::Now)));
    assert_eq!(registry.notifications().drain(), [n]);
    assert!(matches!(
        &pending_events(&mut events)[..],
        [TaskEvent::TaskNotification { status: Some(SdkStatus::Completed), tool_use_id: Some(t), .. }]
            if t == "toolu_9"
    ));
}

#[test]
fn a_silent_kill_notification_is_not_queued_but_reported_stopped() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Killed);
    let state = registry.get(&id).unwrap();
    let mut events = registry.subscribe();
    let n = Notification::for_task(&state, Some(TerminalStatus::Killed), "stopped");
    assert!(registry.notify_once(&id, n, Delivery::Silent));
    assert!(registry.notifications().is_empty());
    assert!(matches!(
        &pending_events(&mut events)[..],
        [TaskEvent::TaskNotification {
            status: Some(SdkStatus::Stopped),
            ..
        }]
    ));
}

#[test]
fn finished_agents_get_their_executors_grace_unless_retained() {
    let registry = registry_with_policy(
        TaskType::LocalAgent,
        Some(std::time::Duration::from_secs(3600)),
    );
    let id = registered_at(&registry, agent_task("a"), TaskStatus::Completed);
    let state = registry.get(&id).unwrap();
    let end = state.base.end_time.unwrap();
    assert_eq!(state.base.evict_after, Some(end + 3_600_000));
    assert!(registry.mark_notified(&id));
    assert!(!registry.evict(&id), "inside the grace");

    let retained = agent_task("b");
    let rid = retained.id();
    registry.register(retained).unwrap();
    registry.set_retained(&rid, true).unwrap();
    registry.transition(&rid, TaskStatus::Running).unwrap();
    let done = registry.transition(&rid, TaskStatus::Failed).unwrap();
    assert_eq!(done.base.evict_after, None);
    assert!(registry.mark_notified(&rid));
    assert!(!registry.evict(&rid), "retained");
    registry.set_retained(&rid, false).unwrap();
    assert!(registry.get(&rid).unwrap().base.evict_after.is_some());
    assert!(!registry.evict(&rid), "leaving the view starts the grace");
}

#[test]
fn a_conditional_eviction_leaves_a_task_resumed_since_the_end_it_was_asked_about() {
    let registry = Registry::default();
    let first = agent_task("resumed");
    let id = registered_at(&registry, first.clone(), TaskStatus::Completed);
    assert!(registry.mark_notified(&id));
    let ended = registry.get(&id).unwrap();
    let end = ended.base.end_time.unwrap();
    while task_core::now_ms() <= end {
        std::thread::yield_now(); // the next end falls in another millisecond
    }

    // Resumed under its id and ended again: the first end is no longer the task's.
    registry.register(first).unwrap();
    registry.transition(&id, TaskStatus::Running).unwrap();
    assert!(!registry.evict_if(&id, |state| *state == *ended), "running");
    registry.transition(&id, TaskStatus::Completed).unwrap();
    assert!(registry.mark_notified(&id));
    assert!(
        !registry.evict_if(&id, |state| *state == *ended),
        "another end"
    );
    assert!(registry.get(&id).is_some());

    let again = registry.get(&id).unwrap();
    assert!(
        registry.evict_if(&id, |state| *state == *again),
        "the end asked about"
    );
    assert!(registry.get(&id).is_none());
}

#[test]
fn a_type_without_an_executor_gets_no_grace_and_keeps_only_base_fields_on_resume() {
    let registry = Registry::default();
    let first = agent_task("plain");
    let id = first.id();
    registry.register(first.clone()).unwrap();
    registry
        .update(&id, |state| {
            let mut next = state.clone();
            if let TaskKind::Agent(agent) = &mut next.kind {
                agent.pending_messages = vec!["kept only by an executor".into()];
            }
            Some(next)
        })
        .unwrap();
    registry.register(first).unwrap();
    let TaskKind::Agent(agent) = &registry.get(&id).unwrap().kind else {
        panic!("not an agent")
    };
    assert!(agent.pending_messages.is_empty());
    registry.transition(&id, TaskStatus::Running).unwrap();
    let done = registry.transition(&id, TaskStatus::Completed).unwrap();
    assert_eq!(done.base.evict_after, None);
}

#[test]
fn killed_teammates_get_the_stopped_display_grace() {
    let registry = registry_with_policy(
        TaskType::InProcessTeammate,
        Some(std::time::Duration::from_millis(3000)),
    );
    let id = TaskId::generate(TaskType::InProcessTeammate).unwrap();
    let task = TaskState::new(id, "mate", "/o", TaskKind::Teammate(Box::default())).unwrap();
    registered_at(&registry, task, TaskStatus::Killed);
    let state = registry.get(&id).unwrap();
    assert_eq!(
        state.base.evict_after,
        Some(state.base.end_time.unwrap() + 3000)
    );
}

#[test]
fn eviction_needs_terminal_notified_unretained_and_expired() {
    let registry = Registry::new(fast_config());
    let mut events = registry.subscribe();
    let pending = registered_at(&registry, shell_task("pending"), TaskStatus::Pending);
    let running = registered_at(&registry, shell_task("running"), TaskStatus::Running);
    let unnotified = registered_at(&registry, shell_task("unnotified"), TaskStatus::Completed);
    let done = registered_at(&registry, shell_task("done"), TaskStatus::Completed);
    let agent = registered_at(&registry, agent_task("agent"), TaskStatus::Failed);
    for id in [pending, running, done, agent] {
        assert!(registry.mark_notified(&id));
    }
    pending_events(&mut events);

    let mut evicted = registry.evict_expired();
    evicted.sort();
    let mut expected = vec![done, agent];
    expected.sort();
    assert_eq!(evicted, expected, "zero grace in fast_config");
    for id in [pending, running, unnotified] {
        assert!(registry.get(&id).is_some());
    }
    assert!(registry.get(&done).is_none());
    assert_eq!(
        pending_events(&mut events)
            .iter()
            .filter(|e| matches!(e, TaskEvent::TaskEvicted { .. }))
            .count(),
        2
    );
    // An evicted task takes no more writes.
    assert_eq!(
        registry.transition(&done, TaskStatus::Running).unwrap_err(),
        RegistryError::NotFound(done)
    );
}
