//! Shared helpers for the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use task_list::{
    CreateRequest, LockConfig, StoreConfig, TaskId, TaskList, UpdateRequest, UpdateResult,
};

/// Millisecond-scale lock timings.
pub fn fast_config() -> StoreConfig {
    StoreConfig {
        lock: LockConfig {
            stale_after: Duration::from_millis(300),
            refresh_every: Duration::from_millis(50),
            retries: 60,
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(20),
        },
        ..StoreConfig::default()
    }
}

pub fn open(root: &std::path::Path) -> TaskList {
    TaskList::open(root, "list", fast_config()).unwrap()
}

pub fn create(list: &TaskList, subject: &str) -> TaskId {
    list.create(&CreateRequest::new(subject, format!("about {subject}")))
        .unwrap()
        .task
        .id
}

pub fn id(n: u64) -> TaskId {
    TaskId::new(n).unwrap()
}

pub fn add_blocked_by(list: &TaskList, task: u64, blockers: &[u64]) -> UpdateResult {
    let mut request = UpdateRequest::new(task);
    request.add_blocked_by = Some(blockers.iter().map(u64::to_string).collect());
    list.update(&request).unwrap()
}

/// Polls `condition` until it holds, failing after 20 s.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
