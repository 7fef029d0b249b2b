//! Starting a task's first process without copying the supervisor: `clone(CLONE_VM |
//! CLONE_VFORK)`, as glibc's `posix_spawn` does, with what a task needs done before `exec`.
//!
//! A `fork` of the supervisor copies its page tables and makes every page it then writes fault
//! (copy-on-write), which cost about 45 % of its CPU per started task and grew with its size
//! (BENCHMARKS.md). The standard library spawns without a `fork` only when no `pre_exec` hook is
//! set, and a task's process needs one (child subreaper, parent-death signal), so this module
//! spawns by itself: the child borrows the parent's memory and runs on a small stack of its own
//! until it calls `execve`, while the calling thread waits (`CLONE_VFORK`; the supervisor's other
//! threads go on).
//!
//! Everything that allocates is done before the `clone`: the program's path is resolved, the
//! arguments and environment become C strings, descriptors are opened. The child only makes
//! system calls, in this order: signal handlers back to their defaults (a handler of the parent
//! must never run on the borrowed memory), its descriptors put in place (`dup2`), `chdir`,
//! `setpgid` or `setsid`, the `prctl`s of [`ChildSetup`], its signal mask emptied, `execve`. If
//! any of them fails it stores the `errno` where the parent reads it once the `clone` returns
//! (shared memory, as glibc does: no pipe needed when the parent resumes only after `exec` or
//! exit) and exits with 127; the parent then reaps it and returns that error.
//!
//! The child does not copy this process's descriptor table either. A `clone` without
//! `CLONE_FILES` copies a reference to every open file of the parent, and the child's `execve`
//! drops each again (close-on-exec): a supervisor holds a descriptor a live task (its pidfd),
//! so that copy grew with the tasks held. Instead the descriptors the child is to get are put
//! in a few low-numbered slots this process keeps for spawning ([`Slots`]), the child shares
//! the table at the `clone`, and its first call, `close_range(above the slots, ~0,
//! CLOSE_RANGE_UNSHARE)` (Linux ≥ 5.9; before, a whole `unshare`), gives it a table of its own
//! holding only the numbers up to the slots; it lifts the slots' descriptors above every slot
//! and target, then copies them into place. So it inherits no descriptor of this process
//! beyond the lowest few, whether close-on-exec or not. A spawn that gives the child more
//! descriptors than there are slots copies the table as before.
//!
//! The result is a [`Child`], which waits through a pidfd (made by the `clone` itself,
//! `CLONE_PIDFD`) and reaps exactly its own process: the supervisor's sweep of adopted orphans
//! ([`reap_adopted_orphans`](super::reap_adopted_orphans)) leaves a group leader it started
//! alone, as before.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString, c_char, c_int, c_void};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{Access, Mode, OFlags};
use rustix::io::DupFlags;
use rustix::pipe::PipeFlags;

use super::child::{Child, Ours};
use super::setup::ChildSetup;

/// The child's stack: what it runs on between `clone` and `execve` (a few system calls; glibc
/// gives its own `posix_spawn` child about 32 KiB). Only the pages it touches are ever backed.
const CHILD_STACK_BYTES: usize = 128 * 1024;

/// The exit code of a child that failed before its `execve` (as a shell's "command not found"
/// is 127); the parent reports the error itself and never shows this code.
const SETUP_FAILED: c_int = 127;

/// The search path used when neither the child's environment nor this process's has a `PATH`.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How many descriptors a child can get through [`Slots`] (stdin, stdout, stderr and a few
/// more); a spawn that gives it more copies this process's whole descriptor table.
const SLOT_COUNT: usize = 8;

/// One of the child's standard descriptors.
#[derive(Debug, Default)]
pub enum Stdio {
    /// `/dev/null`.
    #[default]
    Null,
    /// A new pipe; this process's end is on the [`Child`] (`stdin`, `stdout` or `stderr`).
    Piped,
    /// This descriptor (an output file, say); the child gets a copy.
    Fd(OwnedFd),
}

/// Whether the child leaves this process's process group or session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Group {
    /// It stays in this process's group.
    #[default]
    Inherit,
    /// It leads a new process group (`setpgid(0, 0)`): a kill of the group reaches what it
    /// starts, and a terminal's signals to this process's group do not reach it.
    Lead,
    /// It leads a new session (`setsid`), and so a new group.
    NewSession,
}

