//! `tasks top`: a live dashboard of the session in the terminal (ratatui over crossterm).
//!
//! It reads the same files as `tasks ps` every `--interval`, follows the selected task's output
//! by delta reads, and acts through the session (kill, send). The terminal is put back as it
//! was when the dashboard ends: on `q`, on an error, on a panic (ratatui's hook), and on
//! SIGTERM, SIGHUP or SIGINT (flags checked between frames); when the terminal itself hangs up,
//! the dashboard leaves too.

mod app;
mod details;
mod state;
mod view;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyEventKind};

use crate::cli::TopArgs;
use crate::error::{CliError, Result, exit};
use app::{Action, App};
use task_core::TaskId;
use task_session::session::Session;

/// Runs the dashboard until `q` or a signal.
pub fn top(session: Session, args: &TopArgs) -> Result<u8> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(CliError::invalid(
            "tasks top needs a terminal (use tasks ps or tasks status elsewhere)".into(),
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| CliError::io("handle signals for", "tasks top", e))?;
    }
    let mut app = App::new(session)?;
    let mut screen = Screen::enter()?;
    let result = event_loop(&mut screen, &mut app, args.interval, &stop);
    drop(screen);
    result.map(|()| exit::OK)
}

/// The terminal in raw mode on the alternate screen; put back when dropped.
struct Screen {
    terminal: ratatui::DefaultTerminal,
}

impl Screen {
    fn enter() -> Result<Self> {
        Ok(Self {
            terminal: raw_alternate_screen()?,
        })
    }

    fn draw(&mut self, app: &App) -> Result<()> {
        self.terminal
            .draw(|frame| view::draw(frame, app))
            .map(|_| ())
            .map_err(|e| CliError::io("draw on", "the terminal", e))
    }

    /// Hands the terminal to `program` (the pager) and takes it back. Only the terminal is
    /// replaced: a new `Screen` would drop this one, whose restore would undo the new raw mode
    /// and leave the alternate screen (keys echoed, none read until Enter).
    fn lend(&mut self, run: impl FnOnce()) -> Result<()> {
        ratatui::try_restore().map_err(|e| CliError::io("restore", "the terminal", e))?;
        run();
        self.terminal = raw_alternate_screen()?;
        Ok(())
    }
}

/// The terminal in raw mode on the alternate screen (restored again if that fails).
fn raw_alternate_screen() -> Result<ratatui::DefaultTerminal> {
    ratatui::try_init().map_err(|e| {
        ratatui::restore();
        CliError::io("set up", "the terminal", e)
    })
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}

fn event_loop(
    screen: &mut Screen,
    app: &mut App,
    interval: Duration,
    stop: &AtomicBool,
) -> Result<()> {
    let read_error = |e| CliError::io("read", "the terminal", e);
    let mut refreshed = Instant::now();
    screen.draw(app)?;
    while !stop.load(Ordering::Relaxed) {
        let wait = interval
            .saturating_sub(refreshed.elapsed())
            .min(Duration::from_millis(100));
        if wait_for_input(wait) == Input::HungUp {
            return Ok(());
        }
        // What crossterm has now (keys, resizes), never waiting inside it: on a terminal that
        // hangs up it reads end-of-file in a loop that does not return.
        while event::poll(Duration::ZERO).map_err(read_error)? {
            if let Event::Key(key) = event::read().map_err(read_error)?
                && key.kind == KeyEventKind::Press
            {
                match app.on_key(key)? {
                    Action::Quit => return Ok(()),
                    Action::Page(id) => screen.lend(|| page(&app.session, &id))?,
                    Action::Stay => {}
                }
            }
            screen.draw(app)?;
        }
        if refreshed.elapsed() >= interval {
            app.refresh()?;
            refreshed = Instant::now();
            screen.draw(app)?;
        }
    }
    Ok(())
}

/// What waiting on the terminal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    /// Something to read, a signal, or the time is up.
    Ready,
    /// The terminal hung up (its window closed, the ssh connection dropped).
    HungUp,
}

/// Waits up to `wait` for input on stdin, or for it to hang up.
fn wait_for_input(wait: Duration) -> Input {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    let timeout = Timespec::try_from(wait).unwrap_or_default();
    match rustix::event::poll(&mut fds, Some(&timeout)) {
        Ok(_)
            if fds[0]
                .revents()
                .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) =>
        {
            Input::HungUp
        }
        Ok(_) | Err(rustix::io::Errno::INTR) => Input::Ready,
        Err(_) => Input::HungUp,
    }
}

/// Opens the output of `id` in `$PAGER` (split as a shell would, never run by one), else
/// `less -R`: an agent's conversation as `tasks output` prints it, on the pager's stdin; any
/// other task's output file by its path.
fn page(session: &Session, id: &TaskId) {
    let pager = std::env::var("PAGER").ok().filter(|p| !p.trim().is_empty());
    let words = pager
        .as_deref()
        .and_then(shlex::split)
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| vec!["less".into(), "-R".into()]);
    let mut command = std::process::Command::new(&words[0]);
    command.args(&words[1..]);
    let conversation = session
        .task(id)
        .is_ok_and(|task| task.task.base.task_type.holds_conversation());
    let status = if conversation {
        let mut text = String::new();
        let rendered = crate::transcript::write_whole(session, id, |part| {
            text.push_str(part);
            Ok(())
        });
        if let Err(error) = rendered {
            tracing::warn!(%error, task = %id, "cannot read the conversation");
        }
        page_text(command, text)
    } else {
        command.arg(session.output_path(id)).status()
    };
    if let Err(error) = status {
        tracing::warn!(%error, pager = %words[0], "cannot run the pager");
    }
}

/// Runs the pager with `text` on its stdin (written from a thread of its own: a pager reads as
/// its reader scrolls, and one that quits early closes the pipe, which is no error).
fn page_text(
    mut command: std::process::Command,
    text: String,
) -> std::io::Result<std::process::ExitStatus> {
    let mut child = command.stdin(std::process::Stdio::piped()).spawn()?;
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(text.as_bytes());
        })
    });
    let status = child.wait();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    status
}
