//! Reading state files as untrusted input, and private state directories.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::{CWD, FileType, Mode};
use task_output::open::{NoFollow, check_private_dir, ensure_private_dir, read_untrusted};
use task_output::{DirectoryProblem, FileKind, OutputError};

use crate::support::file_with;

/// How long a read that must not block may take before the test calls it hung.
const HANG_LIMIT: Duration = Duration::from_secs(20);

/// `read_untrusted` on another thread, failing the test if it does not return in time.
fn read_with_deadline(path: PathBuf, max_bytes: u64) -> Result<Vec<u8>, OutputError> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(read_untrusted(&path, max_bytes)));
    receiver
        .recv_timeout(HANG_LIMIT)
        .expect("read_untrusted blocked")
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_regular_file_within_the_limit_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with(dir.path(), "a.json", b"{\"status\":\"running\"}");
    assert_eq!(
        read_untrusted(&path, 20).unwrap(),
        b"{\"status\":\"running\"}"
    );
    let empty = file_with(dir.path(), "empty.json", b"");
    assert!(read_untrusted(&empty, 0).unwrap().is_empty());
}

#[test]
fn a_fifo_is_refused_without_blocking_even_with_no_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    mkfifo(&path);
    match read_with_deadline(path.clone(), 1 << 20) {
        Err(OutputError::NotRegularFile {
            kind: FileKind::Fifo,
            path: named,
        }) => assert_eq!(named, path),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn devices_and_directories_are_refused() {
    match read_with_deadline(PathBuf::from("/dev/null"), 1024) {
        Err(OutputError::NotRegularFile {
            kind: FileKind::CharDevice,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    // /dev/zero would never end if it were read: refused before any read.
    assert!(matches!(
        read_with_deadline(PathBuf::from("/dev/zero"), 1024),
        Err(OutputError::NotRegularFile {
            kind: FileKind::CharDevice,
            ..
        })
    ));
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_untrusted(dir.path(), 1024),
        Err(OutputError::NotRegularFile {
            kind: FileKind::Directory,
            ..
        })
    ));
}

#[test]
fn a_symlink_is_refused_even_to_a_good_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = file_with(dir.path(), "real.json", b"{}");
    let link = dir.path().join("t.json");
    symlink(&target, &link).unwrap();
    assert!(matches!(
        read_untrusted(&link, 1024),
        Err(OutputError::SymlinkRefused { .. })
    ));
    let to_fifo = dir.path().join("fifo");
    mkfifo(&to_fifo);
    let link_to_fifo = dir.path().join("u.json");
    symlink(&to_fifo, &link_to_fifo).unwrap();
    assert!(matches!(
        read_with_deadline(link_to_fifo, 1024),
        Err(OutputError::SymlinkRefused { .. })
    ));
}

#[test]
fn an_oversized_file_is_refused_at_one_byte_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with(dir.path(), "big.json", &vec![b'x'; 4097]);
    match read_untrusted(&path, 4096) {
        Err(OutputError::TooLarge { limit: 4096, .. }) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(read_untrusted(&path, 4097).unwrap().len(), 4097);
}

#[test]
fn a_missing_file_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_untrusted(&dir.path().join("nope"), 10),
        Err(OutputError::NotFound { .. })
    ));
}

#[test]
fn private_dirs_are_created_0700_with_their_parents_and_accepted_again() {
    let root = tempfile::tempdir().unwrap();
    let session = root.path().join("a/b/session");
    ensure_private_dir(&session).unwrap();
    assert_eq!(mode_of(&session), 0o700);
    assert_eq!(mode_of(&root.path().join("a")), 0o700);
    ensure_private_dir(&session).unwrap();
    // An existing directory that only its owner can write is fine.
    fs::set_permissions(&session, fs::Permissions::from_mode(0o755)).unwrap();
    ensure_private_dir(&session).unwrap();
}

#[test]
fn group_or_world_writable_dirs_are_refused() {
    let root = tempfile::tempdir().unwrap();
    for mode in [0o777, 0o1777, 0o770, 0o702] {
        let dir = root.path().join(format!("d{mode:o}"));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        match ensure_private_dir(&dir) {
            Err(OutputError::UnsafeDirectory {
                problem: DirectoryProblem::WritableByOthers { mode: seen },
                ..
            }) => assert_eq!(seen, mode),
            other => panic!("mode {mode:o}: unexpected {other:?}"),
        }
    }
}

