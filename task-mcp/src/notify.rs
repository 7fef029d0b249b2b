//! Notifications, both ways an agent can get them.
//!
//! * **In tool results** (every client): after each tool call the server claims every pending
//!   notification of the session (the same cross-process claims as `tasks notifications`: the
//!   `.notified` latch for completions, a rename for events), in SPEC §3 priority order, and
//!   appends each to the result as one more text block: the reference's framing, then the
//!   `<task-notification>` envelope.
//! * **Pushed** (clients that surface server messages): a watcher looks at the session as soon
//!   as a task's record changes or an event is published (an inotify watch on its records and
//!   on `events/pending/`, task-session's [`RecordChanges`]: then it reads only the records that
//!   changed, and the pending events if they did), and at least every
//!   [`WatchSettings::interval`] (a whole look, for what a watch cannot see), and sends each
//!   new notification once as a standard
//!   `notifications/message` (MCP logging, logger `tasks`), the one server-to-client message
//!   that every client SDK hands to its application (the Python SDK's `logging_callback`, rmcp's
//!   `on_logging_message`); a custom method would be dropped by most of them. By default the
//!   push only *announces* (`"delivered": false`): the envelope is still delivered once, in a
//!   tool result. With [`Deliverer::Push`](crate::Deliverer::Push) (`tasks mcp --deliver push`)
//!   the push claims the notification and is its delivery.
//!
//! * **As Claude Code channel events** ([`Deliverer::Channel`](crate::Deliverer::Channel),
//!   `tasks mcp --deliver channel`): each notification is pushed once as
//!   `notifications/claude/channel` with `{content, meta}` (`content` the model-facing text,
//!   `meta` the task id, its type and, for an end, its status), which Claude Code puts in front
//!   of its model as a `<channel source="tasks" task_id=… type=… status=…>` event; the push is
//!   the delivery.
//!
//! The watcher also sends `notifications/resources/updated` for every subscribed
//! `tasks://{id}/output` whose output grew or whose task ended, and
//! `notifications/resources/list_changed` when tasks appear.
//!
//! The logging and subscription methods are those of the session protocol (2025-11-25 and
//! older, which `initialize`-based clients speak); rmcp marks them deprecated in favour of the
//! 2026-07-28 subscription stream, which this server does not offer yet.
#![allow(deprecated)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use std::time::Duration;
use task_session::guard as lock;

use rmcp::model::{
    CustomNotification, LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use serde_json::json;
use task_core::{TaskId, TaskStatus, TerminalStatus};

use crate::error::McpError;
use task_session::changes::{AsyncRecordChanges, Changed, RecordChanges};
use task_session::notice::{self, Leased, Notice};

use crate::Deliverer;
use crate::context::{Context, blocking};
use crate::resources;

/// The watcher's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSettings {
    /// How often the subscribed outputs are looked at, and the whole session where no watch
    /// on its records can be made (a changed record is looked at as soon as it is written).
    pub interval: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(500),
        }
    }
}

/// What the client asked to hear: subscribed outputs and the lowest logging level.
#[derive(Debug, Default)]
pub(crate) struct Interest {
    /// Subscribed task outputs, with what was last seen of each (size, status).
    subscribed: Mutex<HashMap<TaskId, Option<(u64, TaskStatus)>>>,
    /// The level set by `logging/setLevel` (none: everything is sent).
    level: Mutex<Option<LoggingLevel>>,
}

impl Interest {
    /// Starts reporting changes of `id`'s output.
    pub fn subscribe(&self, id: TaskId) {
        lock(&self.subscribed).entry(id).or_insert(None);
    }

    /// Stops reporting changes of `id`'s output.
    pub fn unsubscribe(&self, id: &TaskId) {
        lock(&self.subscribed).remove(id);
    }

    /// The subscribed tasks as a change to look at: their outputs may have grown.
    fn subscribed_records(&self) -> Changed {
        Changed {
            records: lock(&self.subscribed).keys().copied().collect(),
            ..Changed::default()
        }
    }

    /// Sets the lowest level pushed.
    pub fn set_level(&self, level: LoggingLevel) {
        *lock(&self.level) = Some(level);
    }

