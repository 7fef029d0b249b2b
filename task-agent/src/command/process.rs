//! The agent CLI's process: its group, signals, and the tail of its stderr.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use task_output::RecentLines;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

/// The longest stderr line kept: longer ones are cut while they are read.
const MAX_STDERR_LINE: usize = 4096;
/// How many bytes of stderr one read takes.
const READ_CHUNK: usize = 8192;
/// What ends a line that was cut.
const CUT_MARK: &str = "…";

/// Sends `signal` to process group `pgid`; a group already gone is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if let Err(errno) = kill_process_group(pid, signal)
        && errno != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid, %errno, "could not signal agent process group");
    }
}

/// Whether a stderr line says something: not blank, and not a frame of a backtrace (`  2:
/// <unknown>`, `at f (file.js:1:2)`, `stack backtrace:`).
fn says_something(line: &str) -> bool {
    let text = line.trim();
    let frame = text.starts_with("at ")
        || text.eq_ignore_ascii_case("stack backtrace:")
        || text
            .split_once(':')
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    !text.is_empty() && !frame
}

/// The last lines of a byte stream, bounded in lines and in bytes whatever the stream holds: a
/// line is cut while it is read (a line of any length costs at most its first
/// `MAX_STDERR_LINE` bytes, never more), and a `\r` not followed by `\n` starts the line over,
/// as on a terminal, so a progress bar redrawn in place keeps only its last drawing.
#[derive(Debug)]
pub(crate) struct StderrLines {
    /// The lines ended so far, the last of them kept (task-output's bounded line buffer).
    kept: RecentLines,
    /// The line being read, at most `max_line` bytes.
    current: Vec<u8>,
    /// Whether bytes of `current` were dropped.
    cut: bool,
    /// The last byte read was a `\r`: what follows redraws the line, unless it is `\n`.
    carriage_return: bool,
    /// The first line that says something ([`says_something`]): where a CLI that fails
    /// usually says why, before a backtrace that fills the tail.
    first: Option<String>,
    max_bytes: usize,
}

impl StderrLines {
    /// Keeps at most `max_lines` lines and `max_bytes` bytes of them (a line is cut to
    /// `min(MAX_STDERR_LINE, max_bytes)` bytes).
    pub(crate) fn new(max_lines: usize, max_bytes: usize) -> Self {
        StderrLines {
            kept: RecentLines::new(max_lines, max_bytes),
            current: Vec::new(),
            cut: false,
            carriage_return: false,
            first: None,
            max_bytes,
        }
    }

    /// Reads `chunk`, the next bytes of the stream.
    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        while let Some(&first) = chunk.first() {
            if std::mem::take(&mut self.carriage_return) && first != b'\n' {
                self.current.clear();
                self.cut = false;
            }
            let Some(at) = memchr::memchr2(b'\n', b'\r', chunk) else {
                self.append(chunk);
                return;
            };
            self.append(&chunk[..at]);
            if chunk[at] == b'\n' {
                self.end_line();
            } else {
                self.carriage_return = true;
            }
            chunk = &chunk[at + 1..];
        }
    }

    /// The stream ended: a last line without `\n` is kept too.
    pub(crate) fn finish(&mut self) {
        if !self.current.is_empty() || self.cut {
            self.end_line();
        }
    }

    /// The lines kept, oldest first, then the line being read if it holds anything.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines = self.kept.last(usize::MAX);
        if !self.current.is_empty() {
            lines.push(self.decoded());
        }
        lines
    }

    fn max_line(&self) -> usize {
        MAX_STDERR_LINE.min(self.max_bytes)
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = self.max_line().saturating_sub(self.current.len());
        let take = room.min(bytes.len());
        self.current.extend_from_slice(&bytes[..take]);
        self.cut |= take < bytes.len();
    }

    fn decoded(&self) -> String {
        let mut line = String::from_utf8_lossy(&self.current).trim_end().to_owned();
        if self.cut {
            line.push_str(CUT_MARK);
        }
        line
    }

    /// The first line that said something, if it is no longer among the kept ones.
    pub(crate) fn first_cut(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        (!self.kept.last(usize::MAX).contains(first)).then(|| first.clone())
    }

    fn end_line(&mut self) {
        let line = self.decoded();
        self.current.clear();
        self.cut = false;
        if self.first.is_none() && says_something(&line) {
            self.first = Some(line.clone());
        }
        self.kept.push(line.as_bytes());
        self.kept.push(b"\n");
    }
}

