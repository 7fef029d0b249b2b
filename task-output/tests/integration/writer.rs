use std::fs;

use bytes::Bytes;
use proptest::prelude::*;
use task_output::writer::{CAP_NOTICE, MAX_TASK_OUTPUT_BYTES, cap_notice};
use task_output::{DiskWriter, DiskWriterConfig, OutputError};

use crate::support::output_path;

fn capped(cap_bytes: u64) -> DiskWriterConfig {
    DiskWriterConfig { cap_bytes }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[test]
fn default_cap_is_five_gib() {
    assert_eq!(DiskWriterConfig::default().cap_bytes, 5 << 30);
    assert_eq!(MAX_TASK_OUTPUT_BYTES, 5 << 30);
}

#[test]
fn the_cap_notice_names_the_cap_in_the_reference_words() {
    assert_eq!(cap_notice(MAX_TASK_OUTPUT_BYTES), CAP_NOTICE);
    assert_eq!(
        cap_notice(64 * 1024),
        "\n[output truncated: exceeded 64KB disk cap]\n"
    );
    assert_eq!(
        cap_notice(3 << 20),
        "\n[output truncated: exceeded 3MB disk cap]\n"
    );
    assert_eq!(
        cap_notice(1000),
        "\n[output truncated: exceeded 1000B disk cap]\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_are_written_in_order_by_the_drain() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, DiskWriterConfig::default()).unwrap();
    let mut expected = Vec::new();
    for i in 0..2_000 {
        let chunk = format!("chunk {i}\n");
        expected.extend_from_slice(chunk.as_bytes());
        writer.append(Bytes::from(chunk));
    }
    writer.flush().await.unwrap();
    assert_eq!(fs::read(&path).unwrap(), expected);
    assert_eq!(writer.accepted_bytes(), expected.len() as u64);
}

#[tokio::test]
async fn cap_notice_appears_once_and_the_file_stops_growing() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, capped(1000)).unwrap();
    let mut sent = Vec::new();
    for i in 0..500u32 {
        let chunk = format!("{i:05}|").into_bytes();
        sent.extend_from_slice(&chunk);
        writer.append(Bytes::from(chunk));
    }
    writer.flush().await.unwrap();
    assert!(writer.is_capped());
    writer.write(b"more after the cap");
    writer.flush().await.unwrap();

    let written = fs::read(&path).unwrap();
    let mut expected = sent[..1000].to_vec();
    expected.extend_from_slice(cap_notice(1000).as_bytes());
    assert_eq!(written, expected);
    assert_eq!(count(&written, cap_notice(1000).as_bytes()), 1);
}

#[tokio::test]
async fn output_exactly_at_the_cap_has_no_notice_until_one_more_byte() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, capped(10)).unwrap();
    writer.write(b"0123456789");
    writer.flush().await.unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"0123456789");
    assert!(!writer.is_capped());
    writer.write(b"X");
    writer.flush().await.unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        format!("0123456789{}", cap_notice(10)).as_bytes()
    );
}

#[tokio::test]
async fn appending_to_an_existing_file_counts_its_bytes_against_the_cap() {
    let (_dir, path) = output_path();
    fs::write(&path, b"12345").unwrap();
    let writer = DiskWriter::open_append(&path, capped(8)).unwrap();
    writer.write(b"6789");
    writer.flush().await.unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        format!("12345678{}", cap_notice(8)).as_bytes()
    );
}

#[tokio::test]
async fn evict_writes_what_is_queued_and_keeps_the_file() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, DiskWriterConfig::default()).unwrap();
    writer.write(b"kept\n");
    writer.evict().await.unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"kept\n");
}

#[tokio::test]
async fn cleanup_deletes_the_file() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, DiskWriterConfig::default()).unwrap();
    writer.write(b"gone\n");
    writer.cleanup().await.unwrap();
    assert!(!path.exists());
}

#[tokio::test]
async fn a_failing_write_is_reported_by_flush_once() {
    // Every write to /dev/full fails with ENOSPC: the retry fails too and flush reports it.
    let writer = DiskWriter::open_append("/dev/full", DiskWriterConfig::default()).unwrap();
    writer.write(b"lost");
    let err = writer.flush().await.unwrap_err();
    let OutputError::Io { source, .. } = &err else {
        panic!("expected Io, got {err:?}");
    };
    assert_eq!(
        source.raw_os_error(),
        Some(rustix::io::Errno::NOSPC.raw_os_error())
    );
    writer.flush().await.unwrap();
}

#[test]
fn without_a_runtime_appends_write_inline() {
    let (_dir, path) = output_path();
    let writer = DiskWriter::create(&path, capped(6)).unwrap();
    writer.write(b"sync ");
    assert_eq!(fs::read(&path).unwrap(), b"sync ");
    writer.write(b"writer");
    assert_eq!(
        fs::read(&path).unwrap(),
        format!("sync w{}", cap_notice(6)).as_bytes()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn file_never_exceeds_cap_plus_notice(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..30),
        cap in 0u64..3_000,
    ) {
        let (_dir, path) = output_path();
        let writer = DiskWriter::create(&path, capped(cap)).unwrap();
        let sent: Vec<u8> = chunks.concat();
        for chunk in chunks {
            writer.append(Bytes::from(chunk));
        }
        let written = fs::read(&path).unwrap();
        let mut expected = sent[..sent.len().min(cap as usize)].to_vec();
        if sent.len() as u64 > cap {
            expected.extend_from_slice(cap_notice(cap).as_bytes());
        }
        prop_assert_eq!(written, expected);
    }
}

#[test]
fn appends_after_the_runtime_shut_down_are_still_written_and_flush_returns() {
    let (_dir, path) = output_path();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let handle = runtime.handle().clone();
    let writer = {
        let _in_runtime = handle.enter();
        DiskWriter::create(&path, DiskWriterConfig::default()).unwrap()
    };
    runtime.shutdown_background();
    {
        // The runtime still looks current here, but its blocking pool no longer runs anything.
        let _in_runtime = handle.enter();
        writer.write(b"after shutdown\n");
    }
    let flushed = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(20), writer.flush()).await
        });
    assert!(matches!(flushed, Ok(Ok(()))), "{flushed:?}");
    assert_eq!(fs::read(&path).unwrap(), b"after shutdown\n");
}
