use std::fs;
use std::io::Write;

use task_output::OutputError;
use task_output::open::open_output_append;
use task_output::read::{last_lines, read_delta};
use task_output::transcript::link_transcript;

use crate::support::{file_with, output_path};

#[test]
fn reading_a_linked_output_reads_the_transcript_as_it_grows() {
    let (dir, path) = output_path();
    let transcript = dir.path().join("agent.jsonl");
    link_transcript(&path, &transcript).unwrap();
    let err = read_delta(&path, 0, 10).unwrap_err();
    assert!(matches!(err, OutputError::NotFound { .. }), "{err:?}");

    fs::write(&transcript, b"{\"n\":1}\n").unwrap();
    let first = read_delta(&path, 0, 1024).unwrap();
    assert_eq!(&first.bytes[..], b"{\"n\":1}\n");
    fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap()
        .write_all(b"{\"n\":2}\n")
        .unwrap();
    let second = read_delta(&path, first.new_offset, 1024).unwrap();
    assert_eq!(&second.bytes[..], b"{\"n\":2}\n");
    assert_eq!(last_lines(&path, 1).unwrap(), ["{\"n\":2}"]);
}

#[test]
fn a_linked_output_cannot_be_written_through() {
    let (dir, path) = output_path();
    let transcript = file_with(dir.path(), "agent.jsonl", b"line\n");
    link_transcript(&path, &transcript).unwrap();
    let err = open_output_append(&path).unwrap_err();
    assert!(matches!(err, OutputError::SymlinkRefused { .. }), "{err:?}");
    assert_eq!(fs::read(&transcript).unwrap(), b"line\n");
}

#[test]
fn linking_never_replaces_an_existing_output() {
    let (dir, path) = output_path();
    fs::write(&path, b"real output").unwrap();
    let err = link_transcript(&path, &dir.path().join("agent.jsonl")).unwrap_err();
    assert!(matches!(err, OutputError::AlreadyExists { .. }), "{err:?}");
    assert_eq!(fs::read(&path).unwrap(), b"real output");
}
