//! Diagnostics of both executables: to stderr, warnings by default (`TASKS_LOG` overrides),
//! info for the supervisor, whose stderr is its log file.

use std::io::Stderr;
use std::sync::OnceLock;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::SubscriberBuilder;
use tracing_subscriber::fmt::format::{DefaultFields, Format};
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the subscriber. A filter is parsed only when `TASKS_LOG` is set: building one costs
/// more than the rest of a short command's start-up work. Without it, the formatting
/// subscriber is built only once something is to be logged (`Lazy`, below).
pub fn init(supervisor: bool) {
    let default = if supervisor {
        LevelFilter::INFO
    } else {
        LevelFilter::WARN
    };
    if std::env::var_os("TASKS_LOG").is_some() {
        let filter = EnvFilter::try_from_env("TASKS_LOG")
            .unwrap_or_else(|_| EnvFilter::new(default.to_string()));
        formatter().with_env_filter(filter).init();
    } else {
        let lazy = Lazy {
            max: default,
            inner: OnceLock::new(),
        };
        lazy.init();
    }
}

/// The formatting subscriber's builder: plain text to stderr.
fn formatter() -> SubscriberBuilder<DefaultFields, Format, LevelFilter, fn() -> Stderr> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr as fn() -> Stderr)
        .with_ansi(false)
}

/// Filters by level alone and builds the formatting subscriber the first time an event or a
/// span passes: a short command that logs nothing (the usual case) never builds it, and its
/// span registry preallocates pages a command of a millisecond would fault in for nothing.
struct Lazy {
    max: LevelFilter,
    inner: OnceLock<Box<dyn Subscriber + Send + Sync>>,
}

impl Lazy {
    /// The formatting subscriber, built now if it was not.
    fn inner(&self) -> &(dyn Subscriber + Send + Sync) {
        self.inner
            .get_or_init(|| Box::new(formatter().with_max_level(self.max).finish()))
            .as_ref()
    }

    /// The formatting subscriber if it was built: before, no span exists.
    fn built(&self) -> Option<&(dyn Subscriber + Send + Sync)> {
        self.inner.get().map(AsRef::as_ref)
    }
}

impl Subscriber for Lazy {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match self.enabled(metadata) {
            true => Interest::always(),
            false => Interest::never(),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.max >= *metadata.level()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.inner().new_span(span)
    }

    fn event(&self, event: &Event<'_>) {
        self.inner().event(event);
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(inner) = self.built() {
            inner.record(span, values);
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        if let Some(inner) = self.built() {
            inner.record_follows_from(span, follows);
        }
    }

    fn enter(&self, span: &Id) {
        if let Some(inner) = self.built() {
            inner.enter(span);
        }
    }

    fn exit(&self, span: &Id) {
        if let Some(inner) = self.built() {
            inner.exit(span);
        }
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.built()
            .map_or_else(|| id.clone(), |inner| inner.clone_span(id))
    }

    fn try_close(&self, id: Id) -> bool {
        self.built().is_some_and(|inner| inner.try_close(id))
    }
}
