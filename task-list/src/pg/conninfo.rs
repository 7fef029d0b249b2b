//! A PostgreSQL connection string as libpq takes it: a `postgres://` / `postgresql://` URL or
//! a `key=value` string, completed from the libpq environment (`PGHOST`, `PGPORT`, `PGUSER`,
//! `PGDATABASE`, `PGPASSWORD`, `PGSSLMODE`, `PGSSLROOTCERT`, `PGPASSFILE`) and `~/.pgpass`
//! where it leaves a setting out.
//!
//! The client crate parses the string (`postgres::Config`'s `FromStr`: both forms, Unix-socket
//! hosts, percent-decoding, quoting). It refuses two things libpq accepts, so they are taken out
//! before it sees the string: `sslmode`, whose `verify-ca` / `verify-full` (and `allow`) it
//! does not know, and `sslrootcert`, which it does not know at all. Finding them needs the
//! parameters' boundaries, so [`Lexed`] splits the string exactly as the crate's parser does
//! (`tokio-postgres/src/config.rs`: its `Parser` and `UrlParser`), and interprets nothing but
//! those two parameters (and the password, hidden in messages); everything else is the crate's
//! to read. A test checks that the crate parses what is left exactly as it parses the original.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

use postgres::config::Host;

use crate::error::{Error, PgSettingsError, Result};
use crate::pg::pgpass::{self, DEFAULT_SOCKET_DIRS};

/// The libpq environment a PostgreSQL connection string is completed from, where it leaves a
/// setting out (empty variables count as unset). [`PgEnv::from_env`] reads the process's;
/// build one by hand to connect as if the environment said something else
/// ([`crate::TaskList::connect_with_env`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PgEnv {
    /// `$PGHOST`: host names, IP addresses or socket directories, comma-separated.
    pub host: Option<String>,
    /// `$PGPORT`: one port, or one per host, comma-separated.
    pub port: Option<String>,
    /// `$PGUSER`.
    pub user: Option<String>,
    /// `$PGDATABASE`.
    pub database: Option<String>,
    /// `$PGPASSWORD`.
    pub password: Option<String>,
    /// `$PGSSLMODE`: `disable`, `allow`, `prefer`, `require`, `verify-ca` or `verify-full`.
    pub sslmode: Option<String>,
    /// `$PGSSLROOTCERT`: the CA certificates (PEM) to verify the server with, or `system`.
    pub sslrootcert: Option<String>,
    /// `$PGPASSFILE`: the password file (default `~/.pgpass`).
    pub passfile: Option<String>,
    /// `$HOME`: where `~/.pgpass` and `~/.postgresql/root.crt` are.
    pub home: Option<String>,
    /// The name of the user this process runs as: libpq's default user name (not a variable).
    pub os_user: Option<String>,
}

impl std::fmt::Debug for PgEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEnv")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("database", &self.database)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("passfile", &self.passfile)
            .field("home", &self.home)
            .field("os_user", &self.os_user)
            .finish()
    }
}

impl PgEnv {
    /// Reads the variables from the process environment, and the user this process runs as.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            host: var("PGHOST"),
            port: var("PGPORT"),
            user: var("PGUSER"),
            database: var("PGDATABASE"),
            password: var("PGPASSWORD"),
            sslmode: var("PGSSLMODE"),
            sslrootcert: var("PGSSLROOTCERT"),
            passfile: var("PGPASSFILE"),
            home: var("HOME"),
            os_user: whoami::username().ok().filter(|u| !u.is_empty()),
        }
    }
}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// No TLS.
    Disable,
    /// Plain first; TLS if the server refuses the plain connection.
    Allow,
    /// TLS if the server offers it (or its handshake fails), plain otherwise.
    Prefer,
    /// TLS; the certificate is not verified unless root certificates are given.
    Require,
    /// TLS; the certificate chain is verified, not the host name.
    VerifyCa,
    /// TLS; the chain and the host name are verified.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str, from: &'static str) -> Result<Self, PgSettingsError> {
        Ok(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => {
                return Err(PgSettingsError::InvalidSslMode {
                    value: value.to_string(),
                    from,
                });
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// Whether the server's certificate must be verified (and root certificates are needed).
    pub(crate) fn verifies(self) -> bool {
        matches!(self, Self::VerifyCa | Self::VerifyFull)
    }
}

/// What the server's certificate is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Roots {
    /// Nothing: any certificate is accepted (`require` and `prefer` without root certificates,
    /// as libpq does).
    None,
    /// The CA certificates in this PEM file.
    File(PathBuf),
    /// Mozilla's root certificates (`sslrootcert=system`, or a `verify-*` mode given no file).
    System,
}

