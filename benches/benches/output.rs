//! Benchmarks of task-output: reads whose cost must not depend on the file's size, the same
//! reads done by `tail` as whole processes, and pipe-mode throughput.
//!
//! The 1 MiB, 100 MiB and 1 GiB files are generated once, on first use, into a temp dir that is
//! deleted when the run ends (by `main`). Run with
//! `cargo bench -p benches --bench output -- --warm-up-time 1 --measurement-time 3`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use task_output::read::{last_lines, progress_tail, read_delta, read_tail};
use task_output::{PipeConfig, PipeOutput};
use tempfile::TempDir;

const MIB: u64 = 1024 * 1024;
const SIZES: [(&str, u64); 3] = [("1MiB", MIB), ("100MiB", 100 * MIB), ("1GiB", 1024 * MIB)];
const DELTA_BYTES: u64 = 64 * 1024;

/// The generated files, made once per run.
struct Files {
    dir: TempDir,
}

static FILES: OnceLock<Files> = OnceLock::new();

impl Files {
    fn get() -> &'static Files {
        FILES.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let block = log_block(MIB as usize);
            for (name, size) in SIZES {
                let mut out = BufWriter::new(File::create(dir.path().join(name)).unwrap());
                for _ in 0..size / MIB {
                    out.write_all(&block).unwrap();
                }
                out.flush().unwrap();
            }
            Files { dir }
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `len` bytes of log-like lines (about 60 bytes each, ending with `\n`).
fn log_block(len: usize) -> Vec<u8> {
    let mut block = Vec::with_capacity(len + 128);
    let mut i = 0u64;
    while block.len() < len {
        writeln!(
            block,
            "[{i:08}] compiling crate-{} v0.{}.{} (build step)",
            i % 97,
            i % 13,
            i % 7
        )
        .unwrap();
        i += 1;
    }
    block.truncate(len - 1);
    block.push(b'\n');
    block
}

fn reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("output_read");
    for (name, size) in SIZES {
        group.bench_function(BenchmarkId::new("delta_last_64KiB", name), |b| {
            let path = Files::get().path(name);
            b.iter(|| read_delta(&path, size - DELTA_BYTES, DELTA_BYTES as usize).unwrap());
        });
        group.bench_function(BenchmarkId::new("last_5_lines", name), |b| {
            let path = Files::get().path(name);
            b.iter(|| last_lines(&path, 5).unwrap());
        });
        group.bench_function(BenchmarkId::new("read_tail_64KiB", name), |b| {
            let path = Files::get().path(name);
            b.iter(|| read_tail(&path, DELTA_BYTES as usize).unwrap());
        });
        group.bench_function(BenchmarkId::new("progress_tail", name), |b| {
            let path = Files::get().path(name);
            b.iter(|| progress_tail(&path).unwrap());
        });
    }
    group.finish();
}

/// `tail` timed as a whole process (fork, exec, read, exit), output to /dev/null.
fn tail_processes(c: &mut Criterion) {
    let mut group = c.benchmark_group("output_tail_process");
    group.sample_size(20);
    for (name, _) in SIZES {
        for (label, args) in [("tail_n5", ["-n", "5"]), ("tail_c65536", ["-c", "65536"])] {
            group.bench_function(BenchmarkId::new(label, name), |b| {
                let path = Files::get().path(name);
                b.iter(|| run_tail(&args, &path));
            });
        }
    }
    group.finish();
}

fn run_tail(args: &[&str], path: &Path) {
    let status = Command::new("tail")
        .args(args)
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Pipe mode fed 64 KiB chunks, timed until flushed: all in memory (8 MiB), and spilling to
/// disk (128 MiB, page cache).
fn pipe_throughput(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let next = AtomicU64::new(0);
    let chunk = Bytes::from(log_block(64 * 1024));
    let mut group = c.benchmark_group("output_pipe");
    group.sample_size(10);
    for (label, total) in [("memory_8MiB", 8 * MIB), ("spill_128MiB", 128 * MIB)] {
        group.throughput(Throughput::Bytes(total));
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    let path = dir
                        .path()
                        .join(next.fetch_add(1, Ordering::Relaxed).to_string());
                    let start = Instant::now();
                    runtime.block_on(feed_pipe(&path, &chunk, total));
                    elapsed += start.elapsed();
                    // Deleting the file is not part of the measured work.
                    let _ = std::fs::remove_file(&path);
                }
                elapsed
            });
        });
    }
    group.finish();
}

async fn feed_pipe(path: &Path, chunk: &Bytes, total: u64) {
    let mut pipe = PipeOutput::new(path, PipeConfig::default());
    for _ in 0..total / chunk.len() as u64 {
        pipe.write_stdout(chunk.clone()).unwrap();
    }
    pipe.flush().await.unwrap();
    black_box(pipe.is_spilled());
}

criterion_group!(benches, reads, tail_processes, pipe_throughput);

/// `criterion_main!`, plus deleting the generated files (a static's `TempDir` is never dropped).
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if let Some(files) = FILES.get() {
        let _ = std::fs::remove_dir_all(files.dir.path());
    }
}
