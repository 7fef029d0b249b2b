//! The write-ahead journal of a list (`.wal`): one device flush per write.
//!
//! A write transaction's changes (the new contents of every file it changes, and its audit
//! lines) are appended to the journal as one checksummed, length-framed record and flushed
//! with one `fdatasync`: that is the commit point. Only then are they applied to the task files
//! (temp file, rename into place: a reader never sees a torn file) and to the audit log, without
//! waiting for those to be flushed, and a small `applied` record is appended after them
//! (not flushed). So a write waits for one flush, where applying durably waited for two or
//! three rounds.
//!
//! Frames: `len: u32 LE`, `sum: 8 bytes`, `payload: len bytes` (JSON), `len: u32 LE` again (so
//! the last frame is found from the end). `sum` is the first 8 bytes of SHA-256 over the
//! journal's epoch, the frame's offset, `len` and the payload: a torn or unwritten tail, or a
//! stale block of an earlier journal (another epoch) or of another offset, never checks.
//!
//! The header (`MAGIC`, a random epoch, the boot id of the machine's current boot, the audit
//! log's size when the journal was started, a sum) is written under a temp name, flushed and
//! renamed into place, the directory flushed: a journal is started whole.
//!
//! Recovery, by whoever next takes the list lock (a writer, or `TaskList::open` when it sees
//! a reason to):
//! - **Same boot** (the header's boot id is the machine's): every applied file is in the page
//!   cache, so only the last record can be unapplied, when its writer was killed between its
//!   flush and its `applied` record. It is flushed (its writer may have died before its flush
//!   returned), applied again (the records hold whole new contents, so this is idempotent), its
//!   audit lines appended unless the log already ends with them, and marked applied.
//! - **Another boot** (the machine crashed or lost power, or was rebooted; or the boot id cannot
//!   be read): the applied files may not have reached the disk. Every record of the journal is
//!   applied again in order, except over a task file changed after its record was marked
//!   applied (the `applied` record carries the time) that holds a whole task of its id: a write
//!   of the reference's made after ours, which survived. The audit log is cut back to its size
//!   at the journal's start and every record's lines appended again, then the journal is
//!   checkpointed.
//!
//! Checkpoint, when the journal has grown past [`crate::StoreConfig::journal_checkpoint_bytes`]
//! (and after every write when the boot id cannot be read): every file the journal's records
//! name, the audit log and the directory are flushed at once, then a new journal (new epoch) is
//! renamed over the old one and the directory flushed.
//!
//! What a reference harness writing the same list can see: it writes a task file in place
//! under `{id}.json.lock`, which our writer (with [`crate::LockConfig::reference_locks`] on)
//! holds on every task file of a transaction from its read to its `applied` record, so the two never interleave on a file. A record is applied
//! again only when its writer died before marking it, while that writer's lock directories are
//! still there (a live reference harness takes a lock over only once it is stale, after
//! [`crate::LockConfig::stale_after`]), or after a reboot, over a file the reference did not
//! write since, or whose write the crash tore (the reference flushes nothing).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use task_output::OutputError;
use task_output::open::NoFollow;

use crate::audit::AUDIT_LOG_FILE;
use crate::entry::{EntryFault, EntryKind};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{self, Staged};
use crate::id::TaskId;
use crate::lock::{DirLock, ListGuard};
use crate::store::{HIGH_WATER_MARK_FILE, TaskList};

/// The write-ahead journal of a list.
pub(crate) const WAL_FILE: &str = ".wal";

/// The first bytes of a journal (format 1).
const MAGIC: [u8; 8] = *b"tlwal\0\0\x01";

/// Magic, epoch, boot id, audit base, sum.
const HEADER_LEN: u64 = 8 + 8 + 16 + 8 + 8;

/// A frame's bytes besides its payload: length, sum, length.
const FRAME_OVERHEAD: u64 = 4 + 8 + 4;

/// One file change: new contents, or removal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileChange {
    /// The file's name in the list directory (a task file or `.highwatermark`).
    pub(crate) name: String,
    /// Its new contents; `None` removes it.
    pub(crate) contents: Option<String>,
}

impl FileChange {
    /// Whether the change names one of the files a journal may change.
    pub(crate) fn is_in_list(&self) -> bool {
        self.name == HIGH_WATER_MARK_FILE || TaskId::from_file_name(&self.name).is_some()
    }
}

