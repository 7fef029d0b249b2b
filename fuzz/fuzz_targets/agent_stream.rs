#![no_main]
//! `./run.sh agent_stream` or `cargo fuzz run -s none --features libfuzzer agent_stream` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::agent::stream(data));