/// The last lines a process wrote to stderr ([`StderrLines`]), shared with the task that
/// reads them.
#[derive(Debug, Clone)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<StderrLines>>,
}

impl StderrTail {
    /// Keeps at most `max_lines` lines and `max_bytes` bytes.
    pub(crate) fn new(max_lines: usize, max_bytes: usize) -> Self {
        StderrTail {
            lines: Arc::new(Mutex::new(StderrLines::new(max_lines, max_bytes))),
        }
    }

    /// Reads `stderr`, in chunks of a fixed size, to its end or until the returned reader is
    /// drained (or dropped); every byte also goes to `kept`, if any, up to its cap.
    pub(crate) fn follow<R>(&self, mut stderr: R, mut kept: Option<KeptStderr>) -> StderrReader
    where
        R: AsyncRead + AsFd + Unpin + Send + 'static,
    {
        let lines = Arc::clone(&self.lines);
        let (drain, mut drain_asked) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut buf = vec![0; READ_CHUNK];
            // Once drained: how many bytes the pipe held then, still to read.
            let mut left: Option<usize> = None;
            while left != Some(0) {
                let want = left.map_or(READ_CHUNK, |left| left.min(READ_CHUNK));
                let read = match left {
                    Some(_) => stderr.read(&mut buf[..want]).await,
                    None => tokio::select! {
                        read = stderr.read(&mut buf) => read,
                        _ = &mut drain_asked => {
                            // This task is the pipe's one reader, between two reads: the pipe
                            // holds everything written and not read yet.
                            let pending = rustix::io::ioctl_fionread(&stderr).unwrap_or(0);
                            left = Some(usize::try_from(pending).unwrap_or(usize::MAX));
                            continue;
                        }
                    },
                };
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        lock(&lines).push(&buf[..n]);
                        if let Some(file) = &mut kept {
                            file.write(&buf[..n]);
                        }
                        left = left.map(|left| left.saturating_sub(n));
                    }
                }
            }
            lock(&lines).finish();
        });
        StderrReader { drain, task }
    }

    /// The lines kept, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        lock(&self.lines).lines()
    }

    /// The first line that said something, when the kept lines no longer hold it.
    pub(crate) fn first_cut(&self) -> Option<String> {
        lock(&self.lines).first_cut()
    }
}

/// The whole stderr of a CLI, kept in a file beside its transcript up to
/// [`MAX_KEPT_STDERR_BYTES`](task_output::transcript::MAX_KEPT_STDERR_BYTES), then the cut
/// notice once (a resumed run appends to what its earlier runs kept).
#[derive(Debug)]
pub(crate) struct KeptStderr {
    file: std::fs::File,
    path: std::path::PathBuf,
    written: u64,
    cut: bool,
}

impl KeptStderr {
    /// The file beside `transcript`, opened to append (a failure is logged: the tail is still
    /// kept in memory).
    pub(crate) fn beside(transcript: &std::path::Path) -> Option<Self> {
        let path = task_output::transcript::stderr_path(transcript);
        let file = task_output::open::open_append_creating(&path)
            .inspect_err(|error| tracing::warn!(%error, "the agent's stderr is not kept in a file"))
            .ok()?;
        let written = file.metadata().map_or(0, |meta| meta.len());
        Some(KeptStderr {
            file,
            path,
            written,
            cut: false,
        })
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let cap = task_output::transcript::MAX_KEPT_STDERR_BYTES;
        let room = usize::try_from(cap.saturating_sub(self.written)).unwrap_or(usize::MAX);
        let take = room.min(bytes.len());
        let mut result = self.file.write_all(&bytes[..take]);
        self.written += take as u64;
        if take < bytes.len() && !std::mem::replace(&mut self.cut, true) {
            result = result.and_then(|()| {
                self.file
                    .write_all(task_output::transcript::stderr_cut_notice().as_bytes())
            });
        }
        if let Err(error) = result {
            tracing::warn!(path = %self.path.display(), %error, "cannot keep the agent's stderr");
        }
    }
}

