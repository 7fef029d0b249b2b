//! task-remote: the sessions API's bodies (what a server sends the client, and what `tasks
//! serve` takes from a client), the event log a remote task's output file is, and its sidecar.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use task_core::TaskId;
use task_remote::api::{
    CreateSession, ErrorBody, EventsPage, SendEvents, Session, UserEvent, event_id,
};
use task_remote::{EventLog, Sidecars};

use crate::scratch;

/// The bytes as every API body (what parses re-serializes and parses to an equal value), as
/// the output file of a remote task being resumed (the torn last line cut, the last whole event
/// returned), and as its sidecar.
pub fn api(data: &[u8]) {
    body::<Session>(data);
    body::<ErrorBody>(data);
    body::<CreateSession>(data);
    body::<SendEvents>(data);
    body::<UserEvent>(data);
    if let Some(page) = body::<EventsPage>(data) {
        for event in &page.data {
            let _ = event_id(event);
        }
    }
    event_log(data);
    sidecar(data);
}

fn body<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) -> Option<T> {
    let value: T = serde_json::from_slice(data).ok()?;
    let encoded = serde_json::to_vec(&value).unwrap();
    let decoded: T = serde_json::from_slice(&encoded).unwrap();
    assert_eq!(decoded, value, "a body reads back as it was sent");
    Some(value)
}

fn event_log(data: &[u8]) {
    let path = scratch::dir().join("remote.output");
    scratch::write(&path, data);
    let log = EventLog::new(&path);
    let last = log.recover_last().expect("a log recovers");
    let kept = std::fs::read(&path).unwrap();
    assert!(data.starts_with(&kept), "recovery only cuts the end");
    assert!(
        kept.is_empty() || kept.ends_with(b"\n"),
        "recovery leaves whole lines"
    );
    let expected_last = kept
        .strip_suffix(b"\n")
        .and_then(|lines| lines.rsplit(|&b| b == b'\n').next())
        .and_then(|line| serde_json::from_slice::<Map<String, Value>>(line).ok());
    assert_eq!(last, expected_last, "the last whole event is returned");
    let cursor = log.recover_cursor().expect("a log recovers twice");
    assert_eq!(cursor.as_deref(), last.as_ref().and_then(event_id));
    if let Some(event) = last {
        log.append(std::slice::from_ref(&event))
            .expect("an event appends");
        assert_eq!(
            log.recover_last().unwrap(),
            Some(event),
            "an appended event is the last"
        );
    }
}

fn sidecar(data: &[u8]) {
    let session_dir = scratch::fresh("remote-session");
    let sidecars = Sidecars::new(&session_dir);
    let id = serde_json::from_slice::<Value>(data)
        .ok()
        .and_then(|v| {
            v.get("taskId")?
                .as_str()
                .and_then(|id| TaskId::parse(id).ok())
        })
        .unwrap_or_else(|| TaskId::parse("r12345678").unwrap());
    let path = sidecars.path(&id);
    if let Some(parent) = path.parent() {
        scratch::create_private_dir(parent);
    }
    scratch::write(&path, data);
    if let Ok(sidecar) = sidecars.read(&id) {
        assert_eq!(sidecar.task_id, id);
        sidecars.delete(&id).expect("a sidecar deletes");
        sidecars
            .write(&sidecar)
            .expect("a sidecar that reads can be written");
        assert_eq!(sidecars.read(&id).unwrap(), sidecar, "a sidecar reads back");
    }
    assert_eq!(sidecars.list().len(), 1);
}