#[test]
fn a_symlink_to_a_world_writable_dir_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let open_dir = root.path().join("open");
    fs::create_dir(&open_dir).unwrap();
    fs::set_permissions(&open_dir, fs::Permissions::from_mode(0o777)).unwrap();
    let session = root.path().join("session");
    symlink(&open_dir, &session).unwrap();
    assert!(matches!(
        ensure_private_dir(&session),
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::Symlink,
            ..
        })
    ));
    // Even a link to a private directory: the state must live at the path itself.
    let private = root.path().join("private");
    ensure_private_dir(&private).unwrap();
    let other = root.path().join("other");
    symlink(&private, &other).unwrap();
    assert!(matches!(
        ensure_private_dir(&other),
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::Symlink,
            ..
        })
    ));
}

#[test]
fn a_file_where_the_dir_should_be_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let file = file_with(root.path(), "session", b"");
    assert!(matches!(
        ensure_private_dir(&file),
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::NotADirectory,
            ..
        })
    ));
}

#[test]
fn a_dir_owned_by_another_user_is_refused() {
    let me = rustix::process::geteuid();
    let root = tempfile::tempdir().unwrap();
    // As root, hand a fresh directory to `nobody`; as anyone else, `/usr` belongs to root.
    let foreign = if me.is_root() {
        let dir = root.path().join("foreign");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        dir
    } else {
        PathBuf::from("/usr")
    };
    match ensure_private_dir(&foreign) {
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::OwnedByOther { owner, me: seen },
            ..
        }) => {
            assert_ne!(owner, me.as_raw());
            assert_eq!(seen, me.as_raw());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn check_private_dir_says_missing_private_or_why_not_without_creating() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("p");
    assert!(!check_private_dir(&dir).unwrap(), "missing");
    assert!(!dir.exists(), "nothing created");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(check_private_dir(&dir).unwrap());
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        check_private_dir(&dir),
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::WritableByOthers { mode: 0o777 },
            ..
        })
    ));
    let link = root.path().join("l");
    symlink(root.path(), &link).unwrap();
    assert!(matches!(
        check_private_dir(&link),
        Err(OutputError::UnsafeDirectory {
            problem: DirectoryProblem::Symlink,
            ..
        })
    ));
}

#[test]
fn no_follow_opens_name_what_is_there_instead_of_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("s");
    let _socket = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    for open in [NoFollow::read(), NoFollow::write().append().create()] {
        assert!(matches!(
            open.open(&socket_path),
            Err(OutputError::NotRegularFile {
                kind: FileKind::Socket,
                ..
            })
        ));
    }
    assert!(matches!(
        NoFollow::write().append().create().open(dir.path()),
        Err(OutputError::NotRegularFile {
            kind: FileKind::Directory,
            ..
        })
    ));
    // A FIFO opened for writing neither blocks (no reader) nor is taken for a file.
    let fifo = dir.path().join("f");
    mkfifo(&fifo);
    assert!(matches!(
        NoFollow::write().append().create().open(&fifo),
        Err(OutputError::NotRegularFile {
            kind: FileKind::Fifo,
            ..
        })
    ));
    assert!(matches!(
        NoFollow::read_write().open_regular(&fifo),
        Err(OutputError::NotRegularFile {
            kind: FileKind::Fifo,
            ..
        })
    ));
    // A symlink under `O_CREAT|O_EXCL` is named as such, not "already exists".
    let link = dir.path().join("l");
    symlink(dir.path().join("nowhere"), &link).unwrap();
    assert!(matches!(
        NoFollow::write().create_new().open(&link),
        Err(OutputError::SymlinkRefused { .. })
    ));
    assert!(!dir.path().join("nowhere").exists());
}

#[test]
fn a_file_created_takes_the_mode_asked_for_and_0600_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("private");
    NoFollow::write().create_new().open(&private).unwrap();
    assert_eq!(mode_of(&private), 0o600);
    let shared = dir.path().join("shared");
    let umask = rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::umask(umask);
    NoFollow::write()
        .create_new()
        .mode(0o644)
        .open(&shared)
        .unwrap();
    assert_eq!(mode_of(&shared), 0o644 & !umask.bits());
}