/// The task reading a process's stderr into its [`StderrTail`].
#[derive(Debug)]
pub(crate) struct StderrReader {
    drain: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl StderrReader {
    /// The process has exited: reads what the pipe holds now (everything the process wrote)
    /// and stops, without waiting for the end of the stream, which a descendant that
    /// inherited stderr (a tool's daemon) may hold open for ever. Gives up after `limit`.
    pub(crate) async fn drain(self, limit: Duration) {
        let StderrReader { drain, mut task } = self;
        let _ = drain.send(());
        if tokio::time::timeout(limit, &mut task).await.is_err() {
            task.abort();
        }
    }
}

fn lock(lines: &Mutex<StderrLines>) -> MutexGuard<'_, StderrLines> {
    lines.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(chunks: &[&[u8]], max_lines: usize, max_bytes: usize) -> Vec<String> {
        let mut tail = StderrLines::new(max_lines, max_bytes);
        for chunk in chunks {
            tail.push(chunk);
        }
        tail.finish();
        tail.lines()
    }

    #[test]
    fn the_first_line_that_says_something_is_kept_when_a_backtrace_fills_the_tail() {
        let mut tail = StderrLines::new(3, 1024);
        tail.push(b"\nError: model 'gpt-x' not found\nstack backtrace:\n");
        for n in 0..20 {
            tail.push(format!("  {n}: <unknown>\n").as_bytes());
        }
        tail.finish();
        assert_eq!(
            tail.lines(),
            ["  17: <unknown>", "  18: <unknown>", "  19: <unknown>"]
        );
        assert_eq!(
            tail.first_cut().as_deref(),
            Some("Error: model 'gpt-x' not found")
        );
        let mut short = StderrLines::new(3, 1024);
        short.push(b"Error: once\n");
        assert_eq!(short.first_cut(), None, "still among the kept lines");
    }

    #[test]
    fn lines_split_across_chunks_are_joined_and_the_last_ones_kept() {
        assert_eq!(
            read(&[b"one\ntw", b"o\r\nthree\nfo", b"ur"], 3, 1024),
            ["two", "three", "four"]
        );
    }

    #[test]
    fn a_long_line_is_cut_while_it_is_read() {
        let mut tail = StderrLines::new(10, 1 << 20);
        for _ in 0..1000 {
            tail.push(&[b'x'; READ_CHUNK]);
            assert!(tail.current.len() <= MAX_STDERR_LINE);
        }
        tail.push(b"\nafter\n");
        let lines = tail.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            format!("{}{CUT_MARK}", "x".repeat(MAX_STDERR_LINE))
        );
        assert_eq!(lines[1], "after");
    }

    #[test]
    fn the_kept_bytes_are_bounded_whatever_the_line_lengths() {
        let mut tail = StderrLines::new(1000, 100);
        for i in 0..500 {
            tail.push(format!("line {i} {}\n", "y".repeat(i % 70)).as_bytes());
            assert!(
                tail.kept.kept_bytes() <= 100 + CUT_MARK.len(),
                "{}",
                tail.kept.kept_bytes()
            );
        }
        assert_eq!(
            tail.lines().last().map(String::as_str),
            Some(&*format!("line 499 {}", "y".repeat(499 % 70)))
        );
    }

    #[test]
    fn a_carriage_return_redraws_the_line() {
        let bar: Vec<u8> = (0..=100)
            .flat_map(|p| format!("\rprogress {p}%").into_bytes())
            .collect();
        assert_eq!(
            read(&[b"start\n", &bar, b"\nerror: boom\n"], 10, 1024),
            ["start", "progress 100%", "error: boom"]
        );
        // Redrawn across chunks, and a bar still in progress at the end.
        assert_eq!(read(&[b"a 1%\r", b"a 2%\r", b"a 3%"], 10, 1024), ["a 3%"]);
    }
}
