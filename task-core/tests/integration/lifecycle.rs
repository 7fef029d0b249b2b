//! The transition table through the registry, for every pair of statuses.

use std::sync::Arc;

use task_core::{Registry, RegistryError, TaskStatus, UpdateOutcome};

use crate::common::{pending_events, registered_at, shell_task};

#[test]
fn transition_enforces_the_table_for_every_pair() {
    for from in TaskStatus::ALL {
        for to in TaskStatus::ALL {
            let registry = Registry::default();
            let id = registered_at(&registry, shell_task("t"), from);
            let before = registry.get(&id).unwrap();
            let mut events = registry.subscribe();
            let result = registry.transition(&id, to);
            if from.can_transition_to(to) {
                let after = result.unwrap_or_else(|e| panic!("{from} → {to}: {e}"));
                assert_eq!(after.status(), to);
                assert_eq!(
                    after.base.end_time.is_some(),
                    to.is_terminal(),
                    "{from} → {to}"
                );
                assert_eq!(pending_events(&mut events).len(), 1, "one task_updated");
            } else {
                assert_eq!(
                    result.unwrap_err(),
                    RegistryError::IllegalTransition { id, from, to }
                );
                let after = registry.get(&id).unwrap();
                assert!(
                    Arc::ptr_eq(&before, &after),
                    "{from} → {to} changed the state"
                );
                assert!(
                    pending_events(&mut events).is_empty(),
                    "{from} → {to} emitted"
                );
            }
        }
    }
}

#[test]
fn update_enforces_the_table_for_every_pair() {
    for from in TaskStatus::ALL {
        for to in TaskStatus::ALL.into_iter().filter(|&to| to != from) {
            let registry = Registry::default();
            let id = registered_at(&registry, shell_task("t"), from);
            let before = registry.get(&id).unwrap();
            let result = registry.update(&id, |state| {
                let mut next = state.clone();
                next.base.status = to;
                next.base.description = "changed".into();
                Some(next)
            });
            if from.can_transition_to(to) {
                assert!(matches!(result, Ok(UpdateOutcome::Written(s)) if s.status() == to));
            } else {
                assert_eq!(
                    result.unwrap_err(),
                    RegistryError::IllegalTransition { id, from, to }
                );
                assert!(Arc::ptr_eq(&before, &registry.get(&id).unwrap()));
            }
        }
    }
}

#[test]
fn a_task_is_started_when_it_enters_running_and_never_if_it_ends_waiting() {
    let registry = Registry::default();
    let id = registered_at(&registry, shell_task("ran"), TaskStatus::Pending);
    assert_eq!(registry.get(&id).unwrap().base.started_at, None, "waiting");
    let running = registry.transition(&id, TaskStatus::Running).unwrap();
    let started = running.base.started_at.expect("set on entering running");
    assert!(started >= running.base.start_time);
    let ended = registry.transition(&id, TaskStatus::Completed).unwrap();
    assert_eq!(ended.base.started_at, Some(started), "kept to the end");
    let end = ended.base.end_time.unwrap();
    assert_eq!(ended.base.run_ms(u64::MAX), Some(end - started));

    let never = registered_at(&registry, shell_task("queued"), TaskStatus::Pending);
    let killed = registry.transition(&never, TaskStatus::Killed).unwrap();
    assert_eq!(killed.base.started_at, None);
    assert_eq!(
        killed.base.run_ms(u64::MAX),
        None,
        "no run time for a task that never ran"
    );
}

#[test]
fn a_state_that_says_when_its_run_began_keeps_it_on_entering_running() {
    let registry = Registry::default();
    let mut state = shell_task("followed again");
    state.base.started_at = Some(7);
    let id = registered_at(&registry, state, TaskStatus::Pending);
    let running = registry.transition(&id, TaskStatus::Running).unwrap();
    assert_eq!(running.base.started_at, Some(7));
}
