//! `tasks status`: the pill of real tasks, nothing when idle.

use crate::sandbox::Sandbox;
use crate::support::eventually;

#[test]
fn status_prints_nothing_when_idle_and_counts_live_shells_and_monitors() {
    let sandbox = Sandbox::new();
    assert_eq!(sandbox.ok(&["status"]), "", "a fresh session is idle");
    let idle = sandbox.json(&["status"]);
    assert_eq!(idle["label"], "");
    assert_eq!(idle["count"], 0);
    assert!(
        !sandbox.root().join("default/supervisor.lock").exists(),
        "status starts no supervisor"
    );

    let gate = sandbox.root().join("gate");
    let wait_gate = format!("while [ ! -e {} ]; do sleep 0.01; done", gate.display());
    sandbox.start(&wait_gate);
    sandbox.start(&wait_gate);
    sandbox.ok(&["monitor", "--", &wait_gate]);
    assert_eq!(sandbox.ok(&["status"]), "2 shells, 1 monitor\n");
    let pill = sandbox.json(&["status"]);
    assert_eq!(pill["count"], 3);
    assert_eq!(pill["needsAttention"], false);

    std::fs::write(&gate, "").unwrap();
    eventually("every task to end", || {
        sandbox
            .statuses()
            .iter()
            .all(|(_, status)| status != "running" && status != "pending")
            .then_some(())
    });
    assert_eq!(
        sandbox.ok(&["status"]),
        "",
        "ended tasks are not background work"
    );
}