/// A process to start: program, arguments, environment, working directory, descriptors, group
/// and the [`ChildSetup`] it takes on before `exec`.
#[derive(Debug)]
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    clear_env: bool,
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    stdio: [Stdio; 3],
    fds: Vec<(OwnedFd, RawFd)>,
    group: Group,
    setup: ChildSetup,
}

impl Spawn {
    /// Runs `program` (a path, or a name looked up in the child's `PATH`) with no arguments, this
    /// process's environment, `/dev/null` as stdin, stdout and stderr, in this process's group,
    /// with no [`ChildSetup`].
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            clear_env: false,
            env: Vec::new(),
            cwd: None,
            stdio: [Stdio::Null, Stdio::Null, Stdio::Null],
            fds: Vec::new(),
            group: Group::Inherit,
            setup: ChildSetup::default(),
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts from an empty environment instead of this process's.
    #[must_use]
    pub fn env_clear(mut self) -> Self {
        self.clear_env = true;
        self.env.clear();
        self
    }

    /// Sets one variable (a later setting of the same name wins).
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Sets variables, in order.
    #[must_use]
    pub fn envs(
        mut self,
        vars: impl IntoIterator<Item = (impl Into<OsString>, impl Into<OsString>)>,
    ) -> Self {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), Some(v.into()))));
        self
    }

    /// Removes one variable.
    #[must_use]
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env.push((key.into(), None));
        self
    }

    /// Runs the process in `dir`.
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets stdin.
    #[must_use]
    pub fn stdin(mut self, stdin: Stdio) -> Self {
        self.stdio[0] = stdin;
        self
    }

    /// Sets stdout.
    #[must_use]
    pub fn stdout(mut self, stdout: Stdio) -> Self {
        self.stdio[1] = stdout;
        self
    }

    /// Sets stderr.
    #[must_use]
    pub fn stderr(mut self, stderr: Stdio) -> Self {
        self.stdio[2] = stderr;
        self
    }

    /// Gives the child a copy of `fd` as its descriptor number `target` (not close-on-exec),
    /// such as a script the shell reads from `/dev/fd/9`. `target` must not be 0, 1 or 2.
    #[must_use]
    pub fn fd(mut self, fd: OwnedFd, target: RawFd) -> Self {
        self.fds.push((fd, target));
        self
    }

    /// Chooses the child's process group or session.
    #[must_use]
    pub fn group(mut self, group: Group) -> Self {
        self.group = group;
        self
    }

    /// Chooses what the child takes on before `exec` (subreaper, parent-death signal).
    #[must_use]
    pub fn setup(mut self, setup: ChildSetup) -> Self {
        self.setup = setup;
        self
    }

    /// Starts the process; returns once it has called `execve` (or failed to).
    ///
    /// Call it from inside a tokio runtime (the [`Child`] waits on its pidfd there), and, when
    /// [`ChildSetup::die_with_parent`] is set, from a thread that lives as long as the child
    /// should: a tokio worker, never `spawn_blocking`'s threads (Linux sends the parent-death
    /// signal when the *thread* that started the child exits).
    ///
    /// # Errors
    /// The error of any step, the child's `execve` included (`ENOENT` for a program not found,
    /// `EACCES`, …); [`io::ErrorKind::InvalidInput`] for a NUL byte in an argument or variable, or
    /// a `target` of 0, 1 or 2; [`io::ErrorKind::Other`] outside a tokio runtime.
    pub fn spawn(self) -> io::Result<Child> {
        tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let env = self.environment();
        let path = resolve(&self.program, env.get(OsStr::new("PATH")))?;
        let argv = c_strings(std::iter::once(self.program.clone()).chain(self.args))?;
        let envp = c_strings(env.into_iter().map(|(mut key, value)| {
            key.push("=");
            key.push(value);
            key
        }))?;
        let cwd = self
            .cwd
            .map(|dir| c_string(dir.into_os_string()))
            .transpose()?;
        let (moves, ours) = Descriptors::arrange(self.stdio, self.fds)?;
        let argv_ptrs = null_terminated(&argv);
        let envp_ptrs = null_terminated(&envp);
        let mut slots = Slots::lock();
        let staged = slots.as_mut().and_then(|slots| slots.stage(&moves));
        let plan = Plan {
            path: path.as_ptr(),
            argv: argv_ptrs.as_ptr(),
            envp: envp_ptrs.as_ptr(),
            cwd: cwd.as_ref().map_or(std::ptr::null(), |dir| dir.as_ptr()),
            moves: staged
                .as_ref()
                .map_or(moves.pairs.as_slice(), |staged| staged.pairs.as_slice()),
            shared: staged.as_ref().map(|staged| staged.bounds),
            group: self.group,
            setup: self.setup,
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            error: AtomicI32::new(0),
        };
        let cloned = clone_and_exec(&plan);
        // The child has its own copies (or failed): the slots and ours of its ends can close.
        drop(staged);
        drop(slots);
        let (pid, pidfd) = cloned?;
        drop(moves);
        match plan.error.load(Ordering::Acquire) {
            0 => Child::new(pid, pidfd, ours),
            errno => {
                // It stored its error and is exiting: reap it, so no zombie is left.
                let mut child = Child::new(pid, pidfd, Ours::default())?;
                child.reap_blocking();
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }

    /// The child's environment: this process's (unless cleared) with the settings applied.
    fn environment(&self) -> BTreeMap<OsString, OsString> {
        let mut env: BTreeMap<OsString, OsString> = if self.clear_env {
            BTreeMap::new()
        } else {
            std::env::vars_os().collect()
        };
        for (key, value) in &self.env {
            match value {
                Some(value) => env.insert(key.clone(), value.clone()),
                None => env.remove(key),
            };
        }
        env
    }
}

/// The descriptors the child copies into place, kept open until the `clone` has returned.
#[derive(Debug)]
struct Descriptors {
    /// The sources, each with its target, kept open until the child has its copies.
    sources: Vec<(OwnedFd, RawFd)>,
    /// `(source, target)` pairs, as the child reads them.
    pairs: Vec<(RawFd, RawFd)>,
}

impl Descriptors {
    /// Each source with its target.
    fn sources(&self) -> impl Iterator<Item = (BorrowedFd<'_>, RawFd)> {
        self.sources
            .iter()
            .map(|(fd, target)| (fd.as_fd(), *target))
    }

    /// Opens what the standard descriptors need and numbers every source above every target,
    /// so that no `dup2` in the child overwrites a source it has yet to copy.
    fn arrange(stdio: [Stdio; 3], fds: Vec<(OwnedFd, RawFd)>) -> io::Result<(Self, Ours)> {
        let mut ours = Ours::default();
        let mut sources = Vec::with_capacity(3 + fds.len());
        for (target, io) in (0..).zip(stdio) {
            let source = match io {
                Stdio::Null => {
                    let flags = if target == 0 {
                        OFlags::RDONLY
                    } else {
                        OFlags::WRONLY
                    };
                    rustix::fs::open("/dev/null", flags | OFlags::CLOEXEC, Mode::empty())?
                }
                Stdio::Piped => {
                    let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
                    let (theirs, mine, slot) = match target {
                        0 => (read, write, &mut ours.stdin),
                        1 => (write, read, &mut ours.stdout),
                        _ => (write, read, &mut ours.stderr),
                    };
                    *slot = Some(mine);
                    theirs
                }
                Stdio::Fd(fd) => fd,
            };
            sources.push((source, target));
        }
        for (fd, target) in fds {
            if target < 3 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "descriptors 0, 1 and 2 are given with stdin, stdout and stderr",
                ));
            }
            sources.push((fd, target));
        }
        let floor = sources
            .iter()
            .map(|&(_, target)| target + 1)
            .max()
            .unwrap_or(3);
        let sources = sources
            .into_iter()
            .map(|(fd, target)| {
                if fd.as_raw_fd() >= floor {
                    Ok((fd, target))
                } else {
                    rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), floor).map(|high| (high, target))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pairs = sources
            .iter()
            .map(|(fd, target)| (fd.as_raw_fd(), *target))
            .collect();
        Ok((Self { sources, pairs }, ours))
    }
}

