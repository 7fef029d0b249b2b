//! `doctor`: integrity check of a list, and its repair (`--fix`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use rustix::fs::{FileType, RenameFlags, Stat};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::audit::{AUDIT_LOG_FILE, AuditOp, AuditRecord};
use crate::backend::StoreTxn;
use crate::cache::{CACHE_FILE, CACHE_MAX_BYTES};
use crate::entry::{EntryFault, EntryKind, QUARANTINE_DIR};
use crate::error::{IoContext, Result};
use crate::fsutil::{self, is_temp_file};
use crate::graph::Graph;
use crate::id::TaskId;
use crate::lock::{LIST_LOCK_FILE, lock_age};
use crate::mailbox::INBOX_DIR;
use crate::record::Task;
use crate::snapshot::Snapshot;
use crate::store::{HIGH_WATER_MARK_FILE, HIGH_WATER_MARK_MAX_BYTES, TaskList};
use crate::txn::JOURNAL_FILE;
use crate::wal::WAL_FILE;

/// One integrity problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Problem {
    /// An edge recorded on one task only. Fixed by writing the other side.
    AsymmetricEdge {
        /// The blocking task.
        blocker: TaskId,
        /// The blocked task.
        blocked: TaskId,
        /// The task whose record lacks the edge.
        missing_on: TaskId,
    },
    /// A reference to a task that does not exist. Fixed by removing it.
    DanglingReference {
        /// The task holding the reference.
        task: TaskId,
        /// The id it refers to.
        target: TaskId,
    },
    /// A task that blocks itself. Fixed by removing the edge.
    SelfEdge {
        /// The task.
        task: TaskId,
    },
    /// The same id listed twice in one edge list. Fixed by removing the copy.
    DuplicateReference {
        /// The task holding it.
        task: TaskId,
        /// The repeated id.
        target: TaskId,
    },
    /// A dependency cycle, as a closed path. Fixed by removing its last edge.
    Cycle {
        /// `a → … → a`.
        path: Vec<TaskId>,
    },
    /// The high-water mark is below an id that was issued (per the task files or the audit
    /// log), or unreadable: the next create could reuse an id. Fixed by raising it.
    HighWaterMarkDrift {
        /// The mark on disk (0 if missing or unreadable).
        high_water_mark: u64,
        /// The highest id known to have been issued.
        highest_issued: u64,
    },
    /// A task file that does not parse. Reported only: nothing is deleted.
    CorruptFile {
        /// File name.
        file: String,
        /// Parser message.
        message: String,
    },
    /// An entry of the list directory that is not read: a FIFO, a symlink, a directory, a file
    /// over the size limit or an invalid id where a task file, the high-water mark, the journal,
    /// the audit log, the snapshot cache, the inbox directory or an inbox is expected (see
    /// [`EntryFault`]). Every reader skips it with a warning. Fixed, when it can never hold a
    /// task ([`EntryFault::may_hold_a_task`]), by moving it into [`crate::QUARANTINE_DIR`]
    /// (never following a symlink); one that may is reported only, as a corrupt file is, and so
    /// is the list's `.lock`.
    BadEntry {
        /// Its path inside the list directory (`3.json`, `.inboxes/ann.jsonl`).
        file: String,
        /// What is wrong with it.
        fault: EntryFault,
    },
    /// A lock directory older than the stale limit (a crashed holder). Fixed by removing it.
    StaleLock {
        /// Its name in the list directory.
        name: String,
        /// Time since its last refresh.
        age_ms: u64,
    },
    /// A temp file left by a writer killed before its rename. Fixed by removing it (the
    /// target file was never touched).
    LeftoverTempFile {
        /// Its name in the list directory.
        name: String,
    },
    /// The journal of a writer killed mid-commit. Fixed (by any writer) by replaying it. Until
    /// then, the change it carries may be half applied, so the same report can show that
    /// change's edges one-sided ([`Problem::AsymmetricEdge`], [`Problem::DanglingReference`]);
    /// `doctor --fix` replays the journal before it looks.
    UnfinishedJournal,
    /// A lock directory currently held (informational: a writer is active, or died less than
    /// the stale limit ago).
    LockHeld {
        /// Its name in the list directory.
        name: String,
        /// Time since its last refresh.
        age_ms: u64,
    },
}

