//! `tasks serve`: this machine's task runtime over the sessions API (SPEC §16), so a remote
//! agent started on another machine (`tasks remote`) runs here as an agent task.
//!
//! It listens on 127.0.0.1 by default; any other address needs TLS (`--tls-cert`, `--tls-key`,
//! rustls). Every request needs the bearer token of `--token-file` (a file of mode `0600`,
//! which `--init-token FILE` creates), compared in constant time; bodies are size-limited and
//! events paged within a size limit. Each connection is served by its own task, and the session
//! layer's blocking calls run on the blocking pool, so a slow client holds only itself.
//!
//! Connections are capped ([`ServeLimits`], `--max-connections`): at start the soft descriptor
//! limit is raised to the hard one and the cap kept below it with room for the server's own
//! files; beyond the cap, accept pauses (new connections wait in the listen queue) while those
//! already accepted go on being served. A connection that sends no whole request head within
//! `--header-timeout` of being accepted, or stays silent between requests past
//! `--idle-timeout`, is closed.

mod conn;
mod idempotency;
mod limits;
mod pages;
mod routes;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::{CliError, Result, exit};
use crate::settings::Settings;
use task_session::paths::SessionPaths;

pub use idempotency::{IdempotencyLimits, KEY_TTL, MAX_KEYS};
pub use limits::{
    BLOCKING_THREADS, DESCRIPTOR_HEADROOM, HEADER_TIMEOUT, IDLE_TIMEOUT, LISTEN_BACKLOG,
    MAX_CONNECTIONS, ServeLimits,
};
pub use pages::PageLimits;

/// The default address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";
/// The default request body limit (bytes).
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// Serve this machine's agents over the sessions API (for `tasks remote` elsewhere).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The file holding the bearer token clients must present (mode 0600).
    #[arg(long, value_name = "FILE", required_unless_present = "init_token")]
    pub token_file: Option<PathBuf>,
    /// Write a new random token to FILE (mode 0600; it must not exist), print it and exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["token_file", "tls_cert"])]
    pub init_token: Option<PathBuf>,
    /// The TLS certificate chain (PEM); required for a non-loopback address.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The largest request body accepted (bytes).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    pub max_body: usize,
    /// The most transcript bytes one events page holds.
    #[arg(long, default_value_t = PageLimits::default().max_bytes, value_name = "BYTES")]
    pub page_bytes: usize,
    /// The most connections served at once [default: 4096, lowered to leave 256 descriptors
    /// free below the descriptor limit, whose soft value is first raised to the hard one].
    /// Beyond it new connections wait in the listen queue until one closes; those already
    /// open go on being served.
    #[arg(long, env = "TASKS_SERVE_MAX_CONNECTIONS", value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: Option<usize>,
    /// A connection that has not sent a whole request head this long after it was accepted
    /// (TLS handshake included), or after the first byte of a later request, is closed (a
    /// client that connects and says nothing, or trickles its headers, holds no slot for
    /// long).
    #[arg(long, env = "TASKS_SERVE_HEADER_TIMEOUT", default_value = "10s", value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// A kept-alive connection with no request in flight that sends nothing this long is
    /// closed.
    #[arg(long, env = "TASKS_SERVE_IDLE_TIMEOUT", default_value = "30s", value_name = "DURATION", value_parser = task_session::config::parse_duration)]
    pub idle_timeout: std::time::Duration,
}

impl ServeArgs {
    /// The connection limits these options ask for, the cap kept below `descriptors`.
    pub fn limits(&self, descriptors: u64) -> ServeLimits {
        ServeLimits {
            max_connections: self.max_connections.unwrap_or(MAX_CONNECTIONS),
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
        }
        .within_descriptors(descriptors)
    }
}

/// Runs `tasks serve` until it is killed.
pub fn run(paths: SessionPaths, args: ServeArgs) -> Result<u8> {
    if let Some(path) = &args.init_token {
        let token = token::init(path)?;
        crate::render::out(&format!("{token}\n"))?;
        return Ok(exit::OK);
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        _ => None,
    };
    if !args.listen.ip().is_loopback() && tls.is_none() {
        return Err(CliError::invalid(format!(
            "refusing to serve {} without TLS: a non-loopback address needs --tls-cert and --tls-key",
            args.listen
        )));
    }
    let token_file = args
        .token_file
        .as_deref()
        .ok_or_else(|| CliError::invalid("--token-file is required".into()))?;
    let token = token::read(token_file)?;
    let tasks = crate::daemon::session(paths)?;
    let agent = crate::mcp::configured_runner(&Settings::read(&tasks.config().executors)?)
        .map_err(CliError::invalid)?;
    let served = Arc::new(routes::Served {
        tasks,
        agent,
        token,
        pages: PageLimits {
            max_bytes: args.page_bytes.max(1),
            ..PageLimits::default()
        },
        creates: idempotency::Creates::new(IdempotencyLimits::default()),
    });
    let descriptors = limits::raise_descriptor_limit();
    let limits = args.limits(descriptors);
    if args
        .max_connections
        .is_some_and(|asked| asked > limits.max_connections)
    {
        tracing::warn!(
            max_connections = limits.max_connections,
            descriptors,
            "--max-connections lowered to leave descriptors for the server's own files"
        );
    }
    tracing::info!(?limits, descriptors, "connection limits");
    let app = routes::router(Arc::clone(&served), args.max_body);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .map_err(|e| CliError::io("start", "the runtime", e))?;
    runtime.block_on(async move {
        let listen_error = |e| CliError::io("listen on", args.listen.to_string(), e);
        let listener = listen(args.listen).map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let tls = match tls {
            Some((cert, key)) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert, &key)
                    .await
                    .map_err(|e| CliError::io("load", &cert, e))?;
                let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config)
                    .handshake_timeout(limits.header_timeout);
                Some(acceptor)
            }
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        crate::render::out(&format!("listening on {scheme}://{bound}\n"))?;
        keep_supervisor_alive(served);
        conn::serve(listener, tls, app, limits).await;
        Ok::<_, CliError>(())
    })?;
    Ok(exit::OK)
}

/// A listener on `address` (`SO_REUSEADDR`, as std's) whose queue holds [`LISTEN_BACKLOG`]
/// connections waiting for a slot.
fn listen(address: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
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
