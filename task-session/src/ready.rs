//! Readiness: a task started with a readiness check (`--ready REGEX`, `--ready-port PORT`,
//! `--ready-http URL`) is watched from its start until the check first succeeds, then it emits
//! one "ready" notification (no `<status>` tag, like the stall notice, so no consumer takes it
//! for the task's end), published before its marker `{id}.ready` is created, which `tasks wait
//! --ready` looks for. The watch ends with the task.
//!
//! Nothing spins: a line pattern is looked for in the output written since the last look,
//! every poll interval; a port or URL is tried with a backoff from the poll interval up to
//! [`MAX_BACKOFF`].

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use task_core::{Notification, Priority, Registry, TaskId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::guard as lock;
use crate::notice::Notice;
use crate::paths::SessionPaths;

/// The longest wait between two tries of a port or URL.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How long one connection attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

pub use task_protocol::ReadyCheck;

/// Checks what a client sent: a pattern that compiles, an `http://host[:port]/path` URL.
///
/// # Errors
/// [`Error::Invalid`] saying what is wrong.
pub fn validate(check: &ReadyCheck) -> Result<()> {
    match check {
        ReadyCheck::Line { pattern } => regex::Regex::new(pattern)
            .map(drop)
            .map_err(|e| Error::Invalid(format!("the ready pattern: {e}"))),
        ReadyCheck::Port { port } if *port == 0 => {
            Err(Error::Invalid("the ready port: 0 is no port".into()))
        }
        ReadyCheck::Port { .. } => Ok(()),
        ReadyCheck::Http { url } => HttpTarget::parse(url).map(drop),
    }
}

/// What made a task ready, in words.
fn describe(check: &ReadyCheck) -> String {
    match check {
        ReadyCheck::Line { pattern } => format!("its output matched /{pattern}/"),
        ReadyCheck::Port { port } => format!("port {port} accepts connections"),
        ReadyCheck::Http { url } => format!("{url} answers"),
    }
}

/// Whether the task `id` was found ready (its marker exists).
pub fn is_ready(paths: &SessionPaths, id: &TaskId) -> bool {
    paths.ready_marker(id).exists()
}

/// The checks of the tasks not started yet, and the watches of started ones.
pub(crate) struct Readiness {
    paths: SessionPaths,
    registry: Arc<Registry>,
    poll: Duration,
    expected: Mutex<HashMap<TaskId, ReadyCheck>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readiness")
    }
}

impl Readiness {
    /// Watches with `poll` as the pace of line checks and the first backoff.
    pub(crate) fn new(paths: SessionPaths, registry: Arc<Registry>, poll: Duration) -> Arc<Self> {
        Arc::new(Self {
            paths,
            registry,
            poll: poll.max(Duration::from_millis(1)),
            expected: Mutex::default(),
        })
    }

    /// Notes that `id` is ready once `check` succeeds (watched from its start).
    pub(crate) fn expect(&self, id: TaskId, check: ReadyCheck) {
        lock(&self.expected).insert(id, check);
    }

    /// Drops the check of `id`, which ended without ever starting (killed in the queue, or its
    /// dependency failed). Not on every end: a task that printed its ready line and ended at
    /// once is still found ready by its watch, started after its work.
    pub(crate) fn forget(&self, id: &TaskId) {
        lock(&self.expected).remove(id);
    }

    /// `id` started: watches it, if it has a check.
    pub(crate) fn started(self: &Arc<Self>, id: TaskId) {
        let Some(check) = lock(&self.expected).remove(&id) else {
            return;
        };
        let readiness = Arc::clone(self);
        tokio::spawn(async move { readiness.watch(id, check).await });
    }