/// The answer of [`TaskList::doctor`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// What was found (before fixing).
    pub problems: Vec<Problem>,
    /// Whether the fixable problems were repaired.
    pub fixed: bool,
}

impl DoctorReport {
    /// No problem at all (a held lock counts as one: a writer is active).
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl TaskList {
    /// Checks the list; with `fix`, repairs what can be repaired without losing data, under the
    /// list lock, and records each repair in the audit log.
    pub fn doctor(&self, fix: bool) -> Result<DoctorReport> {
        if !fix {
            let snapshot = self.snapshot()?;
            return Ok(DoctorReport {
                problems: self.find_problems(&snapshot, false)?,
                fixed: false,
            });
        }
        // It reads the directory itself (lock directories, temp files): in no shared
        // transaction.
        let problems = self.write_alone(true, |txn| {
            let snapshot = self.snapshot()?;
            let problems = self.find_problems(&snapshot, true)?;
            self.repair(txn, &snapshot, &problems)?;
            Ok(problems)
        })?;
        Ok(DoctorReport {
            problems,
            fixed: true,
        })
    }

    /// Everything wrong with the list; `locked`: the caller holds the list lock (its own lock
    /// directory is then no problem to report).
    fn find_problems(&self, snapshot: &Snapshot, locked: bool) -> Result<Vec<Problem>> {
        let mut problems: Vec<Problem> = snapshot
            .problems
            .iter()
            .map(|p| match &p.fault {
                EntryFault::Malformed { message } => Problem::CorruptFile {
                    file: p.file.clone(),
                    message: message.clone(),
                },
                fault => Problem::BadEntry {
                    file: p.file.clone(),
                    fault: fault.clone(),
                },
            })
            .collect();
        problems.extend(edge_problems(&snapshot.tasks));
        let (repaired, _) = repaired_edges(&snapshot.tasks);
        problems.extend(
            Graph::from_tasks(&repaired)
                .cycles()
                .into_iter()
                .map(|path| Problem::Cycle { path }),
        );
        let high_water_mark = self.high_water_mark()?;
        let highest_issued = self.highest_issued(snapshot)?;
        let highest_file = snapshot.tasks.keys().next_back().map_or(0, |id| id.get());
        if highest_issued > high_water_mark.max(highest_file)
            || self.high_water_mark_unreadable()?
        {
            problems.push(Problem::HighWaterMarkDrift {
                high_water_mark,
                highest_issued: highest_issued.max(highest_file),
            });
        }
        problems.extend(self.leftovers(locked)?);
        Ok(problems)
    }

    /// The highest id known to have been issued: task files and the audit log (read a line
    /// at a time).
    fn highest_issued(&self, snapshot: &Snapshot) -> Result<u64> {
        let mut highest = snapshot.tasks.keys().next_back().map_or(0, |id| id.get());
        let mut issued = |record: AuditRecord| {
            if let Some(id) = record.task_id {
                highest = highest.max(id.get());
            }
        };
        match self.pg() {
            Some(pg) => pg.audit_log()?.0.into_iter().for_each(issued),
            None => drop(self.each_audit_record(&mut issued)?),
        }
        Ok(highest)
    }

    fn high_water_mark_unreadable(&self) -> Result<bool> {
        if self.pg().is_some() {
            return Ok(false); // a bigint column cannot hold anything else
        }
        Ok(self.high_water_mark_on_disk()?.1.is_some())
    }

    /// Lock directories, temp files and a journal left in the list directory (files only);
    /// `locked`: the list lock is the caller's own, not reported.
    fn leftovers(&self, locked: bool) -> Result<Vec<Problem>> {
        let own_lock = crate::lock::lock_dir_for(&self.dir().join(crate::lock::LIST_LOCK_FILE));
        let mut problems = Vec::new();
        if self.pg().is_some() {
            return Ok(problems); // no lock directories, temp files or journal in a database
        }
        for entry in std::fs::read_dir(self.dir()).at("list", self.dir())? {
            let entry = entry.at("list", self.dir())?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(fault) = self.state_entry_fault(&entry.path(), &name)? {
                problems.push(Problem::BadEntry { file: name, fault });
                continue;
            }
            if name == INBOX_DIR {
                problems.extend(self.bad_inboxes(&entry.path())?);
                continue;
            }
            if is_temp_file(&name) {
                problems.push(Problem::LeftoverTempFile { name });
                continue;
            }
            if name == JOURNAL_FILE || (name == WAL_FILE && self.journal_needs_recovery()?) {
                problems.push(Problem::UnfinishedJournal);
                continue;
            }
            if !name.ends_with(".lock") || !entry.file_type().at("stat", &entry.path())?.is_dir() {
                continue;
            }
            if locked && entry.path() == own_lock {
                continue;
            }
            let Some(age) = lock_age(&entry.path())? else {
                continue;
            };
            let age_ms = millis(age);
            problems.push(if age > self.config.lock.stale_after {
                Problem::StaleLock { name, age_ms }
            } else {
                Problem::LockHeld { name, age_ms }
            });
        }
        Ok(problems)
    }

    /// What is wrong with `entry`, named `name`, if it is one of the list's own files (the
    /// high-water mark, the journal, the audit log, the snapshot cache, `.lock`, the inbox
    /// directory) and is not what it should be. Task files are the snapshot's.
    fn state_entry_fault(&self, path: &Path, name: &str) -> Result<Option<EntryFault>> {
        let max = match name {
            HIGH_WATER_MARK_FILE => HIGH_WATER_MARK_MAX_BYTES,
            JOURNAL_FILE | WAL_FILE | AUDIT_LOG_FILE => self.config.max_log_bytes,
            CACHE_FILE => CACHE_MAX_BYTES,
            LIST_LOCK_FILE => u64::MAX,
            INBOX_DIR => {
                let kind = lstat(path)?.map(|s| EntryKind::of(FileType::from_raw_mode(s.st_mode)));
                return Ok(match kind {
                    None | Some(Some(EntryKind::Directory)) => None,
                    Some(kind) => Some(EntryFault::NotADirectory { kind }),
                });
            }
            _ => return Ok(None),
        };
        entry_fault(path, max)
    }

    /// The inboxes of the directory `dir` that are not regular files within
    /// [`crate::StoreConfig::max_log_bytes`].
    fn bad_inboxes(&self, dir: &Path) -> Result<Vec<Problem>> {
        let mut problems = Vec::new();
        for entry in std::fs::read_dir(dir).at("list", dir)? {
            let entry = entry.at("list", dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".jsonl") {
                continue;
            }
            if let Some(fault) = entry_fault(&entry.path(), self.config.max_log_bytes)? {
                let file = format!("{INBOX_DIR}/{name}");
                problems.push(Problem::BadEntry { file, fault });
            }
        }
        Ok(problems)
    }

    fn repair(
        &self,
        txn: &mut dyn StoreTxn,
        snapshot: &Snapshot,
        problems: &[Problem],
    ) -> Result<()> {
        let (mut repaired, _) = repaired_edges(&snapshot.tasks);
        break_cycles(&mut repaired);
        for (id, task) in &repaired {
            let Some(before) = snapshot.tasks.get(id) else {
                continue;
            };
            if before.blocks == task.blocks && before.blocked_by == task.blocked_by {
                continue;
            }
            if let Some(mut locked) = txn.lock(*id)? {
                locked.blocks.clone_from(&task.blocks);
                locked.blocked_by.clone_from(&task.blocked_by);
                txn.save(&locked)?;
                let fields = vec!["blocks".into(), "blockedBy".into()];
                txn.record(AuditRecord::now(
                    &self.actor.name,
                    AuditOp::Repair,
                    Some(*id),
                    fields,
                ));
            }
        }
        for problem in problems {
            match problem {
                Problem::HighWaterMarkDrift { highest_issued, .. } => {
                    txn.raise_high_water_mark(*highest_issued)?;
                    txn.record(AuditRecord::now(
                        &self.actor.name,
                        AuditOp::Repair,
                        None,
                        vec!["highwatermark".into()],
                    ));
                }
                Problem::StaleLock { name, .. } => self.remove_stale_lock(name)?,
                Problem::BadEntry { file, fault } if quarantined(file, fault) => {
                    self.quarantine(file, fault)?;
                }
                Problem::LeftoverTempFile { name } => {
                    fsutil::remove_if_exists(&self.dir().join(name))?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Moves the bad entry `file` (a name in the list directory, or `.inboxes/{name}`) into
    /// [`QUARANTINE_DIR`] if it still has `fault` (looked at again: a writer may have replaced
    /// it since). A rename relative to directories opened `O_NOFOLLOW`: a symlink is moved,
    /// never followed, and nothing is deleted. A quarantine that is itself not a directory is
    /// left alone, with a warning.
    fn quarantine(&self, file: &str, fault: &EntryFault) -> Result<()> {
        let path = self.dir().join(file);
        if !still_has(&path, fault)? {
            return Ok(());
        }
        let (from_dir, name) = match file.split_once('/') {
            Some((dir, name)) => (self.dir().join(dir), name),
            None => (self.dir().to_path_buf(), file),
        };
        let from = open_dir_nofollow(&from_dir)?;
        let quarantine = self.dir().join(QUARANTINE_DIR);
        match std::fs::create_dir(&quarantine) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).at("mkdir", &quarantine);
            }
            _ => {}
        }
        let to = match open_dir_nofollow(&quarantine) {
            Ok(to) => to,
            Err(e) => {
                tracing::warn!(error = %e, %file, "not quarantined: the quarantine is not a directory");
                return Ok(());
            }
        };
        let base = file.replace('/', "-");
        for n in 0..MAX_QUARANTINED_COPIES {
            let target = match n {
                0 => base.clone(),
                n => format!("{base}.{n}"),
            };
            match rustix::fs::renameat_with(&from, name, &to, &target, RenameFlags::NOREPLACE) {
                Ok(()) => {
                    tracing::warn!(%file, %fault, to = %quarantine.join(&target).display(), "quarantined a bad entry of the list");
                    return Ok(());
                }
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(std::io::Error::from(e)).at("rename", &path),
            }
        }
        Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists)).at("rename", &path)
    }

