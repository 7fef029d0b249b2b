//! What a retention policy is made of, below the configuration that holds one: which finished
//! tasks a prune removes ([`Policy`]) and how its size limit is written ([`parse_size`]).
//! [`crate::prune`] applies it and re-exports both.

use std::time::Duration;

/// Which finished tasks `prune` removes; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Policy {
    /// Only tasks that ended longer ago than this.
    pub older_than: Option<Duration>,
    /// Keep the newest this many finished tasks.
    pub keep_last: Option<usize>,
    /// Then remove the oldest finished tasks until the session's outputs fit in this many bytes.
    pub max_size: Option<u64>,
}

impl Policy {
    /// A policy with the given limits.
    pub fn new(
        older_than: Option<Duration>,
        keep_last: Option<usize>,
        max_size: Option<u64>,
    ) -> Self {
        Self {
            older_than,
            keep_last,
            max_size,
        }
    }

    /// Whether the policy asks for nothing (the supervisor then applies no retention).
    pub fn is_off(&self) -> bool {
        self.older_than.is_none() && self.keep_last.is_none() && self.max_size.is_none()
    }
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
