//! Measures how far past the size cap a command at full write speed gets before the size
//! watchdog stops it: `cargo run --release -p task-shell --example size_cap_overshoot -- [DIR]`
//! (DIR: where the output files go, default a temp dir; use a tmpfs and a disk to compare).
//! Prints the median and the largest overshoot of 11 runs of `yes` and of `head -c 4G /dev/zero`
//! with a 1 MiB cap and the SPEC's 5 s poll, so only the write-driven check can act in time.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use task_core::Registry;
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;
use task_shell::{ShellConfig, ShellExecutor};

const CAP: u64 = 1024 * 1024;
const RUNS: usize = 11;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::args().nth(1).map(std::path::PathBuf::from);
    let dir = match &base {
        Some(path) => tempfile::tempdir_in(path)?,
        None => tempfile::tempdir()?,
    };
    let mut config = ShellConfig::default();
    config.size_cap_bytes = CAP;
    let registry = Arc::new(Registry::default());
    let shells = ShellExecutor::new(Arc::clone(&registry), dir.path(), config);
    for command in ["yes", "head -c 4G /dev/zero"] {
        let mut overshoots = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let request = ShellRequest::new(CommandSpec::new(command)?, "flood").background(true);
            let mut task = shells.spawn(request)?;
            let outcome = task.wait().await?;
            let note = outcome.message.map_or(0, |m| m.len() as u64 + 2);
            let size = std::fs::metadata(task.output_file())?.len();
            overshoots.push(size.saturating_sub(CAP + note));
            std::fs::remove_file(task.output_file())?;
        }
        overshoots.sort_unstable();
        println!(
            "{command}: cap {CAP} B, overshoot median {} KiB, max {} KiB over {RUNS} runs",
            overshoots[RUNS / 2] / 1024,
            overshoots[RUNS - 1] / 1024
        );
    }
    Ok(())
}
