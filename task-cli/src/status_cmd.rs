//! `tasks status`: the footer pill of the reference harness as one line for a shell prompt or a
//! status bar ([`crate::pill`]). Reads the task records and the session lock, nothing else:
//! no supervisor is started, nothing is written, and an idle session prints nothing.

use crate::error::Result;
use crate::error::exit;
use crate::paths::SessionPaths;
use crate::pill;
use crate::render;
use crate::session::Session;

/// Prints the pill of the session at `paths` (`--json`: label, attention flag and count).
pub fn status(paths: SessionPaths, json: bool) -> Result<u8> {
    let session = Session::open(paths)?;
    let listing = session.tasks()?;
    let pill = pill::pill(listing.tasks.iter().map(|record| &record.task));
    if json {
        render::json(&pill)?;
    } else if !pill.label.is_empty() {
        render::out(&format!("{}\n", pill.label))?;
    }
    Ok(exit::OK)
}
