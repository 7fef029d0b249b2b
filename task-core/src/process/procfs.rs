//! Reading what this module needs about other processes from `/proc`.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::sync::LazyLock;

use rustix::process::Pid;

/// The most bytes of `/proc/<pid>/environ` read when looking for a marker.
const MAX_ENVIRON_BYTES: u64 = 4 << 20;

/// The fields of `/proc/<pid>/stat` this crate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The one-letter state (`R`, `S`, `T`, `Z`, ...).
    pub(crate) state: char,
    /// The parent pid.
    pub(crate) ppid: i32,
    /// The process group id.
    pub(crate) pgrp: i32,
    /// The session id.
    pub(crate) session: i32,
    /// When it started, in clock ticks after boot.
    pub(crate) start_time: u64,
    /// CPU time spent in user and kernel mode, in clock ticks.
    pub(crate) cpu_ticks: u64,
}

impl ProcStat {
    /// Whether the process has exited (a zombie not yet reaped, or being reaped).
    pub(crate) fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub(crate) fn read_stat(pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
        cpu_ticks: fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?,
    })
}

/// The effective uid a process runs as (the owner of `/proc/<pid>`); `None` when it is gone.
pub(crate) fn owner(pid: u32) -> Option<u32> {
    fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|meta| meta.uid())
}

/// Whether the environment `pid` was started with holds exactly the entry `entry` (`KEY=value`).
/// `false` when it cannot be read (gone, a zombie, or not ours to read).
pub(crate) fn environ_has(pid: u32, entry: &[u8]) -> bool {
    environ(pid).is_some_and(|bytes| bytes.split(|&b| b == 0).any(|item| item == entry))
}

