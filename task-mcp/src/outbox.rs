//! The notifications tool results carry ([`Outbox`]), from the moment they are claimed for a
//! result until the transport has written that result; below the context that holds one.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::RequestId;
use task_session::guard as lock;
use task_session::notice::Leased;

/// The notifications tool results carry, held under their leases until the transport has
/// written the result: then marked delivered, or given back if the write failed. A server
/// killed in between leaves them deliverable again once its lease is seen to be stale.
#[derive(Debug, Default)]
pub(crate) struct Outbox(Mutex<HashMap<RequestId, Leased>>);

impl Outbox {
    /// Holds `leased` until the answer to `request` is written.
    pub fn hold(&self, request: RequestId, leased: Leased) {
        if !leased.is_empty() {
            lock(&self.0).insert(request, leased);
        }
    }

    /// The answer to `request` was written out (`sent`) or lost.
    pub fn answered(&self, request: &RequestId, sent: bool) {
        let held = lock(&self.0).remove(request);
        match (held, sent) {
            (Some(leased), true) => {
                leased.mark_delivered();
            }
            (Some(leased), false) => {
                tracing::warn!(
                    count = leased.len(),
                    "a tool result was not written: its notifications are given back"
                );
            }
            (None, _) => {}
        }
    }
}
