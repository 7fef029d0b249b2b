//! `tasks input ID TEXT|-` and `--close`: write to the stdin of a task run with `--stdin pipe`.

use serde_json::json;

use crate::cli::InputArgs;
use crate::error::{Result, exit};
use crate::printer::Printer;
use task_session::session::Session;

/// Writes TEXT and a newline, or copies this process's stdin (`-`), then closes the task's
/// stdin with `--close`. Prints nothing on success (`--json`: what was written).
pub fn input(session: &Session, args: &InputArgs, printer: Printer) -> Result<u8> {
    let id = session.resolve(&args.id)?;
    let bytes = match args.text.as_deref() {
        Some("-") => session.copy_input(&id, std::io::stdin().lock(), args.close)?,
        Some(text) => {
            let line = format!("{text}\n");
            session.write_input(&id, line.as_bytes(), args.close)?;
            line.len() as u64
        }
        None => {
            session.write_input(&id, &[], true)?;
            0
        }
    };
    printer.emit(
        &json!({ "id": id, "bytes": bytes, "closed": args.close }),
        "",
    )?;
    Ok(exit::OK)
}