/// A connection string resolved: what the client crate connects with, and the TLS policy
/// around it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The crate's settings; its `ssl_mode` is that of the first attempt.
    pub config: postgres::Config,
    /// The `sslmode` in force (`Disable` when every host is a socket directory).
    pub ssl: SslMode,
    /// What the certificate is verified against.
    pub roots: Roots,
    /// The string as given, its password hidden: for messages.
    pub shown: String,
}

/// Whether the string is a URL or a `key=value` string (or names another store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Url,
    KeyValue,
}

const EXPECTED: &str =
    "expected a postgres:// or postgresql:// URL or a key=value connection string";

fn form(conninfo: &str) -> Result<Form> {
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        return Ok(Form::Url);
    }
    let scheme_at = conninfo.find("://");
    let equals_at = conninfo.find('=');
    match (scheme_at, equals_at) {
        // `password=https://…` is a key=value string; `mysql://h/db?x=1` names another store.
        (Some(scheme), Some(equals)) if equals < scheme => Ok(Form::KeyValue),
        (None, Some(_)) => Ok(Form::KeyValue),
        (Some(scheme), _) => Err(Error::InvalidStore {
            store: conninfo[..scheme].to_string(),
            message: EXPECTED.into(),
        }),
        (None, None) => Err(Error::InvalidStore {
            store: conninfo.to_string(),
            message: EXPECTED.into(),
        }),
    }
}

/// One parameter of the string, as the client crate's parser delimits it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Param {
    /// Its key, decoded.
    key: String,
    /// Its value, decoded (unquoted and unescaped, or percent-decoded).
    value: String,
    /// The whole parameter in the string (`key=value`).
    span: Range<usize>,
    /// Its value in the string (with quotes).
    value_span: Range<usize>,
}

/// A connection string split where the crate's parser splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lexed {
    form: Form,
    params: Vec<Param>,
    /// URL only: the password in the user info.
    url_password: Option<Range<usize>>,
    /// URL only: the hosts of the authority (`host[:port]`, comma-separated).
    url_hosts: Range<usize>,
}

/// Where the crate's parser found the string malformed (it gives the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Malformed;

impl Lexed {
    fn new(s: &str, form: Form) -> Result<Self, Malformed> {
        match form {
            Form::KeyValue => Self::key_value(s),
            Form::Url => Self::url(s),
        }
    }

