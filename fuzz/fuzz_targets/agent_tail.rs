#![no_main]
//! `./run.sh agent_tail` or `cargo fuzz run -s none --features libfuzzer agent_tail` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::agent::tail(data));
