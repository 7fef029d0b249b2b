//! libpq's password file (`~/.pgpass`, or `$PGPASSFILE`): lines of
//! `hostname:port:database:username:password`, the first line whose four first fields match
//! giving the password. A field that is `*` matches anything; `\:` and `\\` stand for `:` and
//! `\`; lines starting with `#` are comments. As libpq, a file that is not a regular file, or
//! that its group or others may read or write, is ignored (with a warning).
//!
//! It also holds libpq's default socket directories ([`DEFAULT_SOCKET_DIRS`]): the connection
//! string tries them when nothing names a host, and the file calls them `localhost`.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use postgres::config::Host;

/// The socket directories tried when neither the string nor `PGHOST` names a host: Debian's
/// libpq default first (where its server puts the socket), then upstream's.
pub(crate) const DEFAULT_SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// What the file calls a connection to no host, or to the default socket directory.
pub(crate) const DEFAULT_HOST: &str = "localhost";

/// A password file larger than this is not read (libpq reads lines of any length; no
/// password file needs a mebibyte).
const MAX_SIZE: u64 = 1 << 20;

/// The name `host` goes by in the file: a TCP host by its name, a socket directory by its
/// path, except libpq's default socket directory (Debian's, upstream's), which is
/// `localhost`.
pub(crate) fn host_name(host: &Host) -> String {
    match host {
        Host::Tcp(name) => name.clone(),
        Host::Unix(path) => {
            let path = path.to_string_lossy();
            let trimmed = path.trim_end_matches('/');
            if DEFAULT_SOCKET_DIRS.contains(&trimmed) || trimmed == "/run/postgresql" {
                DEFAULT_HOST.to_string()
            } else {
                path.into_owned()
            }
        }
    }
}

/// The password `file` holds for this connection, if it holds one and may be used.
pub(crate) fn lookup(
    file: &Path,
    host: &str,
    port: &str,
    database: &str,
    user: &str,
) -> Option<String> {
    let text = read(file)?;
    find(&text, [host, port, database, user])
}

/// The file's text, or `None` (with a warning unless it does not exist) when it must not or
/// cannot be read.
fn read(file: &Path) -> Option<String> {
    // Non-blocking, so that a FIFO planted there cannot hang the open; its type is checked
    // on the opened file.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(file);
    let mut handle = match opened {
        Ok(handle) => handle,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read the password file");
            return None;
        }
    };
    let meta = handle.metadata().ok()?;
    if !meta.is_file() {
        tracing::warn!(file = %file.display(), "password file is not a plain file; ignored");
        return None;
    }
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(
            file = %file.display(),
            "password file has group or world access; permissions should be u=rw (0600) or less; ignored"
        );
        return None;
    }
    let mut text = String::new();
    if let Err(e) = (&mut handle).take(MAX_SIZE).read_to_string(&mut text) {
        tracing::warn!(file = %file.display(), error = %e, "cannot read the password file");
        return None;
    }
    Some(text)
}

/// The password of the first line of `text` matching `wanted` (host, port, database, user).
fn find(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .find_map(|line| {
            let fields = split(line);
            let [host, port, database, user, password] = fields.as_slice() else {
                return None;
            };
            [host, port, database, user]
                .iter()
                .zip(wanted)
                .all(|(field, value)| field.matches(value))
                .then(|| password.text.clone())
        })
}

/// One field of a line.
#[derive(Debug, PartialEq, Eq)]
struct Field {
    /// Its text, unescaped.
    text: String,
    /// Whether it is a bare `*`.
    any: bool,
}

impl Field {
    fn matches(&self, value: &str) -> bool {
        self.any || self.text == value
    }
}

