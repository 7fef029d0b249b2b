//! The accept loop of the sessions server: at most [`ServeLimits::max_connections`] connections at
//! once (beyond it, accept pauses and new connections wait in the listen queue), each served
//! by its own task over HTTP/1.1 and closed when it does not use its slot: no whole request
//! head within the header timeout of being accepted (or of a kept-alive request's first byte),
//! or silence past the idle timeout between requests.
//!
//! The clock is the server's own rather than hyper's header-read timeout, which starts only
//! once hyper reads a request head: with axum-server's HTTP/1-or-2 detection in front of it, a
//! connection that never sent a byte was never timed at all, and hyper's timer cannot tell a
//! first request from a kept-alive wait.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use axum_server::accept::Accept;
use axum_server::tls_rustls::RustlsAcceptor;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::limits::ServeLimits;

/// How long accept waits after a failure (a descriptor limit hit despite the headroom).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// At most one "every slot is taken" warning this often.
const FULL_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Serves `app` on `listener` (through `tls` if given) within `limits`, until the process ends.
pub async fn serve(
    listener: TcpListener,
    tls: Option<RustlsAcceptor>,
    app: Router,
    limits: ServeLimits,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    // Timed by the connection's own clock (see the module's documentation).
    http.header_read_timeout(None);
    let mut warned: Option<Instant> = None;
    loop {
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if warned.is_none_or(|at| at.elapsed() >= FULL_WARNING_EVERY) {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "every connection slot is taken: new connections wait until one closes"
                    );
                    warned = Some(Instant::now());
                }
                match Arc::clone(&slots).acquire_owned().await {
                    Ok(slot) => slot,
                    // Never closed.
                    Err(_) => return,
                }
            }
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let (tls, app, http) = (tls.clone(), app.clone(), http.clone());
        tokio::spawn(async move {
            let clock = Arc::new(Clock::new());
            let io = Watched {
                inner: stream,
                clock: Arc::clone(&clock),
            };
            let served = async {
                let service = Tracked {
                    inner: TowerToHyperService::new(app),
                    clock: Arc::clone(&clock),
                };
                match tls {
                    Some(tls) => {
                        let (io, ()) = tls.accept(io, ()).await?;
                        http.serve_connection(TokioIo::new(io), service).await
                    }
                    None => http.serve_connection(TokioIo::new(io), service).await,
                }
                .map_err(io::Error::other)
            };
            tokio::select! {
                result = served => if let Err(error) = result {
                    tracing::debug!(%error, "connection ended");
                },
                expired = clock.expired(limits) => tracing::debug!(why = expired, "connection closed"),
            }
            drop(slot);
        });
    }
}

/// Where a connection is in its life, for its deadlines.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Accepted, no request yet.
    Fresh { accepted: Instant },
    /// Between requests: since the last answer, and since the next request's first byte.
    Idle {
        since: Instant,
        head_began: Option<Instant>,
    },
    /// A request is being answered (no deadline: the answer is the server's to give).
    Busy,
}

/// One connection's phase, changed by its reads and its requests, watched by
/// [`Clock::expired`].
#[derive(Debug)]
struct Clock {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Clock {
    fn new() -> Self {
        Clock {
            phase: Mutex::new(Phase::Fresh {
                accepted: Instant::now(),
            }),
            changed: Notify::new(),
        }
    }

    fn set(&self, change: impl FnOnce(&mut Phase) -> bool) {
        let changed = change(&mut self.phase.lock().unwrap_or_else(PoisonError::into_inner));
        if changed {
            self.changed.notify_one();
        }
    }

    /// Bytes arrived: between requests, the next request's head has begun.
    fn bytes_read(&self) {
        self.set(|phase| match phase {
            Phase::Idle {
                head_began: began @ None,
                ..
            } => {
                *began = Some(Instant::now());
                true
            }
            _ => false,
        });
    }

    fn busy(&self) {
        self.set(|phase| {
            *phase = Phase::Busy;
            true
        });
    }

    fn idle(&self) {
        self.set(|phase| {
            *phase = Phase::Idle {
                since: Instant::now(),
                head_began: None,
            };
            true
        });
    }

    /// When the connection loses its slot if nothing changes, and why.
    fn deadline(&self, limits: ServeLimits) -> Option<(Instant, &'static str)> {
        const NO_HEAD: &str = "no whole request head within the header timeout";
        match *self.phase.lock().unwrap_or_else(PoisonError::into_inner) {
            Phase::Fresh { accepted } => Some((accepted + limits.header_timeout, NO_HEAD)),
            Phase::Idle {
                head_began: Some(began),
                ..
            } => Some((began + limits.header_timeout, NO_HEAD)),
            Phase::Idle { since, .. } => Some((
                since + limits.idle_timeout,
                "silent past the idle timeout between requests",
            )),
            Phase::Busy => None,
        }
    }

    /// Resolves, with the reason, once the connection has passed its deadline.
    async fn expired(&self, limits: ServeLimits) -> &'static str {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.deadline(limits) {
                None => changed.await,
                Some((at, why)) if at <= Instant::now() => return why,
                Some((at, _)) => tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = changed => {}
                },
            }
        }
    }
}

/// A connection's stream, telling its clock when bytes arrive.
#[derive(Debug)]
struct Watched {
    inner: TcpStream,
    clock: Arc<Clock>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.bytes_read();
        }
        read
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The router, telling the connection's clock when a request is in flight.
#[derive(Debug, Clone)]
struct Tracked {
    inner: TowerToHyperService<Router>,
    clock: Arc<Clock>,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.clock.busy();
        let answer = self.inner.call(request);
        let clock = Arc::clone(&self.clock);
        Box::pin(async move {
            let response = answer.await;
            clock.idle();
            response
        })
    }
}