    fn remove_stale_lock(&self, name: &str) -> Result<()> {
        let path = self.dir().join(name);
        if lock_age(&path)?.is_some_and(|age| age > self.config.lock.stale_after) {
            match std::fs::remove_dir(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).at("rmdir", &path);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether `doctor --fix` moves the bad entry `file` into the quarantine: it can never hold a
/// task, and it is not the list's `.lock` (which the repair itself holds).
fn quarantined(file: &str, fault: &EntryFault) -> bool {
    !fault.may_hold_a_task() && file != LIST_LOCK_FILE
}

/// How many entries of one name the quarantine keeps (`{name}`, `{name}.1`, …).
const MAX_QUARANTINED_COPIES: u32 = 1000;

/// Whether the entry at `path` still has `fault` (for a fault that a rename can fix).
fn still_has(path: &Path, fault: &EntryFault) -> Result<bool> {
    let Some(stat) = lstat(path)? else {
        return Ok(false);
    };
    let kind = EntryKind::of(FileType::from_raw_mode(stat.st_mode));
    Ok(match fault {
        EntryFault::NotRegularFile { kind: was } => kind == Some(*was),
        EntryFault::NotADirectory { kind: was } => kind == *was,
        EntryFault::TooLarge { limit, .. } => {
            kind.is_none() && u64::try_from(stat.st_size).unwrap_or(0) > *limit
        }
        EntryFault::InvalidId => true,
        _ => false,
    })
}

/// Opens the directory `path`, refusing a symlink.
fn open_dir_nofollow(path: &Path) -> Result<std::fs::File> {
    task_output::open::NoFollow::directory()
        .open(path)
        .map_err(std::io::Error::from)
        .at("open", path)
}

/// What is wrong with the entry at `path`, expected to be a regular file of at most `max` bytes
/// (looked at without following a symlink or opening anything).
fn entry_fault(path: &Path, max: u64) -> Result<Option<EntryFault>> {
    let Some(stat) = lstat(path)? else {
        return Ok(None);
    };
    if let Some(kind) = EntryKind::of(FileType::from_raw_mode(stat.st_mode)) {
        return Ok(Some(EntryFault::NotRegularFile { kind }));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    Ok((size > max).then_some(EntryFault::TooLarge { size, limit: max }))
}

/// The `lstat` of `path`, `None` if nothing is there.
fn lstat(path: &Path) -> Result<Option<Stat>> {
    match rustix::fs::lstat(path) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(std::io::Error::from(e)).at("stat", path),
    }
}

fn edge_problems(tasks: &BTreeMap<TaskId, Task>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for task in tasks.values() {
        for (list, this_blocks) in [(&task.blocks, true), (&task.blocked_by, false)] {
            let mut seen = BTreeSet::new();
            for &target in list {
                if !seen.insert(target) {
                    problems.push(Problem::DuplicateReference {
                        task: task.id,
                        target,
                    });
                } else if target == task.id {
                    if this_blocks {
                        problems.push(Problem::SelfEdge { task: task.id });
                    }
                } else if let Some(other) = tasks.get(&target) {
                    let mirrored = if this_blocks {
                        &other.blocked_by
                    } else {
                        &other.blocks
                    };
                    if !mirrored.contains(&task.id) {
                        let (blocker, blocked) = if this_blocks {
                            (task.id, target)
                        } else {
                            (target, task.id)
                        };
                        problems.push(Problem::AsymmetricEdge {
                            blocker,
                            blocked,
                            missing_on: target,
                        });
                    }
                } else {
                    problems.push(Problem::DanglingReference {
                        task: task.id,
                        target,
                    });
                }
            }
        }
    }
    problems
}

/// The tasks with clean, symmetric edges: self-edges, dangling ids and duplicates removed,
/// one-sided edges completed. Also returns the edge set.
fn repaired_edges(
    tasks: &BTreeMap<TaskId, Task>,
) -> (BTreeMap<TaskId, Task>, BTreeSet<(TaskId, TaskId)>) {
    let mut edges = BTreeSet::new();
    for task in tasks.values() {
        edges.extend(task.blocks.iter().map(|&b| (task.id, b)));
        edges.extend(task.blocked_by.iter().map(|&b| (b, task.id)));
    }
    edges.retain(|(a, b)| a != b && tasks.contains_key(a) && tasks.contains_key(b));
    (with_edges(tasks, &edges), edges)
}

/// `tasks` with their edge lists rebuilt from `edges`, keeping each list's existing order.
fn with_edges(
    tasks: &BTreeMap<TaskId, Task>,
    edges: &BTreeSet<(TaskId, TaskId)>,
) -> BTreeMap<TaskId, Task> {
    let mut outs: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
    let mut ins: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
    for &(from, to) in edges {
        outs.entry(from).or_default().push(to);
        ins.entry(to).or_default().push(from);
    }
    let mut out = tasks.clone();
    for task in out.values_mut() {
        keep_order(&mut task.blocks, outs.remove(&task.id).unwrap_or_default());
        keep_order(
            &mut task.blocked_by,
            ins.remove(&task.id).unwrap_or_default(),
        );
    }
    out
}

/// Makes `list` hold exactly `wanted`: existing entries keep their order, new ones go last.
fn keep_order(list: &mut Vec<TaskId>, wanted: Vec<TaskId>) {
    let wanted_set: BTreeSet<TaskId> = wanted.iter().copied().collect();
    let mut seen = BTreeSet::new();
    list.retain(|t| wanted_set.contains(t) && seen.insert(*t));
    list.extend(wanted.into_iter().filter(|t| seen.insert(*t)));
}

/// Removes the closing edge of each cycle until none is left.
fn break_cycles(tasks: &mut BTreeMap<TaskId, Task>) {
    loop {
        let cycles = Graph::from_tasks(tasks).cycles();
        if cycles.is_empty() {
            return;
        }
        for cycle in cycles {
            if let [.., from, to] = cycle[..] {
                if let Some(t) = tasks.get_mut(&from) {
                    t.blocks.retain(|&b| b != to);
                }
                if let Some(t) = tasks.get_mut(&to) {
                    t.blocked_by.retain(|&b| b != from);
                }
            }
        }
    }
}

/// How long ago, in whole milliseconds (for reports).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