    /// As tokio-postgres's `Parser`: `key = value` pairs separated by whitespace; a value is
    /// quoted (`'…'`) or runs to the next whitespace; `\` takes the next character literally.
    /// A key cannot be empty: the crate stops at one (so does this).
    fn key_value(s: &str) -> Result<Self, Malformed> {
        let mut it = s.char_indices().peekable();
        let mut params = Vec::new();
        let skip_ws = |it: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
            while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        };
        loop {
            skip_ws(&mut it);
            let key_start = it.peek().map_or(s.len(), |&(i, _)| i);
            while it
                .next_if(|&(_, c)| !c.is_whitespace() && c != '=')
                .is_some()
            {}
            let key_end = it.peek().map_or(s.len(), |&(i, _)| i);
            if key_end == key_start {
                break;
            }
            skip_ws(&mut it);
            if it.next_if(|&(_, c)| c == '=').is_none() {
                return Err(Malformed);
            }
            skip_ws(&mut it);
            let value_start = it.peek().map_or(s.len(), |&(i, _)| i);
            let mut value = String::new();
            if it.next_if(|&(_, c)| c == '\'').is_some() {
                loop {
                    match it.next() {
                        None => return Err(Malformed),
                        Some((_, '\'')) => break,
                        Some((_, '\\')) => value.extend(it.next().map(|(_, c)| c)),
                        Some((_, c)) => value.push(c),
                    }
                }
            } else {
                while let Some((_, c)) = it.next_if(|&(_, c)| !c.is_whitespace()) {
                    if c == '\\' {
                        value.extend(it.next().map(|(_, c)| c));
                    } else {
                        value.push(c);
                    }
                }
                if value.is_empty() {
                    return Err(Malformed);
                }
            }
            let value_end = it.peek().map_or(s.len(), |&(i, _)| i);
            params.push(Param {
                key: s[key_start..key_end].to_string(),
                value,
                span: key_start..value_end,
                value_span: value_start..value_end,
            });
        }
        Ok(Self {
            form: Form::KeyValue,
            params,
            url_password: None,
            url_hosts: 0..0,
        })
    }

    /// As tokio-postgres's `UrlParser`: after the scheme, the user info up to the first `@`
    /// (if any), the hosts up to `/` or `?`, the database up to `?`, then `key=value`
    /// parameters separated by `&`, percent-decoded.
    fn url(s: &str) -> Result<Self, Malformed> {
        let prefix = ["postgres://", "postgresql://"]
            .iter()
            .find(|p| s.starts_with(*p))
            .map_or(0, |p| p.len());
        let mut at = prefix;
        let mut url_password = None;
        if let Some(end) = s[at..].find('@') {
            let creds = at..at + end;
            if let Some(colon) = s[creds.clone()].find(':') {
                url_password = Some(creds.start + colon + 1..creds.end);
            }
            at = creds.end + 1;
        }
        let hosts_end = s[at..].find(['/', '?']).map_or(s.len(), |i| at + i);
        let url_hosts = at..hosts_end;
        at = hosts_end;
        if s[at..].starts_with('/') {
            at = s[at..].find('?').map_or(s.len(), |i| at + i);
        }
        let mut params = Vec::new();
        if s[at..].starts_with('?') {
            at += 1;
            while at < s.len() {
                let Some(equals) = s[at..].find('=').map(|i| at + i) else {
                    return Err(Malformed);
                };
                let value_end = s[equals + 1..]
                    .find('&')
                    .map_or(s.len(), |i| equals + 1 + i);
                let key = decode(&s[at..equals])?;
                // The crate reads a socket directory's bytes as they are; a value this module
                // interprets is text.
                let value = percent_encoding::percent_decode(&s.as_bytes()[equals + 1..value_end])
                    .decode_utf8_lossy()
                    .into_owned();
                params.push(Param {
                    key,
                    value,
                    span: at..value_end,
                    value_span: equals + 1..value_end,
                });
                at = (value_end + 1).min(s.len());
            }
        }
        Ok(Self {
            form: Form::Url,
            params,
            url_password,
            url_hosts,
        })
    }

    /// The last value of `key` (libpq: a later setting overrides an earlier one).
    fn last(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// `s` with the passwords replaced by `***`.
    fn redact(&self, s: &str) -> String {
        let mut hidden: Vec<Range<usize>> = self
            .params
            .iter()
            .filter(|p| p.key == "password")
            .map(|p| p.value_span.clone())
            .chain(self.url_password.clone())
            .collect();
        hidden.sort_by_key(|r| r.start);
        let mut out = String::with_capacity(s.len());
        let mut at = 0;
        for range in hidden {
            if range.start < at {
                continue;
            }
            out.push_str(&s[at..range.start]);
            out.push_str("***");
            at = range.end;
        }
        out.push_str(&s[at..]);
        out
    }

    /// `s` without the parameters the crate refuses (`sslmode`, `sslrootcert`), and, in a URL
    /// whose hosts give no port, with the ports `env_ports` says (libpq's `PGPORT` applies to
    /// them; the crate would read "no port" as 5432).
    fn for_crate(&self, s: &str, env_ports: Option<&[u16]>) -> Result<String, PgSettingsError> {
        let lifted = |p: &&Param| p.key == "sslmode" || p.key == "sslrootcert";
        match self.form {
            Form::KeyValue => {
                let mut out = String::with_capacity(s.len());
                let mut at = 0;
                for param in self.params.iter().filter(lifted) {
                    out.push_str(&s[at..param.span.start]);
                    out.push(' ');
                    at = param.span.end;
                }
                out.push_str(&s[at..]);
                Ok(out)
            }
            Form::Url => {
                let hosts = &s[self.url_hosts.clone()];
                let mut out = s[..self.url_hosts.start].to_string();
                match env_ports {
                    Some(ports) if !hosts.is_empty() => out.push_str(&with_ports(hosts, ports)?),
                    _ => out.push_str(hosts),
                }
                let Some(first) = self.params.first() else {
                    out.push_str(&s[self.url_hosts.end..]);
                    return Ok(out);
                };
                // Everything up to the parameters (the database and the `?`), then the kept
                // parameters.
                out.push_str(&s[self.url_hosts.end..first.span.start]);
                let kept: Vec<&str> = self
                    .params
                    .iter()
                    .filter(|p| !lifted(p))
                    .map(|p| &s[p.span.clone()])
                    .collect();
                out.push_str(&kept.join("&"));
                Ok(out)
            }
        }
    }
}

fn decode(s: &str) -> Result<String, Malformed> {
    percent_encoding::percent_decode(s.as_bytes())
        .decode_utf8()
        .map(Cow::into_owned)
        .map_err(|_| Malformed)
}

/// `hosts` (a URL's `h1[:p1],h2[:p2]…`) with the ports in `ports` added to the hosts that
/// give none: one port for every host, or one per host.
fn with_ports(hosts: &str, ports: &[u16]) -> Result<String, PgSettingsError> {
    let chunks: Vec<&str> = hosts.split(',').collect();
    if ports.len() > 1 && ports.len() != chunks.len() {
        return Err(PgSettingsError::PortCount {
            ports: ports.len(),
            hosts: chunks.len(),
        });
    }
    let mut out = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        // As the crate reads a chunk: `[v6]:port` or `host:port`.
        let port = if chunk.starts_with('[') {
            chunk
                .find(']')
                .and_then(|end| chunk[end + 1..].strip_prefix(':'))
        } else {
            chunk.split_once(':').map(|(_, port)| port)
        };
        let env_port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        out.push(match port {
            Some("") => format!("{chunk}{env_port}"),
            Some(_) => (*chunk).to_string(),
            None => format!("{chunk}:{env_port}"),
        });
    }
    Ok(out.join(","))
}

