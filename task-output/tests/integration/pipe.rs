use std::fs;

use bytes::Bytes;
use task_output::pipe::{DEFAULT_MAX_MEMORY, STDERR_PREFIX};
use task_output::{OutputError, PipeConfig, PipeOutput};

use crate::support::output_path;

#[tokio::test]
async fn pipe_output_spills_past_eight_mib_and_shows_the_truncated_view() {
    let (_dir, path) = output_path();
    let mut pipe = PipeOutput::new(&path, PipeConfig::default());
    assert_eq!(DEFAULT_MAX_MEMORY, 8 * 1024 * 1024);

    // 16-byte lines filling exactly 8 MiB: still in memory.
    let lines: String = (0..DEFAULT_MAX_MEMORY / 16)
        .map(|i| format!("line {i:>10}\n"))
        .collect();
    assert_eq!(lines.len(), DEFAULT_MAX_MEMORY);
    pipe.write_stdout(Bytes::from(lines.clone())).unwrap();
    assert!(!pipe.is_spilled());
    assert!(!path.exists());
    assert_eq!(pipe.stdout(), lines);

    // One more chunk spills.
    pipe.write_stdout(Bytes::from_static(b"after spill\n"))
        .unwrap();
    assert!(pipe.is_spilled());
    pipe.flush().await.unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        format!("{lines}after spill\n").as_bytes()
    );

    let size_kb = (DEFAULT_MAX_MEMORY + 12 + 512) / 1024;
    let last_lines: String = (524_284..524_288)
        .map(|i| format!("line {i:>10}\n"))
        .collect();
    let expected = format!(
        "{last_lines}after spill\nOutput truncated ({size_kb}KB total). Full output saved to: {}",
        path.display()
    );
    assert_eq!(pipe.stdout(), expected);
}

#[tokio::test]
async fn stderr_chunks_are_prefixed_on_disk() {
    let (_dir, path) = output_path();
    let config = PipeConfig {
        max_memory: 32,
        ..PipeConfig::default()
    };
    let mut pipe = PipeOutput::new(&path, config);
    pipe.write_stdout(Bytes::from_static(b"out1\n")).unwrap();
    pipe.write_stderr(Bytes::from_static(b"err1\n")).unwrap();
    pipe.write_stderr(Bytes::from_static(b"err2\n")).unwrap();
    assert_eq!(pipe.stdout(), "out1\n");
    assert_eq!(pipe.stderr(), "err1\nerr2\n");

    pipe.write_stdout(Bytes::from(vec![b'x'; 30])).unwrap();
    pipe.write_stderr(Bytes::from_static(b"err3\n")).unwrap();
    pipe.write_stdout(Bytes::from_static(b"\nout2\n")).unwrap();
    pipe.flush().await.unwrap();
    let expected = format!(
        "out1\n{p}err1\nerr2\n{x}{p}err3\n\nout2\n",
        p = STDERR_PREFIX,
        x = "x".repeat(30)
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(pipe.stderr(), "");
    assert_eq!(pipe.total_bytes(), 5 + 5 + 5 + 30 + 5 + 6);
}

#[test]
fn recent_lines_keep_the_last_thousand() {
    let (_dir, path) = output_path();
    let mut pipe = PipeOutput::new(&path, PipeConfig::default());
    for i in 0..1500 {
        pipe.write_stdout(Bytes::from(format!("{i}\n"))).unwrap();
    }
    let recent = pipe.recent_lines(usize::MAX);
    assert_eq!(recent.len(), 1000);
    assert_eq!(recent[0], "500");
    assert_eq!(recent[999], "1499");
}

#[test]
fn spilled_view_without_lines_is_just_the_notice() {
    let (_dir, path) = output_path();
    let config = PipeConfig {
        max_memory: 0,
        ..PipeConfig::default()
    };
    let mut pipe = PipeOutput::new(&path, config);
    pipe.write_stdout(Bytes::from_static(b"\n")).unwrap();
    assert_eq!(
        pipe.stdout(),
        format!(
            "Output truncated (0KB total). Full output saved to: {}",
            path.display()
        )
    );
}

#[test]
fn a_failed_spill_keeps_the_output_in_memory() {
    let (dir, path) = output_path();
    std::os::unix::fs::symlink(dir.path().join("target"), &path).unwrap();
    let config = PipeConfig {
        max_memory: 4,
        ..PipeConfig::default()
    };
    let mut pipe = PipeOutput::new(&path, config);
    pipe.write_stdout(Bytes::from_static(b"abc")).unwrap();
    let err = pipe.write_stdout(Bytes::from_static(b"def")).unwrap_err();
    assert!(matches!(err, OutputError::SymlinkRefused { .. }), "{err:?}");
    assert!(!pipe.is_spilled());
    assert_eq!(pipe.stdout(), "abcdef");
    assert!(!dir.path().join("target").exists());
}
