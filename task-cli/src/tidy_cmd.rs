//! `tasks rm` and `tasks prune`: removing finished tasks by hand ([`crate::prune`]).

use clap::Args;

use crate::error::{Result, exit};
use crate::prune::{self, Policy, Removed};
use crate::render;
use crate::session::Session;

/// Remove finished tasks (record and output) whose completion was delivered.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The task ids: each must have ended and had its completion delivered.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

/// Remove finished, delivered tasks by age, count or total output size.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only tasks that ended longer ago than this (`7d`, `12h`, `30m`).
    #[arg(long, value_name = "DURATION", value_parser = crate::config::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// Keep the newest N finished tasks.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Then remove the oldest finished tasks until all outputs fit in this size (`500M`, `1G`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_size: Option<u64>,
}

/// `tasks rm ID…`: removes the tasks, or none of them if one must be kept.
pub fn rm(session: &Session, args: &RmArgs, json: bool) -> Result<u8> {
    let ids = args
        .ids
        .iter()
        .map(|id| Session::parse_id(id))
        .collect::<Result<Vec<_>>>()?;
    let removed = prune::remove_ids(session, &ids)?;
    report(&removed, json)
}

/// `tasks prune`: removes the finished, delivered tasks the options select.
pub fn prune(session: &Session, args: &PruneArgs, json: bool) -> Result<u8> {
    let policy = Policy::new(args.older_than, args.keep_last, args.max_size);
    let removed = prune::prune(session, &policy)?;
    report(&removed, json)
}

fn report(removed: &[Removed], json: bool) -> Result<u8> {
    if json {
        render::json(&removed)?;
    } else {
        let bytes: u64 = removed.iter().map(|r| r.bytes).sum();
        let what = if removed.len() == 1 { "task" } else { "tasks" };
        render::out(&format!(
            "removed {} {what} ({} of output)\n",
            removed.len(),
            render::size(bytes)
        ))?;
    }
    Ok(exit::OK)
}

/// A size: bytes, or a number with `K`, `M`, `G` or `T` (powers of 1024, `B`/`iB` optional).
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let unit_start = upper
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(upper.len());
    let (digits, unit) = upper.split_at(unit_start);
    let shift = match unit.trim().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{text:?}: expected a size such as 500M or 1G")),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected a size such as 500M or 1G"))?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2KiB"), Ok(2048));
        assert_eq!(parse_size("3kb"), Ok(3072));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