    fn wants(&self, level: LoggingLevel) -> bool {
        lock(&self.level).is_none_or(|min| rank(level) >= rank(min))
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Claims every pending notification for a tool result, in priority order, under a lease, and
/// records them: they are marked delivered once the result is written out ([`Outbox`](crate::outbox::Outbox)). A
/// failure is logged and leaves them pending.
pub(crate) async fn lease_for_result(context: &Context) -> Option<Leased> {
    let session = context.session.clone();
    let leased = blocking(move || {
        let mut leased = session.lease_notifications()?;
        leased.record()?;
        Ok::<_, task_session::Error>(leased)
    })
    .await;
    match leased {
        Ok(leased) => Some(leased),
        Err(error) => {
            tracing::warn!(%error, "could not collect pending notifications");
            None
        }
    }
}

/// The text block a notification adds to a tool result (framing, then envelope).
pub(crate) fn for_model(notice: &Notice) -> String {
    notice.notification.render_for_model()
}

/// Where the watcher's messages go.
#[derive(Debug, Clone)]
pub(crate) enum Outlet {
    /// A session-protocol connection (2025-11-25 and older): any server message, any time.
    Session(Peer<RoleServer>),
    /// A 2026-07-28 `subscriptions/listen` stream: resource changes only (that protocol has no
    /// unsolicited logging message, so notifications come in tool results there).
    Subscription(SubscriptionSink),
}

impl Outlet {
    /// Whether notifications (logging messages, channel events) can be pushed here.
    fn takes_notifications(&self) -> bool {
        matches!(self, Outlet::Session(_))
    }

    async fn send(&self, messages: Vec<Message>) -> Result<(), String> {
        for message in messages {
            let sent = match (self, message) {
                (Outlet::Session(peer), message) => send_in_session(peer, message)
                    .await
                    .map_err(|e| e.to_string()),
                (Outlet::Subscription(sink), Message::Updated(uri)) => {
                    let updated = ResourceUpdatedNotification::new(
                        ResourceUpdatedNotificationParam::new(uri),
                    );
                    sink.send(ServerNotification::ResourceUpdatedNotification(updated))
                        .await
                        .map_err(|e| e.to_string())
                }
                (Outlet::Subscription(sink), Message::ListChanged) => sink
                    .notify_resource_list_changed()
                    .await
                    .map_err(|e| e.to_string()),
                // Never made for a subscription (`takes_notifications`).
                (Outlet::Subscription(_), Message::Log(_) | Message::Channel(_)) => Ok(()),
            };
            sent?;
        }
        Ok(())
    }
}

/// Pushes notifications and resource changes to `outlet` until it closes: a look at each record
/// as soon as it changes, the subscribed outputs every [`WatchSettings::interval`] (no watch
/// sees an output grow), and a whole look once a rescan interval (task-session's
/// `rescan_interval`: for what no file change announces, a claim whose reader died), or every
/// interval where there is no watch. A whole look every interval cost a server in a session of
/// 1 000 tasks the parsing of every record twice a second.
pub(crate) async fn watch(
    context: Arc<Context>,
    interest: Arc<Interest>,
    outlet: Outlet,
    settings: WatchSettings,
) {
    let mut pushed = HashSet::new();
    let mut known_tasks = HashSet::new();
    let notifications = outlet.takes_notifications();
    let mut changes = None;
    loop {
        // Made before the whole look, so that no record written during it goes unseen.
        if changes.is_none() {
            changes = watch_records(&context);
        }
        let whole_look_in = match changes {
            Some(_) => context
                .session
                .config()
                .rescan_interval
                .max(settings.interval),
            None => settings.interval,
        };
        let whole_look_due = tokio::time::Instant::now() + whole_look_in;
        let mut only = None;
        loop {
            let looked = look(
                &context,
                &interest,
                notifications,
                only.take(),
                (&mut pushed, &mut known_tasks),
            );
            if !send(&outlet, looked.await).await {
                return;
            }
            let left = whole_look_due.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break; // a whole look is due
            }
            let Some(watch) = &changes else {
                tokio::time::sleep(left).await;
                break;
            };
            match watch.wait(left.min(settings.interval)).await {
                Ok(changed) if changed.lost => break,
                Ok(changed) if changed.any() => only = Some(changed),
                Ok(_) => only = Some(interest.subscribed_records()),
                Err(error) => {
                    tracing::debug!(%error, "record watch failed: looking every interval");
                    changes = None;
                    tokio::time::sleep(left.min(settings.interval)).await;
                    break;
                }
            }
        }
    }
}

/// A watch on the session's records, if one can be made (not before a task was ever started).
fn watch_records(context: &Context) -> Option<AsyncRecordChanges> {
    RecordChanges::watch(context.session.paths())
        .and_then(RecordChanges::into_async)
        .ok()
}

/// Sends what a look found, then marks what it leased delivered; false once the client is
/// gone.
async fn send(outlet: &Outlet, looked: Result<(Vec<Message>, Option<Leased>), McpError>) -> bool {
    match looked {
        Ok((messages, leased)) => {
            if let Err(error) = outlet.send(messages).await {
                tracing::info!(%error, "client gone: the notification watcher stops");
                return false; // what it held is given back (the lease is dropped)
            }
            // Sent: now delivered (if this server dies first, they are delivered again).
            if let Some(leased) = leased
                && let Err(error) =
                    blocking(move || Ok::<_, McpError>(leased.mark_delivered())).await
            {
                tracing::warn!(%error, "pushed notifications not marked delivered");
            }
        }
        Err(error) => tracing::warn!(%error, "could not look at the session"),
    }
    true
}

/// One message for the client.
enum Message {
    Log(LoggingMessageNotificationParam),
    Channel(serde_json::Value),
    Updated(String),
    ListChanged,
}

async fn send_in_session(
    peer: &Peer<RoleServer>,
    message: Message,
) -> Result<(), rmcp::ServiceError> {
    match message {
        Message::Log(param) => peer.notify_logging_message(param).await,
        Message::Channel(params) => {
            let channel = CustomNotification::new(CHANNEL_METHOD, Some(params));
            peer.send_notification(ServerNotification::CustomNotification(channel))
                .await
        }
        Message::Updated(uri) => {
            peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
        }
        Message::ListChanged => peer.notify_resource_list_changed().await,
    }
}

/// One look at the session (at what `only` says changed, when given): what to push now.
async fn look(
    context: &Arc<Context>,
    interest: &Arc<Interest>,
    notifications: bool,
    only: Option<Changed>,
    (pushed, known_tasks): (&mut HashSet<String>, &mut HashSet<TaskId>),
) -> Result<(Vec<Message>, Option<Leased>), McpError> {
    let (job_context, job_interest) = (Arc::clone(context), Arc::clone(interest));
    let collect = move || Seen::collect(&job_context, &job_interest, notifications, only);
    let mut seen = blocking(collect).await?;
    let mut messages = Vec::new();
    for (key, notice) in seen.notices {
        if !pushed.insert(key) {
            continue;
        }
        if context.delivery == Deliverer::Channel {
            messages.push(Message::Channel(channel_params(&notice)));
            continue;
        }
        let level = level(&notice);
        if interest.wants(level) {
            messages.push(Message::Log(log_param(&notice, level, context.delivery)));
        }
    }
    let mut subscribed = lock(&interest.subscribed);
    for (id, state) in seen.outputs {
        if let Some(last) = subscribed.get_mut(&id)
            && *last != Some(state)
        {
            *last = Some(state);
            messages.push(Message::Updated(resources::output_uri(&id)));
        }
    }
    if seen.tasks.iter().any(|id| !known_tasks.contains(id)) {
        known_tasks.extend(seen.tasks);
        messages.push(Message::ListChanged);
    }
    Ok((messages, seen.leased.take()))
}

/// What one look found.
struct Seen {
    /// Notifications to push, keyed so each is pushed once.
    notices: Vec<(String, Notice)>,
    /// Output size and status of each subscribed task.
    outputs: Vec<(TaskId, (u64, TaskStatus))>,
    /// Every task of the session.
    tasks: Vec<TaskId>,
    /// What is pushed as the delivery, held until it is sent.
    leased: Option<Leased>,
}

impl Seen {
    /// What to push now; `notifications`: whether any are (else only resource changes);
    /// `only`: what changed (the records that did, and whether the pending events did), else
    /// the whole session is looked at.
    fn collect(
        context: &Context,
        interest: &Interest,
        notifications: bool,
        only: Option<Changed>,
    ) -> Result<Self, McpError> {
        let session = &context.session;
        let pushes =
            notifications && matches!(context.delivery, Deliverer::Push | Deliverer::Channel);
        // The tasks looked at, and (when the push is the delivery) what they make deliverable,
        // claimed under one lease: a burst of ends is one claim and one record.
        let (tasks, leased) = match (&only, pushes) {
            (Some(changed), true) => {
                let (tasks, leased) = session.lease_changed(changed)?;
                (tasks, Some(leased))
            }
            (Some(changed), false) => (session.tasks_by_id(&changed.records)?, None),
            (None, true) => {
                let tasks = session.tasks()?.tasks;
                let leased = session.lease_of(&tasks, true)?;
                (tasks, Some(leased))
            }
            (None, false) => (session.tasks()?.tasks, None),
        };
        let (notices, leased) = match leased {
            Some(mut leased) => {
                leased.record()?;
                let notices = leased.notices().map(|n| (key_of(n), n.clone())).collect();
                (notices, Some(leased))
            }
            None if notifications => {
                let events = only.as_ref().is_none_or(|changed| changed.events);
                (peek(context, &tasks, events)?, None)
            }
            None => (Vec::new(), None),
        };
        let subscribed: Vec<TaskId> = lock(&interest.subscribed).keys().copied().collect();
        let outputs = tasks
            .iter()
            .filter(|task| subscribed.contains(&task.id()))
            .map(|task| {
                let id = task.id();
                let size = std::fs::metadata(session.output_path(&id)).map_or(0, |m| m.len());
                (id, (size, task.status()))
            })
            .collect();
        let tasks = tasks.iter().map(|task| task.id()).collect();
        Ok(Self {
            notices,
            leased,
            outputs,
            tasks,
        })
    }
}

/// Pending notifications, read without claiming them: the completions of `tasks` not yet
/// delivered and, with `events`, the events waiting to be claimed, in delivery order.
fn peek(
    context: &Context,
    tasks: &[task_session::record::TaskRecord],
    events: bool,
) -> Result<Vec<(String, Notice)>, McpError> {
    let paths = context.session.paths();
    let mut found: Vec<(String, Notice)> = tasks
        .iter()
        .filter(|t| t.is_terminal())
        .filter_map(|t| {
            t.notification
                .clone()
                .filter(|due| !notice::is_notified(paths, &t.id(), due))
                .map(|n| (format!("done:{}:{}", t.id(), n.at_ms), n))
        })
        .collect();
    if events {
        found.extend(
            notice::peek_events(paths)?
                .into_iter()
                .map(|event| (format!("event:{}", event.name), event.notice)),
        );
    }
    // Stable: events of one priority and millisecond stay in publication order.
    found.sort_by_key(|(_, n)| (n.priority, n.at_ms));
    Ok(found)
}

/// The key of a claimed notification: its own stable key.
fn key_of(notice: &Notice) -> String {
    let key = notice.key.as_deref().unwrap_or_default();
    format!("claimed:{key}")
}

/// Completed: notice; failed or killed: warning; a stall warning: warning; a monitor event:
/// info.
fn level(notice: &Notice) -> LoggingLevel {
    match notice.notification.status {
        Some(TerminalStatus::Completed) => LoggingLevel::Notice,
        Some(_) => LoggingLevel::Warning,
        None if notice.notification.event.is_some() => LoggingLevel::Info,
        None => LoggingLevel::Warning,
    }
}

/// The `notifications/message` of a notification: `data` is an object with the envelope's
/// fields, the model-facing text, and whether this push is the delivery.
fn log_param(
    notice: &Notice,
    level: LoggingLevel,
    delivery: Deliverer,
) -> LoggingMessageNotificationParam {
    let n = &notice.notification;
    let data = json!({
        "type": "task-notification",
        "key": notice.key,
        "taskId": n.task_id,
        "status": n.status,
        "priority": notice.priority,
        "summary": n.summary,
        "event": n.event,
        "outputFile": n.output_file,
        "delivered": delivery.pushes(),
        "text": for_model(notice),
    });
    LoggingMessageNotificationParam::new(level, data).with_logger("tasks")
}

/// The method of a Claude Code channel event.
pub const CHANNEL_METHOD: &str = "notifications/claude/channel";

/// The experimental capability that says this server can push channel events.
pub const CHANNEL_CAPABILITY: &str = "claude/channel";

/// The params of a channel event: the model-facing text, and as `meta` (string to string, as
/// the client requires) the task id, its type and, for an end, its status (a stall warning or
/// a monitor event has none, as SPEC §3).
fn channel_params(notice: &Notice) -> serde_json::Value {
    let n = &notice.notification;
    let mut meta = serde_json::Map::new();
    meta.insert("task_id".into(), n.task_id.as_str().into());
    meta.insert("type".into(), n.task_id.task_type().as_str().into());
    if let Some(status) = n.status {
        meta.insert("status".into(), status.as_str().into());
    }
    json!({"content": for_model(notice), "meta": meta})
}