/// Low descriptor numbers this process keeps for spawning, each open on `/dev/null` between
/// spawns (module docs): the child's descriptors are put in them for the `clone`, and the child
/// keeps the numbers up to them alone. Opened at the first spawn, with the lowest numbers free
/// then (at least 3); one spawn uses them at a time ([`Slots::lock`]).
#[derive(Debug)]
struct Slots {
    /// The slots, in ascending order of number.
    kept: Vec<OwnedFd>,
    /// What each slot holds between spawns.
    null: OwnedFd,
}

/// This process's [`Slots`], once opened.
static SLOTS: Mutex<Option<Slots>> = Mutex::new(None);

impl Slots {
    /// The slots, held until the guard is dropped: opened now if they are not open yet (again
    /// at each spawn after a failure, when the guard holds none).
    fn lock() -> MutexGuard<'static, Option<Self>> {
        let mut slots = SLOTS.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.is_none() {
            match Self::open() {
                Ok(opened) => *slots = Some(opened),
                Err(error) => {
                    tracing::debug!(%error, "no descriptor slots: a spawn copies the whole table");
                }
            }
        }
        slots
    }

    fn open() -> io::Result<Self> {
        let null = rustix::fs::open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
        // Each the lowest number free at its turn, so in ascending order.
        let kept = (0..SLOT_COUNT)
            .map(|_| rustix::io::fcntl_dupfd_cloexec(&null, 3))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { kept, null })
    }

    /// Puts the sources of `moves` in the slots, for one `clone`; `None` (nothing staged) when
    /// they do not fit or a copy fails: the child then copies the whole table.
    fn stage(&mut self, moves: &Descriptors) -> Option<Staged<'_>> {
        if moves.pairs.len() > self.kept.len() {
            return None;
        }
        let mut staged = Staged {
            pairs: Vec::with_capacity(moves.pairs.len()),
            bounds: Bounds { keep: 0, lift: 0 },
            slots: self,
        };
        for ((source, target), slot) in moves.sources().zip(&mut staged.slots.kept) {
            if let Err(error) = rustix::io::dup3(source, slot, DupFlags::CLOEXEC) {
                tracing::debug!(%error, "cannot stage a descriptor: the spawn copies the whole table");
                return None; // the slots staged so far are cleared by the drop
            }
            staged.pairs.push((slot.as_raw_fd(), target));
        }
        let keep = staged
            .slots
            .kept
            .last()
            .map_or(3, |slot| slot.as_raw_fd() + 1);
        let lift = staged
            .pairs
            .iter()
            .map(|&(_, target)| target + 1)
            .fold(keep, RawFd::max);
        staged.bounds = Bounds { keep, lift };
        Some(staged)
    }
}