/// The five fields of a line (fewer if it has fewer); the password ends at the next
/// unescaped `:` or at the end of the line, as libpq reads it.
fn split(line: &str) -> Vec<Field> {
    let mut fields = Vec::with_capacity(5);
    let mut text = String::new();
    let mut raw_star = true;
    let mut raw_len = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => {
                    text.push(next);
                    raw_star = false;
                }
                None => text.push('\\'),
            },
            ':' => {
                fields.push(Field {
                    any: raw_star && raw_len == 1,
                    text: std::mem::take(&mut text),
                });
                if fields.len() == 5 {
                    return fields;
                }
                raw_star = true;
                raw_len = 0;
                continue;
            }
            c => {
                raw_star &= c == '*';
                text.push(c);
            }
        }
        raw_len += 1;
    }
    fields.push(Field {
        any: raw_star && raw_len == 1,
        text,
    });
    fields
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::PathBuf;

    use super::*;

    const FILE: &str = "\
# a comment:*:*:*:not-this
db.example:5432:tasks:alice:alice-tasks
db.example:5432:*:alice:alice-any-db
*:*:*:bob:bob\\:with\\\\colon:trailing
/tmp/pg:55432:*:carol:carol-socket
localhost:*:*:carol:carol-local
h\\:x:1:d:u:escaped-host
\\*:1:d:u:literal-star
short:line
";

    fn find_in(host: &str, port: &str, db: &str, user: &str) -> Option<String> {
        find(FILE, [host, port, db, user])
    }

    #[test]
    fn the_first_matching_line_gives_the_password() {
        assert_eq!(
            find_in("db.example", "5432", "tasks", "alice").as_deref(),
            Some("alice-tasks")
        );
        assert_eq!(
            find_in("db.example", "5432", "other", "alice").as_deref(),
            Some("alice-any-db")
        );
        assert_eq!(find_in("db.example", "5433", "tasks", "alice"), None);
        assert_eq!(find_in("elsewhere", "5432", "tasks", "alice"), None);
        assert_eq!(find_in("db.example", "5432", "tasks", "nobody"), None);
    }

    #[test]
    fn wildcards_escapes_and_comments_are_libpqs() {
        // `\:` and `\\` in the password; it ends at the next unescaped colon.
        assert_eq!(
            find_in("anything", "1", "any", "bob").as_deref(),
            Some("bob:with\\colon")
        );
        assert_eq!(
            find_in("h:x", "1", "d", "u").as_deref(),
            Some("escaped-host")
        );
        // `\*` is a star, not a wildcard.
        assert_eq!(find_in("*", "1", "d", "u").as_deref(), Some("literal-star"));
        assert_eq!(find_in("other", "1", "d", "u"), None);
        // The comment line is never read as an entry.
        assert_eq!(find_in("# a comment", "1", "d", "x"), None);
        assert_eq!(
            find("h:1:d:u:pw\r\n", ["h", "1", "d", "u"]).as_deref(),
            Some("pw")
        );
    }

    #[test]
    fn socket_directories_go_by_their_path_and_the_default_one_by_localhost() {
        let socket = |p: &str| host_name(&Host::Unix(PathBuf::from(p)));
        assert_eq!(socket("/tmp/pg"), "/tmp/pg");
        assert_eq!(socket("/var/run/postgresql"), DEFAULT_HOST);
        assert_eq!(socket("/run/postgresql/"), DEFAULT_HOST);
        assert_eq!(host_name(&Host::Tcp("db".into())), "db");
        assert_eq!(
            find_in(&socket("/tmp/pg"), "55432", "x", "carol").as_deref(),
            Some("carol-socket")
        );
        assert_eq!(
            find_in(&socket("/var/run/postgresql"), "5432", "x", "carol").as_deref(),
            Some("carol-local")
        );
    }

    #[test]
    fn a_file_others_may_read_or_that_is_not_a_plain_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "h:1:d:u:pw\n").unwrap();
        let set_mode = |mode: u32| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set_mode(0o600);
        assert_eq!(lookup(&file, "h", "1", "d", "u").as_deref(), Some("pw"));
        set_mode(0o400);
        assert_eq!(lookup(&file, "h", "1", "d", "u").as_deref(), Some("pw"));
        for mode in [0o640, 0o604, 0o620, 0o660, 0o644] {
            set_mode(mode);
            assert_eq!(lookup(&file, "h", "1", "d", "u"), None, "{mode:o}");
        }
        assert_eq!(
            lookup(&dir.path().join("missing"), "h", "1", "d", "u"),
            None
        );
        // A FIFO, with no writer: ignored at once, never waited on.
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        assert_eq!(lookup(&fifo, "h", "1", "d", "u"), None);
        // A directory.
        assert_eq!(lookup(dir.path(), "h", "1", "d", "u"), None);
    }
}