    /// Tries `check` until it succeeds or the task ends.
    async fn watch(&self, id: TaskId, check: ReadyCheck) {
        let output = self.paths.output(&id);
        let mut lines = match &check {
            ReadyCheck::Line { pattern } => match regex::Regex::new(pattern) {
                Ok(pattern) => Some(LineWatch::new(pattern)),
                Err(error) => {
                    tracing::warn!(task = %id, %error, "a readiness pattern that does not compile");
                    return;
                }
            },
            _ => None,
        };
        let mut backoff = task_output::Backoff::new(self.poll, MAX_BACKOFF);
        loop {
            let live = self
                .registry
                .get(&id)
                .is_some_and(|state| !state.status().is_terminal());
            let ready = match (&check, &mut lines) {
                (ReadyCheck::Line { .. }, Some(lines)) => lines.look(&output),
                (ReadyCheck::Port { port }, _) => port_open(*port).await,
                (ReadyCheck::Http { url }, _) => http_ok(url).await,
                _ => false,
            };
            if ready {
                self.mark_ready(&id, &check);
                return;
            }
            if !live {
                return; // ended first: `tasks wait --ready` says so
            }
            let pause = match check {
                ReadyCheck::Line { .. } => self.poll,
                _ => backoff.next_delay(),
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Publishes the one "ready" notification, then creates the marker: once `tasks wait
    /// --ready` returns, the notification is there to deliver.
    fn mark_ready(&self, id: &TaskId, check: &ReadyCheck) {
        if let Some(state) = self.registry.get(id) {
            let summary = format!(
                "\"{}\" is ready: {}",
                state.base.description,
                describe(check)
            );
            let notice = Notice {
                priority: Priority::Next,
                at_ms: task_core::now_ms(),
                notification: Notification::for_task(&state, None, summary),
                key: None,
            };
            if let Err(error) = crate::notice::publish_event(&self.paths, &notice) {
                tracing::warn!(task = %id, %error, "cannot publish its ready notification");
            }
        }
        let marker = self.paths.ready_marker(id);
        if let Err(error) = crate::record::replace(&self.paths, &marker, b"") {
            tracing::warn!(task = %id, %error, "cannot mark it ready");
        }
        tracing::info!(task = %id, "ready");
    }
}

/// The part of an output file looked at so far, for a line pattern.
struct LineWatch {
    pattern: regex::Regex,
    offset: u64,
    partial: Vec<u8>,
}

/// The most of a line kept while its end is not written yet.
const MAX_LINE_BYTES: usize = 64 * 1024;

impl LineWatch {
    fn new(pattern: regex::Regex) -> Self {
        Self {
            pattern,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// Reads what was written since the last look; whether a whole line matched.
    fn look(&mut self, output: &std::path::Path) -> bool {
        let Ok(mut file) = std::fs::File::open(output) else {
            return false;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut fresh = Vec::new();
        let Ok(read) = file.take(8 * 1024 * 1024).read_to_end(&mut fresh) else {
            return false;
        };
        self.offset += read as u64;
        self.partial.extend_from_slice(&fresh);
        let mut matched = false;
        while let Some(end) = memchr_newline(&self.partial) {
            let line = String::from_utf8_lossy(&self.partial[..end]).into_owned();
            matched |= self.pattern.is_match(line.trim_end_matches('\r'));
            self.partial.drain(..=end);
        }
        if self.partial.len() > MAX_LINE_BYTES {
            let cut = self.partial.len() - MAX_LINE_BYTES;
            self.partial.drain(..cut);
        }
        matched
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Whether 127.0.0.1:`port` accepts a connection.
async fn port_open(port: u16) -> bool {
    let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
    matches!(
        tokio::time::timeout(ATTEMPT_TIMEOUT, connect).await,
        Ok(Ok(_))
    )
}

/// An `http://` URL, taken apart.
struct HttpTarget {
    host: String,
    port: u16,
    path: String,
}

impl HttpTarget {
    fn parse(url: &str) -> Result<Self> {
        let bad = |why: &str| Error::Invalid(format!("the ready URL {url:?}: {why}"));
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are checked"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad("a bad port"))?),
            None => (authority, 80),
        };
        if host.is_empty() || host.contains(['@', ' ']) {
            return Err(bad("a bad host"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }
}

/// Whether a `GET` of `url` answers 2xx.
async fn http_ok(url: &str) -> bool {
    let Ok(target) = HttpTarget::parse(url) else {
        return false;
    };
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .ok()?;
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {}\r\nConnection: close\r\n\r\n",
            target.path, target.host
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 16];
        let mut filled = 0;
        while filled < head.len() {
            match stream.read(&mut head[filled..]).await.ok()? {
                0 => break,
                n => filled += n,
            }
        }
        let head = std::str::from_utf8(&head[..filled]).ok()?;
        let status = head.split(' ').nth(1)?;
        Some(status.len() == 3 && status.starts_with('2'))
    };
    matches!(
        tokio::time::timeout(ATTEMPT_TIMEOUT, attempt).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn checks_are_validated() {
        assert!(
            validate(&ReadyCheck::Line {
                pattern: "lis(ten".into()
            })
            .is_err()
        );
        assert!(
            validate(&ReadyCheck::Line {
                pattern: "listening on \\d+".into()
            })
            .is_ok()
        );
        assert!(validate(&ReadyCheck::Port { port: 0 }).is_err());
        assert!(
            validate(&ReadyCheck::Http {
                url: "https://x".into()
            })
            .is_err()
        );
        let target = HttpTarget::parse("http://127.0.0.1:8080/health?x=1").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("127.0.0.1", 8080));
        assert_eq!(target.path, "/health?x=1");
        assert_eq!(HttpTarget::parse("http://localhost").unwrap().path, "/");
    }

    #[test]
    fn a_check_is_dropped_when_its_task_ends_through_a_failed_dependency() {
        use crate::queue::{Admitted, ClassLimits, Queue, Schedule};
        use task_core::{EndReason, TaskKind, TaskState, TaskStatus, TaskType};

        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        std::fs::create_dir_all(paths.tasks_dir()).unwrap();
        let registry = Arc::new(Registry::default());
        let register = || {
            let id = TaskId::generate(TaskType::LocalAgent).unwrap();
            let kind = TaskKind::Agent(Box::default());
            let state = TaskState::new(id, "t", paths.output(&id), kind).unwrap();
            registry.register(state).unwrap();
            id
        };
        let (dependency, waiting) = (register(), register());
        struct NothingStarts;
        impl crate::queue::Turns for NothingStarts {
            fn start(&self, _: TaskId, _: crate::queue::Work) {
                panic!("nothing may start")
            }
            fn launch_kept(&self, _: TaskId, _: bool) -> bool {
                panic!("nothing may start")
            }
            fn register_kept(&self, _: TaskId, _: bool) -> bool {
                panic!("nothing here is kept on disk only")
            }
        }
        let readiness = Readiness::new(paths.clone(), Arc::clone(&registry), Duration::ZERO);
        let queue = Queue::new(
            paths.clone(),
            Arc::clone(&registry),
            ClassLimits::default(),
            0,
            Arc::new(NothingStarts),
            Arc::default(),
            Arc::clone(&readiness),
        )
        .unwrap();
        let placement = queue.place(&Schedule {
            after: vec![dependency],
            ..Schedule::default()
        });
        readiness.expect(waiting, ReadyCheck::Port { port: 1 });
        let work: crate::queue::Work = Box::new(|| {});
        let admitted = queue.admit(
            waiting,
            TaskType::LocalAgent,
            true,
            placement,
            Some(work),
            None,
        );
        assert!(matches!(admitted, Admitted::Queued));
        registry
            .transition_with(&dependency, TaskStatus::Killed, |state| {
                state.record_end(&EndReason::Killed);
            })
            .unwrap();
        queue.pump();
        let ended = registry.get(&waiting).unwrap();
        assert_eq!(ended.status(), TaskStatus::Failed);
        assert!(
            !lock(&readiness.expected).contains_key(&waiting),
            "the check of a task that never runs is kept"
        );
    }

    #[test]
    fn a_line_matches_once_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut watch = LineWatch::new(regex::Regex::new("^ready$").unwrap());
        assert!(!watch.look(&path), "no file yet");
        std::fs::write(&path, "starting\nrea").unwrap();
        assert!(!watch.look(&path));
        std::fs::write(&path, "starting\nready\n").unwrap();
        assert!(watch.look(&path));
    }
}