/// The slots holding one spawn's descriptors, put back on `/dev/null` when dropped (so this
/// process keeps no end of the child's pipes).
#[derive(Debug)]
struct Staged<'a> {
    /// `(slot, target)` pairs, as the child reads them.
    pairs: Vec<(RawFd, RawFd)>,
    bounds: Bounds,
    slots: &'a mut Slots,
}

/// Where a child that shares the descriptor table at the `clone` keeps and lifts descriptors.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// It keeps the numbers below this one (every slot's).
    keep: RawFd,
    /// It lifts each slot's descriptor to a number at least this one (above every slot and
    /// every target) before copying it into place.
    lift: RawFd,
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        let Slots { kept, null } = &mut *self.slots;
        for slot in kept.iter_mut().take(self.pairs.len()) {
            if let Err(error) = rustix::io::dup3(&*null, slot, DupFlags::CLOEXEC) {
                tracing::warn!(%error, "cannot clear a descriptor slot");
            }
        }
    }
}

/// What the child reads: every pointer into memory the parent keeps alive and unchanged until
/// the `clone` returns (its thread is suspended meanwhile).
#[derive(Debug)]
struct Plan {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    /// Null for "stay where the parent is".
    cwd: *const c_char,
    moves: *const [(RawFd, RawFd)],
    /// Set when the child shares this process's descriptor table at the `clone` (`CLONE_FILES`)
    /// and `moves` come from [`Slots`].
    shared: Option<Bounds>,
    group: Group,
    setup: ChildSetup,
    parent: libc::pid_t,
    /// The child's `errno` when a step failed; 0 while it has not.
    error: AtomicI32,
}

