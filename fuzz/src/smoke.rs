//! The stable driver of the targets: `cargo test -p fuzz` runs each target over every file of
//! its corpus and regressions, then over inputs made by mutating those files, for a bounded
//! time. It is not coverage-guided (libFuzzer is; see README.md): it keeps CI honest about the
//! corpus and finds what a few thousand blind mutations of real files find.
//!
//! By default each target runs a fixed number of mutations (`FUZZ_SMOKE_RUNS`, default
//! [`DEFAULT_RUNS`]) from a fixed seed (`FUZZ_SMOKE_SEED`), so every machine runs the same
//! inputs and a CI failure reproduces anywhere. `FUZZ_SMOKE_SECS` runs for a time instead, to
//! explore (a finding then depends on the machine's speed). A finding names the input's file,
//! which is kept in `$TMPDIR/tasks-fuzz-findings/`.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Target;

/// An input that takes longer than this (in a debug build) is reported as a hang.
const SLOW_INPUT: Duration = Duration::from_secs(10);

/// The largest input the mutator makes.
const MAX_INPUT: usize = 64 * 1024;

/// Mutated inputs per target when the environment sets no budget.
pub const DEFAULT_RUNS: usize = 1000;

/// How long a smoke run mutates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// This many mutated inputs: the same inputs on every machine.
    Runs(usize),
    /// Until this much time has passed: more on a faster machine.
    Time(Duration),
}

impl Budget {
    fn allows(self, started: Instant, done: usize) -> bool {
        match self {
            Self::Runs(runs) => done < runs,
            Self::Time(time) => started.elapsed() < time,
        }
    }
}

/// What a smoke run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Files of the corpus and regressions run as they are.
    pub files: usize,
    /// Mutated inputs run.
    pub mutated: usize,
}

/// The directory of the fuzz crate.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The inputs kept for `target`: `corpus/<target>/` (seeds and what libFuzzer found
/// interesting) and `regressions/<target>/` (inputs that once failed), sorted by path.
pub fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for kind in ["corpus", "regressions"] {
        let dir = crate_dir().join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                found.push((path.clone(), std::fs::read(&path).expect("a corpus file")));
            }
        }
    }
    found.sort();
    found
}

/// Runs `target` on its kept inputs, then on mutations of them until `budget` is spent;
/// panics naming the first input that fails.
pub fn run(target: &Target, budget: Budget, seed: u64) -> Report {
    let started = Instant::now();
    let kept = inputs(target.name);
    let mut report = Report::default();
    check(target, b"");
    for (path, bytes) in &kept {
        check_named(target, bytes, Some(path));
        report.files += 1;
    }
    let mut rng = Rng::new(seed ^ fnv(target.name.as_bytes()));
    let seeds: Vec<&[u8]> = kept.iter().map(|(_, bytes)| bytes.as_slice()).collect();
    while budget.allows(started, report.mutated) {
        let input = mutate(&mut rng, &seeds);
        check(target, &input);
        report.mutated += 1;
    }
    report
}

/// [`run`] with the budget and seed from the environment.
pub fn run_from_env(name: &str) -> Report {
    let target = crate::target(name).unwrap_or_else(|| panic!("no target {name}"));
    let secs = env_number::<f64>("FUZZ_SMOKE_SECS");
    let budget = match secs {
        Some(secs) => Budget::Time(Duration::from_secs_f64(secs.max(0.0))),
        None => Budget::Runs(env_number("FUZZ_SMOKE_RUNS").unwrap_or(DEFAULT_RUNS)),
    };
    run(
        target,
        budget,
        env_number("FUZZ_SMOKE_SEED").unwrap_or(0x5eed),
    )
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

fn check(target: &Target, input: &[u8]) {
    check_named(target, input, None);
}

fn check_named(target: &Target, input: &[u8], path: Option<&Path>) {
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let took = started.elapsed();
    let problem = match outcome {
        Err(_) => "panicked (message above)".to_owned(),
        Ok(()) if took > SLOW_INPUT => format!("took {took:?}"),
        Ok(()) => return,
    };
    let kept = path.map_or_else(|| keep(target.name, input), Path::to_path_buf);
    panic!(
        "target {} {problem} on {} ({} bytes: {})",
        target.name,
        kept.display(),
        input.len(),
        preview(input)
    );
}

/// Saves a failing input where the message can name it.
fn keep(target: &str, input: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join("tasks-fuzz-findings");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{:016x}", fnv(input)));
    let _ = std::fs::write(&path, input);
    path
}

fn preview(input: &[u8]) -> String {
    let shown: String = input
        .iter()
        .take(200)
        .flat_map(|&b| b.escape_ascii())
        .map(char::from)
        .collect();
    if input.len() > 200 {
        format!("{shown}…")
    } else {
        shown
    }
}

/// FNV-1a: a stable hash for seeds and file names.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// xorshift64*: small, fast and reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }
}