/// A record of the journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum Entry {
    /// A committed transaction: its file changes and its audit lines (joined by `\n`, no
    /// final newline; empty for none).
    Op {
        changes: Vec<FileChange>,
        audit: String,
    },
    /// The `Op` at offset `at` is applied; `time`: when it was done (nanoseconds since the
    /// epoch, this machine's clock).
    Applied {
        at: u64,
        #[serde(default)]
        time: u64,
    },
}

/// A record to append: [`Entry`], borrowed.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum NewEntry<'a> {
    Op {
        changes: &'a [FileChange],
        audit: &'a str,
    },
    Applied {
        at: u64,
        time: u64,
    },
}

/// The journal's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    /// Random, new for each journal: frames of an earlier journal never check.
    epoch: u64,
    /// The boot id of the boot that started the journal (zero if it could not be read).
    boot: [u8; 16],
    /// The audit log's size when the journal was started (flushed up to there).
    audit_base: u64,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_LEN as usize);
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&self.epoch.to_le_bytes());
        bytes.extend_from_slice(&self.boot);
        bytes.extend_from_slice(&self.audit_base.to_le_bytes());
        let sum = sum8(&[&bytes]);
        bytes.extend_from_slice(&sum);
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..HEADER_LEN as usize)?;
        let (body, sum) = bytes.split_at(HEADER_LEN as usize - 8);
        if body[..8] != MAGIC || sum8(&[body]) != sum {
            return None;
        }
        Some(Self {
            epoch: u64::from_le_bytes(body[8..16].try_into().ok()?),
            boot: body[16..32].try_into().ok()?,
            audit_base: u64::from_le_bytes(body[32..40].try_into().ok()?),
        })
    }

    /// Whether the journal was started in the machine's current boot (never, if the boot id
    /// cannot be read).
    fn this_boot(&self) -> bool {
        current_boot().is_some_and(|boot| boot == self.boot)
    }
}

/// The first 8 bytes of SHA-256 over `parts`.
fn sum8(parts: &[&[u8]]) -> [u8; 8] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part);
    }
    let digest = hash.finalize();
    let mut sum = [0; 8];
    sum.copy_from_slice(&digest[..8]);
    sum
}

/// The sum of the frame at offset `at` holding `payload`.
fn frame_sum(epoch: u64, at: u64, payload: &[u8]) -> [u8; 8] {
    let len = payload.len() as u64;
    sum8(&[
        &epoch.to_le_bytes(),
        &at.to_le_bytes(),
        &len.to_le_bytes(),
        payload,
    ])
}

/// The frame of `entry` at offset `at`.
fn encode_frame(epoch: u64, at: u64, entry: &NewEntry<'_>) -> Result<Vec<u8>> {
    let payload = serde_json::to_vec(entry)
        .map_err(|e| Error::Internal(format!("a journal record does not encode: {e}")))?;
    let len = u32::try_from(payload.len())
        .map_err(|_| Error::Internal("a journal record over 4 GiB".into()))?;
    let mut frame = Vec::with_capacity(payload.len() + FRAME_OVERHEAD as usize);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&frame_sum(epoch, at, &payload));
    frame.extend_from_slice(&payload);
    frame.extend_from_slice(&len.to_le_bytes());
    Ok(frame)
}

/// The entry of the frame that starts `bytes` at offset `at`, and the frame's length; `None`
/// if it is torn, does not check or does not parse.
fn decode_frame(epoch: u64, at: u64, bytes: &[u8]) -> Option<(Entry, u64)> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let sum = bytes.get(4..12)?;
    let payload = bytes.get(12..12 + len)?;
    let trailer = bytes.get(12 + len..16 + len)?;
    if trailer != (len as u32).to_le_bytes() || sum != frame_sum(epoch, at, payload) {
        return None;
    }
    let entry = serde_json::from_slice(payload).ok()?;
    Some((entry, len as u64 + FRAME_OVERHEAD))
}

/// Every entry of the journal `bytes` (header included) that checks, with its offset, up to
/// the first that does not; and the offset where they end.
fn scan(epoch: u64, bytes: &[u8]) -> (Vec<(u64, Entry)>, u64) {
    let mut entries = Vec::new();
    let mut at = HEADER_LEN;
    while let Some((entry, len)) = bytes
        .get(at as usize..)
        .and_then(|rest| decode_frame(epoch, at, rest))
    {
        entries.push((at, entry));
        at += len;
    }
    (entries, at)
}

