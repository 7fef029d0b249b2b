//! A supervisor killed at any moment after a task ended loses nothing: the end reaches disk
//! together with its completion notice, so whatever a reader saw end is delivered.

use crate::full_disk::delivered_ids;
use crate::sandbox::Sandbox;

#[test]
fn an_end_reaches_disk_with_its_notice_so_a_supervisor_killed_after_it_loses_no_completion() {
    let sandbox = Sandbox::new();
    let mut ended = Vec::new();
    for _ in 0..20 {
        let id = sandbox.ended("true");
        let record = std::fs::read_to_string(sandbox.tasks_dir().join(format!("{id}.json")));
        let record: serde_json::Value = serde_json::from_str(&record.unwrap()).unwrap();
        assert!(
            record["notification"].is_object(),
            "{id} reads ended without its notice: {record}"
        );
        ended.push(id);
    }
    sandbox.kill_supervisor();
    assert_eq!(delivered_ids(&sandbox), ended);
}