/// Starts the child on a stack of its own, sharing this process's memory, and returns its pid
/// and pidfd once it has exec'd or exited.
fn clone_and_exec(plan: &Plan) -> io::Result<(u32, OwnedFd)> {
    STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        if stack.is_none() {
            *stack = Some(Stack::new()?);
        }
        match &*stack {
            Some(stack) => clone_on(stack, plan),
            None => Err(io::Error::from(io::ErrorKind::OutOfMemory)),
        }
    })
}

thread_local! {
    /// The child's stack, kept by each thread that spawns: a mapping made and unmapped at every
    /// spawn would cost three system calls, and its unmapping a TLB flush on every CPU running
    /// one of this process's threads. A thread's spawns never overlap (it waits for each
    /// child's `exec`), so one stack serves them all.
    static STACK: std::cell::RefCell<Option<Stack>> = const { std::cell::RefCell::new(None) };
}

/// [`clone_and_exec`] on `stack`.
fn clone_on(stack: &Stack, plan: &Plan) -> io::Result<(u32, OwnedFd)> {
    let mut pidfd: c_int = -1;
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    if plan.shared.is_some() {
        flags |= libc::CLONE_FILES;
    }
    let blocked = BlockedSignals::all()?;
    // SAFETY: `child_main` gets `plan`, which outlives the call (this thread is suspended until
    // the child has exec'd or exited: CLONE_VFORK), and the top of a stack mapped for it alone.
    // Signals are blocked, so no handler of this process runs on the child's side before it
    // has reset them. The child only makes async-signal-safe system calls (see `child_main`).
    // CLONE_PIDFD writes the pidfd to `pidfd` (the `ptid` argument).
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            flags,
            std::ptr::from_ref(plan).cast_mut().cast::<c_void>(),
            &raw mut pidfd,
        )
    };
    let error = io::Error::last_os_error();
    drop(blocked);
    let pid = u32::try_from(pid).map_err(|_| error)?;
    // SAFETY: the `clone` succeeded, so CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid, pidfd))
}

/// The child's side, run on its own stack in the parent's memory until `execve`.
extern "C" fn child_main(plan: *mut c_void) -> c_int {
    // SAFETY: `clone_and_exec` passed a `&Plan` that lives until this process exec's or exits.
    let plan = unsafe { &*plan.cast::<Plan>() };
    // SAFETY: in a child of CLONE_VM | CLONE_VFORK whose parent thread waits: see `prepare_and_exec`.
    let errno = unsafe { prepare_and_exec(plan) };
    plan.error.store(errno, Ordering::Release);
    // SAFETY: `_exit` is async-signal-safe and runs no exit handler of the parent.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// Sets the child up and calls `execve`; returns the `errno` of the step that failed.
///
/// # Safety
/// Only in the child of [`clone_and_exec`]: it must not allocate, take a lock or touch memory
/// other than `plan` and its own stack, so every call below is a plain system call wrapper
/// (async-signal-safe), on pointers `plan` guarantees valid.
unsafe fn prepare_and_exec(plan: &Plan) -> c_int {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: see the function's contract. Each call only passes pointers to locals or to
    // `plan`'s data, which stays valid and unchanged while the parent waits.
    unsafe {
        // Signal handlers are the parent's code on the parent's memory: none may run here.
        // Those it set go back to their defaults (ignored ones stay ignored, as across `exec`),
        // and SIGPIPE, which the Rust runtime ignores, to its default, as std does.
        for signal in 1..=64 {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &raw mut action) != 0 {
                continue;
            }
            let handled =
                action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN;
            if handled || signal == libc::SIGPIPE {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &raw const default, std::ptr::null_mut());
            }
        }
        match plan.shared {
            Some(bounds) => {
                // A table of its own, with the numbers below the slots' end alone.
                let unshared = libc::syscall(
                    libc::SYS_close_range,
                    bounds.keep as libc::c_uint,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_UNSHARE,
                ) == 0
                    || libc::unshare(libc::CLONE_FILES) == 0;
                if !unshared {
                    return errno();
                }
                // A target may be a slot not copied yet: every source is lifted first.
                let mut lifted: [RawFd; SLOT_COUNT] = [-1; SLOT_COUNT];
                for (&(source, _), high) in (*plan.moves).iter().zip(&mut lifted) {
                    *high = libc::fcntl(source, libc::F_DUPFD_CLOEXEC, bounds.lift);
                    if *high < 0 {
                        return errno();
                    }
                }
                for (&(_, target), &high) in (*plan.moves).iter().zip(&lifted) {
                    if libc::dup2(high, target) < 0 {
                        return errno();
                    }
                }
            }
            None => {
                for &(source, target) in &*plan.moves {
                    if libc::dup2(source, target) < 0 {
                        return errno();
                    }
                }
            }
        }
        if !plan.cwd.is_null() && libc::chdir(plan.cwd) != 0 {
            return errno();
        }
        let grouped = match plan.group {
            Group::Inherit => 0,
            Group::Lead => libc::setpgid(0, 0),
            Group::NewSession => libc::setsid(),
        };
        if grouped < 0 {
            return errno();
        }
        if plan.setup.hold_orphans && libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) != 0 {
            return errno();
        }
        if plan.setup.die_with_parent {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return errno();
            }
            // The parent may have died before the prctl: then no signal would ever come.
            if libc::getppid() != plan.parent {
                return libc::ESRCH;
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut()) != 0 {
            return errno();
        }
        libc::execve(plan.path, plan.argv, plan.envp);
        errno()
    }
}

