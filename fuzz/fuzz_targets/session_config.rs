#![no_main]
//! `./run.sh session_config` or `cargo fuzz run -s none --features libfuzzer session_config` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::session::config(data));