/// The boot id of the machine's current boot (`/proc/sys/kernel/random/boot_id`), read once.
fn current_boot() -> Option<[u8; 16]> {
    static BOOT: OnceLock<Option<[u8; 16]>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        let mut boot = [0; 16];
        for (byte, pair) in boot.iter_mut().zip(hex.chunks_exact(2)) {
            *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        (hex.len() == 32 && boot != [0; 16]).then_some(boot)
    })
}

/// What the journal at `path` says about the list, read without the lock.
fn needs_recovery_at(path: &Path, max: u64) -> Result<bool> {
    // Something other than a regular file is no journal: writers refuse it, `doctor` names it.
    let Some(file) = open_if_regular(path)? else {
        return Ok(false);
    };
    let size = file.len();
    if size > max {
        return Ok(false);
    }
    let file = file.into_file();
    let mut header = [0; HEADER_LEN as usize];
    if file.read_exact_at(&mut header, 0).is_err() {
        return Ok(false);
    }
    let Some(header) = Header::decode(&header) else {
        return Ok(false);
    };
    if !header.this_boot() {
        // Records of an earlier boot, unless there are none.
        return Ok(size > HEADER_LEN);
    }
    Ok(match last_frame(&file, size, header.epoch)? {
        Some((_, Entry::Op { .. })) => true,
        Some((_, Entry::Applied { .. })) => false,
        None => size > HEADER_LEN,
    })
}

/// The last frame of the journal `file` of `size` bytes, if it checks.
fn last_frame(file: &File, size: u64, epoch: u64) -> Result<Option<(u64, Entry)>> {
    if size < HEADER_LEN + FRAME_OVERHEAD {
        return Ok(None);
    }
    let mut len = [0; 4];
    file.read_exact_at(&mut len, size - 4)
        .at("read", Path::new(WAL_FILE))?;
    let frame_len = u64::from(u32::from_le_bytes(len)) + FRAME_OVERHEAD;
    let Some(at) = size.checked_sub(frame_len).filter(|&at| at >= HEADER_LEN) else {
        return Ok(None);
    };
    let mut frame = vec![0; frame_len as usize];
    file.read_exact_at(&mut frame, at)
        .at("read", Path::new(WAL_FILE))?;
    Ok(decode_frame(epoch, at, &frame).map(|(entry, _)| (at, entry)))
}

impl TaskList {
    /// Whether the list's journal holds a record that is not applied (or, after a reboot, not
    /// yet flushed): a writer was killed, or the machine crashed, before it was done. Read
    /// without the lock, so a writer in the middle of its commit counts too.
    pub(crate) fn journal_needs_recovery(&self) -> Result<bool> {
        needs_recovery_at(&self.dir().join(WAL_FILE), self.config.max_log_bytes)
    }

    /// Recovers the list's journal if it needs it (see the module's documentation), so that
    /// readers of the files, ours or the reference's, see every committed write whole. Best
    /// effort: a list that cannot be locked for writing (read-only, or a lock held by a dead
    /// writer of the reference's that is not stale yet) is left to its next writer.
    pub(crate) fn recover_journal(&self) {
        match self.journal_needs_recovery() {
            Ok(false) => {}
            Ok(true) => {
                if let Err(e) = self.write(false, |_| Ok(())) {
                    tracing::warn!(list = %self.list_id(), error = %e, "could not recover the list's journal");
                }
            }
            Err(e) => {
                tracing::warn!(list = %self.list_id(), error = %e, "could not read the list's journal");
            }
        }
    }
}

/// The journal, open for writing, under the list lock.
#[derive(Debug)]
pub(crate) struct Wal {
    list: TaskList,
    file: File,
    header: Header,
    /// Where the next frame goes (the end of the last frame that checks).
    end: u64,
}

