use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use task_output::open::{child_stdio, create_output_file, open_output_append};
use task_output::{DiskWriter, DiskWriterConfig, OutputError};

use crate::support::{file_with, in_forbidden_dir, output_path};

#[test]
fn symlink_at_output_path_is_refused_by_every_open_and_its_target_is_untouched() {
    let (dir, path) = output_path();
    let target = file_with(dir.path(), "precious.txt", b"do not touch");
    symlink(&target, &path).unwrap();

    let create = create_output_file(&path).unwrap_err();
    assert!(
        matches!(create, OutputError::SymlinkRefused { .. }),
        "{create:?}"
    );
    let append = open_output_append(&path).unwrap_err();
    assert!(
        matches!(append, OutputError::SymlinkRefused { .. }),
        "{append:?}"
    );
    let child = child_stdio(&path).unwrap_err();
    assert!(
        matches!(child, OutputError::SymlinkRefused { .. }),
        "{child:?}"
    );
    let writer = DiskWriter::open_append(&path, DiskWriterConfig::default()).unwrap_err();
    assert!(
        matches!(writer, OutputError::SymlinkRefused { .. }),
        "{writer:?}"
    );
    assert_eq!(create.path(), path);

    assert_eq!(fs::read(&target).unwrap(), b"do not touch");
    assert!(
        fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn append_open_of_a_symlink_fails_with_eloop() {
    let (dir, path) = output_path();
    symlink(dir.path().join("anywhere"), &path).unwrap();
    let OutputError::SymlinkRefused { .. } = open_output_append(&path).unwrap_err() else {
        panic!("expected SymlinkRefused");
    };
    // The variant is the kernel's ELOOP, not a guess from a pre-check.
    let raw = rustix::fs::open(
        &path,
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::APPEND | rustix::fs::OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .unwrap_err();
    assert_eq!(raw, rustix::io::Errno::LOOP);
    assert!(!dir.path().join("anywhere").exists());
}

#[test]
fn exclusive_create_refuses_an_existing_file_and_leaves_it_alone() {
    let (_dir, path) = output_path();
    fs::write(&path, b"earlier output").unwrap();
    let err = create_output_file(&path).unwrap_err();
    assert!(matches!(err, OutputError::AlreadyExists { .. }), "{err:?}");
    let err = DiskWriter::create(&path, DiskWriterConfig::default()).unwrap_err();
    assert!(matches!(err, OutputError::AlreadyExists { .. }), "{err:?}");
    assert_eq!(fs::read(&path).unwrap(), b"earlier output");
}

#[test]
fn created_file_is_private_and_writable() {
    let (_dir, path) = output_path();
    let mut file = create_output_file(&path).unwrap();
    file.write_all(b"hello").unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(fs::read(&path).unwrap(), b"hello");
}

#[test]
fn append_open_appends_and_needs_an_existing_file() {
    let (_dir, path) = output_path();
    let err = open_output_append(&path).unwrap_err();
    assert!(matches!(err, OutputError::NotFound { .. }), "{err:?}");
    fs::write(&path, b"one\n").unwrap();
    open_output_append(&path)
        .unwrap()
        .write_all(b"two\n")
        .unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"one\ntwo\n");
}

/// Runs `script` with `sh -c`, its stdout and stderr on the output file at `path`.
fn run_shell_into(path: &Path, script: &str) {
    let (stdout, stderr) = child_stdio(path).unwrap();
    let status = Command::new("sh")
        .args(["-c", script])
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn child_writes_stdout_and_stderr_into_one_file_in_order() {
    let (_dir, path) = output_path();
    run_shell_into(&path, "echo out1; echo err1 >&2; echo out2; echo err2 >&2");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "out1\nerr1\nout2\nerr2\n"
    );
    let mode = fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn child_stdio_appends_to_an_existing_file() {
    let (_dir, path) = output_path();
    fs::write(&path, b"before\n").unwrap();
    run_shell_into(&path, "echo after");
    assert_eq!(fs::read_to_string(&path).unwrap(), "before\nafter\n");
}

#[test]
fn opens_in_a_forbidden_directory_are_permission_denied() {
    in_forbidden_dir(|existing| {
        let new = existing.with_file_name("new.output");
        let err = create_output_file(&new).unwrap_err();
        assert!(
            matches!(err, OutputError::PermissionDenied { .. }),
            "{err:?}"
        );
        let err = open_output_append(existing).unwrap_err();
        assert!(
            matches!(err, OutputError::PermissionDenied { .. }),
            "{err:?}"
        );
    });
}
