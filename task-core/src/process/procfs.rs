//! Reading what this module needs about other processes from `/proc`.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

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
    let Ok(file) = fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut bytes = Vec::new();
    if file
        .take(MAX_ENVIRON_BYTES)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return false;
    }
    bytes.split(|&b| b == 0).any(|item| item == entry)
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
}
