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
