//! The `tasks` binary.

fn main() -> anyhow::Result<()> {
    Ok(())
}