/// The ports of `$PGPORT`.
fn env_ports(value: &str) -> Result<Vec<u16>, PgSettingsError> {
    value
        .split(',')
        .map(|port| {
            port.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| PgSettingsError::InvalidPort {
                    value: value.to_string(),
                })
        })
        .collect()
}

/// Resolves `conninfo` (a URL or a `key=value` string) in the environment `env`, as libpq
/// would: what the string leaves out comes from the environment, then from the defaults.
pub(crate) fn resolve(conninfo: &str, env: &PgEnv) -> Result<Target> {
    let form = form(conninfo)?;
    let crate_error = |shown: String| -> Error {
        let message = match conninfo.parse::<postgres::Config>() {
            Err(e) => crate::error::chain(&e),
            Ok(_) => "malformed connection string".to_string(),
        };
        Error::InvalidStore {
            store: shown,
            message,
        }
    };
    let lexed = match Lexed::new(conninfo, form) {
        Ok(lexed) => lexed,
        // The crate says what is wrong; without parameter boundaries, hide what may hold a
        // password.
        Err(Malformed) => return Err(crate_error(shown_without_boundaries(conninfo, form))),
    };
    let shown = lexed.redact(conninfo);
    let settings = |source: PgSettingsError| Error::PgSettings {
        store: shown.clone(),
        source,
    };
    let ports = env
        .port
        .as_deref()
        .map(env_ports)
        .transpose()
        .map_err(settings)?;
    let for_crate = lexed
        .for_crate(conninfo, ports.as_deref())
        .map_err(settings)?;
    let mut config: postgres::Config =
        for_crate
            .parse()
            .map_err(|e: postgres::Error| Error::InvalidStore {
                store: shown.clone(),
                message: crate::error::chain(&e),
            })?;

    // What the string leaves out, from the environment, then libpq's defaults.
    if config.get_hosts().is_empty() {
        match env.host.as_deref() {
            Some(hosts) => {
                for host in hosts.split(',') {
                    add_host(&mut config, host);
                }
            }
            None if config.get_hostaddrs().is_empty() => {
                for dir in DEFAULT_SOCKET_DIRS {
                    config.host_path(dir);
                }
            }
            None => {}
        }
    }
    if config.get_ports().is_empty() {
        for port in ports.iter().flatten() {
            config.port(*port);
        }
    }
    if config.get_user().is_none()
        && let Some(user) = env.user.as_deref().or(env.os_user.as_deref())
    {
        config.user(user);
    }
    if config.get_dbname().is_none()
        && let Some(database) = env.database.as_deref()
    {
        config.dbname(database);
    }
    if config.get_password().is_none() {
        if let Some(password) = env.password.as_deref() {
            config.password(password);
        } else if let Some(password) = password_from_file(&config, env) {
            config.password(password);
        }
    }

    // TLS.
    let given_mode = match lexed.last("sslmode") {
        Some(value) => Some(SslMode::parse(value, "the connection string").map_err(settings)?),
        None => env
            .sslmode
            .as_deref()
            .map(|value| SslMode::parse(value, "PGSSLMODE"))
            .transpose()
            .map_err(settings)?,
    };
    let rootcert = lexed
        .last("sslrootcert")
        .map(str::to_string)
        .or_else(|| env.sslrootcert.clone());
    let (ssl, roots) = tls_policy(given_mode, rootcert, env).map_err(settings)?;
    // libpq never speaks TLS on a Unix socket: its `sslmode` is ignored there.
    let all_sockets = !config.get_hosts().is_empty()
        && config.get_hostaddrs().is_empty()
        && config
            .get_hosts()
            .iter()
            .all(|h| !matches!(h, Host::Tcp(_)));
    let ssl = if all_sockets { SslMode::Disable } else { ssl };
    config.ssl_mode(match ssl {
        SslMode::Disable | SslMode::Allow => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
            postgres::config::SslMode::Require
        }
    });
    Ok(Target {
        config,
        ssl,
        roots,
        shown,
    })
}