impl Wal {
    /// Opens the list's journal (starting one if there is none) and recovers it if it needs
    /// it. The caller holds the list lock (`guard`).
    pub(crate) fn open(list: &TaskList, guard: &ListGuard) -> Result<Self> {
        let path = list.dir().join(WAL_FILE);
        let file = match NoFollow::read_write().open_regular(&path) {
            Ok(file) => file,
            Err(OutputError::NotFound { .. }) => return Self::start(list),
            Err(e) => return Err(refusal(&path, e)),
        };
        let size = file.len();
        if size > list.config.max_log_bytes {
            return Err(Error::BadEntry {
                path,
                fault: EntryFault::TooLarge {
                    size,
                    limit: list.config.max_log_bytes,
                },
            });
        }
        let file = file.into_file();
        let mut header = [0; HEADER_LEN as usize];
        let Some(header) = file
            .read_exact_at(&mut header, 0)
            .ok()
            .and_then(|()| Header::decode(&header))
        else {
            // Not one of ours whole: ours are flushed before they are renamed into place, so
            // this is a journal started unflushed (`durable: false`) before a machine crash,
            // or something else's file. No record in it can be checked without its epoch.
            tracing::warn!(path = %path.display(), "replacing a journal whose header does not check");
            return Self::start(list);
        };
        let mut wal = Self {
            list: list.clone(),
            file,
            header,
            end: size,
        };
        if !header.this_boot() {
            wal.recover_all(guard)?;
            return Ok(wal);
        }
        match last_frame(&wal.file, size, header.epoch)? {
            Some((_, Entry::Applied { .. })) => {}
            Some((at, Entry::Op { changes, audit })) => wal.replay(guard, at, changes, &audit)?,
            None if size == HEADER_LEN => {}
            None => {
                // A torn tail (a writer killed in the middle of its append): find the last
                // frame that checks, and cut the rest so the next frame follows it.
                let bytes = wal.read_all()?;
                let (mut entries, end) = scan(header.epoch, &bytes);
                tracing::warn!(list = %list.list_id(), cut = size - end, "cutting the torn tail of the journal");
                wal.file.set_len(end).at("truncate", &path)?;
                wal.end = end;
                if let Some((at, Entry::Op { changes, audit })) = entries.pop() {
                    wal.replay(guard, at, changes, &audit)?;
                }
            }
        }
        Ok(wal)
    }

    /// Starts a new journal (a new epoch), renamed over any old one, and opens it.
    fn start(list: &TaskList) -> Result<Self> {
        let dir = list.dir();
        let durable = list.config.durable;
        let audit_base = match std::fs::symlink_metadata(dir.join(AUDIT_LOG_FILE)) {
            Ok(meta) if meta.is_file() => meta.len(),
            _ => 0,
        };
        let mut epoch = [0; 8];
        getrandom::fill(&mut epoch)
            .map_err(|e| Error::Internal(format!("no random epoch for the journal: {e}")))?;
        let header = Header {
            epoch: u64::from_le_bytes(epoch),
            boot: current_boot().unwrap_or_default(),
            audit_base,
        };
        let staged = Staged::write(dir, WAL_FILE, &header.encode())?;
        if durable {
            staged.file().sync_all().at("fsync", staged.path())?;
        }
        staged.publish()?;
        if durable {
            fsutil::sync_dir(dir)?;
        }
        let path = dir.join(WAL_FILE);
        let file = NoFollow::read_write()
            .open_regular(&path)
            .map_err(|e| refusal(&path, e))?
            .into_file();
        Ok(Self {
            list: list.clone(),
            file,
            header,
            end: HEADER_LEN,
        })
    }

