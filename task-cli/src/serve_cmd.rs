//! `tasks serve`: this machine's task runtime over the sessions API (SPEC §16), so a remote
//! agent started on another machine (`tasks remote`) runs here as an agent task. The server is
//! task-serve's [`SessionsServer`]; this module reads its options from the command line, the
//! agent CLI from the session's settings, and prints where it listens.

use task_serve::{
    BLOCKING_THREADS, MAX_CONNECTIONS, ServeError, ServeLimits, ServeOptions, SessionsServer,
    TlsFiles,
};

use crate::cli::ServeArgs;
use crate::error::{CliError, Result, exit};
use crate::settings::Settings;
use task_session::paths::SessionPaths;

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

/// The server's error as a command's: the session layer's keeps its exit code.
fn serve_error(error: ServeError) -> CliError {
    match error {
        ServeError::Session(error) => error.into(),
        other => CliError::invalid(other.to_string()),
    }
}

/// Runs `tasks serve` until it is killed.
pub fn run(paths: SessionPaths, args: ServeArgs) -> Result<u8> {
    if let Some(path) = &args.init_token {
        let token = task_serve::token::init(path).map_err(serve_error)?;
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
    options.check().map_err(serve_error)?;
    let token_file = args
        .token_file
        .as_deref()
        .ok_or_else(|| CliError::invalid("--token-file is required".into()))?;
    let token = task_serve::token::read(token_file).map_err(serve_error)?;
    let tasks = crate::daemon::session(paths)?;
    let (command, runner) = Settings::read(&tasks.config().executors)?
        .agent_runner_command()
        .map_err(CliError::invalid)?;
    let server =
        SessionsServer::new(tasks, command, runner, token, options).map_err(serve_error)?;
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
        let listening = server.bind().await.map_err(serve_error)?;
        crate::render::out(&format!("listening on {}\n", listening.url()))?;
        listening.run().await;
        Ok::<_, CliError>(())
    })?;
    Ok(exit::OK)
}