/// A string whose parameters cannot be delimited, for messages: a password could be anywhere
/// in its parameters, so they are left out (a `key=value` string shows its first key, a URL
/// all but its parameters, its user info's password hidden).
fn shown_without_boundaries(conninfo: &str, form: Form) -> String {
    match form {
        Form::KeyValue => {
            let cut = conninfo.find('=').unwrap_or(conninfo.len());
            format!("{}…", &conninfo[..cut])
        }
        Form::Url => {
            let (creds, rest) = match conninfo.split_once('@') {
                Some((creds, rest)) => match creds.split_once("://") {
                    Some((scheme, info)) => {
                        let user = info.split_once(':').map_or(info, |(user, _)| user);
                        let hidden = if user.len() < info.len() { ":***" } else { "" };
                        (format!("{scheme}://{user}{hidden}@"), rest)
                    }
                    None => (String::new(), conninfo),
                },
                None => (String::new(), conninfo),
            };
            match rest.split_once('?') {
                Some((head, _)) => format!("{creds}{head}?…"),
                None => format!("{creds}{rest}"),
            }
        }
    }
}

fn add_host(config: &mut postgres::Config, host: &str) {
    if host.starts_with('/') {
        config.host_path(host);
    } else {
        config.host(host);
    }
}

/// The `sslmode` in force and the roots to verify with, as libpq decides them: an explicit
/// `sslrootcert` file (or `~/.postgresql/root.crt` when it exists) makes every TLS mode
/// verify the chain (`require` then behaves as `verify-ca`); `sslrootcert=system` means
/// Mozilla's roots and `verify-full` (a weaker explicit mode is refused). With no file, the
/// `verify-*` modes use Mozilla's roots (where libpq would refuse to connect).
fn tls_policy(
    given: Option<SslMode>,
    rootcert: Option<String>,
    env: &PgEnv,
) -> Result<(SslMode, Roots), PgSettingsError> {
    if rootcert.as_deref() == Some("system") {
        return match given {
            None | Some(SslMode::VerifyFull) => Ok((SslMode::VerifyFull, Roots::System)),
            Some(mode) => Err(PgSettingsError::WeakSslModeWithSystemRoots { mode: mode.name() }),
        };
    }
    let mode = given.unwrap_or(SslMode::Prefer);
    let file = match rootcert {
        Some(path) => Some(PathBuf::from(path)),
        None => env
            .home
            .as_deref()
            .map(|home| Path::new(home).join(".postgresql/root.crt"))
            .filter(|path| path.exists()),
    };
    let roots = match file {
        // libpq loads the file only if it exists; a `verify-*` mode without it is an error.
        Some(path) if path.exists() => Roots::File(path),
        Some(path) if mode.verifies() => {
            return Err(PgSettingsError::RootCertMissing { path });
        }
        _ if mode.verifies() => Roots::System,
        _ => Roots::None,
    };
    Ok((mode, roots))
}