/// The value of `key` in the environment `pid` was started with; `None` when it has none or
/// the environment cannot be read.
pub(crate) fn environ_value(pid: u32, key: &str) -> Option<String> {
    let bytes = environ(pid)?;
    let prefix = format!("{key}=");
    bytes
        .split(|&b| b == 0)
        .find_map(|item| item.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// The environment `pid` was started with (at most [`MAX_ENVIRON_BYTES`]).
pub(crate) fn environ(pid: u32) -> Option<Vec<u8>> {
    let file = fs::File::open(format!("/proc/{pid}/environ")).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_ENVIRON_BYTES).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The command line of `pid`, its arguments joined by spaces, at most `limit` bytes (cut at a
/// character boundary); the command name in brackets for a process with none (a kernel
/// thread, a zombie); `None` when it is gone.
pub(crate) fn command_line(pid: u32, limit: usize) -> Option<String> {
    let bytes = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let text = if bytes.is_empty() {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        format!("[{}]", comm.trim_end())
    } else {
        let words: Vec<_> = bytes
            .split(|&b| b == 0)
            .filter(|word| !word.is_empty())
            .map(String::from_utf8_lossy)
            .collect();
        words.join(" ")
    };
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(text[..end].to_owned())
}

/// The resident set size of `pid` in bytes (`VmRSS` of `/proc/<pid>/status`); `None` when it
/// is gone or has none (a zombie).
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Seconds since boot (`/proc/uptime`).
pub(crate) fn uptime() -> Option<f64> {
    let text = fs::read_to_string("/proc/uptime").ok()?;
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// Every pid in `/proc` (processes, not threads).
pub(crate) fn all_pids() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .collect()
}

/// Whether this kernel exposes `/proc/<pid>/task/<tid>/children` (CONFIG_PROC_CHILDREN).
static HAS_CHILDREN_FILES: LazyLock<bool> = LazyLock::new(|| {
    let me = std::process::id();
    fs::metadata(format!("/proc/{me}/task/{me}/children")).is_ok()
});

/// The direct children of `pid` (empty when it is gone).
pub(crate) fn children_of(pid: Pid) -> Vec<Pid> {
    if *HAS_CHILDREN_FILES {
        children_from_task_files(pid)
    } else {
        children_from_stat_scan(pid)
    }
}

/// The children this process adopted as a subreaper, with those its main thread started: the
/// children of its main thread. The kernel gives an orphan to the first live thread of its new
/// parent, the main thread while it lives, whereas a child belongs to the thread that started
/// it; a supervisor starts its tasks' processes from its runtime's worker threads, so this
/// list holds the processes it adopted and not one entry per live task (a `children` file
/// costs the kernel time that grows with the square of its length: reading every thread's
/// was most of a start's cost at 1 000 live tasks). Without children files: every child.
pub(crate) fn adopted_children() -> Vec<Pid> {
    let me = std::process::id();
    match to_pid(me) {
        Ok(pid) if !*HAS_CHILDREN_FILES => children_from_stat_scan(pid),
        Ok(_) => fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
            .map(|text| parse_pids(&text))
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Reads `/proc/<pid>/task/*/children`: cheap, proportional to the tree.
fn children_from_task_files(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{}/task", pid.as_raw_nonzero())) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| parse_pids(&text))
        .collect()
}

/// Scans every `/proc/<n>/stat` for a matching parent pid: the fallback for kernels without
/// children files.
fn children_from_stat_scan(parent: Pid) -> Vec<Pid> {
    all_pids()
        .into_iter()
        .filter(|&n| read_stat(n).is_some_and(|stat| stat.ppid == parent.as_raw_nonzero().get()))
        .filter_map(|n| to_pid(n).ok())
        .collect()
}

fn parse_pids(text: &str) -> Vec<Pid> {
    text.split_ascii_whitespace()
        .filter_map(|word| word.parse::<u32>().ok())
        .filter_map(|n| to_pid(n).ok())
        .collect()
}

/// `raw` as a pid: refused (`InvalidInput`) when it is 0 or out of range.
pub(crate) fn to_pid(raw: u32) -> io::Result<Pid> {
    i32::try_from(raw)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("invalid pid {raw}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    #[test]
    fn stat_of_self_parses() {
        let me = std::process::id();
        let stat = read_stat(me).expect("this process has a stat");
        assert!(matches!(stat.state, 'R' | 'S'), "{stat:?}");
        assert_eq!(stat.ppid, std::os::unix::process::parent_id() as i32);
        assert!(stat.start_time > 0);
        assert!(!stat.is_dead());
    }

    /// The session and group fields, checked against a child whose group
    /// is known (its own pid) and whose session is inherited from us. The
    /// session is compared with ours as procfs reports it: where the
    /// session leader lives outside this pid namespace (containers) the
    /// kernel reports 0, and `getsid(2)` returns 0, which rustix's typed
    /// `getsid` refuses.
    #[test]
    fn stat_of_a_child_names_its_group_and_session() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let stat = read_stat(child.id());
        let mine = read_stat(std::process::id()).expect("this process has a stat");
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        let stat = stat.expect("the child has a stat");
        assert_eq!(stat.pgrp, child.id() as i32);
        assert_eq!(stat.ppid, std::process::id() as i32);
        assert_eq!(stat.session, mine.session);
    }

    #[test]
    fn our_own_environment_is_readable() {
        let me = std::process::id();
        assert_eq!(owner(me), Some(rustix::process::geteuid().as_raw()));
        let path = std::env::var_os("PATH").map(|p| p.into_encoded_bytes());
        if let Some(path) = path {
            let mut entry = b"PATH=".to_vec();
            entry.extend(path);
            assert!(environ_has(me, &entry));
        }
        assert!(!environ_has(me, b"TASKS_NO_SUCH_VARIABLE=1"));
        assert!(all_pids().contains(&me));
    }

    #[test]
    fn pid_lists_parse() {
        let pids: Vec<i32> = parse_pids("12 34 \n")
            .iter()
            .map(|p| p.as_raw_nonzero().get())
            .collect();
        assert_eq!(pids, [12, 34]);
        assert!(parse_pids("").is_empty());
    }
}