    /// Commits a transaction: its record appended and flushed (the commit point), then its
    /// changes applied and its audit lines appended (neither flushed), then marked applied.
    /// An error after the commit point leaves the record for the next writer to apply.
    pub(crate) fn commit(&mut self, changes: &[FileChange], audit: &str) -> Result<()> {
        let at = self.end;
        self.append(&NewEntry::Op { changes, audit })?;
        self.flush()?;
        self.apply(changes, audit)?;
        self.append(&NewEntry::Applied { at, time: now() })?;
        let unknown_boot = self.list.config.durable && current_boot().is_none();
        if unknown_boot || self.end >= self.list.config.journal_checkpoint_bytes {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Appends `entry`'s frame (not flushed).
    fn append(&mut self, entry: &NewEntry<'_>) -> Result<()> {
        let frame = encode_frame(self.header.epoch, self.end, entry)?;
        self.file
            .write_all_at(&frame, self.end)
            .at("append", &self.path())?;
        self.end += frame.len() as u64;
        Ok(())
    }

    /// Flushes the journal (`fdatasync`), if the list is durable.
    fn flush(&self) -> Result<()> {
        match self.list.config.durable {
            true => self.file.sync_data().at("fsync", &self.path()),
            false => Ok(()),
        }
    }

    fn path(&self) -> PathBuf {
        self.list.dir().join(WAL_FILE)
    }

    /// The journal's bytes up to `end` (at most `max_log_bytes`, checked at open).
    fn read_all(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![0; self.end as usize];
        self.file
            .read_exact_at(&mut bytes, 0)
            .at("read", &self.path())?;
        Ok(bytes)
    }

    /// Applies `changes` to the files and appends `audit` to the audit log, flushing neither.
    fn apply(&self, changes: &[FileChange], audit: &str) -> Result<()> {
        let dir = self.list.dir();
        for change in changes {
            match &change.contents {
                Some(contents) => {
                    Staged::write(dir, &change.name, contents.as_bytes())?.publish()?
                }
                None => fsutil::remove_if_exists(&dir.join(&change.name))?,
            }
        }
        match audit.is_empty() {
            true => Ok(()),
            false => fsutil::append_line(&dir.join(AUDIT_LOG_FILE), audit, false),
        }
    }

    /// Applies again the record at `at`, whose writer died before marking it applied: the
    /// reference's locks on its task files taken, the record flushed (its writer may have died
    /// before its flush returned), the changes applied, the audit lines appended unless the
    /// log already ends with them; then marked applied.
    fn replay(
        &mut self,
        guard: &ListGuard,
        at: u64,
        changes: Vec<FileChange>,
        audit: &str,
    ) -> Result<()> {
        tracing::warn!(list = %self.list.list_id(), files = changes.len(), "applying the journal record of an interrupted write");
        let changes = self.checked(changes)?;
        let _locks = self.lock_files(guard, &changes)?;
        self.flush()?;
        let log = self.list.dir().join(AUDIT_LOG_FILE);
        let logged = audit.is_empty() || ends_with(&log, &format!("{audit}\n"))?;
        self.apply(&changes, if logged { "" } else { audit })?;
        self.append(&NewEntry::Applied { at, time: now() })
    }

    /// Recovers a journal started in another boot: every record applied again, the audit log
    /// rebuilt from the journal's start, then a checkpoint.
    fn recover_all(&mut self, guard: &ListGuard) -> Result<()> {
        let bytes = self.read_all()?;
        let (entries, _) = scan(self.header.epoch, &bytes);
        // The last change of each file, and when the record it is in was marked applied.
        let mut merged: Vec<(FileChange, Option<u64>)> = Vec::new();
        let mut at_name: HashMap<String, usize> = HashMap::new();
        let mut of_record: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut audit = String::new();
        for (at, entry) in entries {
            match entry {
                Entry::Op {
                    changes,
                    audit: lines,
                } => {
                    for change in changes {
                        let i = match at_name.get(&change.name) {
                            Some(&i) => {
                                merged[i] = (change, None);
                                i
                            }
                            None => {
                                at_name.insert(change.name.clone(), merged.len());
                                merged.push((change, None));
                                merged.len() - 1
                            }
                        };
                        of_record.entry(at).or_default().push(i);
                    }
                    if !lines.is_empty() {
                        audit.push_str(&lines);
                        audit.push('\n');
                    }
                }
                Entry::Applied { at, time } => {
                    for &i in of_record.get(&at).into_iter().flatten() {
                        // Still this record's change (not one of a later record's)?
                        if let Some(slot) = merged.get_mut(i).filter(|s| s.1.is_none()) {
                            slot.1 = Some(time);
                        }
                    }
                }
            }
        }
        let merged: Vec<FileChange> = merged
            .into_iter()
            .filter(|(change, applied)| !self.written_since(change, *applied))
            .map(|(change, _)| change)
            .collect();
        if !merged.is_empty() || !audit.is_empty() {
            tracing::warn!(list = %self.list.list_id(), files = merged.len(), "applying the journal of an earlier boot");
            let merged = self.checked(merged)?;
            let _locks = self.lock_files(guard, &merged)?;
            self.apply(&merged, "")?;
            let log = self.list.dir().join(AUDIT_LOG_FILE);
            cut_to(&log, self.header.audit_base)?;
            if let Some(lines) = audit.strip_suffix('\n') {
                fsutil::append_line(&log, lines, false)?;
            }
        }
        self.checkpoint()
    }

    /// Whether the task file `change` names was written by someone else (the reference) after
    /// our record was applied at `applied`, and survived whole: changed later than that, and a
    /// task of its id. Such a file is left as it is when an earlier boot's journal is applied
    /// again (after a clean reboot, every file is as it was left).
    fn written_since(&self, change: &FileChange, applied: Option<u64>) -> bool {
        let (Some(applied), Some(id)) = (applied, TaskId::from_file_name(&change.name)) else {
            return false;
        };
        let path = self.list.dir().join(&change.name);
        let Ok(Some(bytes)) =
            fsutil::read_optional_within(&path, self.list.config.max_task_file_bytes)
        else {
            return false;
        };
        let changed = std::fs::symlink_metadata(&path)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        changed > applied && crate::record::Task::from_file_json(&bytes).is_ok_and(|t| t.id == id)
    }

    /// `changes` if every one names a file of the list, less a `.highwatermark` change that
    /// would not raise the mark on disk (a record older than the mark must not lower it, or a
    /// later create reuses an id).
    fn checked(&self, mut changes: Vec<FileChange>) -> Result<Vec<FileChange>> {
        if let Some(outside) = changes.iter().find(|change| !change.is_in_list()) {
            return Err(Error::Corrupt {
                path: self.path(),
                message: format!("journal names a file outside the list: {:?}", outside.name),
            });
        }
        let mark = self.list.high_water_mark()?;
        changes.retain(|change| change.name != HIGH_WATER_MARK_FILE || raises(change, mark));
        Ok(changes)
    }

    /// The reference's locks on the task files `changes` write.
    fn lock_files(&self, guard: &ListGuard, changes: &[FileChange]) -> Result<Vec<DirLock>> {
        let mut locks = Vec::new();
        for change in changes.iter().filter(|c| c.name != HIGH_WATER_MARK_FILE) {
            locks.extend(guard.lock_file(&self.list.dir().join(&change.name))?);
        }
        Ok(locks)
    }

    /// Flushes every file the journal's records changed, the audit log and the directory (if
    /// the list is durable), then starts a new journal.
    fn checkpoint(&mut self) -> Result<()> {
        let dir = self.list.dir();
        if self.list.config.durable {
            let bytes = self.read_all()?;
            let (entries, _) = scan(self.header.epoch, &bytes);
            let mut names: Vec<String> = entries
                .into_iter()
                .filter_map(|(_, entry)| match entry {
                    Entry::Op { changes, .. } => Some(changes),
                    Entry::Applied { .. } => None,
                })
                .flatten()
                .filter(|change| change.contents.is_some())
                .map(|change| change.name)
                .collect();
            names.sort_unstable();
            names.dedup();
            names.push(AUDIT_LOG_FILE.to_owned());
            fsutil::at_once(&names, |name| sync_if_there(&dir.join(name)))?;
            fsutil::sync_dir(dir)?;
        }
        *self = Self::start(&self.list)?;
        Ok(())
    }
}

/// Now, in nanoseconds since the epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

/// Flushes the regular file at `path`, if there is one (never following a symlink).
fn sync_if_there(path: &Path) -> Result<()> {
    match open_if_regular(path)? {
        Some(file) => file.file().sync_all().at("fsync", path),
        None => Ok(()),
    }
}

/// The regular file at `path`, opened for reading; `None` if nothing is there, or something
/// else (a symlink is never followed).
fn open_if_regular(path: &Path) -> Result<Option<task_output::open::RegularFile>> {
    match NoFollow::read().open_regular(path) {
        Ok(file) => Ok(Some(file)),
        Err(
            OutputError::NotFound { .. }
            | OutputError::SymlinkRefused { .. }
            | OutputError::NotRegularFile { .. },
        ) => Ok(None),
        Err(e) => Err(std::io::Error::from(e)).at("open", path),
    }
}

/// Whether the file at `path` ends with `tail` (false if it is missing or not a regular file).
fn ends_with(path: &Path, tail: &str) -> Result<bool> {
    let Some(file) = open_if_regular(path)? else {
        return Ok(false);
    };
    let Some(at) = file.len().checked_sub(tail.len() as u64) else {
        return Ok(false);
    };
    let mut bytes = vec![0; tail.len()];
    file.file().read_exact_at(&mut bytes, at).at("read", path)?;
    Ok(bytes == tail.as_bytes())
}

/// Cuts the regular file at `path` back to `len` bytes, if it is longer.
fn cut_to(path: &Path, len: u64) -> Result<()> {
    match NoFollow::write().open_regular(path) {
        Ok(file) if file.len() > len => file.file().set_len(len).at("truncate", path),
        Ok(_) | Err(OutputError::NotFound { .. }) => Ok(()),
        Err(e) => Err(refusal(path, e)),
    }
}

/// The error for an entry that could not be opened as a regular file.
fn refusal(path: &Path, err: OutputError) -> Error {
    match err {
        OutputError::SymlinkRefused { .. } => Error::BadEntry {
            path: path.to_path_buf(),
            fault: EntryFault::NotRegularFile {
                kind: EntryKind::Symlink,
            },
        },
        OutputError::NotRegularFile { kind, .. } => Error::BadEntry {
            path: path.to_path_buf(),
            fault: EntryFault::NotRegularFile {
                kind: EntryKind::from(kind),
            },
        },
        other => Error::Io {
            op: "open",
            path: path.to_path_buf(),
            source: std::io::Error::from(other),
        },
    }
}

/// Whether a `.highwatermark` change sets the mark above `mark`, to an id a task may have.
pub(crate) fn raises(change: &FileChange, mark: u64) -> bool {
    let journaled = change
        .contents
        .as_deref()
        .map(|text| text.trim().parse::<u64>());
    matches!(journaled, Some(Ok(n)) if n > mark && n <= TaskId::MAX)
}

/// How many transaction records the list's journal holds (each was one flush).
#[cfg(test)]
pub(crate) fn op_records(list: &TaskList) -> Result<usize> {
    let bytes = std::fs::read(list.dir().join(WAL_FILE)).at("read", list.dir())?;
    let header = Header::decode(&bytes).ok_or_else(|| Error::Internal("no header".into()))?;
    let (entries, _) = scan(header.epoch, &bytes);
    Ok(entries
        .iter()
        .filter(|(_, e)| matches!(e, Entry::Op { .. }))
        .count())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_frame_checks_only_at_its_offset_and_in_its_epoch() {
        let entry = NewEntry::Applied { at: 7, time: 1 };
        let frame = encode_frame(1, 100, &entry).unwrap();
        assert!(decode_frame(1, 100, &frame).is_some());
        assert!(decode_frame(2, 100, &frame).is_none(), "another epoch");
        assert!(decode_frame(1, 101, &frame).is_none(), "another offset");
        for cut in 0..frame.len() {
            assert!(
                decode_frame(1, 100, &frame[..cut]).is_none(),
                "torn at {cut}"
            );
        }
        let mut flipped = frame.clone();
        flipped[14] ^= 1;
        assert!(decode_frame(1, 100, &flipped).is_none(), "a changed byte");
    }

    #[test]
    fn a_header_round_trips_and_a_damaged_one_does_not_decode() {
        let header = Header {
            epoch: 42,
            boot: [3; 16],
            audit_base: 9,
        };
        let bytes = header.encode();
        assert_eq!(bytes.len() as u64, HEADER_LEN);
        assert_eq!(Header::decode(&bytes), Some(header));
        let mut damaged = bytes.clone();
        damaged[20] ^= 0x40;
        assert_eq!(Header::decode(&damaged), None);
    }

    use crate::api::CreateRequest;
    use crate::{StoreConfig, TaskId};

    /// Writes a journal for `list` started in `boot` (epoch 77), holding `entries`.
    fn write_journal(list: &TaskList, boot: [u8; 16], audit_base: u64, entries: &[NewEntry<'_>]) {
        let header = Header {
            epoch: 77,
            boot,
            audit_base,
        };
        let mut bytes = header.encode();
        for entry in entries {
            let frame = encode_frame(77, bytes.len() as u64, entry).unwrap();
            bytes.extend_from_slice(&frame);
        }
        std::fs::write(list.dir().join(WAL_FILE), bytes).unwrap();
    }

    fn task_change(id: u64, subject: &str) -> FileChange {
        let task = crate::Task::new(TaskId::new(id).unwrap(), subject, "");
        FileChange {
            name: task.id.file_name(),
            contents: Some(task.to_file_json()),
        }
    }

    fn audit_text(list: &TaskList) -> String {
        std::fs::read_to_string(list.dir().join(AUDIT_LOG_FILE)).unwrap_or_default()
    }

    #[test]
    fn a_record_its_writer_did_not_apply_is_applied_once_by_the_next_open() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        list.create(&CreateRequest::new("one", "")).unwrap();
        let base = audit_text(&list).len() as u64;
        let changes = [task_change(2, "from the journal")];
        let line = r#"{"time":"t","actor":"a","op":"create","taskId":"2","fields":[]}"#;
        let op = NewEntry::Op {
            changes: &changes,
            audit: line,
        };
        write_journal(&list, current_boot().unwrap(), base, &[op]);
        assert!(list.journal_needs_recovery().unwrap());
        let reopened = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        assert!(!reopened.journal_needs_recovery().unwrap());
        let two = reopened.get(TaskId::new(2).unwrap()).unwrap().unwrap();
        assert_eq!(two.subject, "from the journal");
        assert_eq!(audit_text(&list).matches(line).count(), 1);
        // Applied again (its writer may have got as far as the audit log): still once.
        let op = NewEntry::Op {
            changes: &changes,
            audit: line,
        };
        write_journal(&list, current_boot().unwrap(), base, &[op]);
        TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        assert_eq!(audit_text(&list).matches(line).count(), 1);
    }

    #[test]
    fn after_a_reboot_every_record_is_applied_again_except_over_a_later_reference_write() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        let changes = [
            task_change(1, "first"),
            task_change(2, "second"),
            task_change(3, "third"),
        ];
        let later = [task_change(1, "first, renamed")];
        let (a, b) = ("{\"n\":1}\n{\"n\":2}", "{\"n\":3}");
        // Another boot's journal; its applied files and audit lines partly lost in the crash:
        // task 1 never reached the disk, task 2 did, the log holds a torn first line.
        write_journal(
            &list,
            [1; 16],
            0,
            &[
                NewEntry::Op {
                    changes: &changes,
                    audit: a,
                },
                NewEntry::Applied {
                    at: HEADER_LEN,
                    time: 1,
                },
                NewEntry::Op {
                    changes: &later,
                    audit: b,
                },
            ],
        );
        std::fs::write(
            list.dir().join("2.json"),
            changes[1].contents.as_ref().unwrap(),
        )
        .unwrap();
        std::fs::write(list.dir().join(AUDIT_LOG_FILE), "{\"n\":").unwrap();
        // Task 3 was edited by the reference after our record was applied (a later
        // modification time): left as it is.
        let edited = task_change(3, "edited by the reference");
        std::fs::write(list.dir().join("3.json"), edited.contents.unwrap()).unwrap();
        let reopened = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        let tasks = reopened.snapshot().unwrap().tasks;
        let subjects: Vec<&str> = tasks.values().map(|t| t.subject.as_str()).collect();
        assert_eq!(
            subjects,
            ["first, renamed", "second", "edited by the reference"]
        );
        assert_eq!(audit_text(&list), format!("{a}\n{b}\n"));
        assert!(!reopened.journal_needs_recovery().unwrap());
        let bytes = std::fs::read(list.dir().join(WAL_FILE)).unwrap();
        let header = Header::decode(&bytes).unwrap();
        assert!(header.this_boot(), "a new journal, of this boot");
        assert_eq!(header.audit_base, audit_text(&list).len() as u64);
    }

    #[test]
    fn a_torn_tail_is_cut_and_a_header_that_does_not_check_is_replaced() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        list.create(&CreateRequest::new("one", "")).unwrap();
        let path = list.dir().join(WAL_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes.len();
        bytes.extend_from_slice(&[0x55; 9]);
        std::fs::write(&path, &bytes).unwrap();
        assert!(list.journal_needs_recovery().unwrap());
        list.create(&CreateRequest::new("two", "")).unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(
            after[..whole],
            bytes[..whole],
            "cut back to the last whole record"
        );
        assert!(!list.journal_needs_recovery().unwrap());

        std::fs::write(&path, b"not a journal").unwrap();
        list.create(&CreateRequest::new("three", "")).unwrap();
        assert_eq!(list.snapshot().unwrap().tasks.len(), 3);
        assert!(Header::decode(&std::fs::read(&path).unwrap()).is_some());
    }

    #[test]
    fn the_boot_id_is_read_here() {
        // Linux, where the tests run, always has one.
        assert!(current_boot().is_some());
    }
}