/// The password `~/.pgpass` (or `$PGPASSFILE`) holds for the first host that has one.
fn password_from_file(config: &postgres::Config, env: &PgEnv) -> Option<String> {
    let file = match (&env.passfile, &env.home) {
        (Some(file), _) => PathBuf::from(file),
        (None, Some(home)) => Path::new(home).join(".pgpass"),
        (None, None) => return None,
    };
    let user = config.get_user()?;
    let database = config.get_dbname().unwrap_or(user);
    let ports = config.get_ports();
    let hosts: Vec<String> = match (config.get_hosts(), config.get_hostaddrs()) {
        ([], []) => vec![pgpass::DEFAULT_HOST.to_string()],
        ([], addrs) => addrs.iter().map(ToString::to_string).collect(),
        (hosts, _) => hosts.iter().map(pgpass::host_name).collect(),
    };
    hosts.iter().enumerate().find_map(|(i, host)| {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        pgpass::lookup(&file, host, &port.to_string(), database, user)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn kv(s: &str) -> Lexed {
        Lexed::new(s, Form::KeyValue).unwrap()
    }

    fn url(s: &str) -> Lexed {
        Lexed::new(s, Form::Url).unwrap()
    }

    fn pairs(lexed: &Lexed) -> Vec<(&str, &str)> {
        lexed
            .params
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str()))
            .collect()
    }

    /// Strings the crate parses; for each, what is handed to it must parse the same.
    const CORPUS: &[&str] = &[
        "host=/run/postgresql port=5432 user=postgres dbname=postgres",
        "host = h1,h2   port=1,2 user='a b' password='it\\'s' dbname=d\\ b",
        "host=h options='-c search_path=x' application_name=a\\=b",
        "user=u password=https://x.example/?q=1 host=h",
        "host=h password='p@ss w:rd' connect_timeout=3 keepalives=0",
        "host=h user=u'x' dbname=d",
        "postgresql:///db?host=/run/postgresql",
        "postgresql:///db?host=%2Frun%2Fpostgresql&port=5433&user=u",
        "postgres://u:p%40ss@h1:1,h2:2/db?application_name=a%26b&connect_timeout=3",
        "postgres://u@[::1]:5433/db",
        "postgres://u:pw@h/db?password=other",
        "postgres://h",
        "postgres://h/",
        "postgres://h/db?",
        "postgres://h/db?application%5Fname=x&",
        "postgres://user@/db?host=/tmp&options=-csearch_path%3Ds",
    ];

    #[test]
    fn the_crate_parses_what_it_is_handed_as_it_parses_the_original() {
        for s in CORPUS {
            let form = form(s).unwrap();
            let lexed = Lexed::new(s, form).unwrap();
            let original: tokio_postgres::Config = s.parse().unwrap();
            let handed: tokio_postgres::Config = lexed.for_crate(s, None).unwrap().parse().unwrap();
            assert_eq!(original, handed, "{s}");
        }
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_and_the_rest_is_untouched() {
        let cases = [
            (
                "host=h sslmode=verify-full user=u sslrootcert='/a b/ca.pem' dbname=d",
                "host=h user=u dbname=d",
                Some("verify-full"),
                Some("/a b/ca.pem"),
            ),
            (
                "sslmode = verify-ca host=h password='sslmode=disable'",
                "host=h password='sslmode=disable'",
                Some("verify-ca"),
                None,
            ),
            (
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&user=v",
                "postgres://u@h/db?user=v",
                Some("verify-full"),
                Some("/etc/ca.pem"),
            ),
            (
                "postgresql:///db?sslmode=allow",
                "postgresql:///db?",
                Some("allow"),
                None,
            ),
            (
                "postgres://h/db?sslmode=disable&sslmode=require",
                "postgres://h/db?",
                Some("require"),
                None,
            ),
        ];
        for (s, remainder, mode, root) in cases {
            let lexed = Lexed::new(s, form(s).unwrap()).unwrap();
            assert_eq!(lexed.last("sslmode"), mode, "{s}");
            assert_eq!(lexed.last("sslrootcert"), root, "{s}");
            let handed: tokio_postgres::Config = lexed.for_crate(s, None).unwrap().parse().unwrap();
            let expected: tokio_postgres::Config = remainder.parse().unwrap();
            assert_eq!(handed, expected, "{s}");
        }
    }

    #[test]
    fn key_value_strings_split_as_the_crate_splits_them() {
        assert_eq!(
            pairs(&kv(" a = 1  b='x \\' y' c=d\\ e f=''")),
            [("a", "1"), ("b", "x ' y"), ("c", "d e"), ("f", "")]
        );
        // The crate stops at an empty key.
        assert_eq!(pairs(&kv("a=1 =2 b=3")), [("a", "1")]);
        for bad in ["a", "a=", "a='x", "a=1 b"] {
            assert!(Lexed::new(bad, Form::KeyValue).is_err(), "{bad}");
            assert!(bad.parse::<tokio_postgres::Config>().is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_split_as_the_crate_splits_them() {
        let lexed = url("postgres://u:p@ss@h:1/db?a=1&b=%26&c=x=y");
        assert_eq!(pairs(&lexed), [("a", "1"), ("b", "&"), ("c", "x=y")]);
        assert_eq!(lexed.url_password, Some(13..14));
        let lexed = url("postgresql:///db?host=/run/postgresql");
        assert_eq!(lexed.url_hosts, 13..13);
        assert_eq!(pairs(&lexed), [("host", "/run/postgresql")]);
        assert!(Lexed::new("postgres://h/db?novalue", Form::Url).is_err());
        assert!(
            "postgres://h/db?novalue"
                .parse::<tokio_postgres::Config>()
                .is_err()
        );
    }

    #[test]
    fn passwords_are_hidden_in_every_form() {
        let cases = [
            (
                "postgres://u:secret@h:5/db?sslmode=require",
                "postgres://u:***@h:5/db?sslmode=require",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
            (
                "postgres://u@h/db?password=secret&x=1",
                "postgres://u@h/db?password=***&x=1",
            ),
            (
                "host=h password='a secret' user=u",
                "host=h password=*** user=u",
            ),
            ("password=secret", "password=***"),
        ];
        for (s, shown) in cases {
            assert_eq!(url_or_kv(s).redact(s), shown);
        }
        assert_eq!(
            shown_without_boundaries("password='secret", Form::KeyValue),
            "password…"
        );
        assert_eq!(
            shown_without_boundaries("postgres://u:secret@h/db?novalue", Form::Url),
            "postgres://u:***@h/db?…"
        );
        assert_eq!(
            shown_without_boundaries("postgres://h/db?password=x&novalue", Form::Url),
            "postgres://h/db?…"
        );
    }

    fn url_or_kv(s: &str) -> Lexed {
        Lexed::new(s, form(s).unwrap()).unwrap()
    }

    #[test]
    fn other_stores_and_plain_words_are_refused() {
        for s in [
            "mysql://h/db",
            "sqlite:///tmp/x?a=b",
            "/some/dir",
            "http://h",
            "",
        ] {
            let err = form(s).unwrap_err();
            assert!(err.to_string().contains(EXPECTED), "{s}: {err}");
        }
        assert_eq!(form("password=https://x").unwrap(), Form::KeyValue);
    }

    fn env() -> PgEnv {
        PgEnv {
            os_user: Some("me".into()),
            ..PgEnv::default()
        }
    }

    fn hosts(target: &Target) -> Vec<String> {
        target
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Unix(p) => p.display().to_string(),
                Host::Tcp(t) => t.clone(),
            })
            .collect()
    }

    #[test]
    fn a_string_that_leaves_everything_out_gets_libpq_defaults() {
        let target = resolve("dbname=d", &env()).unwrap();
        assert_eq!(hosts(&target), DEFAULT_SOCKET_DIRS);
        assert!(target.config.get_ports().is_empty());
        assert_eq!(target.config.get_user(), Some("me"));
        assert_eq!(target.ssl, SslMode::Disable, "sockets only: no TLS");
        assert_eq!(target.roots, Roots::None);
    }

    #[test]
    fn the_environment_fills_what_the_string_leaves_out_and_never_more() {
        let env = PgEnv {
            host: Some("h1,/run/pg".into()),
            port: Some("6000".into()),
            user: Some("envuser".into()),
            database: Some("envdb".into()),
            password: Some("envpw".into()),
            sslmode: Some("require".into()),
            ..env()
        };
        let target = resolve("application_name=x", &env).unwrap();
        assert_eq!(hosts(&target), ["h1", "/run/pg"]);
        assert_eq!(target.config.get_ports(), [6000]);
        assert_eq!(target.config.get_user(), Some("envuser"));
        assert_eq!(target.config.get_dbname(), Some("envdb"));
        assert_eq!(target.config.get_password(), Some(&b"envpw"[..]));
        assert_eq!(target.ssl, SslMode::Require);
        assert_eq!(
            target.config.get_ssl_mode(),
            postgres::config::SslMode::Require
        );

        let target = resolve(
            "host=h port=1 user=u dbname=d password=p sslmode=disable",
            &env,
        )
        .unwrap();
        assert_eq!(hosts(&target), ["h"]);
        assert_eq!(target.config.get_ports(), [1]);
        assert_eq!(target.config.get_user(), Some("u"));
        assert_eq!(target.config.get_dbname(), Some("d"));
        assert_eq!(target.config.get_password(), Some(&b"p"[..]));
        assert_eq!(target.ssl, SslMode::Disable);
        // An explicit `prefer` wins over PGSSLMODE too.
        let target = resolve("host=h sslmode=prefer", &env).unwrap();
        assert_eq!(target.ssl, SslMode::Prefer);
    }

    #[test]
    fn pgport_applies_to_url_hosts_that_give_no_port() {
        let env = PgEnv {
            port: Some("6000".into()),
            ..env()
        };
        let ports = |s: &str| resolve(s, &env).unwrap().config.get_ports().to_vec();
        assert_eq!(ports("postgres://h/db"), [6000]);
        assert_eq!(ports("postgres://h:1/db"), [1]);
        assert_eq!(ports("postgres://h1,h2:2,[::1]/db"), [6000, 2, 6000]);
        assert_eq!(ports("postgres://[::1]:3,h:/db"), [3, 6000]);
        assert_eq!(ports("postgresql:///db?host=/tmp"), [6000]);
        assert_eq!(ports("postgresql:///db?host=/tmp&port=7"), [7]);
        let env = PgEnv {
            port: Some("1,2".into()),
            ..env
        };
        let target = resolve("postgres://a,b/db", &env).unwrap();
        assert_eq!(target.config.get_ports(), [1, 2]);
        assert!(matches!(
            resolve("postgres://a,b,c/db", &env),
            Err(Error::PgSettings {
                source: PgSettingsError::PortCount { ports: 2, hosts: 3 },
                ..
            })
        ));
        let env = PgEnv {
            port: Some("x".into()),
            ..PgEnv::default()
        };
        assert!(matches!(
            resolve("host=h", &env),
            Err(Error::PgSettings {
                source: PgSettingsError::InvalidPort { .. },
                ..
            })
        ));
    }

    #[test]
    fn sslmode_is_libpqs() {
        let mode = |s: &str, env: &PgEnv| {
            let target = resolve(s, env).unwrap();
            (target.ssl, target.config.get_ssl_mode(), target.roots)
        };
        use postgres::config::SslMode as Crate;
        let e = env();
        assert_eq!(
            mode("host=h", &e),
            (SslMode::Prefer, Crate::Prefer, Roots::None)
        );
        assert_eq!(
            mode("host=h sslmode=disable", &e),
            (SslMode::Disable, Crate::Disable, Roots::None)
        );
        assert_eq!(
            mode("host=h sslmode=allow", &e),
            (SslMode::Allow, Crate::Disable, Roots::None)
        );
        assert_eq!(
            mode("host=h sslmode=require", &e),
            (SslMode::Require, Crate::Require, Roots::None)
        );
        assert_eq!(
            mode("host=h sslmode=verify-ca", &e),
            (SslMode::VerifyCa, Crate::Require, Roots::System)
        );
        assert_eq!(
            mode("postgres://h/db?sslmode=verify-full", &e),
            (SslMode::VerifyFull, Crate::Require, Roots::System)
        );
        assert_eq!(
            mode("host=h sslrootcert=system", &e),
            (SslMode::VerifyFull, Crate::Require, Roots::System)
        );
        // A socket directory never gets TLS, whatever the mode.
        assert_eq!(
            mode("host=/tmp sslmode=verify-full", &e).0,
            SslMode::Disable
        );
        assert_eq!(
            mode("postgresql:///db?host=/run/postgresql&sslmode=require", &e).1,
            Crate::Disable
        );
        // A mixed list keeps the mode (the socket answers "no TLS" to the TLS request).
        assert_eq!(mode("host=/tmp,h sslmode=prefer", &e).0, SslMode::Prefer);
        // PGSSLMODE only where the string says nothing.
        let env_mode = PgEnv {
            sslmode: Some("verify-ca".into()),
            ..env()
        };
        assert_eq!(mode("host=h", &env_mode).0, SslMode::VerifyCa);
        assert_eq!(
            mode("host=h sslmode=disable", &env_mode).0,
            SslMode::Disable
        );

        for (s, env, from) in [
            ("host=h sslmode=verify", &e, "the connection string"),
            (
                "host=h",
                &PgEnv {
                    sslmode: Some("on".into()),
                    ..env()
                },
                "PGSSLMODE",
            ),
        ] {
            match resolve(s, env) {
                Err(Error::PgSettings {
                    source: PgSettingsError::InvalidSslMode { from: f, .. },
                    ..
                }) => assert_eq!(f, from),
                other => panic!("{s}: {other:?}"),
            }
        }
        assert!(matches!(
            resolve("host=h sslrootcert=system sslmode=require", &e),
            Err(Error::PgSettings {
                source: PgSettingsError::WeakSslModeWithSystemRoots { mode: "require" },
                ..
            })
        ));
    }

    #[test]
    fn a_root_certificate_file_makes_every_tls_mode_verify_the_chain() {
        let home = tempfile::tempdir().unwrap();
        let env = PgEnv {
            home: Some(home.path().display().to_string()),
            ..env()
        };
        let roots = |s: &str| resolve(s, &env).map(|t| t.roots);
        // No file: `require` accepts any certificate; `verify-*` fall back to Mozilla's roots.
        assert_eq!(roots("host=h sslmode=require").unwrap(), Roots::None);
        assert_eq!(roots("host=h sslmode=verify-ca").unwrap(), Roots::System);
        // `~/.postgresql/root.crt` when it exists.
        let default = home.path().join(".postgresql/root.crt");
        std::fs::create_dir_all(default.parent().unwrap()).unwrap();
        std::fs::write(&default, "").unwrap();
        for mode in ["prefer", "require", "verify-ca", "verify-full"] {
            assert_eq!(
                roots(&format!("host=h sslmode={mode}")).unwrap(),
                Roots::File(default.clone()),
                "{mode}"
            );
        }
        // An explicit file wins; a missing one is an error only for `verify-*` (libpq).
        let other = home.path().join("ca.pem");
        std::fs::write(&other, "").unwrap();
        assert_eq!(
            roots(&format!("host=h sslrootcert={}", other.display())).unwrap(),
            Roots::File(other)
        );
        let missing = home.path().join("missing.pem");
        assert_eq!(
            roots(&format!(
                "host=h sslmode=require sslrootcert={}",
                missing.display()
            ))
            .unwrap(),
            Roots::None
        );
        assert!(matches!(
            roots(&format!(
                "host=h sslmode=verify-ca sslrootcert={}",
                missing.display()
            )),
            Err(Error::PgSettings {
                source: PgSettingsError::RootCertMissing { .. },
                ..
            })
        ));
    }

    #[test]
    fn malformed_strings_are_the_crates_errors_with_the_password_hidden() {
        for s in [
            "host=h password='secret",
            "postgres://u:secret@h/db?novalue",
            "postgres://u:secret@h:notaport/db",
            "host=h port=x password=secret",
        ] {
            let err = resolve(s, &env()).unwrap_err();
            assert!(matches!(err, Error::InvalidStore { .. }), "{s}: {err}");
            assert!(!err.to_string().contains("secret"), "{s}: {err}");
        }
    }
}