/// A stack for the child: anonymous memory with a guard page below it (a stack overflow faults
/// instead of writing into other memory of the parent), unmapped when dropped (its thread
/// exits).
#[derive(Debug)]
struct Stack {
    base: *mut c_void,
}

impl Stack {
    /// The guard page's size (the smallest page Linux uses; a larger page only widens it).
    const GUARD: usize = 4096;

    fn new() -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping, aliasing nothing; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHILD_STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self { base };
        // SAFETY: the first page of the mapping just made, which nothing uses yet.
        if unsafe { libc::mprotect(base, Self::GUARD, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer (stacks grow down on every architecture Linux runs this on).
    fn top(&self) -> *mut c_void {
        self.base.wrapping_byte_add(CHILD_STACK_BYTES)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used: every child that ran on it has
        // exec'd or exited (its thread is exiting).
        unsafe {
            libc::munmap(self.base, CHILD_STACK_BYTES);
        }
    }
}

/// All signals blocked on the calling thread, until dropped (the previous mask is restored).
struct BlockedSignals {
    previous: libc::sigset_t,
}

impl BlockedSignals {
    fn all() -> io::Result<Self> {
        // SAFETY: sigset_t is plain data; the calls only write the two locals.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&raw mut all);
            match libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut previous) {
                0 => Ok(Self { previous }),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask read in `all`, from a local.
        unsafe {
            libc::pthread_sigmask(
                libc::SIG_SETMASK,
                &raw const self.previous,
                std::ptr::null_mut(),
            );
        }
    }
}

impl std::fmt::Debug for BlockedSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockedSignals")
    }
}

/// The path `execve` gets: `program` itself when it has a `/`, else the first executable
/// regular file of that name in `path` (the child's `PATH`, else this process's, else
/// [`DEFAULT_PATH`]), as `execvp` would find it.
fn resolve(program: &OsStr, path: Option<&OsString>) -> io::Result<CString> {
    if program.is_empty() {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    if program.as_bytes().contains(&b'/') {
        return c_string(program.to_owned());
    }
    let inherited = std::env::var_os("PATH");
    let search = path
        .or(inherited.as_ref())
        .map_or(OsStr::new(DEFAULT_PATH), |p| p.as_os_str());
    std::env::split_paths(search)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable_file(candidate))
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        .and_then(|found| c_string(found.into_os_string()))
}

fn is_executable_file(path: &Path) -> bool {
    path.is_file() && rustix::fs::access(path, Access::EXEC_OK).is_ok()
}

fn c_string(value: OsString) -> io::Result<CString> {
    CString::new(value.into_vec()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in an argument, variable or path",
        )
    })
}

fn c_strings(values: impl IntoIterator<Item = OsString>) -> io::Result<Vec<CString>> {
    values.into_iter().map(c_string).collect()
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}
