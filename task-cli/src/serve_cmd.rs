//! `tasks serve`: this machine's task runtime over the sessions API (SPEC §16), so a remote
//! agent started on another machine (`tasks remote`) runs here as an agent task. The server is
//! task-serve's [`SessionsServer`]; this module reads its options from the command line, the
//! agent CLI from the session's settings, and prints where it listens.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use task_serve::{
    BLOCKING_THREADS, DEFAULT_LISTEN, DEFAULT_MAX_BODY, MAX_CONNECTIONS, PageLimits, ServeError,
    ServeLimits, ServeOptions, SessionsServer, TlsFiles,
};

use crate::error::{CliError, Result, exit};
use crate::settings::Settings;
use task_session::paths::SessionPaths;

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

impl From<ServeError> for CliError {
    fn from(error: ServeError) -> Self {
        match error {
            ServeError::Session(error) => error.into(),
            other => CliError::invalid(other.to_string()),
        }
    }
}

/// Runs `tasks serve` until it is killed.
pub fn run(paths: SessionPaths, args: ServeArgs) -> Result<u8> {
    if let Some(path) = &args.init_token {
        let token = task_serve::token::init(path)?;
        crate::render::out(&format!("{token}\n"))?;
        return Ok(exit::OK);
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    let descriptors = task_serve::raise_descriptor_limit();
    let limits = args.limits(descriptors);
    let mut options = ServeOptions::new(args.listen);
    options.tls = tls;
    options.max_body = args.max_body;
    options.pages.max_bytes = args.page_bytes;
    options.limits = limits;
    // A non-loopback address without TLS is refused before the token file is looked at.
    options.check()?;
    let token_file = args
        .token_file
        .as_deref()
        .ok_or_else(|| CliError::invalid("--token-file is required".into()))?;
    let token = task_serve::token::read(token_file)?;
    let tasks = crate::daemon::session(paths)?;
    let (command, runner) = Settings::read(&tasks.config().executors)?
        .agent_runner_command()
        .map_err(CliError::invalid)?;
    let server = SessionsServer::new(tasks, command, runner, token, options)?;
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .map_err(|e| CliError::io("start", "the runtime", e))?;
    runtime.block_on(async move {
        let listening = server.bind().await?;
        crate::render::out(&format!("listening on {}\n", listening.url()))?;
        listening.run().await;
        Ok::<_, CliError>(())
    })?;
    Ok(exit::OK)
}