/// Bytes and texts that parsers treat specially: structure, escapes, numbers at the edges of
/// their types, invalid and multi-byte UTF-8.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b"\\",
    b"\\\"",
    b"\\u0000",
    b"\\ud800",
    b"\\uDFFF",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-0",
    b"-1",
    b"1e999",
    b"-1e999",
    b"0.5",
    b"\"\"",
    b"{}",
    b"[]",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xf0\x9f\x98\x80",
    b"\xc3\xa9",
    b"\x00",
    b"\t",
    b" ",
    b"/*",
    b"*/",
    b"//",
    b"'",
    b"`",
    b"${",
    b"@",
    b"-",
    b".",
    b"..",
    b"/",
    b"\"id\"",
    b"\"type\"",
];

/// Numbers at the edges of the integer types (and of a JS number's exact integers).
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"4294967295",
    b"4294967296",
    b"9007199254740993",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1e999",
    b"0.5",
];

/// A new input: a kept input (or nothing) changed by one to eight mutations.
pub fn mutate(rng: &mut Rng, seeds: &[&[u8]]) -> Vec<u8> {
    let mut data = match seeds.len() {
        0 => Vec::new(),
        n => seeds[rng.below(n)].to_vec(),
    };
    for _ in 0..=rng.below(8) {
        mutate_once(rng, &mut data, seeds);
        data.truncate(MAX_INPUT);
    }
    data
}

fn mutate_once(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[&[u8]]) {
    let len = data.len();
    let at = rng.below(len + 1);
    match rng.below(10) {
        0 if len > 0 => data[at.min(len - 1)] ^= 1 << rng.below(8),
        1 if len > 0 => data[at.min(len - 1)] = rng.next_u64() as u8,
        2 | 3 => {
            let token = match rng.below(4) {
                0 => NUMBERS[rng.below(NUMBERS.len())],
                _ => TOKENS[rng.below(TOKENS.len())],
            };
            data.splice(at..at, token.iter().copied());
        }
        4 if len > 0 => {
            let end = (at + 1 + rng.below(32)).min(len);
            data.drain(at.min(len - 1)..end);
        }
        5 if len > 0 => {
            // Repeat a short run many times: deep nesting, long lines, many lines.
            let start = at.min(len - 1);
            let end = (start + 1 + rng.below(8)).min(len);
            let run = data[start..end].to_vec();
            let most = if rng.below(4) == 0 { 2000 } else { 16 };
            let times = 1 + rng.below(most);
            let repeated: Vec<u8> = run
                .iter()
                .copied()
                .cycle()
                .take(run.len() * times)
                .collect();
            data.splice(start..start, repeated);
        }
        6 if !seeds.is_empty() => {
            // Splice in part of another kept input.
            let other = seeds[rng.below(seeds.len())];
            let start = rng.below(other.len() + 1);
            let end = (start + rng.below(256)).min(other.len());
            data.splice(at..at, other[start..end].iter().copied());
        }
        7 if len > 0 => data.truncate(at),
        8 => {
            // A number (the first at or after a random place) replaced by one at an edge.
            let digits = data[at..]
                .iter()
                .position(u8::is_ascii_digit)
                .map(|n| at + n);
            if let Some(start) = digits {
                let end = data[start..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(len, |n| start + n);
                let number = NUMBERS[rng.below(NUMBERS.len())];
                data.splice(start..end, number.iter().copied());
            }
        }
        _ => data.insert(at, rng.next_u64() as u8),
    }
}
