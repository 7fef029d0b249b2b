//! The server half of the sessions API (SPEC §16): this machine's task runtime served over HTTP,
//! so a remote agent started on another machine (task-remote's client, `tasks remote`) runs here
//! as an agent task of a [`Session`].
//!
//! It listens on a loopback address unless given TLS (rustls; a non-loopback address without
//! it is refused). Every request needs the bearer token ([`token`]), compared in constant time;
//! bodies are size-limited and events paged within a size limit ([`PageLimits`]). Each
//! connection is served by its own task, and the session layer's blocking calls run on the
//! blocking pool, so a slow client holds only itself; creates carrying an `Idempotency-Key` are
//! made once per key ([`IdempotencyLimits`]).
//!
//! Connections are capped ([`ServeLimits`]): [`raise_descriptor_limit`] raises the soft
//! descriptor limit to the hard one, and [`ServeLimits::within_descriptors`] keeps the cap below
//! it with room for the server's own files; beyond the cap, accept pauses (new connections wait
//! in the listen queue) while those already accepted go on being served. A connection that sends
//! no whole request head within [`ServeLimits::header_timeout`] of being accepted, or stays
//! silent between requests past [`ServeLimits::idle_timeout`], is closed.
//!
//! # Example
//!
//! Serving a session's agents on a free loopback port, with the token of a file of mode `0600`:
//!
//! ```no_run
//! # async fn example() -> Result<(), task_serve::ServeError> {
//! use task_protocol::start::RunnerFormat;
//! use task_serve::{ServeOptions, SessionsServer};
//! use task_session::paths::SessionPaths;
//! use task_session::session::Session;
//!
//! let tasks = Session::open(SessionPaths::resolve(None, None)?)?;
//! let token = task_serve::token::read("/home/me/.tasks-token".as_ref())?;
//! let options = ServeOptions::new(([127, 0, 0, 1], 0).into());
//! let agent = vec!["claude".to_owned()];
//! let server = SessionsServer::new(tasks, agent, RunnerFormat::Claude, token, options)?;
//! let listening = server.bind().await?;
//! tracing::info!(url = listening.url(), "serving");
//! listening.run().await;
//! # Ok(()) }
//! ```

mod conn;
mod error;
mod idempotency;
mod limits;
mod pages;
mod routes;
pub mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use task_protocol::start::RunnerFormat;
use task_session::session::Session;
use tokio::net::TcpListener;

pub use error::ServeError;
pub use idempotency::{IdempotencyLimits, KEY_TTL, MAX_KEYS};
pub use limits::{
    BLOCKING_THREADS, DESCRIPTOR_HEADROOM, HEADER_TIMEOUT, IDLE_TIMEOUT, LISTEN_BACKLOG,
    MAX_CONNECTIONS, ServeLimits, raise_descriptor_limit,
};
pub use pages::PageLimits;
pub use token::Token;

/// The default address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";
/// The default request body limit (bytes).
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// The certificate chain and private key (PEM files) a server presents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// How a [`SessionsServer`] listens and what it lets clients hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// TLS, required for a non-loopback address.
    pub tls: Option<TlsFiles>,
    /// The largest request body accepted (bytes).
    pub max_body: usize,
    /// The size limits of an events page.
    pub pages: PageLimits,
    /// The connection cap and timeouts.
    pub limits: ServeLimits,
    /// How long, and how many, idempotency keys are remembered.
    pub keys: IdempotencyLimits,
}

impl ServeOptions {
    /// The defaults of SPEC §16 on `listen`, without TLS.
    pub fn new(listen: SocketAddr) -> Self {
        ServeOptions {
            listen,
            tls: None,
            max_body: DEFAULT_MAX_BODY,
            pages: PageLimits::default(),
            limits: ServeLimits::default(),
            keys: IdempotencyLimits::default(),
        }
    }

    /// Whether these options may be served: a non-loopback address needs TLS.
    ///
    /// # Errors
    /// [`ServeError::NoTls`].
    pub fn check(&self) -> Result<(), ServeError> {
        if !self.listen.ip().is_loopback() && self.tls.is_none() {
            return Err(ServeError::NoTls(self.listen));
        }
        Ok(())
    }
}

/// A sessions API server over one session, not yet listening.
#[derive(Debug)]
pub struct SessionsServer {
    served: Arc<routes::Served>,
    options: ServeOptions,
}

impl SessionsServer {
    /// A server whose sessions are agent tasks of `tasks`, run with the agent CLI `command`
    /// (speaking `runner`), answering only requests that present `token`.
    ///
    /// # Errors
    /// [`ServeError::NoTls`]: a non-loopback address without TLS.
    pub fn new(
        tasks: Session,
        command: Vec<String>,
        runner: RunnerFormat,
        token: Token,
        options: ServeOptions,
    ) -> Result<Self, ServeError> {
        options.check()?;
        let served = Arc::new(routes::Served {
            tasks,
            agent: (command, runner),
            token,
            pages: PageLimits {
                max_bytes: options.pages.max_bytes.max(1),
                ..options.pages
            },
            creates: idempotency::Creates::new(options.keys),
        });
        Ok(SessionsServer { served, options })
    }

    /// Binds the listening socket (and loads the TLS certificate).
    ///
    /// # Errors
    /// The address cannot be bound; the certificate or key cannot be loaded.
    pub async fn bind(self) -> Result<Listening, ServeError> {
        let address = self.options.listen;
        let listen_error = |e| task_session::Error::io("listen on", address.to_string(), e);
        let listener = listen(address).map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let tls = match &self.options.tls {
            Some(TlsFiles { cert, key }) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config = RustlsConfig::from_pem_file(cert, key)
                    .await
                    .map_err(|e| task_session::Error::io("load", cert, e))?;
                Some(
                    RustlsAcceptor::new(config)
                        .handshake_timeout(self.options.limits.header_timeout),
                )
            }
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let app = routes::router(Arc::clone(&self.served), self.options.max_body);
        Ok(Listening {
            url: format!("{scheme}://{bound}"),
            listener,
            tls,
            app,
            limits: self.options.limits,
            served: self.served,
        })
    }
}

/// A bound [`SessionsServer`]: [`Listening::run`] serves it.
#[derive(Debug)]
pub struct Listening {
    url: String,
    listener: TcpListener,
    tls: Option<RustlsAcceptor>,
    app: Router,
    limits: ServeLimits,
    served: Arc<routes::Served>,
}

impl Listening {
    /// Where clients reach the server: `http://ADDR` or `https://ADDR`, the port as bound.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until the process ends, keeping the session's supervisor alive meanwhile.
    pub async fn run(self) {
        keep_supervisor_alive(self.served);
        conn::serve(self.listener, self.tls, self.app, self.limits).await;
    }
}

/// A listener on `address` (`SO_REUSEADDR`, as std's) whose queue holds [`LISTEN_BACKLOG`]
/// connections waiting for a slot.
fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Pings the session's supervisor often enough that it never leaves for idleness while this
/// server runs (a request would otherwise race its exit), starting it if it is not running.
fn keep_supervisor_alive(served: Arc<routes::Served>) {
    let period = (served.tasks.config().idle_exit / 3).max(std::time::Duration::from_millis(50));
    let spawned = std::thread::Builder::new()
        .name("supervisor-keepalive".into())
        .spawn(move || {
            loop {
                if let Err(error) = served.tasks.ping() {
                    tracing::warn!(%error, "the session's supervisor does not answer");
                }
                std::thread::sleep(period);
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "no keep-alive for the supervisor");
    }
}
