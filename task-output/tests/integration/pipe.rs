use std::fs;
use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;
use task_output::pipe::{DEFAULT_MAX_MEMORY, STDERR_PREFIX};
use task_output::{OutputError, PipeConfig, PipeOutput};

use crate::support::output_path;

fn pipe_with_memory(path: &Path, max_memory: usize) -> PipeOutput {
    let config = PipeConfig {
        max_memory,
        ..PipeConfig::default()
    };
    PipeOutput::new(path, config)
}

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
    let mut pipe = pipe_with_memory(&path, 32);
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
    let mut pipe = pipe_with_memory(&path, 0);
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
    let mut pipe = pipe_with_memory(&path, 4);
    pipe.write_stdout(Bytes::from_static(b"abc")).unwrap();
    let err = pipe.write_stdout(Bytes::from_static(b"def")).unwrap_err();
    assert!(matches!(err, OutputError::SymlinkRefused { .. }), "{err:?}");
    assert!(!pipe.is_spilled());
    assert_eq!(pipe.stdout(), "abcdef");
    assert!(!dir.path().join("target").exists());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn recent_lines_are_the_streams_last_lines(
        chunks in prop::collection::vec("[ab\n€]{0,40}", 0..40),
        n in 0usize..30,
        max_recent_bytes in 1usize..200,
    ) {
        let (_dir, path) = output_path();
        let config = PipeConfig { recent_lines: 20, max_recent_bytes, ..PipeConfig::default() };
        let mut pipe = PipeOutput::new(&path, config);
        for chunk in &chunks {
            pipe.write_stdout(Bytes::from(chunk.clone())).unwrap();
        }
        let stream = chunks.concat();
        let body = stream.strip_suffix('\n').unwrap_or(&stream);
        let model: Vec<&str> = if stream.is_empty() { Vec::new() } else { body.split('\n').collect() };
        let recent = pipe.recent_lines(n);
        prop_assert!(recent.len() <= n.min(20));
        let replacement = char::REPLACEMENT_CHARACTER;
        prop_assert!(!recent.iter().any(|line| line.contains(replacement)));
        if stream.len() <= max_recent_bytes {
            // Nothing was cut: exactly the model's last lines.
            prop_assert_eq!(&recent[..], &model[model.len() - n.min(20).min(model.len())..]);
        } else if let Some((first, rest)) = recent.split_first() {
            // Whole lines, except a single long line that keeps its end.
            prop_assert_eq!(rest, &model[model.len() - rest.len()..]);
            prop_assert!(model[model.len() - recent.len()].ends_with(first.as_str()));
        }
    }
}
