//! Handing the command line to the shell: as the argument of `-c`, or, when it is longer than an
//! argument may be, as a script the shell reads from a sealed in-memory file.
//!
//! Linux refuses an `exec` with any single argument over `MAX_ARG_STRLEN` (128 KiB) with `E2BIG`
//! ("Argument list too long"), so a long generated command could not run at all. Such a command
//! is written to a `memfd` (sealed: nobody can change it afterwards), which the child gets as
//! descriptor 9 and the shell runs as `sh /dev/fd/9`; the script's first line closes 9 again
//! (the shell reads the script through its own descriptor), so the command's own processes do
//! not inherit it. Descriptor 9 because POSIX shells such as dash only parse single-digit
//! redirections. Stdin is left alone: it stays `/dev/null` or the caller's pipe.

use std::io;

use task_core::process::Spawn;

/// The descriptor a long command's script is given to the shell as.
#[cfg(target_os = "linux")]
const SCRIPT_FD: i32 = 9;

/// The longest command passed as the argument of `-c`; longer ones are read from a script
/// (well under Linux's 128 KiB limit on one argument, leaving room for the environment).
pub const MAX_ARGUMENT_COMMAND_BYTES: usize = 64 * 1024;

/// Adds `command` to `cmd`'s arguments, or, when it is long, its script as descriptor 9.
///
/// # Errors
/// The error of creating or writing the script file.
pub(crate) fn attach_command(cmd: Spawn, command: &str) -> io::Result<Spawn> {
    if command.len() <= MAX_ARGUMENT_COMMAND_BYTES {
        return Ok(cmd.arg("-c").arg(command));
    }
    attach_script(cmd, command)
}

#[cfg(target_os = "linux")]
fn attach_script(cmd: Spawn, command: &str) -> io::Result<Spawn> {
    use std::io::Write;

    use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, memfd_create};

    let memfd = memfd_create(
        "tasks-command",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(memfd.try_clone()?);
    file.write_all(format!("exec {SCRIPT_FD}<&-\n").as_bytes())?;
    file.write_all(command.as_bytes())?;
    file.write_all(b"\n")?;
    drop(file);
    fcntl_add_seals(
        &memfd,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    Ok(cmd.arg(format!("/dev/fd/{SCRIPT_FD}")).fd(memfd, SCRIPT_FD))
}

#[cfg(not(target_os = "linux"))]
fn attach_script(_cmd: Spawn, command: &str) -> io::Result<Spawn> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "the command is {} bytes long; commands over {MAX_ARGUMENT_COMMAND_BYTES} bytes need Linux",
            command.len()
        ),
    ))
}
